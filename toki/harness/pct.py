"""Probabilistic concurrency testing: moved to :mod:`toki.harness.strategies.pct` (the strategy
:class:`~toki.harness.strategies.Pct`). The former names stay here for one release:
:class:`PCTChooser`, :func:`bound`, :func:`pct_search` and its :class:`PCTResult`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from toki.harness.loop import run
from toki.harness.strategies.pct import PCTChooser, Pct, bound  # noqa: F401 - re-exported
from toki.harness.trial import TrialResult, TrialRunner


@dataclass
class PCTResult:
    depth: int
    runs: int
    steps: int
    agents: int
    found: TrialResult | None
    elapsed_s: float
    planned: int | None = None  # the runs asked for (``runs`` counts those made)
    out_of_time: bool = False  # the deadline ended the search before its runs were made

    @property
    def per_run(self) -> float:
        return bound(self.agents, self.steps, self.depth)

    @property
    def miss(self) -> float:
        """Probability that all the runs missed a given depth-d bug (an upper bound)."""
        return (1.0 - self.per_run) ** self.runs

    def guarantee(self) -> str:
        return Pct(depth=self.depth, runs=self.planned).guarantee(self.runs, self.agents, self.steps,
                                                                  self.found is not None, self.out_of_time)


def pct_search(runner: TrialRunner, *, depth: int, runs: int, seed: int = 0,
               want: Callable[[TrialResult], bool] | None = None,
               on_run: Callable[[int, bool], None] | None = None, deadline: float | None = None) -> PCTResult:
    """``run(runner, Pct(depth=depth, runs=runs, seed=seed))``, as its former result."""
    res = run(runner, Pct(depth=depth, runs=runs, seed=seed), want=want, on_run=on_run, deadline=deadline)
    return PCTResult(depth, res.explored, res.detail["steps"], res.detail["agents"], res.found, res.elapsed_s,
                     planned=runs, out_of_time=bool(res.out_of_time))
