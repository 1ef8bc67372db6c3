"""Search strategies, one file each, behind the one protocol of :mod:`toki.harness.loop`.

- :class:`Random` (``random.py``): Hypothesis grant tapes at four switching rates, shrunk to the
  fewest context switches: a sample, not a bound;
- :class:`Pct` (``pct.py``): probabilistic concurrency testing, with PCT's probability bound;
- :class:`Exhaustive` (``exhaustive.py``): every interleaving within a preemption bound, equivalent
  ones pruned, iteratively bounded and shardable: a certificate within the bound;
- :class:`Replay` (``replay.py``): a recorded grant sequence, re-executed.

Each is a frozen value naming its own parameters, run by :func:`toki.harness.loop.run` and
answering with a :class:`~toki.harness.loop.Searched`. A module here that defines ``OPTION``
(an :class:`Option`) is a search ``toki certify`` offers as ``--NAME VALUE`` and the pytest plugin
as ``NAME=VALUE``: a new strategy is one new file, and neither the command nor the plugin changes.
"""

from __future__ import annotations

import importlib
import pkgutil

from toki.harness.loop import Base, Option, Runs, Searched, Strategy


def strategy_options() -> list[Option]:
    """The ``OPTION`` of every strategy module in this package, in module name order."""
    found = []
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        opt = getattr(importlib.import_module(f"{__name__}.{m.name}"), "OPTION", None)
        if isinstance(opt, Option):
            found.append(opt)
    return found


from toki.harness.strategies.exhaustive import Exhaustive  # noqa: E402
from toki.harness.strategies.pct import Pct  # noqa: E402
from toki.harness.strategies.random import Random  # noqa: E402
from toki.harness.strategies.replay import Replay  # noqa: E402

__all__ = ["Base", "Exhaustive", "Option", "Pct", "Random", "Replay", "Runs", "Searched", "Strategy", "strategy_options"]
