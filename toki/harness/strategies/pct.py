"""Probabilistic concurrency testing (PCT; Burckhardt, Kothari, Musuvathi, Nagarakatte, ASPLOS 2010).

A bug of depth d (d ordering constraints between the agents' steps) is found by one PCT run with
probability at least 1/(n·k^(d-1)) for n agents and k steps: each run gives the agents random
distinct priorities d..d+n-1, picks d-1 change points among the k steps, always runs the
highest-priority agent that can step, and at the i-th change point lowers the running agent's
priority to i. Unlike random tapes, the bound holds for every program, so "no anomaly in N PCT
runs" says how unlikely a missed depth-d race is.

This file is the whole of PCT in toki: the chooser, the bound, the strategy, and ``OPTION``, by
which ``toki certify --pct D`` and the pytest plugin's ``pct=D`` offer it. Neither the command
nor the plugin names PCT.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from toki.errors import ConfigError
from toki.harness.controller import Chooser
from toki.harness.loop import Base, Option, OutOfTime, Runs, Searched, out_of_time_note, timed


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


@dataclass(frozen=True)
class Pct(Base):
    """``runs`` PCT runs for races of depth ``depth``, from ``seed``, stopping at the first anomaly."""

    depth: int
    runs: int = 100
    seed: int = 0
    mode: ClassVar[str] = "pct"

    def __post_init__(self):
        if self.depth < 1:
            raise ConfigError(f"--pct {self.depth}: the depth must be at least 1",
                              fix="pass --pct 2 (two ordering constraints)")

    @property
    def budget(self) -> int:
        return self.runs

    def head(self) -> dict:
        return {"mode": self.mode, "bound": self.depth}

    def describe(self) -> str:
        return f"PCT depth {self.depth}, {self.runs} runs"

    def examples(self, row: dict) -> str:
        return f"{row['trials']} PCT runs" + out_of_time_note(row)

    def search(self, runs: Runs) -> Searched:
        runner = runs.runner
        runs.serial_outcomes()
        steps = max(len(runner.last_serial_grants or []), 1)
        agents = len(runner.scenario.agents)
        rng = random.Random(self.seed)
        made, found, late = 0, None, False
        for _ in range(self.runs):
            try:
                r, hit = runs.trial(PCTChooser(runner.scenario.agents, steps, self.depth, rng))
            except OutOfTime:
                late = True
                break
            made += 1
            runs.report(made, hit)
            if hit:
                found = r
                break
        return Searched(self, found, explored=made, guarantee=self.guarantee(made, agents, steps, found is not None,
                                                                              late),
                        out_of_time=timed(runs.deadline, late), detail={"steps": steps, "agents": agents})

    def guarantee(self, made: int, agents: int, steps: int, found: bool, late: bool) -> str:
        """What ``made`` runs over ``agents`` agents and ``steps`` steps show."""
        if found:
            return f"an anomaly found by PCT run {made} (depth {self.depth})"
        per_run = bound(agents, steps, self.depth)
        miss = (1.0 - per_run) ** made  # all the runs missed a given depth-d bug (an upper bound)
        if late:
            return (f"cut short by --time-budget after {made} of {self.runs} PCT runs (depth {self.depth}): no "
                    f"anomaly in them (all {made} miss a given race of depth <= {self.depth} with probability "
                    f"<= {miss:.3g}); nothing certified")
        return (f"PCT depth {self.depth}, n={agents} agents, k={steps} steps: each run finds a given race of depth "
                f"<= {self.depth} with probability >= {per_run:.3g}; all {made} runs miss it with probability "
                f"<= {miss:.3g}")


def _make(depth: int, *, budget: int | None, seed: int, keep_going: bool = False) -> Pct:
    return Pct(depth=depth, runs=budget, seed=seed)


OPTION = Option("pct", "D", "(--engine) PCT schedules for races of depth D (--budget runs), with PCT's probability "
                "bound", "PCT's probability bound", _make)
