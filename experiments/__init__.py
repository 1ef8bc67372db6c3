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
    "provenance_recovery",
)


def available() -> dict:
    found = {}
    for name in MODULES:
        try:
            mod = importlib.import_module(f"toki.experiments.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"toki.experiments.{name}":
                continue
            raise
        found[mod.NAME] = mod
    return found
