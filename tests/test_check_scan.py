"""The fast loader (toki.check.reading.json_scan, numpy over the bytes) against the general one (op maps).

Both must build the same History, hence the same verdict and the same evidence, on generated
histories of both workloads; every input the scanner does not take (or takes wrongly) must go to
the general path, which accepts it or names the bad op. A mutation test checks that the scanner
never accepts text that is not JSON.
"""

from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toki.check import check
from toki.check.reading import json_scan as jsonscan
from toki.check.gen import generate, write_json
from toki.check.reading.history import History, parse_text, read
from toki.errors import HistoryError

CASES = [(w, db, seed) for w in ("list-append", "rw-register")
         for db in ("serializable", "snapshot-isolation", "read-committed") for seed in (1, 2)]


def ops_of(workload, db, seed, txns=400, keys=4):
    return list(generate(workload=workload, txns=txns, keys=keys, db=db, seed=seed, concurrency=6))


def as_json(ops) -> bytes:
    f = io.StringIO()
    write_json(iter(ops), f)
    return f.getvalue().encode()


def assert_same(a: History, b: History) -> None:
    for f in dataclasses.fields(History):
        if f.name in ("parser", "helper_max_rss_kb"):  # how it was read, not what
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


@pytest.mark.parametrize("workload,db,seed", CASES)
def test_scanner_and_general_path_agree(tmp_path, workload, db, seed):
    path = tmp_path / "h.json"
    path.write_bytes(as_json(ops_of(workload, db, seed)))
    fast = read(path, workload)
    slow = read(path, workload, scan=False)
    assert (fast.parser, slow.parser) == ("scan", "general")
    assert_same(fast, slow)
    for models in (["serializable"], None, ["snapshot-isolation"]):
        rf = check(fast, workload=workload, models=models)
        rs = check(slow, workload=workload, models=models)
        assert rf == rs  # verdict, anomaly types, every case with its evidence, not / also_not
    if db == "snapshot-isolation" and workload == "list-append":
        assert "G2-item" in check(path, workload=workload, models=["serializable"])["anomaly_types"]
    if db == "serializable":
        assert check(path, workload=workload)["valid"] is True


def assert_same_columns(one, sc, where) -> None:
    assert sc is not None, where
    for k, v in vars(one).items():
        if k == "helper_max_rss_kb":  # how it was read, not what
            continue
        w = vars(sc)[k]
        assert (np.array_equal(v, w) if isinstance(v, np.ndarray) else v == w), (where, k)


_FORKED = """
import os, sys
sys.path.insert(0, os.getcwd())
from tests.test_check_scan import as_json, assert_same_columns, ops_of
from toki.check.accel import children as forked
from toki.check.reading import json_scan as jsonscan

assert forked.available(), "the child process runs one thread"
text = as_json(ops_of("list-append", "snapshot-isolation", 5, txns=300))
one = jsonscan.scan(text, threads=1)
sc = jsonscan.scan(text, chunk_bytes=300, threads=3, fork=True)
assert_same_columns(one, sc, "forked")
assert sc.helper_max_rss_kb > 0, "a child did report"

class Dying(forked.Forked):
    def __init__(self, fn, *args):
        super().__init__(os._exit, 9)  # the child leaves without a word

forked.Forked = Dying
lost = jsonscan.scan(text, chunk_bytes=300, threads=3, fork=True)
assert_same_columns(one, lost, "children lost")
assert lost.helper_max_rss_kb == 0
print("ok")
"""


