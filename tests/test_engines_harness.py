"""The engine harness on toy engines: steps, blocking without sleeping, serial outcomes, search, replay."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from tests import toy_engine
from toki.harness.controller import Controller, EngineHung, ReplayChooser, SerialChooser, TapeChooser, Unverifiable
from toki.harness.draw import draw, marked_steps
from toki.harness.locks import InstrumentedLock
from toki.harness.search import context_switches, search
from toki.harness.trial import TrialRunner, hooks_installed
from toki.harness.witness import Witness, digest


def test_serial_orders_of_the_counter_leave_two_and_the_subsets_one():
    with TrialRunner(toy_engine.counter(), "increment") as tr:
        serial = tr.serial_outcomes()
    assert sorted(v for vs in serial.values() for v in vs) == ["A", "A then B", "B", "B then A", "no agent"]
    states = sorted({k for k in serial})
    assert any('"state":[2]' in k for k in states) and any('"state":[1]' in k for k in states)


def test_interleaved_reads_lose_an_update_and_serial_tapes_do_not():
    with TrialRunner(toy_engine.counter(), "increment") as tr:
        # A and B start (no choice), A reads, B reads, A writes, B writes
        lost = tr.trial(ReplayChooser(["A", "B", "A", "B", "A", "B"]))
        serial = tr.trial(TapeChooser([0] * 10))
    assert not lost.serializable and lost.outcome.state == [1]
    assert any(a.startswith("lost-update: counter is 1") for a in lost.anomalies)
    assert serial.serializable and serial.outcome.state == [2]


def test_search_finds_and_shrinks_the_lost_update_and_the_fix_holds():
    with TrialRunner(toy_engine.counter(), "increment") as tr:
        res = search(tr, budget=40, seed=3)
    assert res.admits
    assert context_switches(res.found.trace) == 2  # shrunk: A reads, B reads and writes, A writes
    with TrialRunner(toy_engine.counter_locked(), "increment") as tr:
        assert not search(tr, budget=40, seed=3).admits


def test_begin_immediate_contention_is_busy_then_reissued_never_slept():
    with TrialRunner(toy_engine.counter_locked(), "increment") as tr:
        # starts; A begins; B's begin is answered SQLITE_BUSY; A reads, writes, commits; B's begin
        # is re-issued and B runs. (How long it takes, against the 5 s SQLite's default busy timeout
        # would sleep: benchmarks/bench_bounds.py, sqlite-busy.)
        r = tr.trial(ReplayChooser(["A", "B", "A", "B", "A", "A", "A", "B", "B", "B", "B"]))
    busy = [s for s in r.trace.steps if s.blocked]
    assert r.serializable and r.outcome.state == [2]
    assert busy and busy[0].detail == "begin immediate" and busy[0].completed > busy[0].seq


def test_sqlite_lock_upgrade_deadlock_gives_one_agent_sqlite_busy():
    """Two deferred transactions both read, then both try to write: SQLite answers BUSY to both;
    the harness hands SQLITE_BUSY to one of them, as a real busy timeout would, and the other
    commits."""
    class Upgrade(toy_engine.Counter):
        def increment(self, conn, agent):
            conn.execute("begin")
            try:
                n = conn.execute("select n from counter").fetchone()[0]
                conn.execute("update counter set n = ?", (n + 1,))
                conn.execute("commit")
            except sqlite3.OperationalError:
                conn.execute("rollback")
                raise

    with TrialRunner(Upgrade(), "increment") as tr:
        # starts; A begin, select; B begin, select; A update; B update (busy); A commit (busy:
        # B holds its read lock); everyone blocked: B is the victim, rolls back; A commits.
        r = tr.trial(ReplayChooser(["A", "B", "A", "A", "B", "B", "A", "B", "A", "B", "B", "A"]))
    busy = [s for s in r.trace.steps if s.status in ("busy", "error") and "busy" in (s.error or "busy").lower()]
    assert busy
    assert set(r.outcome.errors) == {"B"} and set(r.outcome.errors.values()) == {"OperationalError"}
    assert r.outcome.state == [1] and r.serializable  # the victim rolled back: a clean abort


def test_an_instrumented_lock_makes_the_waiter_ineligible_until_release():
    lock = InstrumentedLock("store")
    log = []

    def agent(name):
        def run():
            with lock:
                log.append(f"{name} in")
                with hooks_installed(__import__("pathlib").Path(".")):
                    pass
                lock_step = toki_step(name)
                log.append(lock_step)
        return run

    def toki_step(name):
        from toki.harness.controller import current_agent
        ctl, _ = current_agent()
        return ctl.step("sql-read", f"{name} reads", lambda: f"{name} read")

    ctl = Controller(TapeChooser([1, 1, 1, 1, 1, 1]))
    trace = ctl.run({"A": agent("A"), "B": agent("B")})
    assert log in (["A in", "A read", "B in", "B read"], ["B in", "B read", "A in", "A read"])
    waited = [s for s in trace.steps if s.kind == "lock" and s.blocked]
    assert waited and waited[0].waited_from is not None


def test_a_hung_engine_is_an_error_naming_the_agent_and_its_call():
    def fast():
        return 1

    def hangs():
        from toki.harness.controller import current_agent
        ctl, _ = current_agent()
        ctl.step("sql-read", "select 1", lambda: 1)
        t = time.perf_counter()
        while time.perf_counter() - t < 3:  # an engine stuck computing between two storage calls
            pass

    ctl = Controller(SerialChooser(["B", "A"]), step_limit_s=0.5)
    with pytest.raises(EngineHung, match=r"agent B .*select 1"):
        ctl.run({"A": fast, "B": hangs})


def test_an_agent_asleep_outside_any_storage_call_is_unverifiable_naming_where():
    """A wait the harness cannot see (here a sleep; in engines a lock made at import, a foreign
    thread) is recognised from the thread's state within a fraction of a second, not after the
    step limit, and nothing after it is judged."""
    def fast():
        return 1

    def sleeps():
        from toki.harness.controller import current_agent
        ctl, _ = current_agent()
        ctl.step("sql-read", "select 1", lambda: 1)
        time.sleep(3)

    # B sleeps 3 s, less than the step limit: waited out, B would finish and nothing be raised;
    # how soon the wait is recognised: benchmarks/bench_bounds.py (unseen-wait)
    ctl = Controller(SerialChooser(["B", "A"]), step_limit_s=5)
    with pytest.raises(Unverifiable, match=r"agent B waits at .*test_engines_harness.py:\d+ \(in sleeps\)"):
        ctl.run({"A": fast, "B": sleeps})


@pytest.mark.slow
def test_witness_replays_the_same_outcome_20_times_and_draws(tmp_path):
    eng = toy_engine.counter()
    with TrialRunner(eng, "increment") as tr:
        res = search(tr, budget=40, seed=3)
        w = Witness.from_trial(eng, "increment", res.found, seed=3, budget=40)
        w2 = Witness.load(w.save(tmp_path / "w.json"))
        outs = {digest(tr.trial(ReplayChooser(w2.grants)).outcome.key) for _ in range(20)}
    assert outs == {w.outcome}
    marks = marked_steps(w2.steps)
    kinds = sorted(s.kind for s in w2.steps if s.seq in marks)
    assert kinds == ["sql-read", "sql-read", "sql-write", "sql-write"]
    assert draw(w2, tmp_path / "w.png").stat().st_size > 5000
    assert draw(w2, tmp_path / "w.svg").read_text().startswith("<?xml")


def test_file_writes_are_steps_and_whole_file_saves_lose_an_append():
    with TrialRunner(toy_engine.notes(), "append") as tr:
        res = search(tr, budget=40, seed=0)
    assert res.admits
    kinds = {s.kind for s in res.found.trace.steps}
    assert {"file-open", "file-read", "file-open-w", "file-write"} <= kinds
    assert res.found.outcome.state in (["A"], ["B"])


def test_a_silent_engine_is_flagged():
    with TrialRunner(toy_engine.counter_silent(), "increment") as tr:
        tr.serial_outcomes()
        assert tr.silent


def test_threads_outside_the_run_are_not_intercepted(tmp_path):
    with hooks_installed(tmp_path):
        conn = sqlite3.connect(tmp_path / "x.db")
        conn.execute("create table t (x int)")
        conn.execute("insert into t values (1)")
        conn.commit()
        done = []
        th = threading.Thread(target=lambda: done.append(conn.execute("select x from t").fetchall()))
        th.start()
        th.join(5)
    assert done == [[(1,)]]
