"""A pure-Python shared dict as a counter: ``d["n"] = d["n"] + 1``, no storage at all.

- ``racy``: no lock: a thread switch between the read and the store loses an update.
- ``fixed``: a ``threading.Lock`` around the read-modify-write.
- ``misplaced``: the lock is taken and released *before* the read-modify-write, which it does not
  guard: as racy as ``racy``, but each agent now makes calls toki schedules (the lock's).

toki is not built for this: it schedules storage calls, and these agents make none. Its fail-closed
rule makes the honest answer *unverifiable* (an agent completed without a storage call the harness
controls), never "excludes". frontrun traces bytecode and sees the race.
"""

from __future__ import annotations

import threading
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from toki.harness import Detector, Scenario

from . import AGENTS, Case, lost_update


@dataclass
class Handle:
    d: dict = field(default_factory=dict)
    lock: threading.Lock | None = None


def work(h: Handle) -> None:
    """The code under test: one increment."""
    with h.lock or nullcontext():
        h.d["n"] = h.d["n"] + 1


def work_misplaced(h: Handle) -> None:
    """The lock guards nothing: the read-modify-write runs after it is released."""
    with h.lock:
        pass
    h.d["n"] = h.d["n"] + 1


# -- toki ---------------------------------------------------------------------------------------

class DictCounter:
    executed = "real"
    version = "builtin dict"

    def __init__(self, variant: str):
        self.fixed = variant in ("fixed", "misplaced")  # both make a lock; only "fixed" guards with it
        self.work = work_misplaced if variant == "misplaced" else work
        self.name = f"bench-dict-counter-{variant}"
        self._stores: dict[str, Handle] = {}
        self.scenarios = {"increment": Scenario(
            "increment", "two threads add one to d['n'] in one shared dict"
            + {"racy": "", "fixed": " under a lock", "misplaced": " after taking and releasing a lock"}[variant],
            AGENTS, self.increment, setup=self.seed, shared=True,
            detectors=(Detector("lost-update", partial(lost_update, agents=len(AGENTS))),), anomalies=("lost-update",))}

    def open(self, location: Path) -> Handle:
        # the "store" is one dict per run's folder, kept by the plug-in, so that the state read
        # after the run (through a fresh open) sees what the agents did, as it would with a file
        if str(location) not in self._stores:
            self._stores[str(location)] = Handle({}, threading.Lock() if self.fixed else None)
        return self._stores[str(location)]

    def close(self, h: Handle) -> None:
        pass

    def discard(self, location: Path) -> None:
        self._stores.pop(str(location), None)

    def seed(self, h: Handle) -> None:
        h.d["n"] = 0

    def state(self, h: Handle) -> dict:
        return dict(h.d)

    def increment(self, h: Handle, agent: str) -> None:
        self.work(h)


def racy() -> DictCounter:
    return DictCounter("racy")


def fixed() -> DictCounter:
    return DictCounter("fixed")


def misplaced() -> DictCounter:
    return DictCounter("misplaced")


# -- frontrun -----------------------------------------------------------------------------------

def frontrun_case(variant: str, dsn: str | None = None) -> Case:
    lock = variant in ("fixed", "misplaced")

    def setup() -> Handle:
        return Handle({"n": 0}, threading.Lock() if lock else None)

    code = work_misplaced if variant == "misplaced" else work
    return Case(setup, (code,) * len(AGENTS), lambda h: h.d["n"] == len(AGENTS), lambda: None)
