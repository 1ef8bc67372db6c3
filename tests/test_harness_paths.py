"""Storage paths common in real libraries that the harness must schedule, not miss or refuse:
sqlite3's ``with conn:``, SQLAlchemy on SQLite (``sqlite3.dbapi2``), psycopg's ``transaction()``
blocks, ``asyncio.to_thread``, an agent's concurrent tasks; and an agent whose storage the harness
does not see at all is unverifiable, never "excludes"."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from toki.harness import Detector, Scenario
from toki.harness.controller import SerialChooser, Unverifiable
from toki.harness.search import search
from toki.harness.trial import TrialRunner

LOST = Detector("lost-update", lambda st, err: [f"n = {st['n']}"] if st["n"] < 2 else [])


class _Counter:
    version, executed = "1.0", "real"

    def __init__(self):
        self.scenarios = {"increment": Scenario("increment", "two agents add one", ("A", "B"), self.increment,
                                                setup=self.setup, detectors=(LOST,))}

    def close(self, h):
        pass


class WithConn(_Counter):
    """sqlite3's own idiom: ``with conn:`` commits on exit (in C, past Connection.commit)."""

    name = "with-conn"

    def open(self, location):
        return sqlite3.connect(Path(location) / "c.db")

    def setup(self, conn):
        with conn:
            conn.execute("create table c (n int)")
            conn.execute("insert into c values (0)")

    def close(self, conn):
        conn.close()

    def state(self, conn):
        return {"n": conn.execute("select n from c").fetchone()[0]}

    def increment(self, conn, agent):
        with conn:
            n = conn.execute("select n from c").fetchone()[0]
        with conn:
            conn.execute("update c set n = ?", (n + 1,))


def test_sqlite3_with_conn_commits_are_steps_and_the_race_is_found():
    with TrialRunner(WithConn(), "increment") as runner:
        trace, out = runner.run(SerialChooser(["A", "B"]))
        assert out.state == {"n": 2}
        assert [s.kind for s in trace.steps if s.agent == "A"].count("sql-commit") == 2
        assert search(runner, budget=30, seed=0).admits


class AlchemySqlite(_Counter):
    """SQLAlchemy on SQLite connects through sqlite3.dbapi2.connect."""

    name = "alchemy-sqlite"

    def open(self, location):
        import sqlalchemy

        return sqlalchemy.create_engine(f"sqlite:///{Path(location) / 'c.db'}")

    def setup(self, eng):
        from sqlalchemy import text

        with eng.begin() as c:
            c.execute(text("create table c (n int)"))
            c.execute(text("insert into c values (0)"))

    def close(self, eng):
        eng.dispose()

    def state(self, eng):
        from sqlalchemy import text

        with eng.connect() as c:
            return {"n": c.execute(text("select n from c")).scalar()}

    def increment(self, eng, agent):
        from sqlalchemy import text

        with eng.connect() as c:
            n = c.execute(text("select n from c")).scalar()
            c.commit()
        with eng.begin() as c:
            c.execute(text("update c set n = :n"), {"n": n + 1})


@pytest.mark.slow
def test_sqlalchemy_on_sqlite_is_intercepted_through_dbapi2():
    with TrialRunner(AlchemySqlite(), "increment") as runner:
        trace, _ = runner.run(SerialChooser(["A", "B"]))
        assert any(s.kind == "sql-write" and "update c" in s.detail for s in trace.steps)
        assert search(runner, budget=30, seed=0).admits


class ToThread(WithConn):
    """Storage calls an asyncio agent pushes to a thread pool (asyncio.to_thread)."""

    name = "to-thread"

    def open(self, location):
        return Path(location) / "c.db"

    def setup(self, path):
        WithConn.setup(self, sqlite3.connect(path))

    def close(self, path):
        pass

    def state(self, path):
        return WithConn.state(self, sqlite3.connect(path))

    async def increment(self, path, agent):
        def read():
            with sqlite3.connect(path, isolation_level=None) as c:
                return c.execute("select n from c").fetchone()[0]

        def write(n):
            with sqlite3.connect(path, isolation_level=None) as c:
                c.execute("update c set n = ?", (n + 1,))

        n = await asyncio.to_thread(read)
        await asyncio.to_thread(write, n)


