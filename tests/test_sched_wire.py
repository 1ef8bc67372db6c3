"""PostgreSQL at the wire: steps run in greenlets on the runner's thread, the observer is asked only
about statements that have not answered, and a step may be Python code making several queries."""

from __future__ import annotations

import threading

import pytest

from toki.sched import Runner, Schedule, Step, parse_toml
from toki.sched.green import GreenConnection
from toki.sched.runner import Lane

pytestmark = pytest.mark.db

FREE = """name = "free"
setup = ["create table if not exists w (id int primary key, v int)", "delete from w",
         "insert into w values (1, 10), (2, 20)"]
steps = [
  { session = "T1", sql = "begin" }, { session = "T2", sql = "begin" },
  { session = "T1", sql = "update w set v = v + 1 where id = 1" },
  { session = "T2", sql = "update w set v = v + 1 where id = 2" },
  { session = "T1", sql = "commit" }, { session = "T2", sql = "commit" },
]
final = ["select id, v from w order by id"]
"""


@pytest.fixture
def counted(monkeypatch):
    calls = {"observer": 0}
    real = Lane.is_blocked

    def is_blocked(self, pid, others):
        calls["observer"] += 1
        return real(self, pid, others)

    monkeypatch.setattr(Lane, "is_blocked", is_blocked)
    return calls


def test_no_thread_and_no_observer_query_when_nothing_blocks(toki_server, counted):
    runner = Runner(toki_server)
    with runner.lane("wire") as lane:
        runner.run(parse_toml(FREE), "rc", lane=lane)  # connections opened, plans warm
        before = threading.active_count()
        # a statement silent for 0.5 ms costs one question; on an idle local server none are. How
        # many a run asks depends on the machine's load, so benchmarks/bench_bounds.py counts them
        # (wire-questions); here: no thread, and the runs come out right.
        for _ in range(20):
            res = runner.run(parse_toml(FREE), "rc", lane=lane)
            assert res.final[0]["rows"] == [[1, 11], [2, 21]]
        assert threading.active_count() == before
        assert all(isinstance(s.conn, GreenConnection) for s in lane.sessions.values())


def test_a_blocked_step_is_found_by_the_observer_and_released(toki_server, counted):
    text = FREE.replace('{ session = "T2", sql = "update w set v = v + 1 where id = 2" }',
                        '{ session = "T2", sql = "update w set v = v + 1 where id = 1" }')
    res = Runner(toki_server).run(parse_toml(text), "rc")
    assert [s.index for s in res.steps if s.blocked] == [3] and res.steps[3].completed_at == 4
    assert res.final[0]["rows"] == [[1, 12], [2, 20]] and counted["observer"] >= 1


def test_a_python_step_makes_several_queries_cooperatively(toki_server):
    """T2's step reads, then blocks on T1's row lock in its second query: the runner marks the
    step blocked, T1 commits, and the step resumes where it stopped."""
    def read_then_write(conn, ctx):
        ctx["seen"] = conn.execute("select v from w where id = 1").fetchone()[0]
        conn.execute("update w set v = %s where id = 1", (ctx["seen"] + 100,))
        return [[ctx["seen"]]]

    steps = [Step("T1", sql="begin"), Step("T2", sql="begin"),
             Step("T1", sql="update w set v = 11 where id = 1"),
             Step("T2", op="call", args={"fn": read_then_write}),
             Step("T1", sql="commit"), Step("T2", sql="commit")]
    s = Schedule(name="coop", steps=steps, setup=parse_toml(FREE).setup,
                 final=["select v from w where id = 1"]).validate()
    res = Runner(toki_server).run(s, "rc")
    assert res.steps[3].blocked and res.steps[3].status == "ok" and res.steps[3].rows == [[10]]
    assert res.final[0]["rows"] == [[110]]  # read committed: T2 read 10 before T1 committed
