"""Experiments: one module per published table or figure, each behind ``toki experiment NAME``.

Installed as ``toki.experiments``. Each module listed in :data:`MODULES` defines

* ``NAME`` - the command name, e.g. ``"agent-races"``;
* ``TABLE`` - which published table or figure it reproduces (one line);
* ``add_arguments(parser)`` - its options (``--json``, ``--seed`` and ``--dsn`` are added for it);
* ``run(args, out) -> dict`` - computes, prints a table to ``out``, returns the JSON document
  (the framework adds provenance and writes it to ``--json PATH``, default
  ``results/NAME/NAME.json``).

Experiments only compose the library; notebooks only read the JSON they write. Layer 10 beside
the command line: may import every layer of the library (output through :mod:`toki.render`),
never :mod:`toki.cli`; used by ``toki experiment`` and the notebooks' tests.
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


# -- campaigns on a cluster (--cluster) -------------------------------------------------------------
#
# An experiment that splits into independent shards declares
#
# * ``SHARD_OPTION`` - the name of its comma-separated list option whose items are independent
#   (e.g. ``"systems"``: each system's cells depend on the system and --seed only);
# * ``merge(docs, args, out) -> dict`` - one document from the shards' documents (in the order of
#   the option's items), printing the experiment's table to ``out``.
#
# ``toki experiment NAME --cluster ADDRESS`` then runs ``run`` once per item on the cluster's
# workers (each with its own server: the worker's embedded PostgreSQL or --dsn) and merges. The
# experiment's own ``run`` is unchanged, so a shard computes exactly what a local run computes.


def shardable(mod) -> bool:
    return bool(getattr(mod, "SHARD_OPTION", None)) and callable(getattr(mod, "merge", None))


def _run_shard(name: str, options: dict) -> dict:
    """One shard in a worker: the experiment's own run() on one item of its shard option."""
    import argparse
    import io

    mod = load(name)
    return mod.run(argparse.Namespace(**options), io.StringIO())


def run_on_cluster(name: str, mod, args, out, cluster_spec) -> tuple[dict, dict]:
    """Run a shardable experiment on a cluster; returns (merged document, cluster description)."""
    from toki.cluster import Cluster
    from toki.errors import ConfigError
    from toki.render import progress

    if not shardable(mod):
        raise ConfigError(f"experiment {name} does not split into shards, so --cluster has nothing to spread",
                          fix=f"run 'toki experiment {name}' without --cluster")
    option = mod.SHARD_OPTION
    items = [v.strip() for v in str(getattr(args, option)).split(",") if v.strip()]
    base = {k: v for k, v in vars(args).items() if not callable(v) and k != "cluster"}
    shards = [dict(base, **{option: item}) for item in items]
    bar = progress()
    with Cluster(cluster_spec) as cl, bar:
        info = cl.describe()
        task = bar.add_task(f"{name} on the cluster", total=len(shards))
        docs = cl.map(_shard_call, [(name, s) for s in shards], on_result=lambda i, d: bar.advance(task))
    return mod.merge(docs, args, out), info


def _shard_call(pair: tuple[str, dict]) -> dict:
    return _run_shard(*pair)
