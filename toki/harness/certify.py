"""The verdict on one scenario of an engine: ``certify(engine, scenario, strategy) -> Verdict``.

Every serial order first (each verdict is judged against them), then the strategy's search
(:mod:`toki.harness.strategies`), then the decision:

- ``admits``: a run with an outcome no serial order produces; the run is *confirmed* (re-executed
  from its grants: ``replayed`` says whether it gave the same outcome) and its witness built;
- ``out-of-time``: the deadline ended the search with no anomaly found: nothing is certified,
  whatever the serial orders showed (and a scenario the deadline reaches before it starts is not
  run at all);
- ``by-design``: no race, but a property of the engine's design that serial orders show too
  (``always`` detectors): its serial run is the witness, confirmed the same way;
- ``excludes``: none of that within the search (``searched.complete`` says whether it is a
  certificate within a bound, or a sample);
- ``unverifiable``: the run did something the harness did not control, or the engine's read-out
  is empty in every serial order (a check told nothing cannot pass): fail closed.

The by-design findings are reported beside a race too. The decision, the witness and the
search's account are data (:class:`Verdict`); ``toki certify``, the pytest plugin, ``toki
experiment verdicts`` only render it and write its files. :func:`replay` re-executes a witness.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field, replace

from toki.harness import connect_watch
from toki.harness.controller import STEP_LIMIT_S, Unverifiable
from toki.harness.findings import DesignFinding, Finding
from toki.harness.loop import Searched, Strategy, run, timed
from toki.harness.strategies.replay import Replay
from toki.harness.trial import TrialResult, TrialRunner
from toki.harness.witness import Witness, digest


class Decision(str, enum.Enum):
    ADMITS = "admits"
    EXCLUDES = "excludes"
    BY_DESIGN = "by-design"
    UNVERIFIABLE = "unverifiable"
    OUT_OF_TIME = "out-of-time"

    def __str__(self) -> str:
        return self.value


FAILING = (Decision.ADMITS, Decision.UNVERIFIABLE)
LATE = "the --time-budget ran out before the search finished"
SILENT = ("the engine's read-out is empty in every serial order: a check told nothing cannot pass (make state() "
          "return what the engine stores)")


@dataclass
class Verdict:
    """One scenario's verdict: the decision, what the search covered (``searched``), the findings
    (``anomalies``: the race's, or the reason it is unverifiable; ``by_design``: properties of the
    design the serial orders show), and the ``witness`` (the race's run, or the serial run that
    shows the design), with ``replayed`` whether its re-execution gave the same outcome.
    ``serial_findings`` holds every by-design finding of every serial order; ``error`` the
    :class:`~toki.harness.controller.Unverifiable` a run raised; ``silent`` whether the read-out
    was empty. ``admits``, ``found``, ``tried``, ``shrinks`` and ``search`` are the members the
    former ``Certificate`` had."""

    engine: str
    version: str
    executed: str
    scenario: str
    strategy: Strategy
    decision: Decision
    searched: Searched
    serial_orders: int = 0
    anomalies: list[Finding] = field(default_factory=list)
    by_design: list[DesignFinding] = field(default_factory=list)
    reason: str | None = None
    witness: Witness | None = None
    replayed: bool | None = None
    elapsed_s: float = 0.0
    serial_findings: list[Finding] = field(default_factory=list)
    error: Exception | None = None
    silent: bool = False

    @property
    def admits(self) -> bool:
        return self.decision is Decision.ADMITS

    @property
    def fails(self) -> bool:
        """A failing verdict (exit 1 without a baseline): a race, or a run that cannot be judged."""
        return self.decision in FAILING

    @property
    def found(self) -> TrialResult | None:
        return self.searched.found

    @property
    def tried(self) -> int:
        return self.searched.explored

    @property
    def shrinks(self) -> int:
        return self.searched.shrinks

    @property
    def search(self) -> dict:
        return self.searched.to_json()

    def row(self) -> dict:
        """The verdict row ``toki certify --json`` writes (``witness`` is set where the file is
        written, and ``png``/``svg`` are added where the pictures are drawn)."""
        w = self.witness
        return {"system": self.engine, "version": self.version, "executed": self.executed, "scenario": self.scenario,
                "budget": self.strategy.budget, "seed": self.strategy.seed, "trials": self.searched.explored,
                "shrinks": self.searched.shrinks, "serial_orders": self.serial_orders, "elapsed_s": self.elapsed_s,
                "anomalies": list(self.anomalies), "by_design": list(self.by_design),
                "verdict": self.decision.value, "reason": self.reason, "witness": None, "replayed": self.replayed,
                "context_switches": None if w is None else w.context_switches,
                "grants": None if w is None else len(w.grants), "runs": None if w is None else w.runs(),
                "switches": [] if w is None else w.switches(), "search": self.searched.to_json()}


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def certify(engine, scenario: str, strategy: Strategy, *, step_limit_s: float = STEP_LIMIT_S,
            deadline: float | None = None, on_run=None, anomaly: str | None = None, design_first: bool = False,
            runner: TrialRunner | None = None) -> Verdict:
    """Certify ``scenario`` of ``engine`` by searching it with ``strategy``: the :class:`Verdict`.

    ``deadline`` (a :func:`time.monotonic` time) ends the search; ``on_run(runs so far,
    anomalous)`` follows it. ``anomaly`` narrows the question to one anomaly (only findings with
    that name count, as races and by design); ``design_first`` settles it on the serial orders
    when they show the design property or an empty read-out, before any search (a question of
    "does it admit this at all", as ``toki experiment verdicts`` asks). ``runner`` reuses an open
    runner of the same engine and scenario (its serial orders run once for several searches)."""
    t0 = time.perf_counter()
    budget, seed = strategy.budget, strategy.seed
    v = Verdict(engine.name, str(engine.version), getattr(engine, "executed", "real"), scenario, strategy,
                Decision.EXCLUDES, Searched(strategy, None, out_of_time=timed(deadline, False)))

    def done() -> Verdict:
        if v.decision is Decision.UNVERIFIABLE:
            v.anomalies = [Finding("unverifiable", v.reason)]
            # whatever the search covered, it covered calls that cannot be judged: no certificate
            v.searched = replace(v.searched, complete=False, guarantee=f"none: {v.reason}")
        why = connect_watch.unavailable()
        if why is not None and v.decision is Decision.EXCLUDES:
            # Said with the certificate, never dropped: an engine mixing a C driver's short-lived
            # connection into its calls would not have been refused here.
            v.searched = replace(v.searched, unwatched=why, guarantee=(
                f"{v.searched.guarantee or 'no anomaly found'}; limit: connects made below Python (a C driver's "
                f"connection opened and closed between two calls) were not watched ({why})"))
        v.elapsed_s = round(time.perf_counter() - t0, 3)
        return v

    known = getattr(strategy, "known", None)
    if deadline is not None and time.monotonic() >= deadline:
        hit, already = known() if callable(known) else (False, None)
        if not hit and not (already is not None and already.complete):
            # Nothing left to run but the serial orders: a verdict could not rest on them alone.
            v.searched = replace(already or v.searched, complete=False, out_of_time=True,
                                 guarantee=already.guarantee if already is not None and already.out_of_time else
                                 "not started: the --time-budget ran out before this scenario; nothing certified")
            v.decision, v.reason = Decision.OUT_OF_TIME, LATE
            return done()
    own = runner is None
    if own:
        runner = TrialRunner(engine, scenario, step_limit_s=step_limit_s)
    try:
        _decide(v, runner, strategy, deadline=deadline, on_run=on_run, anomaly=anomaly, design_first=design_first,
                budget=budget, seed=seed)
    except Unverifiable as e:
        v.witness, v.replayed = None, None
        v.decision, v.reason, v.error = Decision.UNVERIFIABLE, _one_line(e), e
    finally:
        if own:
            runner.close()
    return done()


def _decide(v: Verdict, runner: TrialRunner, strategy: Strategy, *, deadline, on_run, anomaly, design_first, budget,
            seed) -> None:
    from toki.runinfo import provenance

    engine, name = runner.engine, v.scenario

    def ours(findings):
        return [f for f in findings if anomaly is None or f.anomaly == anomaly]

    def serial_design():
        v.serial_orders = sum(len(o) for o in runner.serial_outcomes().values())
        found = [(t, o, ours(runner.by_design(o))) for _, t, o in runner.serial_runs]
        v.serial_findings = [f for _, _, fs in found for f in fs]
        design = [d for d in found if d[2]]
        v.by_design = [DesignFinding(f, len(design), len(runner.serial_runs)) for f in (design[0][2] if design else [])]
        v.silent = runner.silent
        return design

    def by_design(design) -> None:
        trace, outcome, found = design[0]
        v.witness = w = Witness.from_serial(engine, name, trace, outcome, found, seed=seed, budget=budget or 0)
        again = run(runner, Replay(w.grants)).runs[-1]
        v.decision = Decision.BY_DESIGN
        v.replayed = digest(again.outcome.key) == w.outcome and bool(ours(runner.by_design(again.outcome)))

    if design_first:
        runner.serial_outcomes()
        design = serial_design()
        if v.silent:
            v.decision, v.reason = Decision.UNVERIFIABLE, SILENT
            return
        if design:
            by_design(design)
            return
    want = None if anomaly is None else (lambda r: any(f.anomaly == anomaly for f in r.anomalies))
    v.searched = searched = run(runner, strategy, want=want, on_run=on_run, deadline=deadline)
    design = serial_design()
    if v.silent:
        v.decision, v.reason = Decision.UNVERIFIABLE, SILENT
    elif searched.found is not None:
        opts = {"engine": engine.name, "scenario": name, "budget": budget, "seed": seed}
        v.witness = w = Witness.from_trial(engine, name, searched.found, seed=seed, budget=budget or 0,
                                           provenance=provenance(seed=seed, options=opts))
        again = run(runner, Replay(w.grants)).runs[-1]
        v.decision, v.anomalies = Decision.ADMITS, list(w.anomalies)
        v.replayed = digest(again.outcome.key) == w.outcome
    elif searched.out_of_time:
        # cut short with nothing found: not "excludes", whatever the serial orders showed
        v.decision, v.reason = Decision.OUT_OF_TIME, LATE
    elif design:  # shown by a serial order: the engine's design, not a race
        by_design(design)


@dataclass
class Replayed:
    """A witness re-executed ``times`` times: each run with the by-design findings it shows, and,
    when a run could not be judged, why (the runs before it stand)."""

    witness: Witness
    times: int
    runs: list[tuple[TrialResult, list[Finding]]]
    unverifiable: str | None = None

    @property
    def shows(self) -> list[tuple[TrialResult, list[Finding]]]:
        """The runs that show an anomaly or a by-design finding."""
        return [(r, d) for r, d in self.runs if not r.serializable or d]

    @property
    def same(self) -> int:
        """How many runs gave the recorded outcome."""
        return sum(digest(r.outcome.key) == self.witness.outcome for r, _ in self.runs)

    @property
    def differs(self) -> TrialResult | None:
        """The first run whose outcome is not the recorded one (None: every run gave it)."""
        return next((r for r, _ in self.runs if digest(r.outcome.key) != self.witness.outcome), None)

    @property
    def deterministic(self) -> bool:
        return len({digest(r.outcome.key) for r, _ in self.runs}) <= 1


def replay(engine, witness: Witness, *, times: int = 1, step_limit_s: float = STEP_LIMIT_S) -> Replayed:
    """Re-execute ``witness`` on ``engine`` ``times`` times (a :class:`Replay` each), failing closed:
    a run the harness did not control ends the replay as unverifiable."""
    out = Replayed(witness, times, [])
    with TrialRunner(engine, witness.scenario, step_limit_s=step_limit_s) as runner:
        try:
            for _ in range(times):
                r = run(runner, Replay(witness.grants)).runs[-1]
                out.runs.append((r, runner.by_design(r.outcome)))
        except Unverifiable as e:
            out.unverifiable = _one_line(e)
    return out

