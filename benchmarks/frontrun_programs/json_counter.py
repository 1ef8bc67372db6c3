"""JSON-file counter: each agent loads ``counter.json`` and saves it back with ``n`` plus one.

- ``racy``: ``json.load`` then ``open(path, "w")`` and ``json.dump``, no lock: two agents that both
  read 0 both write 1 (a lost update), and an agent that opens the file between the other's
  truncating open and its write reads an empty file (``json.load`` raises).
- ``fixed``: the agents share one ``threading.Lock``, held from the load to the save, and the
  save is atomic (write ``counter.json.tmp``, then ``os.replace``), so a reader never sees a
  half-written file. A process-level ``fcntl.flock`` would be the multi-process version; toki
  does not intercept it (docs/engines.md, Limits), so both tools get the lock they can see.
- ``racy3``, ``fixed3``: the same with three agents, A, B and C.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from toki.harness import Detector, Scenario

from . import NUMBER, Case, agents, lost_update

FILE = "counter.json"

VARIANTS = {"racy": ("racy", 2), "fixed": ("fixed", 2), "racy3": ("racy", 3), "fixed3": ("fixed", 3)}


@dataclass
class Handle:
    path: str
    lock: threading.Lock | None  # None: racy


def work(h: Handle) -> None:
    """The code under test: one increment."""
    with h.lock or nullcontext():
        with open(h.path) as f:
            n = json.load(f)["n"]
        if h.lock is None:
            with open(h.path, "w") as f:
                json.dump({"n": n + 1}, f)
        else:
            tmp = h.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"n": n + 1}, f)
            os.replace(tmp, h.path)


def seed(path: str) -> None:
    with open(path, "w") as f:
        json.dump({"n": 0}, f)


def read(path: str) -> int:
    with open(path) as f:
        return json.load(f)["n"]


# -- toki ---------------------------------------------------------------------------------------

class JsonCounter:
    executed = "real"
    version = "stdlib json"

    def __init__(self, variant: str):
        kind, n = VARIANTS[variant]
        self.fixed = kind == "fixed"
        self.name = f"bench-json-counter-{variant}"
        how = ("one threading.Lock around load and save, saved by os.replace" if self.fixed
               else "load, then open('w') and dump, no lock")
        # fixed: one handle (and so one lock) shared by the agents; racy: a handle each, no lock
        self.scenarios = {"increment": Scenario(
            "increment", f"{NUMBER[n]} agents add one to counter.json ({how})", agents(n), self.increment,
            setup=lambda h: seed(h.path), shared=self.fixed,
            detectors=(Detector("lost-update", partial(lost_update, agents=n)),),
            anomalies=("lost-update",))}

    def open(self, location: Path) -> Handle:
        # the lock is made here, during the trial, so the harness instruments it
        return Handle(str(Path(location) / FILE), threading.Lock() if self.fixed else None)

    def close(self, h: Handle) -> None:
        pass

    def state(self, h: Handle) -> dict:
        return {"n": read(h.path)}

    def increment(self, h: Handle, agent: str) -> None:
        work(h)


def racy() -> JsonCounter:
    return JsonCounter("racy")


def fixed() -> JsonCounter:
    return JsonCounter("fixed")


def racy3() -> JsonCounter:
    return JsonCounter("racy3")


def fixed3() -> JsonCounter:
    return JsonCounter("fixed3")


# -- frontrun -----------------------------------------------------------------------------------

def frontrun_case(variant: str, dsn: str | None = None) -> Case:
    kind, n = VARIANTS[variant]
    fix = kind == "fixed"
    root = tempfile.mkdtemp(prefix="bench-fr-json-")
    runs = iter(range(1_000_000))

    def setup() -> Handle:  # a fresh file (and lock) per interleaving
        h = Handle(os.path.join(root, f"{next(runs)}-{FILE}"), threading.Lock() if fix else None)
        seed(h.path)
        return h

    return Case(setup, (work,) * n, lambda h: read(h.path) == n, lambda: shutil.rmtree(root, True))
