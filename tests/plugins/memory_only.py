"""A plug-in that keeps its memory in a Python dict and writes no file: power loss has nothing to
crash, so ``toki faults --kind power-loss`` must say so and not pass."""

from __future__ import annotations

from toki.harness import Scenario

_STORE: dict[str, dict] = {}


class MemoryOnly:
    name, version, executed = "memory-only", "1.0", "real"

    def __init__(self):
        self.scenarios = {"put": Scenario("put", "A puts one key", ("A",), self.call)}

    def open(self, location):
        return _STORE.setdefault(str(location), {})

    def close(self, h) -> None:
        pass

    def state(self, h):
        return sorted(h.items())

    def call(self, h, agent):
        h[agent] = 1


def engine():
    return MemoryOnly()
