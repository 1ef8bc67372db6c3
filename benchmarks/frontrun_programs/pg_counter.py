"""PostgreSQL counter: each agent opens its own psycopg 3 connection and adds one to ``n``.

- ``racy``: at READ COMMITTED (the default), ``SELECT n`` then ``UPDATE ... SET n = n_read + 1``
  and ``COMMIT``: two agents that both read 0 both write 1 (a lost update).
- ``fixed``: ``SELECT n ... FOR UPDATE``: the second agent's SELECT waits on the first one's row
  lock until it commits, then reads the committed value.

Each run has a table of its own (toki: named after the plug-in and the run's folder, dropped by
``discard``; frontrun: one per interleaving, dropped by ``cleanup``).
"""

from __future__ import annotations

import uuid
import weakref
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import psycopg
from psycopg import sql

from toki.harness import Detector, Scenario

from . import AGENTS, Case, lost_update


@dataclass
class Handle:
    dsn: str
    table: str


def work(h: Handle, fixed: bool) -> None:
    """The code under test: one increment."""
    lock = sql.SQL(" FOR UPDATE") if fixed else sql.SQL("")
    with psycopg.connect(h.dsn) as conn:  # not autocommit: the first execute begins a transaction
        (n,) = conn.execute(sql.SQL("SELECT n FROM {} WHERE id = 1{}").format(sql.Identifier(h.table), lock)).fetchone()
        conn.execute(sql.SQL("UPDATE {} SET n = %s WHERE id = 1").format(sql.Identifier(h.table)), (n + 1,))
        conn.commit()


def seed(h: Handle) -> None:
    t = sql.Identifier(h.table)
    with psycopg.connect(h.dsn, autocommit=True) as c:
        c.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
        c.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, n int NOT NULL)").format(t))
        c.execute(sql.SQL("INSERT INTO {} VALUES (1, 0)").format(t))


def read(h: Handle) -> int:
    with psycopg.connect(h.dsn, autocommit=True) as c:
        return c.execute(sql.SQL("SELECT n FROM {} WHERE id = 1").format(sql.Identifier(h.table))).fetchone()[0]


def drop(dsn: str, tables) -> None:
    """Best effort, bounded: a connection that never ended may still hold a lock on a table."""
    try:
        with psycopg.connect(dsn, autocommit=True, options="-c lock_timeout=2000") as c:
            for t in list(tables):
                c.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(t)))
    except Exception:  # noqa: BLE001 - cleanup, also at interpreter exit
        pass


# -- toki ---------------------------------------------------------------------------------------

class PgCounter:
    executed = "real"
    version = psycopg.__version__

    def __init__(self, variant: str):
        self.fixed = variant == "fixed"
        self.name = f"bench-pg-counter-{variant}"
        self.prefix = f"bench_fr_{uuid.uuid4().hex[:8]}"  # run folders are named t1, t2, ... in every runner
        self.dsn: str | None = None
        self.tables: set[str] = set()
        how = "SELECT ... FOR UPDATE, UPDATE, COMMIT" if self.fixed else "SELECT, UPDATE, COMMIT"
        self.scenarios = {"increment": Scenario(
            "increment", f"two psycopg connections at READ COMMITTED add one ({how})", AGENTS, self.increment,
            setup=seed, detectors=(Detector("lost-update", partial(lost_update, agents=len(AGENTS))),), anomalies=("lost-update",))}

    def use_dsn(self, dsn: str) -> None:
        self.dsn = dsn
        weakref.finalize(self, drop, dsn, self.tables)  # what discard did not drop, at exit

    def open(self, location: Path) -> Handle:
        if self.dsn is None:
            raise RuntimeError(f"{self.name}: use_dsn() was not called, so there is no database to use")
        table = f"{self.prefix}_{Path(location).name}"
        self.tables.add(table)
        return Handle(self.dsn, table)

    def close(self, h: Handle) -> None:
        pass  # work() closes its own connection

    def discard(self, location: Path) -> None:
        table = f"{self.prefix}_{Path(location).name}"
        drop(self.dsn, [table])
        self.tables.discard(table)

    def state(self, h: Handle) -> dict:
        return {"n": read(h)}

    def increment(self, h: Handle, agent: str) -> None:
        work(h, self.fixed)


def racy() -> PgCounter:
    return PgCounter("racy")


def fixed() -> PgCounter:
    return PgCounter("fixed")


# -- frontrun -----------------------------------------------------------------------------------

def frontrun_case(variant: str, dsn: str | None = None) -> Case:
    if not dsn:
        raise ValueError("the PostgreSQL program needs a DSN")
    fix = variant == "fixed"
    prefix = f"bench_fr_{uuid.uuid4().hex[:8]}"
    tables: list[str] = []

    def setup() -> Handle:  # a fresh table per interleaving
        h = Handle(dsn, f"{prefix}_{len(tables)}")
        tables.append(h.table)
        seed(h)
        return h

    def worker(h: Handle) -> None:
        work(h, fix)

    return Case(setup, (worker,) * len(AGENTS), lambda h: read(h) == len(AGENTS), lambda: drop(dsn, tables))
