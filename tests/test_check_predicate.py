"""Predicate reads (``toki check --workload predicate``): phantoms as G2 / G-single with
predicates, from hand-written histories and from the matrix's P3 rows run on a real PostgreSQL."""

from __future__ import annotations

import io
import json

import pytest

from toki.check import check
from toki.cli import main
from toki.errors import HistoryError

P = {"where": {"set_key": "x", "active": True}}


def row(ci):
    return {"set_key": "x", "active": True, "chosen_index": ci}


def predicate_write(second="ok"):
    """Two transactions each find no active policy for x and each insert one (the P3 witness)."""
    return [
        {"index": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["rp", P, None], ["w", "p:a", row(1)]]},
        {"index": 1, "type": "invoke", "process": 1, "f": "txn", "value": [["rp", P, None], ["w", "p:b", row(0)]]},
        {"index": 2, "type": "ok", "process": 1, "f": "txn", "value": [["rp", P, []], ["w", "p:b", row(0)]]},
        {"index": 3, "type": second, "process": 0, "f": "txn", "value": [["rp", P, []], ["w", "p:a", row(1)]]},
    ]


def test_a_missed_insert_on_each_side_is_g2_with_predicates_explained():
    r = check(predicate_write(), "predicate", models=["serializable"])
    assert r["valid"] is False and r["anomaly_types"] == ["G2"]
    steps = r["anomalies"]["G2"][0]["steps"]
    assert [s["type"] for s in steps] == ["rw", "rw"]
    assert all(s["predicate"] == P and "phantom" in s["explanation"] for s in steps)
    assert {s["key"] for s in steps} == {"p:a", "p:b"}
    # G2 is what snapshot isolation and repeatable read allow (Adya): valid there
    for m in ("snapshot-isolation", "repeatable-read"):
        assert check(predicate_write(), "predicate", models=[m])["valid"] is True


def test_the_insert_that_failed_leaves_no_phantom():
    for models in (["serializable"], None):
        r = check(predicate_write(second="fail"), "predicate", models=models)
        # one committed transaction: an empty graph, which is "unknown", never a pass
        assert r["anomaly_types"] == ["empty-transaction-graph"] and r["valid"] == "unknown"


def test_reread_that_sees_an_insert_is_g_single():
    h = [{"index": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["rp", P, None], ["rp", P, None]]},
         {"index": 1, "type": "invoke", "process": 1, "f": "txn", "value": [["w", "p:c", row(1)]]},
         {"index": 2, "type": "ok", "process": 1, "f": "txn", "value": [["w", "p:c", row(1)]]},
         {"index": 3, "type": "ok", "process": 0, "f": "txn", "value": [["rp", P, []], ["rp", P, [["p:c", row(1)]]]]}]
    r = check(h, "predicate", models=["serializable"])
    assert r["anomaly_types"] == ["G-single"]
    assert [s["type"] for s in r["anomalies"]["G-single"][0]["steps"]] == ["rw", "wr"]


def test_range_predicates_and_rows_outside_the_range():
    rng = {"range": [10, 20]}

    def h(k):
        return [{"index": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["rp", rng, None], ["w", 1, 1]]},
                {"index": 1, "type": "invoke", "process": 1, "f": "txn", "value": [["rp", rng, None], ["w", k, 1]]},
                {"index": 2, "type": "ok", "process": 1, "f": "txn", "value": [["rp", rng, []], ["w", k, 1]]},
                {"index": 3, "type": "ok", "process": 0, "f": "txn", "value": [["rp", rng, []], ["w", 1, 1]]}]
    # T1 missed T2's insert of key 15 (in the range); key 1, which T1 inserts, is outside it: no cycle
    assert check(h(15), "predicate", models=["serializable"])["valid"] is not False
    # with both inserts inside the range, each read missed the other's
    both = h(15)
    for op in both:
        if op["process"] == 0:
            op["value"][1] = ["w", 12, 1]
    assert check(both, "predicate", models=["serializable"])["anomaly_types"] == ["G2"]


@pytest.mark.parametrize("mop, what", [
    (["rp", {"where": {"a": 1}}], "not [\"rp\", predicate, rows]"),
    (["rp", {"limit": 3}, []], "not a where/range map"),
    (["rp", {"range": [1]}, []], "malformed"),
    (["rp", {"range": [1, 2]}, [1, 2]], "list of [key, value] rows"),
])
def test_bad_predicate_reads_are_named(mop, what):
    h = [{"index": 0, "type": "ok", "process": 0, "f": "txn", "value": [mop]}]
    with pytest.raises(HistoryError, match="op 0") as e:
        check(h, "predicate")
    assert what in str(e.value)


