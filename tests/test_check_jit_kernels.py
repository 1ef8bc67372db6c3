"""The checker's compiled twins against their numpy forms, chosen by the one switch
(toki.check.accel.MODE: "always" takes every compiled twin, "never" none): runs of positions
(toki.check.accel.ranges) give numpy's arrays, value and dtype; invocations are paired with
completions the same way (toki.check.reading.history); the joins' (txn, key) groups are ordered
and scanned the same way (toki.check.joins); and a check that takes every compiled twin gives the
same verdict, edges and cases as one that takes none."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from toki.check import accel, check, joins
from toki.check.accel import ranges as index_ranges
from toki.check.gen import generate, plant
from toki.check.reading import history
from toki.check.reading.history import APPEND, R

# Compiled on first use, not at collection (each worker that collected would compile for half a
# minute in a fresh clone), and by one worker: addopts' --dist worksteal keeps a file's tests together.
# The compiled twins are checked against the numpy forms in the slow tier: compiling them costs a
# fresh clone a minute of a test worker (numba caches the machine code afterwards), and below
# accel.MIN_SIZE the checker never uses them, so the fast tier's checks run the numpy forms.
pytestmark = [pytest.mark.skipif(not accel.can_compile(), reason="numba is not installed or TOKI_JIT=never"),
              pytest.mark.slow]


@pytest.fixture
def compiled(monkeypatch):
    monkeypatch.setattr(accel, "MODE", "always")


def numpy_only(fn, *a):
    old = accel.MODE
    accel.MODE = "never"
    try:
        return fn(*a)
    finally:
        accel.MODE = old


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.bool_])
def test_ranges_and_gathers_are_numpys(compiled, dtype):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 100, 500).astype(dtype)
    for _ in range(50):
        k = int(rng.integers(0, 20))
        lens = rng.integers(0, 6, k)
        starts = rng.integers(0, len(a) - 6, k)
        for fn, args in ((index_ranges.ranges, (starts, lens)), (index_ranges.gather, (a, starts, lens))):
            got, want = fn(*args), numpy_only(fn, *args)
            assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("workload,db", [("list-append", "serializable"), ("list-append", "read-committed"),
                                         ("rw-register", "snapshot-isolation")])
def test_a_check_through_the_compiled_loops_is_the_same(monkeypatch, workload, db):
    ops = list(generate(workload=workload, txns=600, keys=5, db=db, seed=4, concurrency=5))
    ops = list(plant(iter(ops), "g2-item", at=300, workload=workload))
    want = numpy_only(lambda: check(ops, workload=workload))
    monkeypatch.setattr(accel, "MODE", "always")
    assert check(ops, workload=workload) == want


@pytest.mark.parametrize("seed", range(30))
def test_groups_are_scanned_as_by_numpy(monkeypatch, seed):
    """Groups of one to many micro-ops, reads of known and unknown (-1) length, appends only,
    reads only, a read first or last; every field the per-group checks read."""
    rng = np.random.default_rng(seed)
    M = int(rng.integers(1, 300))
    txn = np.sort(rng.integers(0, max(1, M // 3), M))
    key = rng.integers(0, 4, M)
    m_f = rng.choice([R, APPEND], M).astype(np.int8)
    mop_rlen = np.where(m_f == R, rng.integers(-1, 9, M), -1).astype(np.int64)
    h = SimpleNamespace(m_txn=txn, m_key=key, m_f=m_f)  # what the group order and scan read
    monkeypatch.setattr(accel, "MODE", "never")
    want = joins.Groups(h, mop_rlen)
    monkeypatch.setattr(accel, "MODE", "always")
    got = joins.Groups(h, mop_rlen)
    for f in ("go", "newg", "gid", "gstart", "prevr", "prevmax", "fr", "lw"):
        a, b = getattr(want, f), getattr(got, f)
        assert a.dtype == b.dtype and np.array_equal(a, b), f


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
    monkeypatch.setattr(accel, "MODE", "never")
    want = history.transactions(index, tc, cpos, P)
    monkeypatch.setattr(accel, "MODE", "always")
    got = history.transactions(index, tc, cpos, P)._asdict()
    want = want._asdict()
    assert want.keys() == got.keys()
    for k in want:
        if isinstance(want[k], np.ndarray):
            assert want[k].dtype == got[k].dtype and np.array_equal(want[k], got[k]), k
        else:
            assert want[k] == got[k], k


@pytest.mark.parametrize("seed", range(30))
def test_longest_reads_are_found_as_by_sorting(monkeypatch, seed):
    """Per key the longest read, the last of equally long ones; keys negative, sparse or one."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    rk = rng.choice(rng.integers(-50, 400, int(rng.integers(1, 30))), n).astype(np.int64)
    rlen = rng.integers(0, 6, n).astype(np.int64)
    pr = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False)).astype(np.int64)
    monkeypatch.setattr(accel, "MODE", "never")
    want = joins.longest_reads(rk, rlen, pr)
    monkeypatch.setattr(accel, "MODE", "always")
    got = joins.longest_reads(rk, rlen, pr)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("seed", range(30))
def test_readers_of_each_version_are_found_as_by_sorting(monkeypatch, seed):
    """Versions read by many, by none, wanted twice or never; negative codes (an initial state)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 150))
    codes = rng.integers(-20, 60, int(rng.integers(1, 25)))
    rv = rng.choice(codes, n).astype(np.int64)
    rtx = rng.integers(0, 1000, n).astype(np.int64)
    want = rng.choice(np.r_[codes, [-99, 500]], int(rng.integers(0, 60))).astype(np.int64)
    monkeypatch.setattr(accel, "MODE", "never")
    want_rep, want_srcs = joins.readers_of(rv, rtx, want)
    monkeypatch.setattr(accel, "MODE", "always")
    rep, srcs = joins.readers_of(rv, rtx, want)
    for a, b in ((want_rep, rep), (want_srcs, srcs)):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("seed", range(30))
def test_groups_are_ordered_as_by_sorting(monkeypatch, seed):
    """Transactions of one to many micro-ops (past the insertion sort's 32), repeated keys, keys
    negative; micro-ops out of transaction order fall back to the sort."""
    rng = np.random.default_rng(seed)
    M = int(rng.integers(1, 400))
    txn = np.sort(rng.integers(0, max(1, M // int(rng.choice([2, 50]))), M)).astype(np.int64)
    if seed % 5 == 0:
        txn = rng.permutation(txn)
    key = rng.integers(-5, 6, M).astype(np.int64)
    monkeypatch.setattr(accel, "MODE", "never")
    want = joins.group_order(txn, key)
    monkeypatch.setattr(accel, "MODE", "always")
    got = joins.group_order(txn, key)
    for a, b in zip(want, got):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("workload", ["list-append", "rw-register"])
@pytest.mark.parametrize("ops", [
    [],
    [{"type": "invoke", "process": 0, "f": "txn", "value": [["append", 1, 1]], "index": 0},
     {"type": "fail", "process": 0, "f": "txn", "value": [["append", 1, 1]], "index": 1}],
], ids=["empty", "only-failed"])
def test_a_history_with_nothing_to_judge_is_not_valid_through_the_compiled_loops(monkeypatch, workload, ops):
    """Told nothing, the compiled paths decide what numpy's do: not valid (unknown), never valid."""
    if workload == "rw-register":
        ops = [dict(o, value=[["w", 1, 1]]) for o in ops]
    want = numpy_only(lambda: check(ops, workload=workload))
    monkeypatch.setattr(accel, "MODE", "always")
    got = check(ops, workload=workload)
    assert got == want and got["valid"] is not True
