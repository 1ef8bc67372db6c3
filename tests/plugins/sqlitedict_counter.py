"""sqlitedict (a dict persisted in SQLite) as a counter: each agent reads ``d["n"]`` and writes it plus one.

sqlitedict runs every SQLite statement on a worker thread of its own (``SqliteMultithread``, started
when the ``SqliteDict`` is constructed): ``d["n"]`` and ``d["n"] = v`` put a request on that thread's
queue and wait for its answer. With ``autocommit=True`` each assignment is committed at once.

- ``racy``: each agent has its own ``SqliteDict`` on the same file (so its own worker thread and
  SQLite connection); both can read 0 and both write 1 (a lost update).
- ``locked``: the agents share one ``SqliteDict`` and hold a ``threading.Lock`` (created in
  ``open()``) around the read-modify-write.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import sqlitedict
from sqlitedict import SqliteDict

from toki.harness import Detector, Scenario

AGENTS = ("A", "B")


def lost_update(state, errors) -> list[str]:
    want = len(AGENTS) - len(errors)
    n = state.get("n", 0)
    return [f"n = {n} after {want} completed increments"] if n < want else []


@dataclass
class Handle:
    d: SqliteDict
    lock: threading.Lock | None = None


class SqliteDictCounter:
    executed = "real"
    version = sqlitedict.__version__

    def __init__(self, locked: bool = False):
        self.locked = locked
        self.name = "sqlitedict-counter-locked" if locked else "sqlitedict-counter"
        how = ("share one SqliteDict and hold a threading.Lock around the read-modify-write" if locked
               else "each with its own SqliteDict(autocommit=True) on the file")
        self.scenarios = {"increment": Scenario(
            "increment", f"two agents add one to d['n'] ({how})", AGENTS, self.increment,
            setup=self.seed, shared=locked, detectors=(Detector("lost-update", lost_update),),
            anomalies=("lost-update",))}

    def open(self, location: Path) -> Handle:
        d = SqliteDict(str(Path(location) / "kv.sqlite"), autocommit=True)
        return Handle(d, threading.Lock() if self.locked else None)

    def close(self, h: Handle) -> None:
        h.d.close()

    def seed(self, h: Handle) -> None:
        h.d.clear()
        h.d["n"] = 0

    def state(self, h: Handle):
        return {k: h.d[k] for k in sorted(h.d.keys())}

    def increment(self, h: Handle, agent: str) -> None:
        if h.lock is None:
            h.d["n"] = h.d["n"] + 1
        else:
            with h.lock:
                h.d["n"] = h.d["n"] + 1


def racy() -> SqliteDictCounter:
    return SqliteDictCounter()


def locked() -> SqliteDictCounter:
    return SqliteDictCounter(locked=True)