def test_cli_exit_codes(tmp_path):
    p = tmp_path / "h.json"
    p.write_text(json.dumps(predicate_write()))
    out = io.StringIO()
    assert main(["check", str(p), "--workload", "predicate", "--json"], out=out, err=io.StringIO()) == 1
    assert json.loads(out.getvalue())["anomaly_types"] == ["G2"]
    bad = tmp_path / "bad.json"
    bad.write_text('[{"index": 0, "type": "ok", "process": 0, "value": [["rp", 7, []]]}]')
    err = io.StringIO()
    assert main(["check", str(bad), "--workload", "predicate"], out=io.StringIO(), err=err) == 2
    assert "where/range" in err.getvalue()
    # a predicate history checked as Elle's default workload names the option that reads it
    err = io.StringIO()
    assert main(["check", str(p)], out=io.StringIO(), err=err) == 2
    assert "pass --workload predicate" in err.getvalue()


# -- histories from real runs: the matrix's phantom rows on PostgreSQL --------------------------

@pytest.mark.db
@pytest.mark.parametrize("level, found", [("repeatable-read", ["G2"]), ("serializable", []),
                                          ("read-committed", ["G2"])])
def test_p3_lane_histories_from_postgresql(toki_server, level, found):
    """P3 (two agents each find no active policy and insert one): PostgreSQL's repeatable read
    admits the phantom, serializable aborts one of the two (40001) and shows none."""
    from toki.matrix.history_export import history

    ops = history("P3", level, trials=4, seed=7, server=toki_server)
    assert sum(op["type"] == "ok" for op in ops) == (8 if found else 4)
    r = check(ops, "predicate")
    assert r["anomaly_types"] == found
    assert r["valid"] is (not found)
    if found:
        case = r["anomalies"]["G2"][0]
        assert all("phantom" in s["explanation"] for s in case["steps"])
        assert len(r["anomalies"]["G2"]) == 4  # one per trial: each trial's keys are its own
    else:
        assert any(op.get("error") == "40001" for op in ops)


@pytest.mark.db
def test_p3_reread_lane_is_g_single_at_read_committed_only(toki_server):
    from toki.matrix.history_export import history

    rc = check(history("P3-reread", "rc", trials=2, seed=3, server=toki_server), "predicate")
    rr = check(history("P3-reread", "rr", trials=2, seed=3, server=toki_server), "predicate")
    assert rc["anomaly_types"] == ["G-single"] and rr["valid"] is True


@pytest.mark.db
def test_matrix_history_option_writes_a_checkable_history(tmp_path, toki_server):
    path = tmp_path / "p3-rr.json"
    err = io.StringIO()
    argv = ["matrix", "--history", str(path), "--level", "rr", "--trials", "2", "--quiet"]
    if toki_server.dsn:
        argv += ["--dsn", toki_server.dsn]
    assert main(argv, out=io.StringIO(), err=err) == 0
    made = json.loads((tmp_path / "p3-rr.json.provenance.json").read_text())
    assert made["options"]["level"] == "rr" and made["seed"] == 42
    out = io.StringIO()
    assert main(["check", str(path), "--workload", "predicate"], out=out, err=io.StringIO()) == 1
    assert "G2" in out.getvalue() and "phantom" in out.getvalue()
    assert main(["matrix", "--history", str(path), "--only", "P2", "--level", "rr"],
                out=io.StringIO(), err=io.StringIO()) == 2


def test_edn_histories_with_predicate_reads(tmp_path):
    p = tmp_path / "h.edn"
    pred = '{:where {:k "x"}}'
    p.write_text("\n".join([
        f'{{:index 0 :type :invoke :process 0 :f :txn :value [[:rp {pred} nil] [:w "a" {{:k "x"}}]]}}',
        f'{{:index 1 :type :invoke :process 1 :f :txn :value [[:rp {pred} nil] [:w "b" {{:k "x"}}]]}}',
        f'{{:index 2 :type :ok :process 1 :f :txn :value [[:rp {pred} []] [:w "b" {{:k "x"}}]]}}',
        f'{{:index 3 :type :ok :process 0 :f :txn :value [[:rp {pred} []] [:w "a" {{:k "x"}}]]}}']))
    assert check(p, "predicate", models=["serializable"])["anomaly_types"] == ["G2"]


def test_an_empty_predicate_history_is_not_valid(tmp_path):
    """A check told nothing never passes: no transactions is "unknown", exit 1."""
    p = tmp_path / "empty.json"
    p.write_text("[]")
    out = io.StringIO()
    assert main(["check", str(p), "--workload", "predicate", "--json"], out=out, err=io.StringIO()) == 1
    assert json.loads(out.getvalue())["valid"] == "unknown"
