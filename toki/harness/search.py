"""The one search loop: the strategy protocol, the loop every strategy runs in, and its one result.

A *strategy* decides which interleavings to run (:mod:`toki.harness.strategies`, one file each:
:class:`~toki.harness.strategies.Random`, :class:`~toki.harness.strategies.Pct`,
:class:`~toki.harness.strategies.Exhaustive`, :class:`~toki.harness.strategies.Replay`). It is
handed a :class:`Runs`, the loop's body that every strategy shares: one run under a chooser,
judged against the serial outcomes (``want`` narrows which anomalies count), refused once the
deadline has passed (:class:`OutOfTime`), with the progress callback. :func:`run` runs a strategy
and returns its :class:`Searched`, the one result every strategy gives, with the fields of a
verdict's ``search`` object (:meth:`Searched.to_json`). Shuttle's shape: schedulers behind one
trait, run by one ``Runner``, except that :class:`~toki.harness.strategies.Random` keeps
Hypothesis driving its own runs (Hypothesis calls the test, not the other way round): it still
makes every run through :meth:`Runs.trial`.

For one release the functions this module used to hold stay, as thin wrappers over the
strategies: :func:`search` (random, :class:`SearchResult`), :func:`certify_search` (a mode string
and an overloaded ``bound``: :class:`Certificate`), :func:`exhaustive_part`,
:func:`exhaustive_verdict`, :func:`first_hit` and :func:`replay`. New code names a strategy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

from toki.harness.controller import ReplayChooser, TapeChooser, context_switches  # noqa: F401 - re-exported
from toki.harness.trial import TrialResult, TrialRunner


class OutOfTime(BaseException):
    """Ends a search at its deadline. A BaseException, as KeyboardInterrupt is, so that Hypothesis
    passes it straight up instead of taking it for a failing example to shrink."""


_OutOfTime = OutOfTime  # its former name


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


class Runs:
    """The loop's body, the same for every strategy: a run under a chooser, judged, refused past
    the deadline (a :func:`time.monotonic` time), and the progress callback ``on_run(runs so far,
    anomalous)``. ``want`` narrows which anomalous runs count (an experiment's one anomaly)."""

    def __init__(self, runner: TrialRunner, *, want: Callable[[TrialResult], bool] | None = None,
                 on_run: Callable[[int, bool], None] | None = None, deadline: float | None = None):
        self.runner, self.want, self.on_run, self.deadline = runner, want, on_run, deadline

    def serial_outcomes(self) -> dict[str, list[str]]:
        """The serial orders' outcomes, every verdict's yardstick (run once per runner)."""
        return self.runner.serial_outcomes()

    def past(self) -> bool:
        """Has the deadline passed?"""
        return _past(self.deadline)

    def hit(self, r: TrialResult) -> bool:
        """Does the run count as an anomaly: not serializable, and one ``want`` accepts?"""
        return not r.serializable and (self.want is None or self.want(r))

    def trial(self, chooser) -> tuple[TrialResult, bool]:
        """One run under ``chooser`` and whether it is an anomaly; :class:`OutOfTime` once the
        deadline has passed (the run is not made)."""
        if _past(self.deadline):
            raise OutOfTime
        r = self.runner.trial(chooser)
        return r, self.hit(r)

    def replay(self, grants) -> TrialResult:
        """Re-execute a run already found from its grants (never cut short by the deadline)."""
        return self.runner.trial(ReplayChooser(grants))

    def report(self, n: int, hit: bool) -> None:
        if self.on_run is not None:
            self.on_run(n, hit)


@runtime_checkable
class Strategy(Protocol):
    """What the loop needs of a search strategy. A strategy is a frozen value (it travels to the
    worker processes of a sharded search) that names its own parameters, so no mode string and
    no overloaded bound: ``Exhaustive(preemptions=2)``, ``Pct(depth=3, runs=100)``,
    ``Random(budget=100, seed=0)``, ``Replay(grants)``. Also read, with defaults in
    :class:`~toki.harness.strategies.Base`: ``budget`` and ``seed`` (recorded in a verdict and its
    witness), ``describe()`` and ``examples()`` (what ``toki certify`` prints)."""

    mode: ClassVar[str]  # the strategy's name in a verdict's search object ("random", "pct", ...)

    def search(self, runs: Runs) -> "Searched":
        """Make the runs, each through ``runs.trial``, and say what they found and certify."""

    def head(self) -> dict:
        """The search object's first fields: ``mode``, and ``bound`` as the JSON has always named
        the strategy's own parameter (Exhaustive's preemptions, Pct's depth; None for the others)."""


@dataclass(frozen=True)
class Searched:
    """What a search found and what its verdict rests on: the one result of every strategy.

    ``explored`` runs were judged (for an exhaustive search, distinct interleavings; ``pruned``
    more were skipped as equivalent), ``complete`` says the strategy's whole space was covered
    (only an exhaustive search can), ``guarantee`` says in words what the search shows, and
    ``out_of_time`` whether the deadline ended it (None: it had no deadline, and the search object
    says nothing). ``shrinks`` counts the runs spent shrinking a found anomaly, ``anomalous`` the
    anomalous runs of a search that went on past the first (None: it stopped), ``shards`` the
    parts a sharded search was cut into, ``runs`` a replay's runs, ``detail`` what only one
    strategy knows (a random search's tape and switching rate, PCT's steps and agents)."""

    strategy: Any
    found: TrialResult | None
    explored: int = 0
    guarantee: str | None = None
    pruned: int = 0
    complete: bool = False
    out_of_time: bool | None = None
    shrinks: int = 0
    anomalous: int | None = None
    shards: int = 1
    runs: tuple[TrialResult, ...] = ()
    detail: dict = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def admits(self) -> bool:
        return self.found is not None

    @property
    def mode(self) -> str:
        return self.strategy.mode

    @property
    def tried(self) -> int:  # Certificate's name for it
        return self.explored

    @property
    def search(self) -> dict:  # Certificate's name for it
        return self.to_json()

    def to_json(self) -> dict:
        """The verdict row's ``search`` object."""
        doc = {**self.strategy.head(), "explored": self.explored, "pruned": self.pruned, "complete": self.complete,
               "guarantee": self.guarantee}
        if self.anomalous is not None:
            doc["anomalous"] = self.anomalous
        if self.out_of_time is not None:
            doc["out_of_time"] = self.out_of_time
        if self.shards > 1:
            doc["shards"] = self.shards
        return doc


def run(runner: TrialRunner, strategy: Strategy, *, want: Callable[[TrialResult], bool] | None = None,
        on_run: Callable[[int, bool], None] | None = None, deadline: float | None = None) -> Searched:
    """Search ``runner``'s scenario with ``strategy`` until it is done, or until ``deadline`` (a
    :func:`time.monotonic` time): a search the deadline ends says ``out_of_time``, and certifies
    nothing. ``want`` narrows which anomalies count; ``on_run(runs so far, anomalous)`` follows
    the runs."""
    t0 = time.perf_counter()
    res = strategy.search(Runs(runner, want=want, on_run=on_run, deadline=deadline))
    return replace(res, elapsed_s=time.perf_counter() - t0)


def timed(deadline: float | None, out_of_time: bool) -> bool | None:
    """``out_of_time`` for a :class:`Searched`: None when there was no deadline."""
    return None if deadline is None else out_of_time


# -- the former API, for one release --------------------------------------------------------------

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

    res = run(runner, Random(budget=budget, seed=seed, shrink=shrink), want=want, on_run=on_trial, deadline=deadline)
    return SearchResult(runner.engine.name, runner.scenario.name, budget, seed, tried=res.explored,
                        shrinks=res.shrinks, found=res.found, tape=list(res.detail.get("tape", [])),
                        rate=res.detail.get("rate"), elapsed_s=res.elapsed_s,
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
