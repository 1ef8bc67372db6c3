"""TinyDB (PyPI, unmodified) under power loss: its default storage, and a durable one plugged in.

TinyDB's default ``JSONStorage`` keeps its file open and rewrites it in place on every write:
``seek(0)``, ``json.dump``, ``flush``, ``os.fsync``, then ``truncate()``. The fsync comes
before the truncate, so when the new document is shorter than the old one, the truncate is the
one operation of the write that is not durable when the call returns: after a power loss the
file can hold the new JSON followed by the old tail, which TinyDB cannot read.

- ``default``: a user deletes a long note (``remove``), then another user inserts a short one,
  each through TinyDB on the file. ``toki faults --engine-module tests.plugins.tinydb_store:default
  --kind power-loss`` exits 1.
- ``durable``: the same calls through TinyDB with a :class:`DurableJSONStorage` (TinyDB's documented
  extension point, ``TinyDB(path, storage=...)``): the whole file written to a temporary file,
  fsynced, renamed over the store, and the directory fsynced. Exits 0.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import tinydb
from tinydb import TinyDB
from tinydb.storages import Storage

from toki.harness import Scenario

LONG = "the user's notes from the planning call: " + "details " * 60


class DurableJSONStorage(Storage):
    """Write aside, fsync, rename, fsync the directory: the file is the old one or the new one."""

    def __init__(self, path: str, **kwargs):
        self.path = Path(path)
        if not self.path.exists():
            self.write({})

    def read(self):
        try:
            with open(self.path) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        return json.loads(text) if text else None

    def write(self, data) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class TinyDBStore:
    executed = "real"
    version = tinydb.__version__

    def __init__(self, durable: bool):
        self.durable = durable
        self.name = "tinydb-durable-storage" if durable else "tinydb"
        self.scenarios = {"remove-then-insert": Scenario(
            "remove-then-insert", "A removes a long note, then B inserts a short one", ("A", "B"), self.call,
            setup=self.seed)}

    def open(self, location):
        path = Path(location) / "db.json"
        return TinyDB(path, storage=DurableJSONStorage) if self.durable else TinyDB(path)

    def close(self, db) -> None:
        db.close()

    def seed(self, db) -> None:
        db.insert({"user": "ana", "note": LONG})
        db.insert({"user": "ben", "note": "lives in Berlin"})

    def state(self, db):
        return sorted([d["user"], d["note"][:30]] for d in db.all())

    def call(self, db, agent):
        if agent == "A":
            db.remove(tinydb.where("user") == "ana")
        else:
            db.insert({"user": "cy", "note": "likes tea"})


def default():
    return TinyDBStore(durable=False)


def durable():
    return TinyDBStore(durable=True)
