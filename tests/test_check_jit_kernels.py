"""The checker's compiled loops against its numpy paths: runs of positions (toki.check.runs) give
numpy's arrays, value and dtype; invocations are paired with completions the same way
(toki.check._jitpairs); and a check that takes every compiled loop gives the same verdict, edges
and cases as one that takes none."""

from __future__ import annotations

import numpy as np
import pytest

from toki.check import check, history, jit, runs
from toki.check.gen import generate, plant

pytestmark = pytest.mark.skipif(jit.kernels("_jitruns") is None or jit.kernels("_jitpairs") is None,
                                reason="numba is not installed or cannot compile")


@pytest.fixture
def compiled(monkeypatch):
    monkeypatch.setattr(runs, "JIT_MIN", 0)


def numpy_only(fn, *a):
    old = runs.JIT_MIN
    runs.JIT_MIN = 1 << 62
    try:
        return fn(*a)
    finally:
        runs.JIT_MIN = old


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.bool_])
def test_ranges_and_gathers_are_numpys(compiled, dtype):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 100, 500).astype(dtype)
    for _ in range(50):
        k = int(rng.integers(0, 20))
        lens = rng.integers(0, 6, k)
        starts = rng.integers(0, len(a) - 6, k)
        for fn, args in ((runs.ranges, (starts, lens)), (runs.gather, (a, starts, lens))):
            got, want = fn(*args), numpy_only(fn, *args)
            assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("workload,db", [("list-append", "serializable"), ("list-append", "read-committed"),
                                         ("rw-register", "snapshot-isolation")])
def test_a_check_through_the_compiled_loops_is_the_same(monkeypatch, workload, db):
    ops = list(generate(workload=workload, txns=600, keys=5, db=db, seed=4, concurrency=5))
    ops = list(plant(iter(ops), "g2-item", at=300, workload=workload))
    want = numpy_only(lambda: check(ops, workload=workload))
    monkeypatch.setattr(runs, "JIT_MIN", 0)
    monkeypatch.setattr(history, "_JIT_PAIRS", 0)
    assert check(ops, workload=workload) == want


@pytest.mark.parametrize("seed", range(40))
def test_invocations_are_paired_as_by_sorting(monkeypatch, seed):
    """Outstanding invocations, completions with none, several at once, sparse process numbers."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    procs = rng.choice([0, 1, 2, 5, 70_000, -3], size=int(rng.integers(1, 5)), replace=False)
    P = rng.choice(procs, n).astype(np.int64)
    tcode = rng.choice([0, 1, 2, 3], n, p=[0.3, 0.05, 0.1, 0.55]).astype(np.int8)
    if seed % 2:  # mostly one operation at a time per process, as clients run
        pending = set()
        for i, p in enumerate(P.tolist()):
            if p in pending and rng.random() < 0.95:
                tcode[i] = int(rng.choice([0, 1, 2]))
                pending.discard(p)
            else:  # an invocation (a second one outstanding, now and then)
                tcode[i] = 3
                pending.add(p)
    cpos = np.sort(rng.choice(np.arange(2 * n), n, replace=False))
    index = np.arange(2 * n) * 3
    tc = np.zeros(2 * n, np.int8)
    tc[cpos] = tcode
    monkeypatch.setattr(history, "_JIT_PAIRS", 1 << 62)
    want = history._transactions(index, tc, cpos, P, None)
    monkeypatch.setattr(history, "_JIT_PAIRS", 0)
    got = history._transactions(index, tc, cpos, P, None)
    assert want.keys() == got.keys()
    for k in want:
        if isinstance(want[k], np.ndarray):
            assert want[k].dtype == got[k].dtype and np.array_equal(want[k], got[k]), k
        else:
            assert want[k] == got[k], k
