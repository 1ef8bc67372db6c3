"""A toy engine for the engine harness's own tests (and the README's worked example).

A counter in a SQLite file: each agent reads it and writes it back plus one, autocommitting
each statement (as many engines do), so two agents can both read 0 and both write 1: a lost
update. ``counter(locked=True)`` does the same inside one ``BEGIN IMMEDIATE`` transaction.
``notes()`` keeps a list in a JSON file, loaded whole and saved whole.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from toki.harness import Detector, Scenario


class Counter:
    name, version, executed = "toy-counter", "1.0", "real"

    def __init__(self, locked: bool = False, silent: bool = False):
        self.locked, self.silent = locked, silent
        self.scenarios = {"increment": Scenario(
            "increment", "two agents add one to the counter", ("A", "B"), self.increment,
            setup=lambda c: c.execute("insert into counter values (0)"),
            detectors=(Detector("lost-update", lambda st, err: [f"counter is {st[0]} after 2 increments"]
                                if st and st[0] < 2 else []),))}

    def open(self, location: Path):
        conn = sqlite3.connect(Path(location) / "counter.db", isolation_level=None)
        conn.execute("create table if not exists counter (n int)")
        return conn

    def close(self, conn) -> None:
        conn.close()

    def state(self, conn):
        return None if self.silent else [r[0] for r in conn.execute("select n from counter")]

    def increment(self, conn, agent: str):
        if self.locked:
            conn.execute("begin immediate")
        n = conn.execute("select n from counter").fetchone()[0]
        conn.execute("update counter set n = ?", (n + 1,))
        if self.locked:
            conn.execute("commit")


class Notes:
    name, version, executed = "toy-notes", "1.0", "model"

    def __init__(self):
        self.scenarios = {"append": Scenario("append", "two agents append a note", ("A", "B"), self.append,
                                             setup=lambda p: self._save(p, []))}

    def open(self, location: Path):
        return Path(location) / "notes.json"

    def close(self, path) -> None:
        pass

    def _save(self, path, notes):
        with open(path, "w") as f:
            json.dump(notes, f)

    def state(self, path):
        with open(path) as f:
            return sorted(json.load(f))

    def append(self, path, agent: str):
        with open(path) as f:
            notes = json.load(f)
        self._save(path, notes + [agent])


def counter():
    return Counter()


def counter_locked():
    return Counter(locked=True)


def counter_silent():
    return Counter(silent=True)


def notes():
    return Notes()
