"""A counter with an optimistic version check, as ORMs do it (SQLAlchemy's version_id_col, Letta's
block version): read the row and its version, then ``update ... where version = ?``; no row
updated means another writer got there first, and the library raises its own ``Conflict``,
which callers retry. Without ``clean_aborts`` toki calls the error a failed call (no serial order
raises it); with it, a clean abort judged like a serialization failure."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from toki.harness import Scenario


class Conflict(Exception):
    """The row changed since it was read."""


class Optimistic:
    version, executed = "1.0", "real"

    def __init__(self, declared: bool):
        self.name = "optimistic-declared" if declared else "optimistic"
        if declared:
            self.clean_aborts = (Conflict,)
        self.scenarios = {"increment": Scenario("increment", "two agents add one under a version check",
                                                ("A", "B"), self.call, setup=self.setup)}

    def open(self, location):
        conn = sqlite3.connect(Path(location) / "c.db", isolation_level=None)
        conn.execute("create table if not exists c (n int, version int)")
        return conn

    def close(self, conn) -> None:
        conn.close()

    def setup(self, conn) -> None:
        conn.execute("insert into c values (0, 0)")

    def state(self, conn):
        return [list(r) for r in conn.execute("select n, version from c")]

    def call(self, conn, agent):
        n, v = conn.execute("select n, version from c").fetchone()
        if conn.execute("update c set n = ?, version = ? where version = ?", (n + 1, v + 1, v)).rowcount == 0:
            raise Conflict(f"version {v} is gone")


def undeclared():
    return Optimistic(False)


def declared():
    return Optimistic(True)
