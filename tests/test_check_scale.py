"""What lets ``toki check`` take 10^7 transactions (docs/checker.md#speed-and-memory): narrow
columns, inference a slice of keys at a time, cycles searched only where one can be, planted
anomalies found at any size, and a clear refusal of a huge file the slice reader cannot take.
Speed itself is measured in benchmarks/bench_check.py, never asserted here."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from toki.check import check
from toki.check import accel
from toki.check.accel import key_slices as partition
from toki.check.reading import history
from toki.check.reading import json_scan as jsonscan
from toki.check.gen import generate, plant, write_json
from toki.cli import main
from toki.errors import ConfigError, HistoryError

DBS = ("serializable", "snapshot-isolation", "read-committed")
NONCYCLE = ("internal", "lost-update", "G1a", "G1b", "incompatible-order", "dirty-update", "future-read",
            "duplicate-elements", "cyclic-versions")


def ops_of(workload, db, seed=3, txns=3000, keys=5):
    return list(plant(generate(workload=workload, txns=txns, keys=keys, db=db, seed=seed, concurrency=6),
                      "g2-item", at=txns, workload=workload))


@pytest.mark.parametrize("workload", ["list-append", "rw-register"])
@pytest.mark.parametrize("db,keys", [pytest.param(db, 5, marks=pytest.mark.slow if db != "snapshot-isolation" else ())
                                     for db in DBS] + [(DBS[-1], 300)])
def test_inference_in_key_slices_finds_what_whole_inference_finds(monkeypatch, workload, db, keys):
    """keys=300: a slice holds every twelfth key or so, which inference ranks (Codes.krank)."""
    if db == "snapshot-isolation":
        # the fast tier's case: its list-append reads write millions of positions, which ``auto``
        # hands to the compiled twins (a 9 s compile in a fresh clone); slicing is what is tested
        # here, and the twins' agreement with the numpy forms is test_check_jit_kernels' (slow tier)
        monkeypatch.setattr(accel, "MODE", "never")
    ops = ops_of(workload, db, keys=keys)
    whole = check([dict(o) for o in ops], workload, models=["serializable"])
    monkeypatch.setattr(partition, "SLICE_MOPS", 700)  # about a dozen slices
    sliced = check([dict(o) for o in ops], workload, models=["serializable"])
    assert (sliced["valid"], sliced["anomaly_types"], sliced["not"]) == \
        (whole["valid"], whole["anomaly_types"], whole["not"])
    for t in whole["anomaly_types"]:
        assert len(sliced["anomalies"][t]) == len(whole["anomalies"][t]), t
        if t in NONCYCLE:  # the same cases, micro-ops mapped back to the history's
            assert sorted(map(repr, sliced["anomalies"][t])) == sorted(map(repr, whole["anomalies"][t])), t


@pytest.mark.parametrize("workload", ["list-append", "rw-register"])
def test_a_planted_write_skew_is_found_and_explained(tmp_path, workload):
    p = tmp_path / "h.json"
    with open(p, "w") as f:
        write_json(plant(generate(workload=workload, txns=5000, keys=20, db="serializable", seed=1),
                         "g2-item", at=5000, workload=workload), f)
    r = check(p, workload, models=["serializable"])
    assert r["valid"] is False and r["anomaly_types"] == ["G2-item"]
    steps = r["anomalies"]["G2-item"][0]["steps"]
    assert [s["type"] for s in steps] == ["rw", "rw"] and all("explanation" in s for s in steps)
    # snapshot isolation allows a write skew; the rest of the history is serializable
    assert check(p, workload, models=["snapshot-isolation"])["valid"] is True
    # the CLI's generator plants the same
    out = tmp_path / "g.json"
    assert main(["gen", "history", "--workload", workload, "--txns", "300", "--plant", "g2-item", "--out", str(out)],
                out=io.StringIO(), err=io.StringIO()) == 0
    assert check(out, workload, models=["serializable"])["anomaly_types"] == ["G2-item"]


def test_plant_rejects_what_it_cannot_plant():
    with pytest.raises(ConfigError, match="cannot plant"):
        list(plant(iter([]), "g0", at=0))


def test_columns_are_narrowed_and_both_readers_agree(tmp_path):
    assert jsonscan.compact(np.array([1, 32])).dtype == np.int8
    assert jsonscan.compact(np.array([-1, 40000])).dtype == np.int32
    assert jsonscan.compact(np.array([0, 1 << 40])).dtype == np.int64
    p = tmp_path / "h.json"
    with open(p, "w") as f:
        write_json(generate(txns=2000, keys=10, seed=2), f)
    fast, slow = history.read(p, "list-append"), history.read(p, "list-append", scan=False)
    assert fast.r_elem.dtype == slow.r_elem.dtype == np.int8
    assert np.array_equal(fast.r_elem, slow.r_elem) and fast.m_key.dtype == np.int64


def test_only_transactions_under_a_backward_edge_reach_the_component_search():
    from toki.check.core import _may_be_on_a_cycle
    from toki.check.graph import RW, WW, EdgeSet

    fwd = EdgeSet(WW, np.array([0, 1, 2, 5]), np.array([1, 2, 3, 6]))
    assert _may_be_on_a_cycle(8, [fwd]) is None
    back = EdgeSet(RW, np.array([3]), np.array([1]))
    on = _may_be_on_a_cycle(8, [fwd, back])
    assert on.tolist() == [False, True, True, True, False, False, False, False]


def test_a_huge_file_outside_the_slice_reader_is_refused_with_the_reason(tmp_path, monkeypatch):
    p = tmp_path / "h.json"
    p.write_text(json.dumps([{"index": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["append", 1, 1.5]]},
                             {"index": 1, "type": "ok", "process": 0, "f": "txn", "value": [["append", 1, 1.5]]}]))
    monkeypatch.setattr(history, "GENERAL_MAX_BYTES", 10)
    with pytest.raises(HistoryError, match="not an integer") as e:
        check(p)
    assert "write integers" in e.value.fix
    err = io.StringIO()
    assert main(["check", str(p)], out=io.StringIO(), err=err) == 2
    assert "too large to read whole" in err.getvalue()


@pytest.mark.parametrize("workload", ["list-append", pytest.param("rw-register", marks=pytest.mark.slow)])
def test_slices_computed_in_a_forked_child_merge_to_what_one_process_finds(workload):
    """Every other slice in a child, the rest here: the same edges, in the same order, and the same
    cases as all slices in this process.

    The checker forks only while one thread runs (a lock another thread held at the fork would
    never be released in the child); a test process that ran a harness trial keeps the connect
    watch's thread, so there the body runs in a process of its own."""
    import subprocess
    import sys
    from pathlib import Path

    from toki.check.accel import children as forked

    if forked.available():
        _forked_slices_merge(workload)
        return
    done = subprocess.run([sys.executable, "-c", "from tests.test_check_scale import _forked_slices_merge as f; "
                           f"f({workload!r}); print('ok')"], cwd=Path(__file__).parent.parent,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def _forked_slices_merge(workload: str) -> None:
    from toki.check import list_append, rw_register
    from toki.check.accel import children as forked
    from toki.check.reading.history import parse

    assert forked.available(), "fork needs this process to run one thread"
    h = parse([dict(o) for o in ops_of(workload, "read-committed")], workload)
    fn = list_append.analyse if workload == "list-append" else rw_register.analyse
    here = partition.analyse(h, fn, slice_mops=700, fork=False)
    split = partition.analyse(h, fn, slice_mops=700, fork=True)
    assert h.helper_max_rss_kb > 0  # the child did its share
    assert [e.rel for e in split["edges"]] == [e.rel for e in here["edges"]]
    for a, b in zip(split["edges"], here["edges"]):
        assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
    assert repr(split["anomalies"]) == repr(here["anomalies"]) and here["anomalies"]


def test_pair_codes_rank_sparse_keys_and_decode_back():
    from toki.check.joins import Codes

    rng = np.random.default_rng(7)
    for stride in (1, 8, 1000):
        keys = rng.integers(0, 200, 2000) * stride + 3
        vals = rng.integers(-5, 40, 2000)
        C = Codes(keys, vals)
        assert (C.krank is not None) == (stride > 1)
        codes = C.pair(keys, vals)
        assert len(set(codes.tolist())) == len(set(zip(keys.tolist(), vals.tolist())))
        assert C.key_of(codes).tolist() == keys.tolist()
        assert C.key_of(C.init(keys)).tolist() == keys.tolist()
        if stride > 1:  # ranked: dense enough for direct tables
            assert int(codes.max()) - int(codes.min()) < 8 * len(set(codes.tolist())) + 4096


def test_an_edge_is_found_the_same_by_scan_and_by_index():
    """EdgeSet.find scans for its first lookups and sorts an index after: both give the first
    record of a -> b, or None."""
    from toki.check.graph import WW, EdgeSet

    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 30, 400), rng.integers(0, 30, 400)
    es = EdgeSet(WW, src, dst, src.copy(), dst.copy(), dst.copy())
    for q in range(60):  # past the scans, into the index
        a, b = int(rng.integers(0, 30)), int(rng.integers(0, 30))
        want = [i for i in range(len(es.src)) if es.src[i] == a and es.dst[i] == b]
        assert es.find(a, b) == (want[0] if want else None), q
    assert es._order is not None
