"""A memory on SQLite that ``toki record`` can drive (``record_client``), written from the memory
histories docs as a new user would. Each slot holds one current claim; ``add`` supersedes it by
reading the current claim, closing it and inserting the new one, each statement committed on its
own, with a millisecond between the read and the write where an engine would ask its judge (racy:
two processes can both read the same old claim, both close it and both insert, leaving two
current); ``atomic`` does the three inside ``BEGIN IMMEDIATE``."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path


class Client:
    def __init__(self, store: str, atomic: bool):
        self.db = sqlite3.connect(Path(store) / "memory.db", timeout=30, isolation_level=None)
        self.atomic = atomic

    def add(self, slot: str, claim: str) -> list[str]:
        if self.atomic:
            self.db.execute("begin immediate")
        try:
            old = [r[0] for r in self.db.execute("select claim from facts where slot = ? and current = 1", (slot,))]
            time.sleep(0.001)  # the judge's turn: does the new claim contradict the old?
            closed = [o for o in old if self.db.execute(
                "update facts set current = 0 where slot = ? and claim = ? and current = 1", (slot, o)).rowcount]
            self.db.execute("insert into facts (slot, claim, current) values (?, ?, 1)", (slot, claim))
        finally:
            if self.atomic:
                self.db.execute("commit")
        return closed  # what this add superseded (toki record writes them as retractions)

    def retract(self, slot: str, claim: str) -> None:
        self.db.execute("update facts set current = 0 where slot = ? and claim = ? and current = 1", (slot, claim))

    def current(self, slot: str) -> list[str]:
        return [r[0] for r in self.db.execute("select claim from facts where slot = ? and current = 1 order by seq",
                                              (slot,))]

    def history(self, slot: str) -> list[str]:
        return [r[0] for r in self.db.execute("select claim from facts where slot = ? order by seq", (slot,))]

    def close(self) -> None:
        self.db.close()


class Recordable:
    name, version, executed = "recordable-sqlite", "1.0", "real"
    scenarios: dict = {}

    def __init__(self, atomic: bool):
        self.atomic = atomic

    def open(self, location):
        return location

    def close(self, h) -> None:
        pass

    def state(self, h):
        return None

    def record_setup(self, store: str) -> None:
        db = sqlite3.connect(Path(store) / "memory.db")
        db.execute("pragma journal_mode=wal")
        db.execute("create table if not exists facts (seq integer primary key autoincrement, slot text, claim text, "
                   "current int)")
        db.commit()
        db.close()

    def record_client(self, store: str) -> Client:
        return Client(store, self.atomic)


def racy():
    return Recordable(False)


def atomic():
    return Recordable(True)
