"""The former search API, kept for one release as thin wrappers over the strategies.

:func:`search` (a random search, :class:`SearchResult`), :func:`certify_search` (a mode string and
a ``bound`` that meant preemptions in one mode and depth in another: :class:`Certificate`),
:func:`exhaustive_part`, :func:`exhaustive_verdict`, :func:`first_hit` and :func:`replay`. New code
names a strategy (:mod:`toki.harness.strategies`) and runs it in the one loop of
:mod:`toki.harness.loop` (:func:`~toki.harness.loop.run`, whose names this module re-exports).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from toki.harness.controller import ReplayChooser, TapeChooser, context_switches  # noqa: F401 - re-exported
from toki.harness.loop import OutOfTime, Runs, Searched, Strategy, run, timed  # noqa: F401 - re-exported
from toki.harness.trial import TrialResult, TrialRunner

_OutOfTime = OutOfTime  # its former name


def _past(deadline: float | None) -> bool:
    """The deadline check :func:`search` makes its runs with (a test may stand in for the clock here)."""
    return deadline is not None and time.monotonic() >= deadline


@dataclass
class SearchResult:
    """A random search's result, as :func:`search` gave it (new code: :class:`Searched`)."""

    engine: str
    scenario: str
    budget: int
    seed: int
    tried: int = 0
    shrinks: int = 0
    found: TrialResult | None = None
    tape: list[int] = field(default_factory=list)
    rate: int | None = None
    elapsed_s: float = 0.0
    serial_orders: int = 0
    out_of_time: bool = False  # the deadline ended the search (generating, or shrinking a found anomaly)

    @property
    def admits(self) -> bool:
        return self.found is not None


def search(runner: TrialRunner, *, budget: int, seed: int = 0, shrink: bool = True,
           on_trial: Callable[[int, bool], None] | None = None,
           want: Callable[[TrialResult], bool] | None = None, deadline: float | None = None) -> SearchResult:
    """Search ``budget`` random interleavings (``run(runner, Random(budget, seed, shrink=shrink))``)."""
    from toki.harness.strategies.random import Random

    t0 = time.perf_counter()
    # its runs check the deadline through this module's _past, as they did when the search lived here
    res = Random(budget=budget, seed=seed, shrink=shrink).search(
        Runs(runner, want=want, on_run=on_trial, deadline=deadline, past=lambda d: _past(d)))
    elapsed = time.perf_counter() - t0
    return SearchResult(runner.engine.name, runner.scenario.name, budget, seed, tried=res.explored,
                        shrinks=res.shrinks, found=res.found, tape=list(res.detail.get("tape", [])),
                        rate=res.detail.get("rate"), elapsed_s=elapsed,
                        serial_orders=sum(len(v) for v in runner.serial_outcomes().values()),
                        out_of_time=bool(res.out_of_time))


def replay(runner: TrialRunner, grants: list[str]) -> TrialResult:
    return runner.trial(ReplayChooser(grants))


@dataclass
class Certificate:
    """What :func:`certify_search` gave (new code: :class:`Searched`, which has the same members)."""

    found: TrialResult | None
    tried: int
    shrinks: int
    search: dict

    @property
    def admits(self) -> bool:
        return self.found is not None


def strategy_for(mode: str = "random", bound: int | None = None, budget: int | None = 100, seed: int = 0,
                 keep_going: bool = False):
    """The strategy a former ``mode``/``bound`` pair names."""
    from toki.errors import ConfigError
    from toki.harness.strategies import Exhaustive, Pct, Random

    if mode == "exhaustive":
        return Exhaustive(preemptions=bound, budget=budget, keep_going=keep_going, seed=seed)
    if mode == "pct":
        return Pct(depth=bound, runs=budget, seed=seed)
    if mode == "random":
        return Random(budget=budget, seed=seed)
    raise ConfigError(f"search mode {mode!r} does not exist", fix="name a strategy: Random, Pct or Exhaustive")


def certify_search(runner: TrialRunner, *, mode: str = "random", bound: int | None = None, budget: int | None = 100,
                   seed: int = 0, on_trial: Callable[[int, bool], None] | None = None,
                   keep_going: bool = False, deadline: float | None = None) -> Certificate:
    """Search a scenario the way ``mode`` says (``run(runner, strategy)`` with the strategy the mode
    and ``bound`` name: "random", "pct" with depth ``bound``, "exhaustive" to ``bound``
    preemptions); kept for one release for the plug-ins and scripts that call it."""
    res = run(runner, strategy_for(mode, bound, budget, seed, keep_going), on_run=on_trial, deadline=deadline)
    return Certificate(res.found, res.explored, res.shrinks, res.to_json())


def exhaustive_part(runner: TrialRunner, *, bound: int, budget: int | None = None,
                    on_trial: Callable[[int, bool], None] | None = None, shard: tuple[int, int] = (0, 1),
                    keep_going: bool = False, memo=None, start: int = 0, deadline: float | None = None) -> dict:
    """Shard ``shard`` of an exhaustive search to ``bound`` preemptions (see
    :meth:`toki.harness.strategies.Exhaustive.part`), with the anomalous run as ``found``."""
    from toki.harness.strategies.exhaustive import Exhaustive

    return Exhaustive(preemptions=bound, budget=budget, keep_going=keep_going).part(
        Runs(runner, on_run=on_trial, deadline=deadline), shard=shard, memo=memo, start=start)


def exhaustive_verdict(bound: int, parts: list[dict]) -> dict:
    """The verdict row's ``search`` object from the parts of an exhaustive search."""
    from toki.harness.strategies.exhaustive import Exhaustive

    return Exhaustive(preemptions=bound).merge(parts).to_json()


def first_hit(parts: list[dict]) -> dict | None:
    """The part whose anomaly a sharded search reports: the lowest level, then the first shard."""
    from toki.harness.strategies.exhaustive import first_hit as first

    return first(parts)
