"""The store and the write path (docs/design.md#the-write-path) on a real PostgreSQL (embedded, or TOKI_DSN)."""

import threading
import time
from datetime import datetime

import pytest

from toki.db.store import SchemaMode, Store, WriteTxn
from toki.errors import (
    AmbiguousIncumbents,
    ConfigError,
    DatabaseError,
    InputError,
    InvalidVote,
    JudgeError,
    TokiError,
)
from toki.judges.base import SimulatedJudge, Vote
from toki.model import SENTINEL, Fact
from toki.operators import decode_witness
from toki.provenance import Carrier

pytestmark = pytest.mark.db

MAR1, APR1, APR15, APR16, MAY1 = (datetime(2026, 3, 1), datetime(2026, 4, 1), datetime(2026, 4, 15),
                                  datetime(2026, 4, 16), datetime(2026, 5, 1))
W1, W2, W3 = datetime(2026, 3, 1, 9), datetime(2026, 4, 15, 9), datetime(2026, 4, 16, 9)
PEN = Fact("rx-1", "alice", "medication", "penicillin", MAR1, confidence=0.6)
AMOX = Fact("rx-2", "alice", "medication", "amoxicillin", APR15, confidence=0.9)
CEPH = Fact("rx-3", "alice", "medication", "cephalexin", APR16, confidence=0.7)


def snapshot(store: Store) -> dict:
    c = store.conn
    return {
        "agent_memory": store.rows("all"),
        "judge_log": c.execute("select judge_key, epoch, vote from judge_log order by seq").fetchall(),
        "policy": c.execute("select policy_id, set_key, chosen_index from policy order by policy_id").fetchall(),
        "callback_log": c.execute("select request_hash, chosen_index, status from callback_log "
                                  "order by request_hash").fetchall(),
    }


def objects(rows):
    return sorted(r.object for r in rows)


# -- the basic cases -----------------------------------------------------------------------

def test_insert_into_an_empty_slot(toki_store):
    out = toki_store.write(PEN, at=W1)
    assert out.action == "inserted" and out.winner_id == "rx-1" and out.at == W1
    (row,) = toki_store.rows()
    assert row.values() == ("rx-1", "alice", "medication", "penicillin", MAR1, SENTINEL, W1, SENTINEL,
                            "x_rx-1", 0.6, "lww", "current")


def test_duplicate_merges_provenance(toki_store):
    toki_store.write(PEN, at=W1)
    out = toki_store.write(PEN.replace(fact_id="rx-1b", valid_from=APR1), at=W2)
    assert out.action == "duplicate" and out.winner_id == "rx-1"
    (row,) = toki_store.rows()
    assert Carrier.MULTILINEAR.parse(row.provenance_id) == Carrier.MULTILINEAR.parse("x_rx-1 + x_rx-1b")


def test_lww_supersedes_and_keeps_the_remainder_current(toki_store):
    toki_store.write(PEN, at=W1)
    out = toki_store.write(AMOX, operator="lww", at=W2)
    assert (out.action, out.winner_id, out.loser_id) == ("superseded", "rx-2", "rx-1")
    rows = {r.fact_id: r for r in toki_store.rows()}
    assert rows["rx-1"].system_time_end == W2 and rows["rx-1"].row_kind == "current"  # closed, kept
    assert (rows["rx-2"].system_time_start, rows["rx-2"].system_time_end) == (W2, SENTINEL)
    assert rows["rx-2"].provenance_id == "x_rx-1 + x_rx-2"
    # penicillin stays true before 15 April: the remainder #pre is current from W2 on
    pre = rows["rx-1#pre"]
    assert (pre.object, pre.valid_from, pre.valid_to, pre.system_time_start) == ("penicillin", MAR1, APR15, W2)
    audit = rows[out.audit_id]
    assert out.audit_id == "audit::rx-1::2026-04-15T09:00:00" and audit.row_kind == "audit"
    assert decode_witness(audit.object) == ("amoxicillin", "penicillin")
    assert audit.provenance_id == "x_rx-1 + x_rx-2" and audit.resolution_strategy_id == "lww"
    assert objects(toki_store.current("alice", "medication")) == ["amoxicillin", "penicillin"]
    assert objects(toki_store.as_of(MAY1)) == ["amoxicillin"]
    assert objects(toki_store.as_of(datetime(2026, 3, 20))) == ["penicillin"]


