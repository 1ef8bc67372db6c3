"""The compiled scanner (toki.check.accel.compiled.json_scan) against the vectorised one (toki.check.reading.json_scan): the
same columns, dtype for dtype, wherever the compiled one takes a slice, and every slice it does
not take handed back, never accepted or refused on its own."""

from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toki.check import accel
from toki.check.reading import json_scan as jsonscan
from toki.check.gen import generate, write_edn, write_json

# Compiled on first use, not at collection, and by one worker (--dist worksteal keeps a file together).
# The compiled twins are checked against the numpy forms in the slow tier: compiling them costs a
# fresh clone a minute of a test worker (numba caches the machine code afterwards), and below
# accel.MIN_SIZE the checker never uses them, so the fast tier's checks run the numpy forms.
pytestmark = [pytest.mark.skipif(not accel.can_compile(), reason="numba is not installed or TOKI_JIT=never"),
              pytest.mark.slow]


def scan(text: bytes, jit: bool, monkeypatch, **kw):
    monkeypatch.setattr(accel, "MODE", "always" if jit else "never")
    return jsonscan.scan(text, **kw)


def assert_same(a, b) -> None:
    assert (a is None) == (b is None), "one scanner took the history, the other did not"
    if a is None:
        return
    for f in dataclasses.fields(jsonscan.Scanned):
        if f.name == "helper_max_rss_kb":
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


def ops_of(seed, txns=300, db="read-committed", workload="list-append"):
    return list(generate(workload=workload, txns=txns, keys=4, db=db, seed=seed, concurrency=6))


def _written_edn(ops) -> bytes:
    f = io.StringIO()
    write_edn(iter(ops), f)
    return f.getvalue().encode()


def to_edn(v) -> str:
    """Any op as EDN (strings as keywords), where write_edn writes only generated ops."""
    if isinstance(v, dict):
        return "{" + ", ".join(f":{k} {to_edn(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + " ".join(to_edn(x) for x in v) + "]"
    return "nil" if v is None else f":{v}" if isinstance(v, str) else str(v).lower()


def edn_layouts(ops) -> dict[str, bytes]:
    lines = "".join(to_edn(o) + "\n" for o in ops).encode()
    return {"edn": lines, "edn-vector": b"[" + lines + b"]", "edn-no-commas": lines.replace(b", ", b" "),
            "edn-one-line": lines.replace(b"\n", b" ")}


def layouts(ops) -> dict[str, bytes]:
    f = io.StringIO()
    write_json(iter(ops), f)
    return {"lines": f.getvalue().encode(), "compact": orjson.dumps(ops),
            "jsonl": b"\n".join(orjson.dumps(o) for o in ops) + b"\n",
            "pretty": json.dumps(ops, indent=2).encode(), "spaced": json.dumps(ops).encode(),
            "crlf": b"\r\n".join(orjson.dumps(o) for o in ops)}