@pytest.mark.slow
def test_forked_pieces_are_really_forked_and_a_lost_child_is_redone():
    """Pieces after the first are scanned in forked children (the scan holds the GIL, threads
    would not use the other cores); a child that dies is replaced by scanning its piece here.

    In a process of its own: the scanner forks only when no other thread runs (a lock another
    thread held at the fork would never be released in the child), and a test process keeps
    threads of earlier tests (a Dask cluster, the embedded server's watcher)."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", _FORKED], cwd=Path(__file__).parent.parent,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


@pytest.mark.slow
def test_a_bad_op_in_a_forked_piece_sends_the_history_to_the_general_parser():
    ops = ops_of("list-append", "snapshot-isolation", 6, txns=300)
    ops[-3] = dict(ops[-3], value=[["r", "x", None]])  # a string key, in the last piece: not the subset
    text = as_json(ops)
    assert jsonscan.scan(text, chunk_bytes=300, threads=3, fork=True) is None
    assert jsonscan.scan(text, chunk_bytes=300, threads=3, fork=False) is None


@pytest.mark.slow
def test_slices_threads_and_json_lines_give_the_same_columns():
    ops = ops_of("list-append", "snapshot-isolation", 3, txns=300)
    text = as_json(ops)
    ref = parse_text(text, "list-append", scan=False)
    one = jsonscan.scan(text, threads=1)
    for chunk, threads in ((256, 1), (300, 3), (4096, 2), (1 << 20, 4)):
        for fork in (False, True):
            assert_same_columns(one, jsonscan.scan(text, chunk_bytes=chunk, threads=threads, fork=fork),
                                (chunk, threads, fork))
    lines = b"\n".join(orjson.dumps(o) for o in ops) + b"\n"
    pretty = json.dumps(ops, indent=2).encode()  # an op spans many lines
    spaced = json.dumps(ops).encode()            # ", " and ": " separators, one line
    for t in (lines, pretty, spaced):
        h = parse_text(t, "list-append")
        assert h.parser == "scan"
        assert_same(h, ref)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["compact", "pretty", "lines"])
def test_layout_does_not_change_slices_or_threads(layout):
    # issue 16: a whole history on one line used to become one slice (cuts were at newlines),
    # 4.4 s of parsing for 200,000 transactions; cuts are now after op braces, in every layout
    ops = ops_of("list-append", "snapshot-isolation", 4, txns=300)
    text = {"compact": json.dumps(ops, separators=(",", ":")).encode(),
            "pretty": json.dumps(ops, indent=2).encode(),
            "lines": b"\n".join(orjson.dumps(o) for o in ops) + b"\n"}[layout]
    assert len(jsonscan._split(jsonscan._Bytes(text), 0, 3)) == 4  # three pieces, one per thread
    one = jsonscan.scan(text, threads=1)
    for chunk, threads in ((256, 1), (300, 3), (4096, 2)):
        for fork in (False, True):
            assert_same_columns(one, jsonscan.scan(text, chunk_bytes=chunk, threads=threads, fork=fork),
                                (chunk, threads, fork))
    assert_same(parse_text(text, "list-append"), parse_text(text, "list-append", scan=False))


FALLBACK = {
    "string keys": lambda o: {**o, "value": [[f, str(k), v] for f, k, v in o["value"]]},
    "float time": lambda o: {**o, "time": o["time"] + 0.5},
    "nemesis op with a map": None,
    "escaped string": lambda o: {**o, "note": 'a "quoted" word'},
    "unicode": lambda o: {**o, "note": "caf\u00e9"},
    "19-digit integer": lambda o: {**o, "time": 2 ** 62},
}


@pytest.mark.parametrize("what", sorted(FALLBACK))
def test_unusual_inputs_take_the_general_path_with_the_same_result(what):
    ops = ops_of("list-append", "serializable", 5, txns=60)
    f = FALLBACK[what]
    if f is None:
        ops.insert(3, {"type": "info", "process": "nemesis", "f": "start-partition",
                       "value": {"n1": ["n2", "n3"]}, "index": -1, "time": 0})
        for i, o in enumerate(ops):
            o["index"] = i
    else:
        ops = [f(o) for o in ops]
    text = json.dumps(ops).encode()
    h = parse_text(text, "list-append")
    assert h.parser == "general"
    assert check(h, workload="list-append")["valid"] is True


def test_scanner_skips_non_client_ops_and_unknown_keys():
    ops = ops_of("list-append", "serializable", 6, txns=60)
    ops.insert(5, {"type": "info", "process": "nemesis", "f": "kill", "value": ["n1", "n2"]})
    ops.insert(9, {"type": "info", "process": "nemesis", "f": "start", "value": None})
    ops = [{**o, "node": "n1", "error": None} if i % 7 == 0 else o for i, o in enumerate(ops)]
    for o in ops:
        o.pop("index", None)
    text = orjson.dumps(ops)
    h = parse_text(text, "list-append")
    assert h.parser == "scan"
    assert_same(h, parse_text(text, "list-append", scan=False))


def test_short_micro_op_at_the_end_is_refused_not_read_past():
    """A micro-op shorter than [f k v] closing the last op of a slice once made the scanner index
    past its tokens (IndexError, not a fallback)."""
    for text, edn in ((b'{"type": "ok", "process": 0, "value": [["r"]]}\n', False),
                      (b'{:type :ok, :process 0, :value [[:r]]}\n', True), (b'{:type :ok, :process 0, :value [[]]}', True)):
        assert jsonscan.scan(text, edn=edn) is None
        with pytest.raises(HistoryError, match="micro-op 0"):
            parse_text(text, "list-append", fmt="edn" if edn else None)


@pytest.mark.parametrize("text,err", [
    (b'[{"type":"ok","process":0,"f":"txn","value":[["r",1,[1 2]]]}]', "not valid JSON"),
    (b'[{"type":"ok","process":0,"f":"txn","value":[["r",1,[01]]]}]', "not valid JSON"),
    (b'[{"type":"ok","process":0,"f":"txn","value":[["r",1,null,5]]}]', "micro-op 0"),
    (b'[{"type":"ok","process":0,"f":"txn","value":[["r"]]}]', "micro-op 0"),
    (b'[{"type":"ok","process":0,"f":"txn","value":[5]}]', "micro-op 0"),
    (b'[{"type":"done","process":0,"f":"txn","value":[]}]', "type"),
    (b'[{"type":"ok","process":0,"f":"read","value":[]}]', "has f"),
    (b'[{"type":"ok","process":0,"f":"txn","value":[["append",1,null]]}]', "writes null"),
    (b'[{"type":"ok","process":0,"value":[["r",null,[1]]]}]', "null key"),
    (b'{"type":"ok","process":0,"value":[]} {"type":"ok","process":1,"value":[]}\n', "not valid JSON"),
])
def test_malformed_input_is_named_by_the_general_path(text, err):
    with pytest.raises(HistoryError, match=err):
        parse_text(text, "list-append")


SMALL = as_json(ops_of("list-append", "read-committed", 7, txns=12, keys=2))


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(SMALL) - 1), st.sampled_from(list(b'[]{},:" -0123456789nulltrefasx\n')),
       st.sampled_from(["replace", "insert", "delete"]))
def test_scanner_accepts_only_json_and_then_agrees(i, byte, how):
    if how == "replace":
        t = SMALL[:i] + bytes([byte]) + SMALL[i + 1:]
    elif how == "insert":
        t = SMALL[:i] + bytes([byte]) + SMALL[i:]
    else:
        t = SMALL[:i] + SMALL[i + 1:]
    sc = jsonscan.scan(t)
    if sc is None:
        return
    ops = orjson.loads(t)  # raises if the scanner accepted text that is not JSON
    assert isinstance(ops, list)

    def outcome(fn):
        try:
            return fn()
        except HistoryError as e:
            return str(e)

    a = outcome(lambda: parse_text(t, "list-append"))
    b = outcome(lambda: parse_text(t, "list-append", scan=False))
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
    else:
        assert_same(a, b)


def _small_edn() -> bytes:
    from toki.check.gen import write_edn

    f = io.StringIO()
    write_edn(iter(ops_of("list-append", "read-committed", 7, txns=12, keys=2)), f)
    return f.getvalue().encode()


SMALL_EDN = _small_edn()


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(SMALL_EDN) - 1), st.sampled_from(list(b'[]{},:" -0123456789niltrefasxp#;\n<>=.*+!?_/\'~@^`%&$|\t\r')),
       st.sampled_from(["replace", "insert", "delete"]))
def test_edn_scanner_accepts_only_edn_and_then_agrees(i, byte, how):
    """As for JSON: a mutated EDN history the scanner takes must be EDN the EDN reader takes, and
    both paths must then build the same History (or name the same bad op)."""
    t = {"replace": SMALL_EDN[:i] + bytes([byte]) + SMALL_EDN[i + 1:],
         "insert": SMALL_EDN[:i] + bytes([byte]) + SMALL_EDN[i:],
         "delete": SMALL_EDN[:i] + SMALL_EDN[i + 1:]}[how]
    if jsonscan.scan(t, edn=True) is None:
        return

    def outcome(fn):
        try:
            return fn()
        except HistoryError as e:
            return str(e)

    a = outcome(lambda: parse_text(t, "list-append", fmt="edn"))
    b = outcome(lambda: parse_text(t, "list-append", fmt="edn", scan=False))
    assert not isinstance(b, str) or "EDN" not in b, b  # the reader must read what the scanner took
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
    else:
        assert_same(a, b)


def test_far_apart_keys_are_coded_the_same_by_both_paths_and_named_as_written(tmp_path):
    """A planted write skew sits on keys at 2^40, far above the generator's: both paths code the
    keys 0..n-1 (dense lookups in inference), agree column for column, and the explanation
    names the keys as the history wrote them."""
    from toki.check.gen import PLANT_KEY, plant

    ops = list(plant(generate(workload="list-append", txns=400, keys=4, db="serializable", seed=3,
                              concurrency=6), "g2-item", at=300))
    path = tmp_path / "h.json"
    path.write_bytes(as_json(ops))
    fast, slow = read(path, "list-append"), read(path, "list-append", scan=False)
    assert fast.keys is not None and fast.keys[-2:] == [PLANT_KEY, PLANT_KEY + 1]
    assert int(fast.m_key.max()) == len(fast.keys) - 1
    assert_same(fast, slow)
    res = check(path, workload="list-append", models=["serializable"])
    assert res["anomaly_types"] == ["G2-item"]
    assert str(PLANT_KEY) in json.dumps(res["anomalies"]["G2-item"])
