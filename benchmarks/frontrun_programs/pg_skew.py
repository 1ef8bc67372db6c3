"""PostgreSQL write skew: the on-call doctors (Berenson et al.'s A5B; Cahill et al.'s example).

Two doctors, alice and bob, are on call; at least one must stay on call. Agent A asks to take
alice off call, agent B bob: each opens its own psycopg 3 connection, reads the pair's rows in one
transaction and, if both are on call (the other stays), sets its own doctor off call and commits.

- ``racy``: at REPEATABLE READ (snapshot isolation). Both agents read their snapshot before
  either commits, both see two doctors on call, and each updates a *different* row: no write
  conflict, both commit, nobody is on call. No serial order does that (the second agent sees one
  doctor on call and leaves its own on).
- ``fixed``: the same transaction at SERIALIZABLE, retried on a serialization failure (40001),
  as PostgreSQL's documentation asks of SERIALIZABLE callers: the read-write dependency cycle
  aborts one of the two, whose retry reads the other's commit and keeps its doctor on call. A
  retry that still fails after ``ATTEMPTS`` raises the failure: toki judges it a clean abort
  (the outcome must equal a serial run of the agents that completed), and the plug-in says so
  in ``clean_aborts`` too.

Each run has a table of its own (toki: named after the plug-in and the run's folder, dropped by
``discard``; frontrun: one per interleaving, dropped by ``cleanup``), as in ``pg_counter``.
"""

from __future__ import annotations

import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from toki.harness import Detector, Scenario

from . import AGENTS, Case
from .pg_counter import drop

DOCTORS = {"A": "alice", "B": "bob"}  # the doctor each agent asks to take off call
# Two agents need one retry at most (the survivor has committed before the retry reads); a
# bound keeps a misbehaving server from looping the search forever.
ATTEMPTS = 5

VARIANTS = {"racy": psycopg.IsolationLevel.REPEATABLE_READ, "fixed": psycopg.IsolationLevel.SERIALIZABLE}


@dataclass
class Handle:
    dsn: str
    table: str


def work(h: Handle, doctor: str, fixed: bool) -> None:
    """The code under test: take ``doctor`` off call if the other doctor stays on."""
    t = sql.Identifier(h.table)
    with psycopg.connect(h.dsn) as conn:  # not autocommit: the first execute begins a transaction
        conn.isolation_level = VARIANTS["fixed" if fixed else "racy"]
        for attempt in range(1, (ATTEMPTS if fixed else 1) + 1):
            try:
                rows = conn.execute(sql.SQL("SELECT name, on_call FROM {} WHERE name = ANY(%s)").format(t),
                                    (sorted(DOCTORS.values()),)).fetchall()
                if sum(on for _, on in rows) >= 2:
                    conn.execute(sql.SQL("UPDATE {} SET on_call = false WHERE name = %s").format(t), (doctor,))
                conn.commit()
                return
            except psycopg.errors.SerializationFailure:
                conn.rollback()
                if attempt == ATTEMPTS:
                    raise


def seed(h: Handle) -> None:
    t = sql.Identifier(h.table)
    with psycopg.connect(h.dsn, autocommit=True) as c:
        c.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
        c.execute(sql.SQL("CREATE TABLE {} (name text PRIMARY KEY, on_call boolean NOT NULL)").format(t))
        c.execute(sql.SQL("INSERT INTO {} VALUES ('alice', true), ('bob', true)").format(t))


def on_call(h: Handle) -> list[str]:
    with psycopg.connect(h.dsn, autocommit=True) as c:
        q = sql.SQL("SELECT name FROM {} WHERE on_call ORDER BY name").format(sql.Identifier(h.table))
        return [name for (name,) in c.execute(q).fetchall()]


def nobody_on_call(state: dict, errors) -> list[str]:
    """The invariant, on every state a run can leave (an unreadable one is no finding of this detector)."""
    if "on_call" not in state:
        return []
    return [] if state["on_call"] else ["no doctor on call: both agents took theirs off"]


# -- toki ---------------------------------------------------------------------------------------

class PgSkew:
    executed = "real"
    version = psycopg.__version__
    clean_aborts = (psycopg.errors.SerializationFailure,)

    def __init__(self, variant: str):
        self.fixed = variant == "fixed"
        self.name = f"bench-pg-skew-{variant}"
        self.prefix = f"bench_fr_{uuid.uuid4().hex[:8]}"  # run folders are named t1, t2, ... in every runner
        self.dsn: str | None = None
        self.tables: set[str] = set()
        how = ("at SERIALIZABLE, retried on serialization failure" if self.fixed else "at REPEATABLE READ")
        self.scenarios = {"off-call": Scenario(
            "off-call", f"two psycopg connections each read alice's and bob's rows and take their own doctor "
                         f"off call if both are on ({how})", AGENTS, self.off_call,
            setup=seed, detectors=(Detector("write-skew", nobody_on_call),), anomalies=("write-skew",))}

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
        return {"on_call": on_call(h)}

    def off_call(self, h: Handle, agent: str) -> None:
        work(h, DOCTORS[agent], self.fixed)


def racy() -> PgSkew:
    return PgSkew("racy")


def fixed() -> PgSkew:
    return PgSkew("fixed")


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

    def alice_off(h: Handle) -> None:  # agent A
        work(h, DOCTORS["A"], fix)

    def bob_off(h: Handle) -> None:  # agent B
        work(h, DOCTORS["B"], fix)

    return Case(setup, (alice_off, bob_off), lambda h: bool(on_call(h)), lambda: drop(dsn, tables))
