"""A JSON store saved with ``atomicwrites`` (temporary file, fsync, rename, directory fsync), a
library that binds ``_proper_fsync = os.fsync`` at import: its fsyncs must be seen for power loss to
judge the store (15 phantom "lost" crash states when they were missed)."""

from __future__ import annotations

import json
from pathlib import Path

import atomicwrites

from toki.harness import Scenario


class AtomicJson:
    name, executed = "atomic-json", "real"
    version = atomicwrites.__version__

    def __init__(self):
        self.scenarios = {"two-puts": Scenario("two-puts", "A puts alice=Rome, then B puts bob=Paris", ("A", "B"),
                                               self.call, setup=lambda f: self._save(f, {"carol": "Berlin"}))}

    def open(self, location):
        return Path(location)

    def close(self, folder) -> None:
        pass

    def _save(self, folder: Path, data: dict) -> None:
        with atomicwrites.atomic_write(str(folder / "store.json"), overwrite=True) as f:
            json.dump(data, f)

    def state(self, folder):
        p = folder / "store.json"
        return sorted(json.loads(p.read_text()).items()) if p.exists() else []

    def call(self, folder, agent):
        data = json.loads((folder / "store.json").read_text())
        data.update([{"A": ("alice", "Rome"), "B": ("bob", "Paris")}[agent]])
        self._save(folder, data)


def engine():
    return AtomicJson()