# The EDN instance of the kernel compiles for about 27 s in a fresh clone: its tests are in the slow
# tier (the JSON instance's stay in the fast tier).
@pytest.mark.parametrize("edn", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_kernel_compiles_and_takes_the_common_shape(edn, monkeypatch):
    ops = ops_of(1)
    text = _written_edn(ops) if edn else layouts(ops)["compact"]
    calls = []
    kernel = accel.load("json_scan")
    real = kernel.scan_slice
    monkeypatch.setattr(kernel, "scan_slice", lambda *a: calls.append(r := real(*a)) or r)
    sc = scan(text, True, monkeypatch, threads=1, chunk_bytes=4096, edn=edn)
    assert sc is not None and len(calls) > 3 and all(isinstance(r, tuple) for r in calls)  # no slice handed back


@pytest.mark.parametrize("layout", ["lines"] + [pytest.param(x, marks=pytest.mark.slow) for x in (
    "compact", "jsonl", "pretty", "spaced", "crlf", "edn", "edn-written", "edn-vector", "edn-no-commas", "edn-one-line")])
@pytest.mark.parametrize("workload", ["list-append", "rw-register"])
def test_every_layout_and_slice_size_gives_the_vectorised_columns(layout, workload, monkeypatch):
    ops = ops_of(2, workload=workload)
    edn = layout.startswith("edn")
    text = _written_edn(ops) if layout == "edn-written" else (edn_layouts if edn else layouts)(ops)[layout]
    for chunk in (64, 4096, 1 << 19):  # (the narrowed dtypes depend on where slices are cut)
        want = scan(text, False, monkeypatch, chunk_bytes=chunk, threads=1, edn=edn)
        assert want is not None
        for threads, fork in ((1, None), (3, True)):
            assert_same(scan(text, True, monkeypatch, chunk_bytes=chunk, threads=threads, fork=fork, edn=edn), want)


EDITS = {
    "nemesis op": lambda ops: ops[:3] + [{"type": "info", "process": "nemesis", "f": "kill", "value": ["n1"]}]
    + ops[3:],
    "unknown key": lambda ops: [{**o, "node": "n1"} if i == 7 else o for i, o in enumerate(ops)],
    "index in some ops only": lambda ops: [{k: v for k, v in o.items() if k != "index" or i % 5}
                                           for i, o in enumerate(ops)],
    "no index": lambda ops: [{k: v for k, v in o.items() if k != "index"} for o in ops],
    "no time": lambda ops: [{k: v for k, v in o.items() if k != "time"} for o in ops],
    "null time": lambda ops: [{**o, "time": None} if i % 3 == 0 else o for i, o in enumerate(ops)],
    "negative time": lambda ops: [{**o, "time": -o["time"] - 1} for o in ops],
    "no f": lambda ops: [{k: v for k, v in o.items() if k != "f"} for o in ops],
    "other f": lambda ops: [{**o, "f": "read"} if i == 9 else o for i, o in enumerate(ops)],
    "null value": lambda ops: [{**o, "value": None} if i % 4 == 0 else o for i, o in enumerate(ops)],
    "empty value": lambda ops: [{**o, "value": []} if i % 4 == 0 else o for i, o in enumerate(ops)],
    "number value": lambda ops: [{**o, "value": 5} if i == 11 else o for i, o in enumerate(ops)],
    "keys reordered": lambda ops: [dict(reversed(list(o.items()))) for o in ops],
    "18 digits": lambda ops: [{**o, "time": 10 ** 17 + i} for i, o in enumerate(ops)],
    "19 digits": lambda ops: [{**o, "time": 10 ** 18} if i == 5 else o for i, o in enumerate(ops)],
    "float": lambda ops: [{**o, "time": 1.5} if i == 5 else o for i, o in enumerate(ops)],
    "string process": lambda ops: [{**o, "process": "p1"} if i == 6 else o for i, o in enumerate(ops)],
    "unknown type": lambda ops: [{**o, "type": "done"} if i == 6 else o for i, o in enumerate(ops)],
    "long micro-op": lambda ops: [{**o, "value": [m + [1] for m in o["value"]]} if i == 8 else o
                                  for i, o in enumerate(ops)],
    "empty read": lambda ops: [{**o, "value": [[f, k, [] if f == "r" else v] for f, k, v in o["value"]]}
                               for o in ops],
}


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("layout", ["compact", "jsonl", "pretty", pytest.param("edn", marks=pytest.mark.slow)])
def test_edited_histories_are_taken_or_handed_back_alike(edit, layout, monkeypatch):
    ops = EDITS[edit](ops_of(3, txns=60))
    edn = layout == "edn"
    text = (edn_layouts(ops) if edn else layouts(ops))[layout]
    for chunk in (100, 1 << 19):
        want = scan(text, False, monkeypatch, chunk_bytes=chunk, threads=1, edn=edn)
        assert_same(scan(text, True, monkeypatch, chunk_bytes=chunk, threads=1, edn=edn), want)


SMALL = orjson.dumps(ops_of(7, txns=12))
SMALL_LINES = layouts(ops_of(7, txns=12))["jsonl"]


@pytest.mark.slow
@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([SMALL, SMALL_LINES]), st.integers(0, len(SMALL) - 1),
       st.sampled_from(list(b'[]{},:" -0123456789nulltrefasx\n\r\t\\')),
       st.sampled_from(["replace", "insert", "delete"]), st.sampled_from([48, 200, 1 << 19]))
def test_mutated_bytes_are_taken_or_handed_back_alike(text, i, byte, how, chunk):
    i = min(i, len(text) - 1)
    t = {"replace": text[:i] + bytes([byte]) + text[i + 1:], "insert": text[:i] + bytes([byte]) + text[i:],
         "delete": text[:i] + text[i + 1:]}[how]
    with pytest.MonkeyPatch.context() as mp:
        want = scan(t, False, mp, threads=1, chunk_bytes=chunk)
        assert_same(scan(t, True, mp, threads=1, chunk_bytes=chunk), want)


SMALL_EDN = _written_edn(ops_of(7, txns=12))


@pytest.mark.slow
@settings(max_examples=350, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.integers(0, len(SMALL_EDN) - 1),
       st.sampled_from(list(b'[]{},:" -0123456789niltrefasxp#;\n<>=.*+!?_/\'~@^`%&$|\t\r')),
       st.sampled_from(["replace", "insert", "delete"]), st.sampled_from([48, 200, 1 << 19]))
def test_mutated_edn_is_taken_or_handed_back_alike(i, byte, how, chunk):
    t = {"replace": SMALL_EDN[:i] + bytes([byte]) + SMALL_EDN[i + 1:],
         "insert": SMALL_EDN[:i] + bytes([byte]) + SMALL_EDN[i:], "delete": SMALL_EDN[:i] + SMALL_EDN[i + 1:]}[how]
    with pytest.MonkeyPatch.context() as mp:
        want = scan(t, False, mp, threads=1, chunk_bytes=chunk, edn=True)
        assert_same(scan(t, True, mp, threads=1, chunk_bytes=chunk, edn=True), want)


@pytest.mark.parametrize("text", [b"[]", b"[ ]", b"", b"\n", b"{:type :info, :process :nemesis, :f :kill}\n",
                                  b'[{"type":"info","process":"nemesis","f":"kill","value":null}]',
                                  b'[{"type":"invoke","process":0,"f":"txn","value":[]},'
                                  b'{"type":"ok","process":0,"f":"txn","value":[]}]'])
def test_a_history_that_tells_nothing_is_not_valid_through_the_compiled_scanner(text, tmp_path, monkeypatch):
    """No ops, only a nemesis, or transactions with no micro-ops: never "valid", with the compiled
    scanner on as with it off."""
    from toki.check import check

    path = tmp_path / ("h.edn" if text.startswith(b"{:") else "h.json")
    path.write_bytes(text)
    verdicts = []
    for jit_on in (True, False):
        monkeypatch.setattr(accel, "MODE", "always" if jit_on else "never")
        r = check(str(path), workload="list-append")
        verdicts.append((r["valid"], r["anomaly_types"]))
    assert verdicts[0] == verdicts[1]
    assert verdicts[0][0] is not True and "empty-transaction-graph" in verdicts[0][1]
