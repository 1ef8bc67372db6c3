"""Experiments: one module per published table or figure, each behind ``toki experiment NAME``.

Installed as ``toki.experiments``. Each module listed in :data:`MODULES` defines

* ``NAME`` - the command name, e.g. ``"agent-races"``;
* ``TABLE`` - which published table or figure it reproduces (one line);
* ``add_arguments(parser)`` - its options (``--json``, ``--seed`` and ``--dsn`` are added for it);
* ``run(args, out) -> dict`` - computes, prints a table to ``out``, returns the JSON document
  (the framework adds provenance and writes it to ``--json PATH``, default
  ``results/NAME/NAME.json``).

Experiments only compose the library; notebooks only read the JSON they write.
"""

from __future__ import annotations

import importlib

# module names under toki.experiments; a module not present yet is skipped
MODULES = (
    "agent_races",
    "n1_replay",
    "judge_calibration",
    "replay_consistency",
    "order_swap",
    "temperature_sweep",
    "serializable_pilot",
    "multi_writer",
    "two_writer",
    "verdicts",
    "reported_races",
)


def names() -> list[str]:
    """Command names of the experiments present, without importing them (NAME is the module
    name with dashes)."""
    from importlib.util import find_spec

    return [m.replace("_", "-") for m in MODULES if find_spec(f"toki.experiments.{m}") is not None]


def load(name: str):
    """The experiment module behind a command name."""
    mod = importlib.import_module(f"toki.experiments.{name.replace('-', '_')}")
    if mod.NAME != name:  # pragma: no cover - a module whose NAME drifted from its file name
        raise ImportError(f"experiment module {mod.__name__} is named {mod.NAME!r}, expected {name!r}")
    return mod


def available() -> dict:
    return {name: load(name) for name in names()}
