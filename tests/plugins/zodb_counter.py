"""ZODB's FileStorage: an object database whose every byte goes through Python file objects
(seek, write, flush, fsync; a lock file under zc.lockfile's flock). One ``DB`` per run (its
FileStorage holds a process lock on the folder), one connection and transaction per agent, as a
multi-threaded ZODB application has them.

- ``racy``: read the counter in one transaction, add one in the next (a lost update);
- ``mvcc``: read and write in one transaction; ZODB's conflict detection makes the second
  committer fail with ``ConflictError``, which the caller retries: declared in ``clean_aborts``.
"""

from __future__ import annotations

from pathlib import Path

import transaction
import ZODB
import ZODB.FileStorage
import ZODB.POSException
from persistent import Persistent

from toki.harness import Detector, Scenario


class Counter(Persistent):
    def __init__(self):
        self.n = 0


def _lost(state, errors):
    return [f"counter is {state['n']} after two increments"] if state.get("n") == 1 and not errors else []


class ZodbCounter:
    version, executed = ZODB.__name__ and __import__("importlib.metadata").metadata.version("ZODB"), "real"

    def __init__(self, mode: str):
        self.mode = mode
        self.name = f"zodb-{mode}"
        if mode == "mvcc":
            self.clean_aborts = (ZODB.POSException.ConflictError,)
        self.scenarios = {"increment": Scenario("increment", "two agents add one to the root's counter",
                                                ("A", "B"), self.call, setup=self.setup, shared=True,
                                                detectors=(Detector("lost-update", _lost),))}

    def open(self, location):
        return ZODB.DB(ZODB.FileStorage.FileStorage(str(Path(location) / "data.fs")))

    def close(self, db) -> None:
        db.close()

    def setup(self, db) -> None:
        tm = transaction.TransactionManager()
        conn = db.open(tm)
        conn.root()["counter"] = Counter()
        tm.commit()
        conn.close()

    def state(self, db):
        tm = transaction.TransactionManager()
        conn = db.open(tm)
        try:
            return {"n": conn.root()["counter"].n}
        finally:
            tm.abort()
            conn.close()

    def call(self, db, agent):
        tm = transaction.TransactionManager()
        conn = db.open(tm)
        try:
            if self.mode == "racy":
                n = conn.root()["counter"].n
                tm.abort()
                conn.root()["counter"].n = n + 1
            else:
                conn.root()["counter"].n += 1
            tm.commit()
        except BaseException:
            tm.abort()
            raise
        finally:
            conn.close()


def racy():
    return ZodbCounter("racy")


def mvcc():
    return ZodbCounter("mvcc")
