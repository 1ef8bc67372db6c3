"""The keyed judge log on the real database: first votes, replays, explicit re-adjudication."""

from __future__ import annotations

from datetime import datetime

import psycopg
import pytest

from toki.db import judge_log
from toki.db.store import Store
from toki.errors import InputError
from toki.judges import FixtureJudge, SimulatedJudge, judge_key
from toki.model import Fact

pytestmark = pytest.mark.db

A = Fact("fa", "alice", "medication", "penicillin", datetime(2026, 3, 1))
B = Fact("fb", "alice", "medication", "amoxicillin", datetime(2026, 4, 15))


def replay(store: Store, judge, **kw):
    """Forget the memory, keep the log, write the same conflict again."""
    store.conn.execute("delete from agent_memory")
    store.write(A, operator="lww")
    return store.write(B, operator="await", judge=judge, **kw)


def test_first_vote_is_logged_and_replays_read_it(toki_store):
    judge = SimulatedJudge(p=0.5, seed=11)
    outs = [replay(toki_store, judge) for _ in range(6)]
    assert [o.vote_source for o in outs] == ["judge"] + ["log"] * 5
    assert len({o.winner_id for o in outs}) == 1 and judge.calls == 1
    key = judge_key((A, B), judge)
    [entry] = judge_log.history(toki_store.conn, key)
    assert (entry.epoch, entry.reason, entry.read_set) == (0, "first", "fa|fb")
    assert entry.vote == outs[0].vote and judge_log.lookup(toki_store.conn, key) == entry


def test_without_the_log_replays_disagree(toki_store):
    judge = SimulatedJudge(p=0.5, seed=11)
    winners = []
    for _ in range(40):
        toki_store.conn.execute("delete from judge_log")
        winners.append(replay(toki_store, judge).winner_id)
    assert len(set(winners)) == 2 and judge.calls == 40


def test_readjudication_needs_an_explicit_condition(toki_store):
    judge = SimulatedJudge(p=1.0, seed=0)  # always the first canonical candidate: fa
    assert replay(toki_store, judge).winner_id == "fa"
    key = judge_key((A, B), judge)
    conn = toki_store.conn
    with pytest.raises(InputError, match="explicit reason"):
        judge_log.readjudicate(conn, key, (A, B), reason="first", vote=1)
    with pytest.raises(InputError, match="explicit reason"):
        judge_log.readjudicate(conn, key, (A, B), reason="because", vote=1)
    with pytest.raises(InputError, match="same model"):
        judge_log.readjudicate(conn, key, (A, B), reason="model-change", judge=SimulatedJudge(p=0.0))
    with pytest.raises(InputError, match="without evidence"):
        judge_log.readjudicate(conn, key, (A, B), reason="new-evidence", judge=judge)
    with pytest.raises(InputError, match="exactly one"):
        judge_log.readjudicate(conn, key, (A, B), reason="appeal")
    with pytest.raises(InputError, match="read set"):
        judge_log.readjudicate(conn, key, (A, Fact("fz", "alice", "medication", "x", datetime(2026, 1, 1))),
                               reason="appeal", vote=1)
    unseen = judge_key((A, B), SimulatedJudge(p=1.0, seed=99))
    with pytest.raises(InputError, match="no logged vote"):
        judge_log.readjudicate(conn, unseen, (A, B), reason="appeal", vote=1)
    assert len(judge_log.history(conn, key)) == 1  # refused re-adjudications left nothing

    e1 = judge_log.readjudicate(conn, key, (A, B), reason="appeal", vote=1, session="clinician")
    assert (e1.epoch, e1.reason, e1.vote, e1.session) == (1, "appeal", 1, "clinician")
    out = replay(toki_store, judge)
    assert (out.winner_id, out.vote_source) == ("fb", "log")

    e2 = judge_log.readjudicate(conn, key, (B, A), reason="model-change",
                                judge=SimulatedJudge(p=1.0, seed=0, model="bigger-model"))
    assert (e2.epoch, e2.reason, e2.vote) == (2, "model-change", 0) and "bigger-model" in e2.theta
    e3 = judge_log.readjudicate(conn, key, (A, B), reason="new-evidence", judge=SimulatedJudge(p=0.0),
                                evidence="pharmacy record 2026-04-16: amoxicillin dispensed")
    assert (e3.epoch, e3.vote) == (3, 1) and "evidence_sha256" in e3.theta
    assert [e.reason for e in judge_log.history(conn, key)] == ["first", "appeal", "model-change", "new-evidence"]
    assert replay(toki_store, judge).winner_id == "fb" and judge.calls == 1


def test_non_canonical_keys_store_canonical_votes(toki_store):
    """Arrival order (B, A) with canonicalisation off: the judge sees B first, the log stores the
    index into the canonical order, and re-adjudication presents the key's own order again."""
    judge = FixtureJudge({("fa", "fb"): 1.0, ("fb", "fa"): 1.0})  # position A always wins
    toki_store.write(B, operator="lww")
    txn = toki_store.begin_write(A, operator="await", judge=judge, canonicalize=False)
    out = txn.run()
    assert out.winner_id == "fb"  # B was shown first (incumbent first) and won by position
    key = judge_key((B, A), judge, canonicalize=False)
    assert key.read_set == ("fb", "fa") and judge_log.lookup(toki_store.conn, key).vote == 1
    e = judge_log.readjudicate(toki_store.conn, key, (A, B), reason="appeal", judge=judge)
    assert e.vote == 1  # shown as (fb, fa) again: position A is fb, canonical index 1


@pytest.mark.parametrize("form", ["unique", "append"])
def test_log_forms(toki_server, form):
    """The unique form refuses a second vote for one (key, epoch); the append form keeps both and
    readers take the first by seq."""
    with Store.open(server=toki_server, label="jlog", judge_log_form=form) as store:
        judge = SimulatedJudge(p=1.0)
        key = judge_key((A, B), judge)
        from toki.judges import Vote
        judge_log.record(store.conn, key, Vote(0, 1.0))
        if form == "unique":
            with pytest.raises(psycopg.errors.UniqueViolation):
                judge_log.record(store.conn, key, Vote(1, 1.0))
        else:
            judge_log.record(store.conn, key, Vote(1, 1.0))
            assert [e.vote for e in judge_log.history(store.conn, key)] == [0, 1]
            assert judge_log.lookup(store.conn, key).vote == 0