def test_partial_loss_keeps_both_remainders(toki_store):
    toki_store.write(PEN, at=W1)
    toki_store.write(AMOX.replace(valid_to=MAY1), at=W2)
    cur = {r.fact_id: (r.object, r.valid_from, r.valid_to) for r in toki_store.current()}
    assert cur == {"rx-1#pre": ("penicillin", MAR1, APR15), "rx-2": ("amoxicillin", APR15, MAY1),
                   "rx-1#post": ("penicillin", MAY1, SENTINEL)}
    assert objects(toki_store.as_of(datetime(2026, 6, 1))) == ["penicillin"]


def test_evi_keeps_the_stronger_incumbent(toki_store):
    toki_store.write(AMOX.replace(valid_from=MAR1), operator="evi", at=W1)
    out = toki_store.write(PEN.replace(valid_from=APR1), operator="evi", at=W2)
    assert (out.action, out.winner_id, out.loser_id) == ("rejected", "rx-2", "rx-1")
    (cur,) = toki_store.current()
    assert cur.fact_id == "rx-2" and cur.system_time_end == SENTINEL
    # the newcomer lives only in the audit row
    (audit,) = toki_store.rows("audit")
    assert audit.fact_id.startswith("audit::rx-1::") and decode_witness(audit.object) == ("amoxicillin", "penicillin")
    assert not [r for r in toki_store.rows() if r.fact_id == "rx-1"]


def test_await_takes_the_delivered_callback(toki_store):
    toki_store.write(PEN, operator="await", at=W1)
    toki_store.deliver_callback([PEN, AMOX], 0)  # the clinician keeps penicillin
    out = toki_store.write(AMOX, operator="await", at=W2, judge=SimulatedJudge(fail=True))
    assert (out.action, out.winner_id, out.vote, out.vote_source) == ("rejected", "rx-1", 0, "callback")
    assert toki_store.judge_votes() == []  # the judge was never asked


def test_await_without_callback_asks_the_judge_and_logs_the_vote_under_its_key(toki_store):
    toki_store.write(PEN, operator="await", at=W1)
    judge = SimulatedJudge(p=1.0, seed=3)  # always index 0 = rx-1
    out = toki_store.begin_write(AMOX, operator="await", at=W2, judge=judge)
    out.begin()
    out.read_candidates()
    vote = out.judge_step()
    # logged inside the transaction, before the operator writes or commits
    assert vote.index == 0 and len(out.conn.execute("select * from judge_log").fetchall()) == 1
    res = out.commit()
    assert (res.action, res.vote_source) == ("rejected", "judge") and judge.calls == 1
    ((key, vote_idx, _),) = toki_store.judge_votes()
    assert vote_idx == 0
    # the same contradiction again reads the log, even with a judge that would vote otherwise
    again = toki_store.write(AMOX.replace(fact_id="rx-2"), operator="await", at=W3,
                             judge=SimulatedJudge(p=0.0, seed=3))
    assert (again.vote_source, again.winner_id) == ("log", "rx-1")


def test_rule_uses_the_policy_row(toki_store):
    toki_store.write(PEN, operator="rule", at=W1)
    toki_store.policy([AMOX, PEN], 1)
    out = toki_store.write(AMOX, operator="rule", at=W2, judge=SimulatedJudge(fail=True))
    assert (out.action, out.winner_id, out.vote_source) == ("superseded", "rx-2", "policy")


def test_rule_without_policy_asks_the_judge_and_installs_a_policy(toki_store):
    toki_store.write(PEN, operator="rule", at=W1)
    out = toki_store.write(AMOX, operator="rule", at=W2, judge=SimulatedJudge(p=0.0))
    assert (out.winner_id, out.vote_source) == ("rx-2", "judge")
    rows = toki_store.conn.execute("select set_key, chosen_index, source from policy").fetchall()
    assert rows == [("rx-1|rx-2", 1, "judge")]


@pytest.mark.parametrize("operator", ["lww", "evi", "await", "rule"])
def test_every_operator_records_its_strategy(toki_store, operator):
    toki_store.write(PEN, operator=operator, at=W1)
    toki_store.deliver_callback([PEN, AMOX], 1)
    toki_store.policy([PEN, AMOX], 1)
    out = toki_store.write(AMOX, operator=operator, at=W2)
    assert out.winner_id == "rx-2"  # lww: later; evi: 0.9 > 0.6; await/rule: index 1
    assert {r.resolution_strategy_id for r in toki_store.rows()} == {operator}


# -- schema modes ----------------------------------------------------------------------------

