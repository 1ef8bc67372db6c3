"""SQLite counter: each agent opens its own connection and adds one to ``counter.n``.

- ``racy``: ``SELECT n`` then ``UPDATE ... SET n = n_read + 1``, each statement autocommitted:
  two agents that both read 0 both write 1 (a lost update).
- ``fixed``: the same two statements inside ``BEGIN IMMEDIATE ... COMMIT``: the second agent's
  ``BEGIN IMMEDIATE`` waits (SQLite's default 5 s busy timeout) until the first commits.
- ``racy3``, ``fixed3``: the same with three agents, A, B and C.

The connection is opened inside ``work`` with ``sqlite3``'s defaults, as an application would.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from functools import partial
from pathlib import Path

from toki.harness import Detector, Scenario

from . import NUMBER, Case, agents, lost_update

DB = "counter.db"

VARIANTS = {"racy": ("racy", 2), "fixed": ("fixed", 2), "racy3": ("racy", 3), "fixed3": ("fixed", 3)}


def work(path: str, fixed: bool) -> None:
    """The code under test: one increment."""
    conn = sqlite3.connect(path, isolation_level=None)  # autocommit: BEGIN is ours to issue
    try:
        if fixed:
            conn.execute("BEGIN IMMEDIATE")
        (n,) = conn.execute("SELECT n FROM counter WHERE id = 1").fetchone()
        conn.execute("UPDATE counter SET n = ? WHERE id = 1", (n + 1,))
        if fixed:
            conn.execute("COMMIT")
    finally:
        conn.close()


def seed(path: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE IF EXISTS counter")
    conn.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
    conn.execute("INSERT INTO counter VALUES (1, 0)")
    conn.close()


def read(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT n FROM counter WHERE id = 1").fetchone()[0]
    finally:
        conn.close()


# -- toki ---------------------------------------------------------------------------------------

class SqliteCounter:
    executed = "real"
    version = sqlite3.sqlite_version

    def __init__(self, variant: str):
        kind, n = VARIANTS[variant]
        self.fixed = kind == "fixed"
        self.name = f"bench-sqlite-counter-{variant}"
        how = "BEGIN IMMEDIATE, SELECT, UPDATE, COMMIT" if self.fixed else "SELECT, then UPDATE, autocommitted"
        self.scenarios = {"increment": Scenario(
            "increment", f"{NUMBER[n]} connections add one to counter.n ({how})", agents(n), self.increment,
            setup=seed, detectors=(Detector("lost-update", partial(lost_update, agents=n)),),
            anomalies=("lost-update",))}

    def open(self, location: Path) -> str:
        return str(Path(location) / DB)  # the handle is the file: work() connects itself

    def close(self, path: str) -> None:
        pass

    def state(self, path: str) -> dict:
        return {"n": read(path)}

    def increment(self, path: str, agent: str) -> None:
        work(path, self.fixed)


def racy() -> SqliteCounter:
    return SqliteCounter("racy")


def fixed() -> SqliteCounter:
    return SqliteCounter("fixed")


def racy3() -> SqliteCounter:
    return SqliteCounter("racy3")


def fixed3() -> SqliteCounter:
    return SqliteCounter("fixed3")


# -- frontrun -----------------------------------------------------------------------------------

def frontrun_case(variant: str, dsn: str | None = None) -> Case:
    kind, n = VARIANTS[variant]
    fix = kind == "fixed"
    root = tempfile.mkdtemp(prefix="bench-fr-sqlite-")
    runs = iter(range(1_000_000))

    def setup() -> str:  # a fresh database file per interleaving
        path = os.path.join(root, f"{next(runs)}-{DB}")
        seed(path)
        return path

    def worker(path: str) -> None:
        work(path, fix)

    return Case(setup, (worker,) * n, lambda path: read(path) == n, lambda: shutil.rmtree(root, True))
