"""TinyDB (a JSON document store) as a counter: each agent reads document 1 and writes it back plus one.

TinyDB's default ``JSONStorage`` opens its JSON file once, when the ``TinyDB`` is constructed, and
keeps the file handle: every read seeks to 0 and ``json.load``s the handle, every write seeks to 0,
writes, flushes, fsyncs and truncates.

- ``racy``: each agent has its own ``TinyDB`` on the same file (opened in ``open()``), and does
  ``db.get(doc_id=1)`` then ``db.update({"n": n + 1}, doc_ids=[1])``: two agents that both read
  0 both write 1 (a lost update).
- ``locked``: the agents share one ``TinyDB`` (``shared=True``) and hold a ``threading.Lock``
  (created in ``open()``) around the read-modify-write, as TinyDB's docs tell users to do for
  concurrent access from threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import tinydb
from tinydb import TinyDB
from tinydb.table import Document

from toki.harness import Detector, Scenario

AGENTS = ("A", "B")


def lost_update(state, errors) -> list[str]:
    """Every agent that completed added one to a counter that started at 0."""
    want = len(AGENTS) - len(errors)
    return [f"document {d['id']} has n = {d['n']} after {want} completed increments"
            for d in state if d["n"] < want]


@dataclass
class Handle:
    db: TinyDB
    lock: threading.Lock | None = None


class TinyDBCounter:
    executed = "real"
    version = tinydb.__version__

    def __init__(self, locked: bool = False):
        self.locked = locked
        self.name = "tinydb-counter-locked" if locked else "tinydb-counter"
        how = ("share one TinyDB and hold a threading.Lock around get-then-update" if locked
               else "each with its own TinyDB on the file, get-then-update")
        self.scenarios = {"increment": Scenario(
            "increment", f"two agents add one to document 1 ({how})", AGENTS, self.increment,
            setup=self.seed, shared=locked, detectors=(Detector("lost-update", lost_update),),
            anomalies=("lost-update",))}

    def open(self, location: Path) -> Handle:
        db = TinyDB(Path(location) / "db.json")
        return Handle(db, threading.Lock() if self.locked else None)

    def close(self, h: Handle) -> None:
        h.db.close()

    def seed(self, h: Handle) -> None:
        h.db.truncate()
        h.db.insert(Document({"n": 0}, doc_id=1))

    def state(self, h: Handle):
        return [{"id": d.doc_id, "n": d["n"]} for d in sorted(h.db.all(), key=lambda d: d.doc_id)]

    def _increment(self, db: TinyDB) -> None:
        doc = db.get(doc_id=1)
        db.update({"n": doc["n"] + 1}, doc_ids=[1])

    def increment(self, h: Handle, agent: str) -> None:
        if h.lock is None:
            self._increment(h.db)
        else:
            with h.lock:
                self._increment(h.db)


def racy() -> TinyDBCounter:
    return TinyDBCounter()


def locked() -> TinyDBCounter:
    return TinyDBCounter(locked=True)
