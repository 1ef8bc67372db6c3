"""An async ORM app on SQLite in WAL mode: SQLAlchemy's asyncio extension over aiosqlite, each
agent with its own ``AsyncSession`` on one ``AsyncEngine``. Nothing of the driver is imported at
the module's top: SQLAlchemy imports aiosqlite lazily, when the engine first connects (in
``setup``, during a trial), as apps that pull in an async ORM in ``init`` do.

- ``racy``: read ``n`` and commit, then write ``n + 1`` in a second transaction (a lost update);
- ``deferred``: read and write in one deferred transaction: under WAL the second writer's upgrade
  fails with SQLITE_BUSY_SNAPSHOT (a clean abort the caller retries), so nothing is lost;
- ``immediate``: the transaction starts with ``BEGIN IMMEDIATE`` (SQLAlchemy's documented recipe for
  pysqlite/aiosqlite), so the second agent waits for the first to commit.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from toki.harness import Detector, Scenario


def _lost(state, errors):
    want = 2 - len(errors)
    return [f"n is {state['n']} after {want} completed increments"] if state["n"] < want else []


class AsyncOrmCounter:
    executed = "real"

    def __init__(self, mode: str):
        import sqlalchemy

        self.version = sqlalchemy.__version__
        self.mode, self.immediate = mode, mode == "immediate"
        self.name = f"async-orm-wal-{mode}"
        self.scenarios = {"increment": Scenario("increment", "two AsyncSessions add one to n", ("A", "B"),
                                                self.call, setup=self.setup,
                                                detectors=(Detector("lost-update", _lost),))}

    def _engine(self, path: Path):
        from sqlalchemy import event
        from sqlalchemy.ext.asyncio import create_async_engine

        eng = create_async_engine(f"sqlite+aiosqlite:///{path}")

        @event.listens_for(eng.sync_engine, "connect")
        def _connect(dbapi_conn, record):
            dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN itself (its documented recipe)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

        @event.listens_for(eng.sync_engine, "begin")
        def _begin(conn):
            conn.exec_driver_sql("BEGIN IMMEDIATE" if self.immediate else "BEGIN")

        return eng

    def open(self, location):
        return Path(location) / "orm.db"

    def close(self, path) -> None:
        pass

    def setup(self, path) -> None:
        async def go():
            from sqlalchemy import text

            eng = self._engine(path)
            async with eng.begin() as c:
                await c.execute(text("create table counter (id integer primary key, n integer)"))
                await c.execute(text("insert into counter values (1, 0)"))
            await eng.dispose()
        asyncio.run(go())

    def state(self, path):
        import sqlite3

        db = sqlite3.connect(path)
        try:
            return {"n": db.execute("select n from counter where id = 1").fetchone()[0]}
        finally:
            db.close()

    async def call(self, path, agent):
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import AsyncSession

        eng = self._engine(path)
        try:
            async with AsyncSession(eng) as session:
                n = (await session.execute(text("select n from counter where id = 1"))).scalar_one()
                if self.mode == "racy":
                    await session.commit()
                await session.execute(text("update counter set n = :n where id = 1"), {"n": n + 1})
                await session.commit()
        finally:
            await eng.dispose()


def racy():
    return AsyncOrmCounter("racy")


def deferred():
    return AsyncOrmCounter("deferred")


def immediate():
    return AsyncOrmCounter("immediate")
