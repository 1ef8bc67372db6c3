"""asyncio agents on two async drivers: each agent's call is a coroutine (it runs on the agent's own
event loop) that reads a counter and writes it back plus one.

- ``aiosqlite_racy``: each agent opens its own ``aiosqlite.connect(...)`` (aiosqlite runs sqlite3
  on a thread of its own per connection) and does ``SELECT n`` then ``UPDATE ... SET n = ?`` and
  commits: two agents that both read 0 both write 1 (a lost update).
  ``aiosqlite_immediate``: the same inside ``BEGIN IMMEDIATE`` ... ``COMMIT`` (the second agent's
  BEGIN IMMEDIATE waits until the first commits).
- ``psycopg_racy``: each agent opens its own ``psycopg.AsyncConnection`` at READ COMMITTED and
  does ``SELECT n`` then ``UPDATE`` and commits (a lost update).
  ``psycopg_for_update``: ``SELECT n ... FOR UPDATE`` (the second agent's SELECT waits on the row lock).

The PostgreSQL counter is a table per plug-in instance (its name carries a random suffix), which
``setup`` drops, creates and seeds; ``discard`` drops it.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path

import aiosqlite
import psycopg
from psycopg import sql

from toki.harness import Detector, Scenario

AGENTS = ("A", "B")


def lost_update(state, errors) -> list[str]:
    want = len(AGENTS) - len(errors)
    return [f"counter {r['id']} has n = {r['n']} after {want} completed increments" for r in state if r["n"] < want]


# -- aiosqlite ------------------------------------------------------------------------------------

class AiosqliteCounter:
    executed = "real"
    version = aiosqlite.__version__

    def __init__(self, immediate: bool = False):
        self.immediate = immediate
        self.name = "aiosqlite-counter-immediate" if immediate else "aiosqlite-counter"
        how = "inside BEGIN IMMEDIATE ... COMMIT" if immediate else "SELECT, then UPDATE and commit"
        self.scenarios = {"increment": Scenario(
            "increment", f"two asyncio agents, each with its own aiosqlite connection, add one ({how})", AGENTS,
            self.increment, setup=self.seed, detectors=(Detector("lost-update", lost_update),),
            anomalies=("lost-update",))}

    def open(self, location: Path) -> Path:
        return Path(location) / "counter.db"  # each agent connects on its own event loop

    def close(self, path: Path) -> None:
        pass

    def seed(self, path: Path) -> None:
        async def seed():
            async with aiosqlite.connect(path) as db:
                await db.execute("DROP TABLE IF EXISTS counter")
                await db.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
                await db.execute("INSERT INTO counter VALUES (1, 0)")
                await db.commit()
        asyncio.run(seed())

    def state(self, path: Path):
        async def read():
            async with aiosqlite.connect(path) as db:
                async with db.execute("SELECT id, n FROM counter ORDER BY id") as cur:
                    return [{"id": i, "n": n} for i, n in await cur.fetchall()]
        return asyncio.run(read())

    async def increment(self, path: Path, agent: str) -> None:
        async with aiosqlite.connect(path) as db:
            if self.immediate:
                await db.execute("BEGIN IMMEDIATE")
            async with db.execute("SELECT n FROM counter WHERE id = 1") as cur:
                (n,) = await cur.fetchone()
            await db.execute("UPDATE counter SET n = ? WHERE id = 1", (n + 1,))
            await db.commit()


def aiosqlite_racy() -> AiosqliteCounter:
    return AiosqliteCounter()


def aiosqlite_immediate() -> AiosqliteCounter:
    return AiosqliteCounter(immediate=True)


# -- psycopg AsyncConnection ----------------------------------------------------------------------

@dataclass
class PgHandle:
    dsn: str
    table: sql.Identifier


def _drop_table(dsn: str, table: str) -> None:
    """Best effort, bounded: a connection that never ended may still hold a lock on the table."""
    try:
        with psycopg.connect(dsn, autocommit=True, options="-c lock_timeout=2000") as c:
            c.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
    except Exception:  # noqa: BLE001 - best effort (also at interpreter exit)
        pass


class PsycopgAsyncCounter:
    executed = "real"
    version = psycopg.__version__

    def __init__(self, for_update: bool = False):
        self.for_update = for_update
        self.name = "psycopg-async-counter-for-update" if for_update else "psycopg-async-counter"
        self.table = f"toki_counter_{uuid.uuid4().hex[:10]}"
        self.dsn: str | None = None
        how = "SELECT ... FOR UPDATE, then UPDATE" if for_update else "SELECT, then UPDATE"
        self.scenarios = {"increment": Scenario(
            "increment", f"two asyncio agents, each with its own psycopg AsyncConnection at READ COMMITTED, add one "
            f"({how})", AGENTS, self.increment, setup=self.seed, detectors=(Detector("lost-update", lost_update),),
            anomalies=("lost-update",))}

    def use_dsn(self, dsn: str) -> None:
        self.dsn = dsn
        weakref.finalize(self, _drop_table, dsn, self.table)  # also runs at exit

    def open(self, location: Path) -> PgHandle:
        if self.dsn is None:
            raise RuntimeError(f"{self.name}: use_dsn() was not called, so there is no database to use")
        return PgHandle(self.dsn, sql.Identifier(self.table))

    def close(self, h: PgHandle) -> None:
        pass  # each agent's connection is closed by its call

    def discard(self, location: Path) -> None:
        if self.dsn is not None:
            _drop_table(self.dsn, self.table)

    def seed(self, h: PgHandle) -> None:
        with psycopg.connect(h.dsn, autocommit=True) as c:
            c.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(h.table))
            c.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, n int NOT NULL)").format(h.table))
            c.execute(sql.SQL("INSERT INTO {} VALUES (1, 0)").format(h.table))

    def state(self, h: PgHandle):
        with psycopg.connect(h.dsn) as c:
            rows = c.execute(sql.SQL("SELECT id, n FROM {} ORDER BY id").format(h.table)).fetchall()
        return [{"id": i, "n": n} for i, n in rows]

    async def increment(self, h: PgHandle, agent: str) -> None:
        lock = sql.SQL(" FOR UPDATE") if self.for_update else sql.SQL("")
        async with await psycopg.AsyncConnection.connect(h.dsn) as conn:
            await conn.set_isolation_level(psycopg.IsolationLevel.READ_COMMITTED)
            cur = await conn.execute(sql.SQL("SELECT n FROM {} WHERE id = 1{}").format(h.table, lock))
            (n,) = await cur.fetchone()
            await conn.execute(sql.SQL("UPDATE {} SET n = %s WHERE id = 1").format(h.table), (n + 1,))
            await conn.commit()


def psycopg_racy() -> PsycopgAsyncCounter:
    return PsycopgAsyncCounter()


def psycopg_for_update() -> PsycopgAsyncCounter:
    return PsycopgAsyncCounter(for_update=True)
