"""The barrier-controlled runner on a real PostgreSQL: blocking and unblocking, deadlocks,
serialization failures, failed transactions, both on_blocked modes, and hanging steps."""

from __future__ import annotations

import secrets

import psycopg
import pytest

from toki.db.server import SCHEMA_PREFIX
from toki.errors import ScheduleError, StepTimeout
from toki.sched import Runner, parse_toml
from toki.sched.runner import DEADLOCK_TIMEOUT_MS

pytestmark = pytest.mark.db

TABLE = """
setup = ["create table test (id int primary key, value int)",
         "insert into test (id, value) values (1, 10), (2, 20)"]
final = ["select id, value from test order by id"]
"""


def sched(steps: str, name: str = "t", extra: str = "", expect: str = ""):
    return parse_toml(f'name = "{name}"\n{extra}\n{TABLE}\nsteps = [\n{steps}\n]\n{expect}', source=f"{name}.toml")


@pytest.fixture(scope="module")
def runner(toki_server):
    return Runner(toki_server, step_limit_s=5)


def _schemas(server, label: str) -> list[str]:
    with psycopg.connect(server.dsn, autocommit=True) as c:
        return [r[0] for r in c.execute("select nspname from pg_namespace where nspname like %s",
                                        (f"{SCHEMA_PREFIX}{label}%",)).fetchall()]


def test_blocked_step_is_released_by_commit(runner):
    s = sched("""
      { session = "T1", sql = "begin" },
      { session = "T2", sql = "begin" },
      { session = "T1", sql = "update test set value = 11 where id = 1" },
      { session = "T2", sql = "update test set value = value + 1 where id = 1 returning value" },
      { session = "T1", sql = "select 1" },
      { session = "T1", sql = "commit" },
      { session = "T2", sql = "commit" },""")
    r = runner.run(s, "read-committed")
    blocked = r.steps[3]
    assert blocked.blocked and blocked.status == "ok"
    assert blocked.completed_at == 5  # finished after T1's commit, not after step 4
    assert blocked.rows == [[12]]  # re-evaluated on T1's committed row
    assert [st.completed_at for st in r.steps if not st.blocked] == [0, 1, 2, 4, 5, 6]
    assert r.final[0]["rows"] == [[1, 12], [2, 20]]
    assert r.sessions == {"T1": "committed", "T2": "committed"}


def test_blocked_step_is_released_by_abort(runner):
    s = sched("""
      { session = "T1", sql = "begin" },
      { session = "T2", sql = "begin" },
      { session = "T1", sql = "update test set value = 11 where id = 1" },
      { session = "T2", sql = "update test set value = value + 1 where id = 1 returning value" },
      { session = "T1", sql = "rollback" },
      { session = "T2", sql = "commit" },""")
    r = runner.run(s, "repeatable-read")  # an abort releases without a serialization failure
    assert r.steps[3].blocked and r.steps[3].completed_at == 4
    assert r.steps[3].status == "ok" and r.steps[3].rows == [[11]]
    assert r.sessions == {"T1": "rolled-back", "T2": "committed"}
    assert r.final[0]["rows"] == [[1, 11], [2, 20]]


def test_deadlock_is_resolved_in_milliseconds(runner):
    s = sched("""
      { session = "T1", sql = "begin" },
      { session = "T2", sql = "begin" },
      { session = "T1", sql = "update test set value = 11 where id = 1" },
      { session = "T2", sql = "update test set value = 22 where id = 2" },
      { session = "T1", sql = "update test set value = 21 where id = 2" },
      { session = "T2", sql = "update test set value = 12 where id = 1" },
      { session = "T1", sql = "commit" },
      { session = "T2", sql = "commit" },""", extra='on_blocked = "defer"')
    r = runner.run(s, "read-committed")
    states = [st.sqlstate for st in r.steps]
    assert states.count("40P01") == 1, states
    victim = states.index("40P01")
    assert victim in (4, 5)
    survivor = 5 if victim == 4 else 4
    assert r.steps[survivor].status == "ok"
    assert sorted(r.sessions.values()) == ["aborted", "committed"]
    # deadlock_timeout is lowered to milliseconds for the sessions (or, where the role cannot,
    # toki breaks deadlocks itself); the time it takes: benchmarks/bench_bounds.py (deadlock)
    if runner.server.can_lower_deadlock_timeout:
        shown = runner.run(sched('{ session = "T1", sql = "show deadlock_timeout" },'), "read-committed")
        assert shown.steps[0].rows == [[f"{DEADLOCK_TIMEOUT_MS}ms"]], shown.steps[0].rows
    else:
        assert "pg_blocking_pids" in r.to_json()["backend"]["deadlocks"]


def test_serialization_failure_40001_and_failed_transaction_25P02(runner):
    s = sched("""
      { session = "T1", sql = "begin" },
      { session = "T2", sql = "begin" },
      { session = "T1", sql = "select value from test where id = 1" },
      { session = "T2", sql = "select value from test where id = 1" },
      { session = "T1", sql = "update test set value = 11 where id = 1" },
      { session = "T2", sql = "update test set value = 11 where id = 1" },
      { session = "T1", sql = "commit" },
      { session = "T2", sql = "select value from test where id = 2" },
      { session = "T2", sql = "commit" },""")
    r = runner.run(s, "serializable")
    assert r.steps[5].blocked and r.steps[5].sqlstate == "40001" and r.steps[5].completed_at == 6
    assert r.steps[7].status == "error" and r.steps[7].sqlstate == "25P02"
    assert r.steps[8].status == "ok"  # COMMIT of a failed transaction ends as a rollback
    assert r.sessions == {"T1": "committed", "T2": "aborted"}
    assert r.sqlstates() == ["40001", "25P02"]


