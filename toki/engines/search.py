"""Search, shrink and replay interleavings of an engine scenario.

Hypothesis draws a *tape*: one small integer per scheduling decision (0 continues the agent
that ran last, k switches to the k-th other eligible agent). The tape is as long as the serial
runs have decisions (with headroom), so generation switches often and finds races quickly;
shrinking lowers entries to 0, so a found anomaly shrinks toward the fewest context switches.
The witness is the concrete grant sequence of the shrunk run, which
:class:`~toki.engines.controller.ReplayChooser` re-executes exactly.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from toki.engines.controller import ReplayChooser, TapeChooser
from toki.engines.trial import TrialResult, TrialRunner
from toki.errors import ConfigError


def context_switches(grants: list[str]) -> int:
    return sum(1 for a, b in zip(grants, grants[1:]) if a != b)


@dataclass
class SearchResult:
    engine: str
    scenario: str
    budget: int
    seed: int
    tried: int = 0
    shrinks: int = 0
    found: TrialResult | None = None
    tape: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0
    serial_orders: int = 0

    @property
    def admits(self) -> bool:
        return self.found is not None


def search(runner: TrialRunner, *, budget: int, seed: int = 0, shrink: bool = True,
           on_trial: Callable[[int, bool], None] | None = None) -> SearchResult:
    if budget < 1:
        raise ConfigError(f"budget {budget} must be at least 1", fix="pass --budget 100 or more")
    t0 = time.perf_counter()
    serial = runner.serial_outcomes()
    decisions = max(len(runner.last_serial_grants or []), 8)
    n_agents = len(runner.scenario.agents)
    res = SearchResult(runner.engine.name, runner.scenario.name, budget, seed,
                       serial_orders=sum(len(v) for v in serial.values()))
    generating = True

    def anomalous(tape: list[int]) -> bool:
        r = runner.trial(TapeChooser(tape))
        if generating:
            res.tried += 1
        else:
            res.shrinks += 1
        if on_trial:
            on_trial(res.tried, not r.serializable)
        return not r.serializable

    tape_st = st.lists(st.integers(0, n_agents - 1), min_size=2 * decisions, max_size=2 * decisions)
    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]

    def stop_counting(tape):  # called once per example; after the first hit, every call is a shrink
        nonlocal generating
        hit = anomalous(tape)
        if hit:
            generating = False
        return hit

    try:
        tape = find(tape_st, stop_counting,
                    settings=settings(max_examples=budget, deadline=None, database=None, derandomize=False,
                                      phases=phases, suppress_health_check=list(HealthCheck),
                                      report_multiple_bugs=False),
                    random=random.Random(seed))
    except (NoSuchExample, Unsatisfiable):
        tape = None
    if tape is not None:
        res.tape = list(tape)
        res.found = runner.trial(TapeChooser(tape))
    res.elapsed_s = time.perf_counter() - t0
    return res


def replay(runner: TrialRunner, grants: list[str]) -> TrialResult:
    return runner.trial(ReplayChooser(grants))