def test_schema_modes_differ_only_in_what_they_keep(toki_server):
    seen = {}
    for mode in SchemaMode:
        with Store.open(server=toki_server, label="modes", mode=mode.value) as s:
            s.write(PEN, at=W1)
            out = s.write(AMOX, at=W2)
            s.write(CEPH.replace(fact_id="rx-0", confidence=0.1), operator="evi", at=W3)  # loses
            seen[mode] = (out, s.rows("current"), s.rows("audit"), s.as_of(MAY1), s.as_of(datetime(2026, 3, 20)),
                          s.as_of(datetime(2026, 3, 20), APR1))
    out, cur, audit, may, mar, mar_then = seen[SchemaMode.AUDIT_ROW]
    assert out.audit_id and len(audit) == 2 and len(cur) == 3  # rx-1 closed, rx-1#pre, rx-2
    out, cur, audit, may2, mar2, mar_then2 = seen[SchemaMode.DUAL_ROW]
    assert out.audit_id is None and audit == [] and len(cur) == 3
    # Proposition 5: audit rows change no answer of a query that does not mention row_kind
    assert (may, mar, mar_then) == (may2, mar2, mar_then2)
    assert objects(may) == ["amoxicillin"] and objects(mar) == ["penicillin"] == objects(mar_then)
    out, cur, audit, may3, mar3, mar_then3 = seen[SchemaMode.BASE]
    # base: the winner overwrote the incumbent in place; no history, no audit (N3 by construction)
    assert audit == [] and [r.object for r in cur] == ["amoxicillin"] and out.audit_id is None
    assert mar3 == [] and mar_then3 == [] and objects(may3) == ["amoxicillin"]


def test_as_of_kinds(toki_store):
    toki_store.write(PEN, at=W1)
    toki_store.write(AMOX, at=W2)
    at = datetime(2026, 3, 20)
    assert objects(toki_store.as_of(at, kind="current")) == ["penicillin"]
    assert [r.row_kind for r in toki_store.as_of(at, kind="audit")] == ["audit"]
    assert len(toki_store.as_of(at, kind="all")) == 2
    # believed before the supersede: the original rx-1, and no audit yet
    assert [r.fact_id for r in toki_store.as_of(at, APR1, kind="all")] == ["rx-1"]
    assert toki_store.as_of(at, datetime(2026, 2, 1)) == []
    with pytest.raises(ConfigError):
        toki_store.as_of(at, kind="history")
    with pytest.raises(ConfigError):
        toki_store.rows("current' or true --")


def test_write_argument_errors(toki_store):
    with pytest.raises(ConfigError):
        toki_store.write(PEN, operator="max")
    with pytest.raises(ConfigError):
        toki_store.write(PEN, mode="triple_row")
    with pytest.raises(ConfigError):
        toki_store.write(PEN, level="snapshot-ish")
    with pytest.raises(InputError):
        toki_store.write(("rx-1", "alice"))
    assert toki_store.rows() == []


# -- refusals leave the store as it was ------------------------------------------------------

def _prepared(store):
    store.write(PEN.replace(valid_to=APR1), at=W1)
    store.write(AMOX.replace(valid_from=APR1), at=W2)  # meets: no contradiction, two current rows
    store.deliver_callback([PEN, CEPH], 0)
    return snapshot(store)


def test_more_than_one_contradicting_incumbent_is_refused(toki_store):
    before = _prepared(toki_store)
    with pytest.raises(AmbiguousIncumbents, match="contradicts 2 current rows") as e:
        toki_store.write(CEPH.replace(valid_from=datetime(2026, 3, 15)), at=W3)
    assert isinstance(e.value, TokiError) and e.value.fix
    assert snapshot(toki_store) == before


class ExplodingJudge(SimulatedJudge):
    def vote(self, candidates):
        raise RuntimeError("the judge's HTTP connection dropped")


class OutOfRangeJudge(SimulatedJudge):
    def vote(self, candidates):
        return Vote(2, 1.0)


@pytest.mark.parametrize("judge,exc", [(SimulatedJudge(fail=True), JudgeError),
                                       (ExplodingJudge(), RuntimeError),
                                       (OutOfRangeJudge(), InvalidVote)], ids=["fails", "raises", "out-of-range"])
@pytest.mark.parametrize("operator", ["await", "rule"])
def test_a_failing_judge_leaves_no_trace(toki_store, judge, exc, operator):
    toki_store.write(PEN, operator=operator, at=W1)
    before = snapshot(toki_store)
    with pytest.raises(exc):
        toki_store.write(AMOX, operator=operator, at=W2, judge=judge)
    assert snapshot(toki_store) == before  # no judge_log, policy or callback_log row either
    assert toki_store.conn.info.transaction_status.name == "IDLE"


def test_an_out_of_range_policy_is_refused(toki_store):
    toki_store.write(PEN, operator="rule", at=W1)
    toki_store.policy([PEN, AMOX], 5)
    before = snapshot(toki_store)
    with pytest.raises(InvalidVote):
        toki_store.write(AMOX, operator="rule", at=W2)
    assert snapshot(toki_store) == before


