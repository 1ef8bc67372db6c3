"""The small programs that ``benchmarks/bench_frontrun.py`` runs under frontrun and under toki.

Each program is two agents (threads) that add one to a counter. One function per module,
``work``, is the code under test; both tools run that same function. Around it each module has

- a toki engine plug-in (``racy()``, ``fixed()``: ``toki certify --engine-module
  benchmarks.frontrun_programs.MODULE:racy``), following the protocol in docs/engines.md;
- ``frontrun_case(variant, dsn)``: the ``setup`` / ``worker`` / ``invariant`` that
  ``frontrun.explore`` takes, and a ``cleanup`` for what the runs left (PostgreSQL tables).

``PROGRAMS`` names every program the benchmark runs: ``NAME -> (module, variant)``.
"""

from __future__ import annotations

PROGRAMS: dict[str, tuple[str, str]] = {
    "sqlite-racy": ("sqlite_counter", "racy"),
    "sqlite-fixed": ("sqlite_counter", "fixed"),
    "json-racy": ("json_counter", "racy"),
    "json-fixed": ("json_counter", "fixed"),
    "pg-racy": ("pg_counter", "racy"),
    "pg-fixed": ("pg_counter", "fixed"),
    "dict-racy": ("dict_counter", "racy"),
    "dict-fixed": ("dict_counter", "fixed"),
    "dict-lock-misplaced": ("dict_counter", "misplaced"),
}

# Storage programs: toki's target (decisive on each) is stated over these; the dicts have no storage.
STORAGE = tuple(p for p in PROGRAMS if not p.startswith("dict-"))

AGENTS = ("A", "B")


def lost_update(state: dict, errors) -> list[str]:
    """Every agent that returned added one to a counter that started at 0 (state ``{"n": n}``)."""
    want = len(AGENTS) - len(errors)
    n = state["n"]
    return [f"n = {n} after {want} completed increments"] if n < want else []


def module(name: str):
    """The program module of ``PROGRAMS[name]`` and its variant."""
    import importlib

    mod, variant = PROGRAMS[name]
    return importlib.import_module(f"{__name__}.{mod}"), variant
