"""The small programs that ``benchmarks/bench_frontrun.py`` runs under frontrun and under toki.

Each program is a few agents (threads) running one function per module, ``work``: the code under
test, which both tools run. Most add one to a counter (two agents, or three for the ``-3``
programs); ``pg_skew`` is the on-call doctors' write skew. Around ``work`` each module has

- a toki engine plug-in per variant (``racy()``, ``fixed()``, ``racy3()``, ...: ``toki certify
  --engine-module benchmarks.frontrun_programs.MODULE:racy``), following the protocol in
  docs/engines.md;
- ``frontrun_case(variant, dsn)``: a :class:`Case`, the ``setup`` / ``workers`` / ``invariant``
  that ``frontrun.explore`` takes (one worker per agent), and a ``cleanup`` for what the runs left
  (PostgreSQL tables, temporary folders).

The number of agents is the program's: each module's ``VARIANTS`` maps a variant to its kind and
its agent count, and the plug-in's scenario and the frontrun case both take it from there.

``PROGRAMS`` names every program the benchmark runs: ``NAME -> (module, variant)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

PROGRAMS: dict[str, tuple[str, str]] = {
    "sqlite-racy": ("sqlite_counter", "racy"),
    "sqlite-fixed": ("sqlite_counter", "fixed"),
    "sqlite-racy-3": ("sqlite_counter", "racy3"),
    "sqlite-fixed-3": ("sqlite_counter", "fixed3"),
    "json-racy": ("json_counter", "racy"),
    "json-fixed": ("json_counter", "fixed"),
    "json-racy-3": ("json_counter", "racy3"),
    "json-fixed-3": ("json_counter", "fixed3"),
    "pg-racy": ("pg_counter", "racy"),
    "pg-fixed": ("pg_counter", "fixed"),
    "pg-skew-racy": ("pg_skew", "racy"),
    "pg-skew-fixed": ("pg_skew", "fixed"),
    "dict-racy": ("dict_counter", "racy"),
    "dict-fixed": ("dict_counter", "fixed"),
    "dict-lock-misplaced": ("dict_counter", "misplaced"),
}

# Storage programs: toki's target (decisive on each) is stated over these; the dicts have no storage.
STORAGE = tuple(p for p in PROGRAMS if not p.startswith("dict-"))

NUMBER = {2: "two", 3: "three"}  # for the scenarios' descriptions


def agents(n: int) -> tuple[str, ...]:
    """The names of ``n`` agents: A, B, C, ..."""
    if not 1 <= n <= 26:
        raise ValueError(f"{n} agents: between 1 and 26")
    return tuple(chr(ord("A") + i) for i in range(n))


AGENTS = agents(2)  # the two-agent programs'


@dataclass(frozen=True)
class Case:
    """What ``frontrun.explore`` runs: ``setup()`` makes a fresh state per interleaving, each of
    ``workers`` (one per agent) runs on it in a thread, ``invariant(state)`` must hold after;
    ``cleanup()`` once at the end."""

    setup: Callable[[], Any]
    workers: tuple[Callable[[Any], Any], ...]
    invariant: Callable[[Any], bool]
    cleanup: Callable[[], None]

    def explore_workers(self) -> dict:
        """``explore``'s worker arguments: one function run by every agent goes in as
        ``workers=f, count=n``, as the two-agent programs always have; agents that differ (the
        skew's doctors) as the list."""
        first = self.workers[0]
        if all(w is first for w in self.workers):
            return {"workers": first, "count": len(self.workers)}
        return {"workers": list(self.workers)}


def lost_update(state: dict, errors, *, agents: int) -> list[str]:
    """Every one of the ``agents`` agents that returned added one to a counter that started at 0
    (state ``{"n": n}``). Bound with ``functools.partial`` so the detector stays a module-level
    function (a plug-in's objects may be pickled to toki's workers)."""
    want = agents - len(errors)
    n = state["n"]
    return [f"n = {n} after {want} completed increments"] if n < want else []


def module(name: str):
    """The program module of ``PROGRAMS[name]`` and its variant."""
    import importlib

    mod, variant = PROGRAMS[name]
    return importlib.import_module(f"{__name__}.{mod}"), variant
