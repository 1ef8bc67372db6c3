"""Plug-ins with the mistakes a new user makes, for the harness's bad-input tests: each must give
exit status 2 and one line naming the method that failed, never a traceback.

- ``state_raises``: ``state()`` queries a table that does not exist (a typo: ``countr``);
- ``open_missing_file``: ``open()`` opens a settings file that is not there (FileNotFoundError);
- ``factory_raises``: the factory itself raises (a missing configuration value).

``broken_import`` and ``broken_on_import`` are modules that do not import.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from toki.harness import Detector, Scenario


class _Counter:
    name, version, executed = "broken-counter", "1.0", "real"

    def __init__(self):
        self.scenarios = {"increment": Scenario(
            "increment", "two agents add one to a counter", ("A", "B"), self.increment,
            setup=lambda c: c.execute("insert into counter values (0)"),
            detectors=(Detector("lost-update", lambda st, err: ["lost"] if st and st[0] < 2 else []),))}

    def open(self, location: Path):
        conn = sqlite3.connect(Path(location) / "counter.db", isolation_level=None)
        conn.execute("create table if not exists counter (n int)")
        return conn

    def close(self, conn) -> None:
        conn.close()

    def state(self, conn):
        return [r[0] for r in conn.execute("select n from counter")]

    def increment(self, conn, agent: str) -> None:
        conn.execute("begin immediate")
        n = conn.execute("select n from counter").fetchone()[0]
        conn.execute("update counter set n = ?", (n + 1,))
        conn.execute("commit")


class StateRaises(_Counter):
    name = "broken-state"

    def state(self, conn):
        return [r[0] for r in conn.execute("select n from countr")]  # the typo


class OpenMissingFile(_Counter):
    name = "broken-open"

    def open(self, location: Path):
        settings = (Path(location) / "settings.json").read_text()  # never written: FileNotFoundError
        return super().open(location) if settings else None


def state_raises():
    return StateRaises()


def open_missing_file():
    return OpenMissingFile()


def factory_raises():
    raise ValueError("missing configuration: set COUNTER_HOME")