def test_a_database_error_mid_write_rolls_everything_back(toki_store):
    toki_store.write(PEN, at=W1)
    # a row in another slot that holds the audit id this write will use: the audit insert, the
    # last statement of the write (after the close and the winner insert), fails with 23505
    toki_store.conn.execute(
        "insert into agent_memory values ('audit::rx-1::2026-04-15T09:00:00', 'zed', 'x', 'y', %s, %s, %s, %s,"
        " '1', 1, 'lww', 'audit')", (MAR1, SENTINEL, W2, SENTINEL))
    before = snapshot(toki_store)
    with pytest.raises(DatabaseError) as e:
        toki_store.write(AMOX, at=W2)
    assert e.value.sqlstate == "23505" and "23505" in str(e.value)
    assert snapshot(toki_store) == before


def test_write_time_must_follow_the_incumbent(toki_store):
    toki_store.write(PEN, at=W2)
    before = snapshot(toki_store)
    with pytest.raises(InputError, match="not after"):
        toki_store.write(AMOX, at=W1)
    assert snapshot(toki_store) == before


def test_a_finished_write_cannot_go_on(toki_store):
    txn = toki_store.begin_write(PEN, at=W1)
    assert txn.run().action == "inserted"
    with pytest.raises(InputError, match="already finished"):
        txn.write()


def test_phases_expose_reads_and_writes(toki_store):
    toki_store.write(PEN, at=W1)
    txn = toki_store.begin_write(AMOX, at=W2)
    assert isinstance(txn, WriteTxn) and txn.PHASES[0] == "begin"
    txn.begin()
    assert [r.fact_id for r in txn.read_candidates()] == ["rx-1"]
    assert txn.judge_step() is None and txn.read_callback() is None  # lww needs neither
    out = txn.write()
    assert txn.commit() is out and txn.outcome is out
    assert txn.reads[0] == ("rx-1", "penicillin")
    assert ("rx-2", "amoxicillin") in txn.writes and ("rx-1", None) in txn.writes


# -- the double-supersede race, by hand with two connections -------------------------------

def _blocked(observer, pid) -> bool:
    return observer.execute("select cardinality(pg_blocking_pids(%s)) > 0", (pid,)).fetchone()[0]


def double_supersede(store, level, guard):
    """T1 and T2 both read penicillin as current, both supersede it; T2's close waits for T1."""
    store.write(PEN, at=W1)
    c1, c2 = store.connect(), store.connect()
    try:
        t1 = store.begin_write(AMOX, level=level, guard=guard, conn=c1)
        t2 = store.begin_write(CEPH, level=level, guard=guard, conn=c2)
        t1.begin()
        t2.begin()
        assert [r.fact_id for r in t1.read_candidates()] == ["rx-1"]
        assert [r.fact_id for r in t2.read_candidates()] == ["rx-1"]
        t1.write()
        result = {}

        def second():
            try:
                result["outcome"] = t2.write()
                t2.commit()
            except TokiError as e:
                result["error"] = e

        th = threading.Thread(target=second)
        th.start()
        deadline = time.monotonic() + 20
        while not _blocked(store.conn, c2.info.backend_pid):  # ask the server, never sleep to "let it block"
            assert th.is_alive() and time.monotonic() < deadline, f"T2 never blocked: {result}"
            time.sleep(0.005)
        t1.commit()
        th.join(20)
        assert not th.is_alive()
        return result
    finally:
        c1.close()
        c2.close()


def test_double_supersede_at_read_committed_with_the_guard_leaves_one_value(toki_store):
    r = double_supersede(toki_store, "read-committed", guard=True)
    assert "error" not in r and r["outcome"].rereads == 1 and r["outcome"].action == "superseded"
    assert objects(toki_store.as_of(MAY1)) == ["cephalexin"]


def test_double_supersede_at_read_committed_without_the_guard_leaves_two_values(toki_store):
    r = double_supersede(toki_store, "read-committed", guard=False)
    assert "error" not in r and r["outcome"].rereads == 0
    assert objects(toki_store.as_of(MAY1)) == ["amoxicillin", "cephalexin"]


@pytest.mark.parametrize("guard", [True, False])
@pytest.mark.parametrize("level", ["repeatable-read", "serializable"])
def test_double_supersede_above_read_committed_aborts_the_second(toki_store, level, guard):
    r = double_supersede(toki_store, level, guard=guard)
    assert isinstance(r["error"], DatabaseError) and r["error"].sqlstate == "40001"
    assert objects(toki_store.as_of(MAY1)) == ["amoxicillin"]
