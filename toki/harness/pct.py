"""Probabilistic concurrency testing (PCT; Burckhardt, Kothari, Musuvathi, Nagarakatte, ASPLOS 2010).

A bug of depth d (d ordering constraints between the agents' steps) is found by one PCT run with
probability at least 1/(n·k^(d-1)) for n agents and k steps: each run gives the agents random
distinct priorities d..d+n-1, picks d-1 change points among the k steps, always runs the
highest-priority agent that can step, and at the i-th change point lowers the running agent's
priority to i. Unlike random tapes, the bound holds for every program, so "no anomaly in N PCT
runs" says how unlikely a missed depth-d race is.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toki.errors import ConfigError
from toki.harness.controller import Chooser
from toki.harness.trial import TrialResult, TrialRunner


class PCTChooser(Chooser):
    def __init__(self, agents: Sequence[str], steps: int, depth: int, rng: random.Random):
        order = list(agents)
        rng.shuffle(order)
        self.priority = {a: depth + i for i, a in enumerate(order)}  # higher runs first
        points = rng.sample(range(1, steps + 1), min(depth - 1, steps))
        self.changes = {k: i + 1 for i, k in enumerate(points)}  # the i-th change point lowers to i
        self.count = 0

    def choose(self, eligible, last):
        self.count += 1
        if self.count in self.changes and last is not None:
            self.priority[last] = self.changes[self.count]
        return max(eligible, key=lambda a: self.priority.get(a, -1))

    def victim(self, blocked):
        return min(blocked, key=lambda a: self.priority.get(a, -1))


def bound(agents: int, steps: int, depth: int) -> float:
    """PCT's lower bound on the probability that one run finds a given bug of this depth."""
    return 1.0 / (agents * steps ** (depth - 1))


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
        if self.found is not None:
            return f"an anomaly found by PCT run {self.runs} (depth {self.depth})"
        if self.out_of_time:
            return (f"cut short by --time-budget after {self.runs} of {self.planned} PCT runs (depth {self.depth}): "
                    f"no anomaly in them (all {self.runs} miss a given race of depth <= {self.depth} with probability "
                    f"<= {self.miss:.3g}); nothing certified")
        return (f"PCT depth {self.depth}, n={self.agents} agents, k={self.steps} steps: each run finds a given race "
                f"of depth <= {self.depth} with probability >= {self.per_run:.3g}; all {self.runs} runs miss it with "
                f"probability <= {self.miss:.3g}")


def pct_search(runner: TrialRunner, *, depth: int, runs: int, seed: int = 0,
               want: Callable[[TrialResult], bool] | None = None,
               on_run: Callable[[int, bool], None] | None = None, deadline: float | None = None) -> PCTResult:
    """``runs`` PCT runs, stopping at the first anomaly (``want`` narrows which ones count), or at
    ``deadline`` (a :func:`time.monotonic` time): then ``out_of_time`` says so."""
    if depth < 1:
        raise ConfigError(f"--pct {depth}: the depth must be at least 1", fix="pass --pct 2 (two ordering constraints)")
    t0 = time.perf_counter()
    runner.serial_outcomes()
    steps = max(len(runner.last_serial_grants or []), 1)
    agents = len(runner.scenario.agents)
    rng = random.Random(seed)
    res = PCTResult(depth, 0, steps, agents, None, 0.0, planned=runs)
    for _ in range(runs):
        if deadline is not None and time.monotonic() >= deadline:
            res.out_of_time = True
            break
        r = runner.trial(PCTChooser(runner.scenario.agents, steps, depth, rng))
        res.runs += 1
        hit = not r.serializable and (want is None or want(r))
        if on_run:
            on_run(res.runs, hit)
        if hit:
            res.found = r
            break
    res.elapsed_s = time.perf_counter() - t0
    return res