def test_session_in_failed_transaction_is_recorded_as_failed(runner):
    s = sched("""
      { session = "T1", sql = "begin" },
      { session = "T1", sql = "select 1 / 0" },
      { session = "T1", sql = "select 1" },""")
    r = runner.run(s, "read-committed")
    assert [st.sqlstate for st in r.steps] == [None, "22012", "25P02"]
    assert r.sessions == {"T1": "failed"}


def test_step_sent_to_blocked_session_is_a_schedule_error_naming_both_steps(runner, toki_server):
    label = f"blk{secrets.token_hex(3)}"
    s = sched("""
      { session = "T1", sql = "begin" },
      { session = "T2", sql = "begin" },
      { session = "T1", sql = "update test set value = 11 where id = 1" },
      { session = "T2", sql = "update test set value = 12 where id = 1" },
      { session = "T2", sql = "commit" },
      { session = "T1", sql = "commit" },""", name=label)
    with pytest.raises(ScheduleError) as e:
        runner.run(s, "read-committed")
    msg = str(e.value)
    assert f"{label}.toml" in msg
    assert "step 4 (T2: commit)" in msg and "step 3 (T2: update test set value = 12 where id = 1)" in msg
    assert "on_blocked" in msg  # the fix
    assert _schemas(toki_server, label) == []


def test_defer_mode_records_the_executed_order(runner):
    s = sched("""
      { session = "T1", sql = "begin" },
      { session = "T2", sql = "begin" },
      { session = "T1", sql = "update test set value = 11 where id = 1" },
      { session = "T2", sql = "update test set value = 12 where id = 1" },
      { session = "T2", sql = "commit" },
      { session = "T1", sql = "commit" },""")
    r = runner.run(s, "read-committed", on_blocked="defer")
    assert r.executed == [0, 1, 2, 3, 5, 4]  # T2's commit waited for its blocked update
    assert r.steps[3].blocked and r.steps[3].completed_at == 5
    assert r.sessions == {"T1": "committed", "T2": "committed"}
    assert r.final[0]["rows"] == [[1, 12], [2, 20]]
    assert r.to_json()["executed"] == [0, 1, 2, 3, 5, 4]


def test_hanging_step_raises_step_timeout_and_leaves_no_schema(toki_server):
    label = f"hang{secrets.token_hex(3)}"
    s = sched("""
      { session = "T1", sql = "begin" },
      { session = "T1", sql = "select pg_sleep(5)" },
      { session = "T1", sql = "commit" },""", name=label)
    # cancelled at the step limit, not waited out (the time it takes: benchmarks/bench_bounds.py)
    with pytest.raises(StepTimeout) as e:
        Runner(toki_server, step_limit_s=0.3).run(s, "read-committed")
    msg = str(e.value)
    assert "step 1 (T1: select pg_sleep(5))" in msg and "0.3s" in msg and e.value.fix
    assert _schemas(toki_server, label) == []


def test_never_released_block_is_a_step_timeout(toki_server):
    label = f"stuck{secrets.token_hex(3)}"
    s = sched("""
      { session = "T1", sql = "begin" },
      { session = "T1", sql = "update test set value = 11 where id = 1" },
      { session = "T2", sql = "update test set value = 12 where id = 1" },""", name=label,
              extra='on_blocked = "defer"')
    with pytest.raises(StepTimeout) as e:
        Runner(toki_server, step_limit_s=0.3).run(s, "read-committed")
    assert "step(s) [2]" in str(e.value) and "commit or rollback" in str(e.value)
    assert _schemas(toki_server, label) == []


def test_expectations_are_checked_and_a_wrong_one_fails(runner):
    steps = """
      { session = "T1", sql = "begin" },
      { session = "T2", sql = "begin" },
      { session = "T1", sql = "select value from test where id = 1" },
      { session = "T2", sql = "update test set value = 12 where id = 1" },
      { session = "T2", sql = "commit" },
      { session = "T1", sql = "select value from test where id = 1" },
      { session = "T1", sql = "commit" },"""
    expect = "[expect.rc]\nrows = {{ 5 = {} }}\nfinal = [[[1, 12], [2, 20]]]\n"
    good = sched(steps, name="good", expect=expect.format("[[12]]"))
    r = runner.run(good, "rc")
    assert r.expect == {"checked": True, "ok": True, "diff": []}
    r = runner.run(good, "rr")  # no expectation for rr: not checked
    assert r.expect["checked"] is False and r.steps[5].rows == [[10]]
    bad = sched(steps, name="bad", expect=expect.format("[[10]]"))
    r = runner.run(bad, "rc")
    assert r.expect["ok"] is False and r.expect["diff"] == ["rows of step 5: expected [[10]], got [[12]]"]


def test_lane_is_reused_across_runs(runner):
    s = sched("""
      { session = "T1", sql = "begin" },
      { session = "T1", sql = "update test set value = value + 1 where id = 1 returning value" },
      { session = "T1", sql = "commit" },""")
    s.teardown = ["drop table test"]
    with runner.lane("reuse") as lane:
        pids = None
        for _ in range(3):
            r = runner.run(s, "rc", lane=lane)
            assert r.steps[1].rows == [[11]]  # setup re-created the table: each run starts fresh
            now = {n: sess.pid for n, sess in lane.sessions.items()}
            assert pids is None or now == pids  # same connections
            pids = now
