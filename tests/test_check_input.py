"""What ``toki check`` accepts (issue 16): as much as Elle does, and elle-cli's flags.

Several outstanding invocations per process, string and integer keys, ``info`` completions,
fields Elle ignores, EDN as Jepsen writes it (fast path) and as people write it (general path),
and scripts written for elle-cli (``-m list-append -c serializable -a G0 -f edn -v``)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from test_check_scan import assert_same, assert_same_columns

from toki.check import check
from toki.check.core import process_edges, realtime_edge_set
from toki.check.gen import generate, write_edn
from toki.check.reading.history import parse, parse_text
from toki.cli import main


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def ok(p, value, **kw):
    return {"type": "ok", "process": p, "f": "txn", "value": value, **kw}


def inv(p, value, **kw):
    return {"type": "invoke", "process": p, "f": "txn", "value": value, **kw}


# ------------------------------------------------------------------ several outstanding invocations

def test_overlapping_invocations_claim_no_real_time_order_they_do_not_prove():
    # process 0 invokes A (index 0) and B (index 3) and completes them at 4 and 5, in an order the
    # history does not give; C (process 1) ran between the two invocations. Either completion may
    # be A's, invoked before C, so C must not be ordered before either of them in real time.
    ops = [inv(0, [["append", "x", 1]]),            # 0: A invoked
           inv(1, [["r", "x", None]]), ok(1, [["r", "x", None]]),  # 1, 2: C, complete
           inv(0, [["append", "x", 2]]),            # 3: B invoked
           ok(0, [["append", "x", 2]]),             # 4
           ok(0, [["append", "x", 1]])]             # 5
    h = parse(ops, "list-append")
    assert h.t_pgroup is not None
    t_of = {int(i): t for t, i in enumerate(h.t_index)}
    # both of process 0's completions count as invoked at index 0, the group's first invocation
    assert h.t_invoke[t_of[4]] == 0 and h.t_invoke[t_of[5]] == 0
    rt = realtime_edge_set(h)
    assert not any(int(s) == t_of[2] for s in rt.src)  # C -> A/B would be invented
    # the two overlapping ops of process 0 are not ordered by process order either
    pe = process_edges(h)
    assert len(pe.src) == 0


def test_process_order_orders_groups():
    ops = [inv(0, [["append", "x", 1]]), inv(0, [["append", "y", 1]]),
           ok(0, [["append", "x", 1]]), ok(0, [["append", "y", 1]]),
           inv(0, [["r", "x", None]]), ok(0, [["r", "x", [1]]])]
    h = parse(ops, "list-append")
    pe = process_edges(h)
    pairs = sorted(zip(h.t_index[pe.src].tolist(), h.t_index[pe.dst].tolist()))
    assert pairs == [(2, 5), (3, 5)]  # both of the first group before the read, not each other


def test_dangling_invocations_of_a_group_become_info():
    ops = [inv(0, [["append", "x", 1]]), inv(0, [["append", "x", 2]]), ok(0, [["append", "x", 1]])]
    h = parse(ops, "list-append")
    assert sorted(h.t_type.tolist()) == [0, 1]  # one ok, one info (the invocation left open)


def test_same_history_through_scanner_and_general_path():
    ops = [inv(0, [["append", 1, 1]]), inv(0, [["r", 1, None]]), ok(0, [["append", 1, 1]]),
           ok(0, [["r", 1, [1]]]), inv(1, [["r", 1, None]]), ok(1, [["r", 1, [1]]])]
    text = json.dumps(ops).encode()
    a, b = parse_text(text, "list-append"), parse_text(text, "list-append", scan=False)
    assert a.parser == "scan" and b.parser == "general"
    for f in ("t_index", "t_invoke", "t_pgroup", "t_type"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


# ------------------------------------------------------------------ keys, info, ignored fields

@pytest.mark.parametrize("key", [3, "x", "some key"])
def test_string_and_integer_keys(key):
    ops = [ok(0, [["append", key, 1], ["r", "y", None]]), ok(1, [["append", "y", 1], ["r", key, None]])]
    r = check(ops, models=["serializable"])
    assert r["valid"] is False and r["anomaly_types"] == ["G2-item"]
    step_keys = {s["key"] for s in r["anomalies"]["G2-item"][0]["steps"]}
    assert step_keys == {key, "y"}


def test_info_completions_and_fields_elle_ignores():
    ops = [inv(0, [["append", "x", 1]], time=5, node="n1"),
           {"type": "info", "process": 0, "f": "txn", "value": [["append", "x", 1]], "error": ["timeout", 3]},
           {"type": "info", "process": "nemesis", "f": "start-partition", "value": {"n1": ["n2"]}},
           inv(1, [["r", "x", None]]), ok(1, [["r", "x", [1]]], extra={"a": 1})]
    r = check(ops, models=["serializable"])
    assert r["valid"] is True  # an info write may have happened; reading it is no anomaly


def test_uninterpretable_history_still_names_the_op(tmp_path):
    f = tmp_path / "h.json"
    f.write_text(json.dumps([ok(0, [["append", "x", 1]]), ok(1, [["append", "x", [1]]])]))
    rc, _, err = run("check", str(f))
    assert rc == 2 and "op 1" in err and "writes a list" in err


# ------------------------------------------------------------------ EDN

def _edn(workload, db, seed, txns=200):
    buf = io.StringIO()
    write_edn(generate(workload=workload, txns=txns, keys=4, db=db, seed=seed, concurrency=5), buf)
    return buf.getvalue().encode()


@pytest.mark.parametrize("workload", ["list-append", "rw-register"])
def test_jepsen_edn_takes_the_fast_path_with_the_same_result(workload):
    text = _edn(workload, "snapshot-isolation", 2)
    fast, slow = parse_text(text, workload, fmt="edn"), parse_text(text, workload, fmt="edn", scan=False)
    assert (fast.parser, slow.parser) == ("edn-scan", "general")
    assert check(fast, workload=workload, models=["serializable"]) == \
        check(slow, workload=workload, models=["serializable"])


def test_edn_with_nemesis_ops_vectors_strings_and_comments():
    body = ("{:index 0, :time 0, :type :invoke, :process 0, :f :txn, :value [[:append 7 1] [:r 8 nil]]}\n"
            "{:index 1, :time 1, :type :info, :process :nemesis, :f :start-partition, :value :majority}\n"
            "{:index 2, :time 2, :type :ok, :process 0, :f :txn, :value [[:append 7 1] [:r 8 nil]]}\n"
            "{:index 3, :time 3, :type :invoke, :process 1, :f :txn, :value [[:append 8 1] [:r 7 nil]]}\n"
            "{:index 4, :time 4, :type :ok, :process 1, :f :txn, :value [[:append 8 1] [:r 7 nil]], :error :x}\n")
    want = check(parse_text(body.encode(), "list-append", fmt="edn", scan=False), models=["serializable"])
    assert want["anomaly_types"] == ["G2-item"]
    fast = parse_text(body.encode(), "list-append", fmt="edn")
    assert fast.parser == "edn-scan" and check(fast, models=["serializable"]) == want
    for variant in ("[" + body + "]",                                   # a vector of ops
                    "; a comment\n" + body,                            # comments: the EDN reader
                    body.replace(":start-partition", '"start partition"'),  # strings: the EDN reader
                    body.replace(", :f :txn", " :f :txn"),             # no commas: the EDN reader
                    body.replace("[:append 7 1]", "[:append :k 1]").replace("[:r 7 nil]", "[:r :k nil]")):
        h = parse_text(variant.encode(), "list-append", fmt="edn")
        got = check(h, models=["serializable"])
        assert (got["valid"], got["anomaly_types"]) == (False, ["G2-item"]), variant[:60]


@pytest.mark.slow
@pytest.mark.parametrize("fork", [True, False])
@pytest.mark.parametrize("workload", ["list-append", "rw-register"])
def test_edn_is_scanned_as_its_json_is(tmp_path, workload, fork):
    """Jepsen's EDN is scanned natively (commas are whitespace, keywords are names, forms alternate
    key and value): the same columns as the same ops written as JSON, whatever the slice size, in
    forked or threaded pieces, one op map per line or a vector of them; and the same History as
    the EDN reader."""
    from toki.check.reading import json_scan
    from toki.check.gen import write_json
    from toki.check.reading.history import read

    ops = list(generate(workload=workload, txns=300, keys=4, db="snapshot-isolation", seed=3, concurrency=5))
    buf = io.StringIO()
    write_json(iter(ops), buf)
    want = json_scan.scan(buf.getvalue().encode(), threads=1)
    buf = io.StringIO()
    write_edn(iter(ops), buf)
    text = buf.getvalue().encode()
    p = tmp_path / "history.edn"
    for body in (text, b"[" + text + b"]"):
        p.write_bytes(body)
        for chunk in (97, 300, 4096):
            sc = json_scan.scan_file(p, chunk_bytes=chunk, threads=3, fork=fork, edn=True)
            assert_same_columns(want, sc, (chunk, fork, body[:1]))
    h = read(p, workload)
    assert h.parser == "edn-scan"
    assert_same(h, parse_text(text, workload, fmt="edn", scan=False))
    unnamed = tmp_path / "history.log"  # no .edn suffix: known by its first bytes
    unnamed.write_bytes(text)
    assert read(unnamed, workload).parser == "edn-scan"


@pytest.mark.slow
def test_edn_file_the_scanner_cannot_take_goes_to_the_edn_reader(tmp_path):
    """A string in the last op sends the file to the EDN reader (a vector of ops does not), with
    the same verdict."""
    from toki.check.reading.history import read

    text = _edn("list-append", "snapshot-isolation", 4, txns=300)
    want = check(parse_text(text, "list-append", fmt="edn", scan=False), models=["serializable"])
    assert want["valid"] is False
    for name, body in (("string", text + b'{:index 99999, :time 99999, :type :info, :process :nemesis, :f :kill, :value "n1"}\n'),
                       ("vector", b"[" + text + b"]")):
        p = tmp_path / f"{name}.edn"
        p.write_bytes(body)
        h = read(p, "list-append")
        assert h.parser == ("general" if name == "string" else "edn-scan"), name
        assert check(h, models=["serializable"]) == want, name


@pytest.mark.parametrize("name", ["crlf", "vector-with-string", "op-over-two-lines", "spaced-vector",
                                  "two-ops-on-a-line"])
def test_edn_layouts_scanner_and_reader_read_alike(name):
    """EDN layouts beyond one op map per line: both paths read them, and read them alike (CR is
    whitespace in EDN, a vector of ops is a history, an op may span lines)."""
    line = b"{:index %d, :type :%s, :process 0, :f :txn, :value [[:append 1 2] [:r 1 %s]]}"
    ops = [line % (0, b"invoke", b"nil"), line % (1, b"ok", b"[2]")]
    text = {"crlf": b"\r\n".join(ops) + b"\r\n",
            "vector-with-string": b"[" + b"\n".join(ops).replace(b"]]}", b"]], :error \"x\"}") + b"]",
            "op-over-two-lines": b"\n".join(ops).replace(b", :f", b",\n :f"),
            "spaced-vector": b"[ \n" + b"\n".join(ops) + b"]",
            "two-ops-on-a-line": b" ".join(ops)}[name]
    fast, slow = parse_text(text, "list-append"), parse_text(text, "list-append", fmt="edn", scan=False)
    assert fast.parser == ("general" if name == "vector-with-string" else "edn-scan")
    assert fast.n_ops == 2
    assert_same(fast, slow)


# ------------------------------------------------------------------ elle-cli's flags

def _g2(tmp_path, suffix=".json"):
    f = tmp_path / f"h{suffix}"
    f.write_text(json.dumps([ok(0, [["append", "x", 1], ["r", "y", None]]),
                             ok(1, [["append", "y", 1], ["r", "x", None]])]))
    return str(f)


def test_elle_cli_flags_mean_what_they_mean_in_elle_cli(tmp_path):
    f = _g2(tmp_path)
    rc, out, _ = run("check", "-m", "list-append", "-c", "serializable", f, "-v")
    assert rc == 1 and json.loads(out)["anomaly_types"] == ["G2-item"]
    rc, out, _ = run("check", "--model", "elle-list-append", "--consistency-models", "read-committed", f)
    assert rc == 0 and "valid: true" in out
    rc, out, _ = run("check", "-m", "list-append", "-c", "read-committed,snapshot-isolation", f)
    assert rc == 0
    rc, out, _ = run("check", "-m", "list-append", "-c", "", "-a", "G2-item,G1", f, "--json")
    assert rc == 1 and json.loads(out)["anomaly_types"] == ["G2-item"]
    rc, _, err = run("check", "-m", "rw-register", f)  # appends are not rw-register micro-ops
    assert rc == 2 and "rw-register" in err


def test_elle_cli_format_flag_and_several_files(tmp_path):
    g2 = _g2(tmp_path)
    edn = tmp_path / "h.txt"
    edn.write_text("{:type :ok, :process 0, :f :txn, :value [[:append :x 1]]}\n"
                   "{:type :ok, :process 1, :f :txn, :value [[:r :x [1]]]}\n")
    rc, out, _ = run("check", "-m", "list-append", "-f", "edn", str(edn), "-c", "serializable")
    assert rc == 0 and "valid: true" in out
    rc, out, _ = run("check", "-m", "list-append", "-c", "serializable", str(edn), g2, "-v")
    res = json.loads(out)
    assert rc == 1 and res[str(edn)]["valid"] is True and res[g2]["valid"] is False


def test_two_workloads_are_bad_input(tmp_path):
    rc, _, err = run("check", "-m", "list-append", "--workload", "rw-register", _g2(tmp_path))
    assert rc == 2 and "two workloads" in err
