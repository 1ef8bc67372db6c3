"""Random search: Hypothesis grant tapes, shrunk to the fewest context switches.

Hypothesis draws a *tape* (:class:`~toki.harness.controller.TapeChooser`): one small integer per
scheduling decision (low values continue the agent that ran last, high ones switch), read at a
switching rate. The tape is as long as the serial runs have decisions (with headroom);
shrinking lowers entries to 0, so a found anomaly shrinks toward the fewest context switches.
The witness is the concrete grant sequence of the shrunk run, which a
:class:`~toki.harness.strategies.Replay` re-executes exactly.

Hypothesis drives its own loop (it calls the test with each tape): every run is still made
through the search loop's :meth:`~toki.harness.loop.Runs.trial`, which ends the search at its
deadline. A sample, not a bound: "no anomaly" here certifies nothing beyond the runs made.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from toki.errors import ConfigError
from toki.harness.controller import TapeChooser, context_switches
from toki.harness.loop import Base, OutOfTime, Runs, Searched, out_of_time_note, timed
from toki.harness.trial import TrialResult

RATES = (1, 4, 2, 3)  # switching rates 1/2, 1/16, 1/4, 1/8 per decision, in the order the budget is spent


@dataclass(frozen=True)
class Random(Base):
    """``budget`` random interleavings from ``seed``, the first anomaly shrunk (``shrink``)."""

    budget: int = 100
    seed: int = 0
    shrink: bool = True
    mode: ClassVar[str] = "random"

    def __post_init__(self):
        if self.budget < 1:
            raise ConfigError(f"budget {self.budget} must be at least 1", fix="pass --budget 100 or more")

    def describe(self) -> str:
        return f"random search, budget {self.budget}"

    def examples(self, row: dict) -> str:
        return f"{row['trials']} (+{row['shrinks']} shrinking)" + out_of_time_note(row)

    def search(self, runs: Runs) -> Searched:
        from hypothesis import HealthCheck, Phase, find, settings  # imported when a search runs: toki starts faster
        from hypothesis import strategies as st
        from hypothesis.errors import NoSuchExample, Unsatisfiable

        runner = runs.runner
        runs.serial_outcomes()
        decisions = max(len(runner.last_serial_grants or []), 8)
        tried = shrinks = 0
        out_of_time = False
        generating = True
        rate = 1
        # The run that was judged is the one reported: running its tape again would be a new run,
        # which an engine with a timing-dependent path (a pool, a flusher) need not repeat.
        hits: dict[tuple[int, ...], TrialResult] = {}

        def anomalous(tape: list[int]) -> bool:
            nonlocal generating, tried, shrinks
            if tuple(tape) in hits:
                # Hypothesis runs the example it reports once more, to confirm it; a run need not
                # repeat (LangMem under CI load did not: FlakyFailure, and the search crashed). The
                # judged run stands, and is not run again.
                return True
            r, hit = runs.trial(TapeChooser(tape, rate))
            if generating:
                tried += 1
            else:
                shrinks += 1
            runs.report(tried, hit)
            if hit:
                generating = False  # after the first hit, every call is a shrink
                hits[tuple(tape)] = r
            return hit

        tape_st = st.lists(st.integers(0, TapeChooser.SPAN - 1), min_size=2 * decisions, max_size=2 * decisions)
        phases = [Phase.generate, Phase.shrink] if self.shrink else [Phase.generate]
        tape = None
        # The budget is split over the four switching rates: Hypothesis draws the decisions, the
        # rate decides how often they interrupt the running agent.
        for i, rate in enumerate(RATES):
            share = self.budget // 4 + (1 if i < self.budget % 4 else 0)
            if share < 1:
                continue
            try:
                tape = find(tape_st, anomalous,
                            settings=settings(max_examples=share, deadline=None, database=None, derandomize=False,
                                              phases=phases, suppress_health_check=list(HealthCheck),
                                              report_multiple_bugs=False),
                            random=random.Random(self.seed * 4 + i))
            except (NoSuchExample, Unsatisfiable):
                tape = None
            except OutOfTime:
                out_of_time = True
                # shrinking was cut short: report the anomalous run with the fewest switches so far
                tape = min(hits, key=lambda t: (context_switches(hits[t].trace), t)) if hits else None
            if tape is not None or out_of_time:
                break
        found = None
        detail = {}
        if tape is not None:
            found = hits[tuple(tape)]
            if self.shrink and not out_of_time:
                tape, found, spent, out_of_time = _fewer_switches(runs, list(tape), found, rate)
                shrinks += spent
            detail = {"tape": list(tape), "rate": rate}
        if found is not None:
            guarantee = f"an anomaly found in random interleaving {tried}" + (
                " (shrinking cut short by --time-budget)" if out_of_time else "")
        elif out_of_time:
            guarantee = (f"cut short by --time-budget after {tried} of {self.budget} random interleavings: no "
                         "anomaly in them; nothing certified")
        else:
            guarantee = (f"no anomaly in {tried} random interleavings (Hypothesis grant tapes at four switching "
                         "rates): a sample, not a bound")
        return Searched(self, found, explored=tried, guarantee=guarantee, shrinks=shrinks,
                        out_of_time=timed(runs.deadline, out_of_time), detail=detail)


def _fewer_switches(runs: Runs, tape: list[int], found: TrialResult, rate: int | None = None,
                    limit: int = 80) -> tuple[list[int], TrialResult, int, bool]:
    """Hypothesis stops at a local minimum of its own order; finish with moves it does not try:
    drop a switch, or move it one decision earlier or later, while the run stays anomalous
    (until the deadline: the best run so far stands). Returns the tape, its run, the runs made
    and whether the deadline ended it."""
    best = context_switches(found.trace)
    tries = made = 0
    improved = True
    while improved and tries < limit:
        improved = False
        for j in [i for i, v in enumerate(tape) if v]:
            cands = [tape[:j] + [0] + tape[j + 1:]]
            for k in (j - 1, j + 1):
                if 0 <= k < len(tape) and not tape[k]:
                    t = list(tape)
                    t[j], t[k] = t[k], t[j]
                    cands.append(t)
            for t in cands:
                if runs.past():
                    return tape, found, made, True
                tries += 1
                try:
                    r, hit = runs.trial(TapeChooser(t, rate))
                except OutOfTime:
                    return tape, found, made, True
                made += 1
                sw = context_switches(r.trace)
                if hit and (sw < best or (sw == best and t < tape)):
                    tape, found, best, improved = t, r, sw, True
                    break
            if improved or tries >= limit:
                break
    return tape, found, made, False
