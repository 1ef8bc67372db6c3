"""Search strategies, one file each, behind the one protocol of :mod:`toki.harness.search`.

- :class:`Random` (``random.py``): Hypothesis grant tapes at four switching rates, shrunk to the
  fewest context switches: a sample, not a bound;
- :class:`Pct` (``pct.py``): probabilistic concurrency testing, with PCT's probability bound;
- :class:`Exhaustive` (``exhaustive.py``): every interleaving within a preemption bound, equivalent
  ones pruned, iteratively bounded and shardable: a certificate within the bound;
- :class:`Replay` (``replay.py``): a recorded grant sequence, re-executed.

Each is a frozen value naming its own parameters, run by :func:`toki.harness.search.run` and
answering with a :class:`~toki.harness.search.Searched`. A module here that defines ``OPTION``
(an :class:`Option`) is a search ``toki certify`` offers as ``--NAME VALUE`` and the pytest plugin
as ``NAME=VALUE``: a new strategy is one new file, and neither the command nor the plugin changes.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from toki.harness.search import Runs, Searched, Strategy


class Base:
    """Defaults for the members of a strategy that the protocol reads and most strategies share."""

    mode: ClassVar[str]
    # The search can cover its whole space (``Searched.complete``): then only a complete one excludes.
    certifies: ClassVar[bool] = False
    budget: int | None = None  # recorded in the verdict and its witness ("budget")
    seed: int = 0  # recorded in the verdict and its witness ("seed")

    def head(self) -> dict:
        return {"mode": self.mode, "bound": None}

    def describe(self) -> str:
        """How ``toki certify`` titles its table for this search ("random search, budget 100")."""
        return self.mode

    def examples(self, row: dict) -> str:
        """The "examples" cell of ``toki certify``'s table for a verdict row (its ``trials``,
        ``shrinks``, ``verdict`` and ``search``): how many runs, and whether the deadline cut
        them short."""
        return f"{row['trials']} runs" + _late(row)


def _late(row: dict) -> str:
    return ", out of time" if (row.get("search") or {}).get("out_of_time") else ""


@dataclass(frozen=True)
class Option:
    """How a strategy is asked for: ``--NAME METAVAR`` on ``toki certify``, ``NAME=VALUE`` in the
    pytest plugin's ``toki_certify_engine``. ``make(value, budget=, seed=, keep_going=)`` builds the
    strategy (``budget`` is ``--budget``, or ``default_budget`` when it is not given) and refuses a
    bad value with a :class:`~toki.errors.ConfigError`; ``purpose`` is said when two searches are
    asked for at once; ``keep_going`` and ``shards`` say whether ``--keep-going`` and
    ``--workers``/``--cluster`` apply (the strategy then has ``part``, ``merge`` and ``shards``, as
    :class:`Exhaustive` has)."""

    name: str
    metavar: str
    help: str
    purpose: str
    make: Callable[..., Strategy]
    default_budget: int | None = 100
    keep_going: bool = False
    shards: bool = False


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
