"""Runs of positions (toki.check.runs): the compiled loops give numpy's arrays, value and dtype,
and a check that takes them everywhere (every gather through them) gives the same verdict, edges
and cases as one that takes none."""

from __future__ import annotations

import numpy as np
import pytest

from toki.check import check, jit, runs
from toki.check.gen import generate, plant

pytestmark = pytest.mark.skipif(jit.kernels("_jitruns") is None, reason="numba is not installed or cannot compile")


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
def test_a_check_through_the_compiled_runs_is_the_same(monkeypatch, workload, db):
    ops = list(generate(workload=workload, txns=600, keys=5, db=db, seed=4, concurrency=5))
    ops = list(plant(iter(ops), "g2-item", at=300, workload=workload))
    want = numpy_only(lambda: check(ops, workload=workload))
    monkeypatch.setattr(runs, "JIT_MIN", 0)
    assert check(ops, workload=workload) == want
