"""Races on the guarded write path, driven by the scheduler: concurrent confirmations must not
lose evidence, and concurrent cleanup agents (the n-ary ⊕t fold) must leave one value."""

from __future__ import annotations

import pytest

from toki.sched import Runner, Schedule, Step

pytestmark = pytest.mark.db

SLOT = "select object, provenance_id from agent_memory where row_kind = 'current' and system_time_end = '9999-12-31' order by fact_id"
ROW = ("insert into agent_memory values ('{fid}', 'alice', 'medication', '{obj}', '2026-03-01', '9999-12-31', "
       "'{t}', '9999-12-31', '{prov}', 0.5, 'lww', 'current')")


def _fact(fid, obj, prov):
    return {"fact_id": fid, "subject": "alice", "predicate": "medication", "object": obj,
            "valid_from": "2026-03-01T00:00:00", "provenance": prov}


def _race(first_a, first_b, setup):
    steps = [first_a, first_b, Step("A", op="read_candidates"), Step("B", op="read_candidates"),
             Step("A", op="write"), Step("B", op="write"), Step("A", op="commit"), Step("B", op="commit")]
    return Schedule(name="race", steps=steps, setup=setup, final=[SLOT], on_blocked="defer", store=True).validate()


@pytest.fixture(scope="module")
def runner(toki_server):
    return Runner(toki_server)


@pytest.mark.parametrize("guard", [True, False])
def test_concurrent_confirmations_keep_both_agents_evidence_only_with_the_guard(runner, guard):
    setup = [ROW.format(fid="rx-1", obj="penicillin", t="2026-03-01", prov="x_rx1")]
    sched = _race(Step("A", op="begin", args={"fact": _fact("rx-a", "penicillin", "x_a"), "guard": guard}),
                  Step("B", op="begin", args={"fact": _fact("rx-b", "penicillin", "x_b"), "guard": guard}), setup)
    res = runner.run(sched, "read-committed", check_expect=False)
    assert res.sessions == {"A": "committed", "B": "committed"}
    assert res.steps[5].blocked  # B's merge waits for A's
    [(obj, prov)] = res.final[0]["rows"]
    tokens = set(prov.split(" + "))
    if guard:
        assert tokens == {"x_rx1", "x_a", "x_b"} and res.outcomes["B"].rereads == 1
    else:
        assert tokens == {"x_rx1", "x_b"}  # A's confirmation was overwritten: a lost update


@pytest.mark.parametrize("level", ["read-committed", "repeatable-read", "serializable"])
def test_two_cleanup_agents_folding_a_slot_leave_one_value(runner, level):
    setup = [ROW.format(fid="rx-2", obj="amoxicillin", t="2026-03-01 10:00", prov="x_rx2"),
             ROW.format(fid="rx-3", obj="cephalexin", t="2026-03-01 11:00", prov="x_rx3")]
    sched = _race(Step("A", op="consolidate", args={"subject": "alice", "predicate": "medication"}),
                  Step("B", op="consolidate", args={"subject": "alice", "predicate": "medication"}), setup)
    res = runner.run(sched, level, check_expect=False)
    assert [r[0] for r in res.final[0]["rows"]] == ["cephalexin"]  # ⊕t: the later write wins, for both
    if level == "read-committed":
        assert res.sessions == {"A": "committed", "B": "committed"}
        assert res.outcomes["B"].action == "nothing-to-do" and res.outcomes["B"].rereads == 1
    else:
        assert sorted(res.sessions.values()) == ["aborted", "committed"]
        assert "40001" in res.sqlstates()


def test_consolidate_writes_one_audit_row_per_loser_dominating_all(toki_store):
    from datetime import datetime

    from toki.matrix.memory import audit_erasure

    for i, obj in enumerate(["a", "b", "c"]):
        toki_store.conn.execute(ROW.format(fid=f"f{i}", obj=obj, t=f"2026-03-0{i + 1}", prov=f"x_f{i}"))
    out = toki_store.consolidate("alice", "medication", operator="evi", at=datetime(2026, 4, 1))
    assert out.action == "consolidated" and out.winner_id == "f2"  # equal confidence: later system time
    assert [r.object for r in toki_store.current("alice", "medication")] == ["c"]
    audits = [r.provenance_id for r in toki_store.rows("audit")]
    assert len(audits) == 2 and not audit_erasure(["x_f0", "x_f1", "x_f2"], audits)
    with pytest.raises(Exception, match="lww or evi"):
        toki_store.consolidate("alice", "medication", operator="rule")


def test_a_newcomer_that_confirms_one_value_and_contradicts_another_is_refused(toki_store):
    from datetime import datetime

    from toki.errors import AmbiguousIncumbents
    from toki.model import Fact

    toki_store.conn.execute(ROW.format(fid="a", obj="penicillin", t="2026-03-01", prov="x_a"))
    toki_store.conn.execute(ROW.format(fid="b", obj="amoxicillin", t="2026-03-02", prov="x_b"))
    before = toki_store.rows()
    with pytest.raises(AmbiguousIncumbents, match="consolidate"):
        toki_store.write(Fact("c", "alice", "medication", "penicillin", datetime(2026, 3, 1)), at=datetime(2026, 4, 1))
    assert toki_store.rows() == before


@pytest.mark.parametrize("slot_lock", [False, True])
def test_empty_slot_phantom_at_si_needs_the_slot_lock(runner, slot_lock):
    """⊕p at SI (its precondition): two writers both find the slot empty and both insert.
    the paper's write path (docs/design.md#the-write-path) lets it through; the opt-in slot lock serialises them."""
    def begin(agent, fid, obj, conf):
        fact = dict(_fact(fid, obj, f"x_{fid}"), confidence=conf)
        return Step(agent, op="begin", args={"fact": fact, "operator": "evi", "slot_lock": slot_lock})

    sched = _race(begin("A", "n1", "amoxicillin", 0.6), begin("B", "n2", "cephalexin", 0.7), [])
    res = runner.run(sched, "repeatable-read", check_expect=False)
    assert res.sessions == {"A": "committed", "B": "committed"}
    objects = [r[0] for r in res.final[0]["rows"]]
    if slot_lock:
        assert res.steps[1].blocked and objects == ["cephalexin"]  # B waited, then resolved against A
    else:
        assert objects == ["amoxicillin", "cephalexin"]  # two contradicting current values
