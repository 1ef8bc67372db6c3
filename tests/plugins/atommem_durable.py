"""AtomMem's model with the fix ``atommem-atomic`` lacks for power loss: each file saved durably.

``atommem-atomic`` saves a file by writing ``NAME.tmp`` and ``os.replace``-ing it over ``NAME``:
atomic against a process crash, but nothing is fsynced, so after a power loss the rename can be
on disk and the data it renamed not (an empty facts file), or neither (an acknowledged fact gone).
This plug-in is the same engine with each save written aside, fsynced, renamed over the file,
and the directory fsynced (the engine's storage object is given this save in ``open``; the
engine's code is not edited). What remains is AtomMem's design: one fact is saved as three files
in turn, so a crash between two saves leaves a half-done state, power loss or not.
"""

from __future__ import annotations

import json
import os
from typing import Any

from toki.engines.registry import load_engine


def save_json_durable(data: Any, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DurableAtomMem:
    def __init__(self):
        self.inner = load_engine("atommem-atomic")
        self.name, self.version, self.executed = "atommem-durable", self.inner.version, self.inner.executed
        self.scenarios = self.inner.scenarios

    def open(self, location):
        h = self.inner.open(location)
        h.storage._save = save_json_durable
        return h

    def close(self, h) -> None:
        self.inner.close(h)

    def state(self, h):
        return self.inner.state(h)

    def prepare(self, h, controller) -> None:
        prepare = getattr(self.inner, "prepare", None)
        if callable(prepare):
            prepare(h, controller)


def engine():
    return DurableAtomMem()
