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
makes every run through :meth:`Runs.trial`. :class:`Base` holds the defaults of the protocol's
members, and :class:`Option` how a strategy is asked for on the command line and in the plugin.

The strategies import this module and nothing imports them back from here:
:mod:`toki.harness.search` keeps the former functions, as wrappers over the strategies.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

from toki.harness.controller import ReplayChooser
from toki.harness.trial import TrialResult, TrialRunner


class OutOfTime(BaseException):
    """Ends a search at its deadline. A BaseException, as KeyboardInterrupt is, so that Hypothesis
    passes it straight up instead of taking it for a failing example to shrink."""


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


class Runs:
    """The loop's body, the same for every strategy: a run under a chooser, judged, refused past
    the deadline (a :func:`time.monotonic` time), and the progress callback ``on_run(runs so far,
    anomalous)``. ``want`` narrows which anomalous runs count (an experiment's one anomaly)."""

    def __init__(self, runner: TrialRunner, *, want: Callable[[TrialResult], bool] | None = None,
                 on_run: Callable[[int, bool], None] | None = None, deadline: float | None = None,
                 past: Callable[[float | None], bool] | None = None):
        self.runner, self.want, self.on_run, self.deadline = runner, want, on_run, deadline
        self._past = past or _past  # ``past(deadline)``: has it passed? (a test's clock may stand in)

    def serial_outcomes(self) -> dict[str, list[str]]:
        """The serial orders' outcomes, every verdict's yardstick (run once per runner)."""
        return self.runner.serial_outcomes()

    def past(self) -> bool:
        """Has the deadline passed?"""
        return self._past(self.deadline)

    def hit(self, r: TrialResult) -> bool:
        """Does the run count as an anomaly: not serializable, and one ``want`` accepts?"""
        return not r.serializable and (self.want is None or self.want(r))

    def trial(self, chooser) -> tuple[TrialResult, bool]:
        """One run under ``chooser`` and whether it is an anomaly; :class:`OutOfTime` once the
        deadline has passed (the run is not made)."""
        if self._past(self.deadline):
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
    :class:`Base`: ``budget`` and ``seed`` (recorded in a verdict and its
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

    ``explored`` runs were judged (for an exhaustive search, one per class of equivalent
    interleavings; ``pruned`` more were skipped as equivalent, ``redundant`` were run and turned out
    equivalent), ``complete`` says the strategy's whole space was covered
    (only an exhaustive search can), ``guarantee`` says in words what the search shows, and
    ``out_of_time`` whether the deadline ended it (None: it had no deadline, and the search object
    says nothing). ``shrinks`` counts the runs spent shrinking a found anomaly, ``anomalous`` the
    anomalous runs of a search that went on past the first (None: it stopped), ``shards`` the
    parts a sharded search was cut into, ``runs`` a replay's runs, ``detail`` what only one
    strategy knows (a random search's tape and switching rate, PCT's steps and agents),
    ``unwatched`` why this process could not watch connects made below Python (the limit a
    certificate from it carries; None: they were watched)."""

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
    unwatched: str | None = None
    redundant: int | None = None  # an exhaustive search's runs that turned out equivalent to explored ones

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
        if self.redundant is not None:
            doc["redundant"] = self.redundant
        if getattr(self.strategy, "reduction", None) is not None:
            doc["reduction"] = self.strategy.reduction
        if self.anomalous is not None:
            doc["anomalous"] = self.anomalous
        if self.out_of_time is not None:
            doc["out_of_time"] = self.out_of_time
        if self.shards > 1:
            doc["shards"] = self.shards
        if self.unwatched is not None:
            doc["unwatched"] = self.unwatched
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
        return f"{row['trials']} runs" + out_of_time_note(row)


def out_of_time_note(row: dict) -> str:
    """", out of time" when the deadline cut the row's search short (an "examples" cell's tail)."""
    return ", out of time" if (row.get("search") or {}).get("out_of_time") else ""


@dataclass(frozen=True)
class Option:
    """How a strategy is asked for: ``--NAME METAVAR`` on ``toki certify``, ``NAME=VALUE`` in the
    pytest plugin's ``toki_certify_engine``. ``make(value, budget=, seed=, keep_going=)`` builds the
    strategy (``budget`` is ``--budget``, or ``default_budget`` when it is not given) and refuses a
    bad value with a :class:`~toki.errors.ConfigError`; ``purpose`` is said when two searches are
    asked for at once; ``keep_going`` and ``shards`` say whether ``--keep-going`` and
    ``--workers``/``--cluster`` apply (the strategy then has ``sharded``, ``job``, ``late_part`` and
    ``shards``, as :class:`~toki.harness.strategies.Exhaustive` has)."""

    name: str
    metavar: str
    help: str
    purpose: str
    make: Callable[..., Strategy]
    default_budget: int | None = 100
    keep_going: bool = False
    shards: bool = False
