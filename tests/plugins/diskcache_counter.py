"""diskcache (SQLite underneath, one connection per thread, opened lazily on the agent's thread)
with the lock made in the plug-in's factory, before any trial, as an app makes its lock at start-up.

- ``racy``: ``get`` then ``set`` (a lost update);
- ``factory_lock``: the same under a ``threading.Lock`` the factory made (toki swaps it for an
  instrumented one during each trial: certified, where it used to be refused).
"""

from __future__ import annotations

import threading
from pathlib import Path

import diskcache

from toki.harness import Detector, Scenario


def _lost(state, errors):
    return [f"n is {state['n']} after two increments"] if state["n"] == 1 else []


class DiskcacheCounter:
    version, executed = diskcache.__version__, "real"

    def __init__(self, locked: bool):
        self.name = "diskcache-" + ("factory-lock" if locked else "racy")
        self.lock = threading.Lock() if locked else None  # made here, in the factory
        self.scenarios = {"increment": Scenario("increment", "two agents get n and set n + 1", ("A", "B"),
                                                self.call, setup=self.setup, shared=True,
                                                detectors=(Detector("lost-update", _lost),))}

    def open(self, location):
        return diskcache.Cache(str(Path(location) / "cache"))

    def close(self, cache) -> None:
        cache.close()

    def setup(self, cache) -> None:
        cache.set("n", 0)

    def state(self, cache):
        return {"n": cache.get("n")}

    def _increment(self, cache) -> None:
        n = cache.get("n")
        cache.set("n", n + 1)

    def call(self, cache, agent):
        if self.lock is None:
            self._increment(cache)
        else:
            with self.lock:
                self._increment(cache)


def racy():
    return DiskcacheCounter(False)


def factory_lock():
    return DiskcacheCounter(True)
