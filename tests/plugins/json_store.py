"""A small JSON key-value store, written from docs/engines.md as a new user would, saved three ways.

The store is one file, ``store.json``, loaded whole and saved whole on every ``put``:

- ``inplace``: ``open(path, "w")`` and ``json.dump`` (truncates, then writes: nothing fsynced);
- ``rename``: write ``store.json.tmp``, then ``os.replace`` it over the store (atomic against a
  process crash, but the data of the temporary file is never fsynced);
- ``durable``: write the temporary file, ``fsync`` it, ``os.replace``, ``fsync`` the directory.

``toki faults --engine-module tests.plugins.json_store:inplace --kind power-loss`` exits 1 (the
store can be left empty, and an acknowledged put lost), ``:rename`` exits 1 (the renamed file's
data may not have reached the disk: an empty store), ``:durable`` exits 0.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from toki.harness import Scenario

MODES = ("inplace", "rename", "durable")


class Store:
    def __init__(self, folder: Path, mode: str):
        self.path, self.mode = Path(folder) / "store.json", mode

    def load(self) -> dict:
        if not self.path.exists():
            return {}
        with open(self.path) as f:
            return json.load(f)

    def save(self, data: dict) -> None:
        if self.mode == "inplace":
            with open(self.path, "w") as f:
                json.dump(data, f)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f)
            if self.mode == "durable":
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        if self.mode == "durable":
            fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def put(self, key: str, value: str) -> None:
        data = self.load()
        data[key] = value
        self.save(data)


class JsonStore:
    version, executed = "1.0", "real"

    def __init__(self, mode: str):
        self.mode = mode
        self.name = f"json-store-{mode}"
        self.scenarios = {"two-puts": Scenario(
            "two-puts", "A puts alice=Rome, then B puts bob=Paris, over carol=Berlin", ("A", "B"), self.call,
            setup=lambda s: s.put("carol", "Berlin"))}

    def open(self, location):
        return Store(location, self.mode)

    def close(self, store) -> None:
        pass

    def state(self, store):
        return sorted(store.load().items())

    def call(self, store, agent):
        store.put(*{"A": ("alice", "Rome"), "B": ("bob", "Paris")}[agent])


class SilentJsonStore(JsonStore):
    """The in-place store whose ``state`` reads nothing back: no crash state can be judged on it."""

    def state(self, store):
        return []


def silent():
    store = SilentJsonStore("inplace")
    store.name = "json-store-silent"
    return store


def inplace():
    return JsonStore("inplace")


def rename():
    return JsonStore("rename")


def durable():
    return JsonStore("durable")
