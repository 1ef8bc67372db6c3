"""Search, shrink and replay interleavings of an engine scenario.

Hypothesis draws a *tape* (:class:`~toki.harness.controller.TapeChooser`): a switching rate,
then one small integer per scheduling decision (low values continue the agent that ran last,
high ones switch). The tape is as long as the serial runs have decisions (with headroom);
shrinking lowers entries to 0, so a found anomaly shrinks toward the fewest context switches.
The witness is the concrete grant sequence of the shrunk run, which
:class:`~toki.harness.controller.ReplayChooser` re-executes exactly.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from toki.harness.controller import ReplayChooser, TapeChooser, context_switches  # noqa: F401 - re-exported
from toki.harness.trial import TrialResult, TrialRunner
from toki.errors import ConfigError


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
    rate: int | None = None
    elapsed_s: float = 0.0
    serial_orders: int = 0
    out_of_time: bool = False  # the deadline ended the search (generating, or shrinking a found anomaly)

    @property
    def admits(self) -> bool:
        return self.found is not None


class _OutOfTime(BaseException):
    """Ends a Hypothesis search at its deadline. A BaseException, as KeyboardInterrupt is, so that
    Hypothesis passes it straight up instead of taking it for a failing example to shrink."""


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def search(runner: TrialRunner, *, budget: int, seed: int = 0, shrink: bool = True,
           on_trial: Callable[[int, bool], None] | None = None,
           want: Callable[[TrialResult], bool] | None = None, deadline: float | None = None) -> SearchResult:
    """Search ``budget`` interleavings for an anomaly (``want`` narrows which ones count), until
    ``deadline`` (a :func:`time.monotonic` time) at the latest: a search it ends says
    ``out_of_time``, and an anomaly found before it is reported as shrunk so far."""
    if budget < 1:
        raise ConfigError(f"budget {budget} must be at least 1", fix="pass --budget 100 or more")
    t0 = time.perf_counter()
    serial = runner.serial_outcomes()
    decisions = max(len(runner.last_serial_grants or []), 8)
    res = SearchResult(runner.engine.name, runner.scenario.name, budget, seed,
                       serial_orders=sum(len(v) for v in serial.values()))
    generating = True
    rate = 1
    # The run that was judged is the one reported: running its tape again would be a new run,
    # which an engine with a timing-dependent path (a pool, a flusher) need not repeat.
    hits: dict[tuple[int, ...], TrialResult] = {}

    def hit(r: TrialResult) -> bool:
        return not r.serializable and (want is None or want(r))

    def anomalous(tape: list[int]) -> bool:
        nonlocal generating
        if tuple(tape) in hits:
            # Hypothesis runs the example it reports once more, to confirm it; a run need not
            # repeat (LangMem under CI load did not: FlakyFailure, and the search crashed). The
            # judged run stands, and is not run again.
            return True
        if _past(deadline):
            raise _OutOfTime
        r = runner.trial(TapeChooser(tape, rate))
        if generating:
            res.tried += 1
        else:
            res.shrinks += 1
        if on_trial:
            on_trial(res.tried, hit(r))
        if hit(r):
            generating = False  # after the first hit, every call is a shrink
            hits[tuple(tape)] = r
        return hit(r)

    tape_st = st.lists(st.integers(0, TapeChooser.SPAN - 1), min_size=2 * decisions, max_size=2 * decisions)
    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]
    tape = None
    # The budget is split over four switching rates (1/2, 1/16, 1/4, 1/8 per decision): Hypothesis
    # draws the decisions, the rate decides how often they interrupt the running agent.
    for i, rate in enumerate((1, 4, 2, 3)):
        share = budget // 4 + (1 if i < budget % 4 else 0)
        if share < 1:
            continue
        try:
            tape = find(tape_st, anomalous,
                        settings=settings(max_examples=share, deadline=None, database=None, derandomize=False,
                                          phases=phases, suppress_health_check=list(HealthCheck),
                                          report_multiple_bugs=False),
                        random=random.Random(seed * 4 + i))
        except (NoSuchExample, Unsatisfiable):
            tape = None
        except _OutOfTime:
            res.out_of_time = True
            # shrinking was cut short: report the anomalous run with the fewest switches so far
            tape = min(hits, key=lambda t: (context_switches(hits[t].trace), t)) if hits else None
        if tape is not None or res.out_of_time:
            break
    if tape is not None:
        found = hits[tuple(tape)]
        if shrink and not res.out_of_time:
            tape, found = _fewer_switches(runner, list(tape), found, res, rate, hit=hit, deadline=deadline)
        res.tape = list(tape)
        res.rate = rate
        res.found = found
    res.elapsed_s = time.perf_counter() - t0
    return res


def _fewer_switches(runner: TrialRunner, tape: list[int], found: TrialResult, res: SearchResult,
                    rate: int | None = None, limit: int = 80,
                    hit: Callable[[TrialResult], bool] | None = None,
                    deadline: float | None = None) -> tuple[list[int], TrialResult]:
    """Hypothesis stops at a local minimum of its own order; finish with moves it does not try:
    drop a switch, or move it one decision earlier or later, while the run stays anomalous
    (until ``deadline``: the best run so far stands)."""
    best = context_switches(found.trace)
    tries = 0
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
                if _past(deadline):
                    res.out_of_time = True
                    return tape, found
                tries += 1
                r = runner.trial(TapeChooser(t, rate))
                res.shrinks += 1
                sw = context_switches(r.trace)
                if (hit(r) if hit else not r.serializable) and (sw < best or (sw == best and t < tape)):
                    tape, found, best, improved = t, r, sw, True
                    break
            if improved or tries >= limit:
                break
    return tape, found


def replay(runner: TrialRunner, grants: list[str]) -> TrialResult:
    return runner.trial(ReplayChooser(grants))


@dataclass
class Certificate:
    """What a search found and what its verdict rests on (the verdict row's ``search`` object)."""

    found: TrialResult | None
    tried: int
    shrinks: int
    search: dict

    @property
    def admits(self) -> bool:
        return self.found is not None


def certify_search(runner: TrialRunner, *, mode: str = "random", bound: int | None = None, budget: int | None = 100,
                   seed: int = 0, on_trial: Callable[[int, bool], None] | None = None,
                   keep_going: bool = False, deadline: float | None = None) -> Certificate:
    """Search a scenario the way ``mode`` says: "random" (Hypothesis tapes, ``budget`` of them),
    "pct" (``budget`` PCT runs of depth ``bound``) or "exhaustive" (every interleaving with at most
    ``bound`` preemptions, ``budget`` capping the runs when given; ``keep_going`` covers the whole
    bound past the first anomaly and counts the anomalous interleavings). Every search ends at
    ``deadline`` (a :func:`time.monotonic` time) at the latest; given one, the ``search`` object
    says ``out_of_time`` (true: the deadline cut the search short, and it certifies nothing)."""
    if mode == "exhaustive":
        part = exhaustive_part(runner, bound=bound, budget=budget, on_trial=on_trial, keep_going=keep_going,
                               deadline=deadline)
        return Certificate(part.pop("found"), part["explored"], 0, exhaustive_verdict(bound, [part]))
    if mode == "pct":
        from toki.harness.pct import pct_search

        res = pct_search(runner, depth=bound, runs=budget, seed=seed, on_run=on_trial, deadline=deadline)
        doc = {"mode": "pct", "bound": bound, "explored": res.runs, "pruned": 0, "complete": False,
               "guarantee": res.guarantee()}
        return Certificate(res.found, res.runs, 0, _timed(doc, deadline, res.out_of_time))
    res = search(runner, budget=budget, seed=seed, on_trial=on_trial, deadline=deadline)
    if res.found is not None:
        guarantee = f"an anomaly found in random interleaving {res.tried}" + (
            " (shrinking cut short by --time-budget)" if res.out_of_time else "")
    elif res.out_of_time:
        guarantee = (f"cut short by --time-budget after {res.tried} of {budget} random interleavings: no anomaly in "
                     "them; nothing certified")
    else:
        guarantee = (f"no anomaly in {res.tried} random interleavings (Hypothesis grant tapes at four switching "
                     "rates): a sample, not a bound")
    doc = {"mode": "random", "bound": None, "explored": res.tried, "pruned": 0, "complete": False,
           "guarantee": guarantee}
    return Certificate(res.found, res.tried, res.shrinks, _timed(doc, deadline, res.out_of_time))


def _timed(doc: dict, deadline: float | None, out_of_time: bool) -> dict:
    """A search under a deadline says whether the deadline ended it; one without says nothing."""
    return doc if deadline is None else {**doc, "out_of_time": out_of_time}


def exhaustive_part(runner: TrialRunner, *, bound: int, budget: int | None = None,
                    on_trial: Callable[[int, bool], None] | None = None, shard: tuple[int, int] = (0, 1),
                    keep_going: bool = False, memo=None, start: int = 0, deadline: float | None = None) -> dict:
    """Shard ``shard`` of an exhaustive search to ``bound`` preemptions, by iterative context
    bounding (CHESS): K = 0, 1, ... so that a race is found with the fewest preemptions, and a
    bound with no anomaly is covered completely before the next. A bound walks the lower
    bounds' runs from a record instead of executing them again, and counts only its own
    (exactly K preemptions), so ``explored`` counts distinct interleavings. A sharded search
    runs the bounds below K once, whole (``memo`` given: every bound's runs are recorded in it),
    and hands the record to the shards of bound K (``start=K``), which walk it. ``keep_going``
    instead covers the bound in one pass past every anomaly, counting them (the witness is the
    anomalous run with the fewest switches). ``budget`` caps this shard's runs, ``deadline`` (a
    :func:`time.monotonic` time) its time: given one, the part says ``out_of_time``. The part as
    :func:`exhaustive_verdict` merges it, with the anomalous run as ``found``."""
    from toki.harness.explore import Memo, explore

    explored = pruned = 0
    res, k = None, 0
    record_all = memo is not None
    memo = Memo() if memo is None else memo
    for k in ([bound] if keep_going else range(start, bound + 1)):
        memo.recording = record_all or k < bound
        res = explore(runner, bound=k, max_runs=None if budget is None else max(1, budget - explored),
                      on_run=None if on_trial is None else (lambda n, hit, base=explored: on_trial(base + n, hit)),
                      shard=shard, stop_at_first=not keep_going, memo=memo, count_below=keep_going, deadline=deadline)
        # each bound's tree holds the lower bounds' runs: its prunings are the search's
        explored, pruned = explored + res.explored, res.pruned
        if res.found is not None or not res.complete:
            break
    part = {"shard": list(shard), "explored": explored, "pruned": pruned, "level": k,
            "complete": res.complete and (keep_going or res.found is None), "found": res.found,
            "grants": None if res.found is None else list(res.found.trace.grants)}
    if keep_going:
        part.update(anomalous=res.hits, anomalous_outcomes=sorted(res.anomalous))
    if deadline is not None:
        part["out_of_time"] = res.out_of_time
    if res.found is not None:
        part["switches"] = context_switches(res.found.trace)
    return part


def exhaustive_verdict(bound: int, parts: list[dict]) -> dict:
    """The verdict row's ``search`` object from the parts of an exhaustive search (one part, or
    the shards of one in shard order: the anomaly reported is the first shard's at the lowest
    level, so any number of workers reports the same one)."""
    explored, pruned = sum(p["explored"] for p in parts), sum(p["pruned"] for p in parts)
    hit = first_hit(parts)
    going_on = all("anomalous" in p for p in parts)
    complete = (hit is None or going_on) and all(p["complete"] for p in parts)
    timed = any("out_of_time" in p for p in parts)
    late = any(p.get("out_of_time") for p in parts)
    cut = "--time-budget" if late else "--budget"
    if going_on:
        bad = sum(p["anomalous"] for p in parts)
        kinds = len(set().union(*(p["anomalous_outcomes"] for p in parts)))
        covered = "all" if complete else f"incomplete: cut short by {cut} after"
        guarantee = (f"{covered} {explored} interleavings with at most {bound} preemption(s) explored ({pruned} pruned "
                     f"as equivalent): {bad} show an anomaly, with {kinds} distinct outcome(s)")
    elif hit is not None:
        guarantee = f"an anomaly with at most {hit['level']} preemption(s), after {explored} interleavings"
    elif complete:
        guarantee = (f"no anomaly in any interleaving with at most {bound} preemption(s): {explored} explored, "
                     f"{pruned} pruned as equivalent")
    else:
        level = min(p["level"] for p in parts if not p["complete"])
        guarantee = (f"incomplete: cut short by {cut} after {explored} interleavings at {level} preemption(s); "
                     "no guarantee beyond them")
    doc = {"mode": "exhaustive", "bound": bound, "explored": explored, "pruned": pruned, "complete": complete,
           "guarantee": guarantee}
    if going_on:
        doc["anomalous"] = sum(p["anomalous"] for p in parts)
    if timed:
        doc["out_of_time"] = late
    shards = max(p["shard"][1] for p in parts)
    if shards > 1:
        doc["shards"] = shards
    return doc


def first_hit(parts: list[dict]) -> dict | None:
    """The part whose anomaly a sharded search reports: the lowest level, then the first shard."""
    hits = [p for p in parts if p["grants"] is not None]
    return min(hits, key=lambda p: (p["level"], p.get("switches", 0))) if hits else None
