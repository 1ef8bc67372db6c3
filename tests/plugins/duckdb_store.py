"""A plug-in over DuckDB, whose files its C++ library writes (and fsyncs) where toki cannot see:
power loss must say it cannot verify it, not pass it."""

from __future__ import annotations

from pathlib import Path

import duckdb

from toki.harness import Scenario


class DuckdbStore:
    name, executed = "duckdb-store", "real"
    version = duckdb.__version__

    def __init__(self):
        self.scenarios = {"insert": Scenario("insert", "A inserts one row", ("A",), self.call,
                                             setup=lambda c: c.execute("create table t (x int)"))}

    def open(self, location):
        return duckdb.connect(str(Path(location) / "store.duckdb"))

    def close(self, conn) -> None:
        conn.close()

    def state(self, conn):
        return [r[0] for r in conn.execute("select x from t order by x").fetchall()]

    def call(self, conn, agent):
        conn.execute("insert into t values (1)")
        conn.execute("checkpoint")


def engine():
    return DuckdbStore()