@pytest.mark.slow
def test_work_an_agent_gives_a_thread_pool_is_the_agents_own_steps():
    with TrialRunner(ToThread(), "increment") as runner:
        trace, out = runner.run(SerialChooser(["A", "B"]))
        assert out.state == {"n": 2}
        assert {s.agent for s in trace.steps if s.kind.startswith("sql")} == {"A", "B"}
        assert search(runner, budget=30, seed=0).admits


@pytest.mark.db
def test_an_agents_concurrent_tasks_each_take_their_own_steps(toki_server):
    """asyncio.gather of two queries on two connections of one agent: while one task's query is
    a granted step, the other's is not "inside" it; each is a step of its own."""
    import psycopg

    class Gather(_Counter):
        name = "gather"

        def open(self, location):
            return toki_server.dsn

        def setup(self, dsn):
            with psycopg.connect(dsn, autocommit=True) as c:
                c.execute("drop table if exists toki_paths_gather")
                c.execute("create table toki_paths_gather (n int)")
                c.execute("insert into toki_paths_gather values (0)")

        def state(self, dsn):
            with psycopg.connect(dsn) as c:
                return {"n": c.execute("select n from toki_paths_gather").fetchone()[0]}

        async def increment(self, dsn, agent):
            async def read():
                async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
                    cur = await c.execute("select n, pg_sleep(0.01) from toki_paths_gather")
                    return (await cur.fetchone())[0]

            n, _ = await asyncio.gather(read(), read())
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
                await c.execute("update toki_paths_gather set n = %s", (n + 1,))

    with TrialRunner(Gather(), "increment") as runner:
        trace, out = runner.run(SerialChooser(["A", "B"]))
        assert out.state == {"n": 2}
        reads = [s for s in trace.steps if s.agent == "A" and s.kind == "pg-read"]
        assert len(reads) == 2, [(s.kind, s.detail) for s in trace.steps if s.agent == "A"]


class Invisible(_Counter):
    """Storage the harness cannot see (here: a dict standing in for a server over a socket)."""

    name = "invisible"
    store: dict = {}

    def open(self, location):
        return self.store

    def setup(self, store):
        store["n"] = 0

    def state(self, store):
        return {"n": store["n"]}

    def increment(self, store, agent):
        store["n"] = store["n"] + 1


def test_an_agent_that_made_no_controlled_storage_call_is_unverifiable_not_excludes():
    with TrialRunner(Invisible(), "increment") as runner:
        with pytest.raises(Unverifiable, match="completed without one storage call the harness controls"):
            runner.serial_outcomes()


@pytest.mark.db
def test_psycopg_transaction_blocks_begin_and_commit_as_steps(toki_server):
    import psycopg

    class Tx(_Counter):
        name = "pg-transaction-block"

        def open(self, location):
            return psycopg.connect(toki_server.dsn, autocommit=True)

        def setup(self, conn):
            conn.execute("drop table if exists toki_paths_tx")
            conn.execute("create table toki_paths_tx (n int)")
            conn.execute("insert into toki_paths_tx values (0)")

        def close(self, conn):
            conn.close()

        def state(self, conn):
            return {"n": conn.execute("select n from toki_paths_tx").fetchone()[0]}

        def increment(self, conn, agent):
            with conn.transaction():
                n = conn.execute("select n from toki_paths_tx").fetchone()[0]
                conn.execute("update toki_paths_tx set n = %s", (n + 1,))

    with TrialRunner(Tx(), "increment") as runner:
        trace, _ = runner.run(SerialChooser(["A", "B"]))
        a = [s.kind for s in trace.steps if s.agent == "A"]
        assert a.count("pg-txn") >= 2, a  # BEGIN and COMMIT of the block, each a step


class BackOff(WithConn):
    """A back-off between the read and the write, longer than the harness's idle limit."""

    name = "back-off"

    def increment(self, conn, agent):
        import time

        with conn:
            n = conn.execute("select n from c").fetchone()[0]
        time.sleep(0.5)
        with conn:
            conn.execute("update c set n = ?", (n + 1,))


def test_an_agents_sleep_is_virtual_time_not_an_unseen_wait():
    # the sleep (0.5 s) is longer than the idle limit: were it a real, unseen wait the trial would
    # be unverifiable, not judged. (Wall time, against 30+ runs of real sleeps:
    # benchmarks/bench_bounds.py, virtual-sleep.)
    with TrialRunner(BackOff(), "increment") as runner:
        assert search(runner, budget=30, seed=0).admits
