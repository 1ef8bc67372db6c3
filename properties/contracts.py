"""Contract suites: each operator's exposed anomaly, searched over interleavings of its write path.

docs/design.md#the-four-operators gives each operator an isolation precondition and the anomaly it admits when the
precondition is weakened:

========  ============  ==========================================================
operator  precondition  anomaly searched for (a detector over what happened)
========  ============  ==========================================================
lww       RC            P4 lost update: a committed write left no trace, its close
                        of the incumbent was lost, or its winner was computed from a
                        stale read of the row it closed (the closed row's committed
                        provenance is not in the winner's)
evi       SI            A5B write skew: the slot ends with several current values at
                        one instant (each writer decided on a snapshot without the
                        other's row, and wrote a different row)
await     RC+cb         callback boundary: a committed ⊕? resolution that went against
                        the confirmation delivered for its pair before it wrote, or
                        that applied a confirmation of another pair
rule      SR            P3 phantom: a set has several active ⊕c policies, or a
                        resolution went against the active policy for its set
========  ============  ==========================================================

The workloads are agents writing claims to one slot through the adapter's write path (begin,
read candidates, [read callback], [judge], write, commit), plus the environment each operator
lives in: a confirmer session delivering ⊕? callbacks, a policy writer that inserts a ⊕c
policy if none is active. Hypothesis draws the data and the interleaving
(:func:`toki.properties.strategies.interleavings`); :func:`check` searches with a stated budget.
At or above the precondition no example may admit the anomaly; below it one is found, shrunk
by Hypothesis toward fewer agents, simpler facts and fewer context switches, and printed as a
schedule file (SQL and op steps only) whose ``[expect.LEVEL]`` table holds the outcome, so
``toki run FILE --level L`` replays it and exits 0 when it reproduces.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from toki.db import schema as dbschema
from toki.db.store import COLUMNS, Row
from toki.errors import ConfigError
from toki.levels import MATRIX_LEVELS, PRECONDITION, Isolation, Level, parse_level
from toki.matrix import memory
from toki.model import SENTINEL, Fact
from toki.operators import OPERATORS
from toki.provenance import Carrier
from toki.sched.results import RunResult
from toki.sched.runner import Lane, Runner
from toki.sched.schedule import Expect, Schedule, Step, to_toml

from .adapter import RecordingConnection, TokiWritePath, load_adapter
from .strategies import context_switches, interleavings

ANOMALY = {"lww": "P4", "evi": "A5B", "await": "callback-boundary", "rule": "P3"}
ANOMALY_NAME = {"P4": "lost update", "A5B": "write skew", "callback-boundary": "callback boundary",
                "P3": "phantom"}
T0 = datetime(2026, 1, 1)
INCUMBENT_TIME = datetime(2000, 1, 1)  # system time of the setup row: before any write-path stamp
FINAL = [
    "select row_kind, case when row_kind = 'audit' then 'audit::' || split_part(fact_id, '::', 2) else fact_id end,"
    " object, provenance_id, system_time_end = '9999-12-31' as open from agent_memory order by 1, 2, 5, 3, 4",
    "select set_key, chosen_index, active, source from policy order by 1, 4, 2",
    "select request_hash, chosen_index, status from callback_log order by 1",
]
_RESET = "; ".join(f"delete from {t}" for t in dbschema.TABLES)
NO_OUTCOME = "unverifiable"  # the prefix of findings that say the adapter reported nothing


# -- workloads ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Agent:
    session: str
    fact: Fact
    judge_seed: int = 0


@dataclass(frozen=True)
class Workload:
    """One example: who writes what, the environment, and the interleaving."""

    operator: str
    level: Level
    incumbent: Fact | None
    agents: tuple[Agent, ...]
    confirm: tuple[int, ...] = ()  # await: the confirmer's index per agent's (incumbent, claim) pair
    admin: int | None = None  # rule: the policy writer's index for the first agent's pair
    order: tuple[tuple[str, int], ...] = ()

    def describe(self) -> str:
        who = ", ".join(f"{a.session} writes {a.fact.fact_id}={a.fact.object}"
                        f"[{a.fact.valid_from:%m-%d}, {'∞' if a.fact.valid_to == SENTINEL else f'{a.fact.valid_to:%m-%d}'})"
                        + (f" conf {a.fact.confidence}" if self.operator == "evi" else "") for a in self.agents)
        inc = f"incumbent {self.incumbent.fact_id}={self.incumbent.object}" if self.incumbent else "empty slot"
        return f"{self.operator} at {self.level.name}: {inc}; {who}; {context_switches(self.order)} context switches"


def _phases(operator: str, level: Level) -> list[str]:
    ph = ["begin", "read_candidates"]
    if operator == "await" and level.callback:
        ph.append("read_callback")
    if operator in ("await", "rule"):
        ph.append("judge")
    return ph + ["write", "commit"]


def _fact(fid: str, obj: str, start: int, end: int | None, conf: float) -> Fact:
    return Fact(fid, "alice", "medication", obj, T0 + timedelta(days=start),
                SENTINEL if end is None else T0 + timedelta(days=end), confidence=conf)


@st.composite
def _claim(draw, fid: str, operator: str, contradict: bool) -> Fact:
    obj = draw(st.sampled_from(["b", "c"] if contradict else ["b", "a", "c"]))
    start = draw(st.integers(0, 2))
    end = draw(st.one_of(st.none(), st.integers(start + 1, 4)))
    conf = draw(st.sampled_from([0.5, 0.9, 0.2])) if operator == "evi" else 0.5
    return _fact(fid, obj, start, end, conf)


def programs_of(w: Workload) -> dict[str, list[str]]:
    """Session -> phase names (agents) or step kinds (environment)."""
    progs = {a.session: _phases(w.operator, w.level) for a in w.agents}
    if w.operator == "await":
        progs["CB"] = ["begin"] + [f"deliver:{i}" for i in range(len(w.agents))] + ["commit"]
    if w.operator == "rule" and w.admin is not None:
        progs["ADM"] = ["begin", "policy-if-none", "commit"]
    return progs


def workloads(operator: str, level: Level | str, *, max_agents: int = 3) -> st.SearchStrategy[Workload]:
    """Examples for one operator at one level (data first, interleaving last)."""
    if operator not in OPERATORS:
        raise ConfigError(f"unknown operator {operator!r}", fix=f"use one of {', '.join(OPERATORS)}")
    lvl = parse_level(level) if isinstance(level, str) else level

    @st.composite
    def draw_workload(draw) -> Workload:
        needs_pair = operator in ("await", "rule")
        has_inc = needs_pair or draw(st.booleans())
        inc = _fact("x0", "a", 0, None, 0.5) if has_inc else None
        lo = 1 if needs_pair else 2
        n = draw(st.integers(lo, max(lo, max_agents if operator in ("lww", "evi") else 2)))
        agents = tuple(Agent("ABC"[i], draw(_claim(f"n{i + 1}", operator, needs_pair)),
                             draw(st.integers(0, 3)) if needs_pair else 0) for i in range(n))
        confirm = tuple(draw(st.integers(0, 1)) for _ in agents) if operator == "await" else ()
        admin = draw(st.integers(0, 1)) if operator == "rule" else None
        w = Workload(operator, lvl, inc, agents, confirm, admin)
        progs = programs_of(w)
        after = {}
        if operator == "await" and lvl.callback:  # the callback read comes after the confirmation
            cb_commit = ("CB", len(progs["CB"]) - 1)
            for a in agents:
                after[(a.session, progs[a.session].index("read_callback"))] = [cb_commit]
        order = draw(interleavings(progs, after))
        return Workload(operator, lvl, inc, agents, confirm, admin, tuple(order))

    return draw_workload()


# -- schedules ------------------------------------------------------------------------------

def _fact_args(f: Fact) -> dict:
    d = {"fact_id": f.fact_id, "subject": f.subject, "predicate": f.predicate, "object": f.object,
         "valid_from": f.valid_from, "confidence": f.confidence}
    if f.valid_to != SENTINEL:
        d["valid_to"] = f.valid_to
    return d


def _lit(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, datetime):
        return f"'{v.isoformat(sep=' ')}'"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


def setup_sql(w: Workload) -> list[str]:
    if w.incumbent is None:
        return []
    f = w.incumbent
    values = (f.fact_id, f.subject, f.predicate, f.object, f.valid_from, f.valid_to, INCUMBENT_TIME, SENTINEL,
              f"x_{f.fact_id}", f.confidence, w.operator, "current")
    return [f"insert into agent_memory ({', '.join(COLUMNS)}) values ({', '.join(map(_lit, values))})"]


def _pair_key(a: str, b: str) -> str:
    return "|".join(sorted((a, b)))


def _env_step(w: Workload, session: str, kind: str) -> Step:
    if kind in ("begin", "commit"):
        return Step(session, sql=kind, name=f"{session.lower()}-{kind}")
    if kind.startswith("deliver:"):
        i = int(kind.split(":")[1])
        ids = sorted([w.incumbent.fact_id, w.agents[i].fact.fact_id])
        return Step(session, op="deliver_callback", args={"ids": ids, "index": w.confirm[i]},
                    name=f"confirm {'|'.join(ids)} -> {w.confirm[i]}")
    if kind == "policy-if-none":
        key = _pair_key(w.incumbent.fact_id, w.agents[0].fact.fact_id)
        sql = ("insert into policy (policy_id, set_key, chosen_index, source) select "
               f"{_lit('policy::' + key + '::admin')}, {_lit(key)}, {int(w.admin)}, 'admin' where not exists "
               f"(select 1 from policy where set_key = {_lit(key)} and active)")
        return Step(session, sql=sql, name="policy writer: insert if none active")
    raise AssertionError(kind)


def _native_step(w: Workload, agent: Agent, phase: str, mode: str, guard: bool, slot_lock: bool = False) -> Step:
    if phase == "begin":
        args = {"fact": _fact_args(agent.fact), "operator": w.operator, "mode": mode}
        if not guard:
            args["guard"] = False
        if slot_lock:
            args["slot_lock"] = True
        if w.operator in ("await", "rule"):
            args["judge"] = {"p": 0.5, "seed": agent.judge_seed}
        return Step(agent.session, op="begin", args=args, name=f"{agent.session} begin {agent.fact.fact_id}")
    return Step(agent.session, op=phase, name=f"{agent.session} {phase}")


class _AdapterCall:
    """A call step that runs one phase of an adapter and records the SQL it sent."""

    def __init__(self, adapter, agent: Agent, phase: str, level: Level, position: int):
        self.adapter, self.agent, self.phase, self.level, self.position = adapter, agent, phase, level, position

    def __call__(self, conn, ctx):
        log = ctx.setdefault("sql", {}).setdefault(self.position, [])
        rconn = ctx.get("rconn")
        if rconn is None or rconn._conn is not conn:
            rconn = ctx["rconn"] = RecordingConnection(conn, log)
        rconn.log = log  # statements of this phase go to this step (the txn keeps the connection)
        if self.phase == "begin":
            ctx["txn"] = self.adapter.begin(rconn, self.agent.fact, self.level)
            return []
        txn = ctx.get("txn")
        if txn is None:
            return []
        if self.phase == "read_callback":
            fn = getattr(txn, "read_callback", None)
            if fn is not None:
                fn()
            return []
        value = getattr(txn, self.phase if self.phase != "read_candidates" else "read_candidates")()
        if self.phase == "write":
            ctx["outcome"] = value
        return []


def build_schedule(w: Workload, adapter, *, mode: str = "audit_row") -> Schedule:
    progs = programs_of(w)
    agents = {a.session: a for a in w.agents}
    native = getattr(adapter, "native_ops", False)
    guard = getattr(adapter, "guard", True)
    steps = []
    for pos, (s, i) in enumerate(w.order):
        kind = progs[s][i]
        if s not in agents:
            steps.append(_env_step(w, s, kind))
        elif native:
            steps.append(_native_step(w, agents[s], kind, mode, guard, getattr(adapter, "slot_lock", False)))
        else:
            steps.append(Step(s, op="call", name=f"{s} {kind}",
                              args={"fn": _AdapterCall(adapter, agents[s], kind, w.level, pos)}))
    return Schedule(name=f"contract-{w.operator}-{w.level.name.replace('+', '-')}", steps=steps,
                    setup=setup_sql(w), final=list(FINAL), on_blocked="defer", store=True,
                    sessions_declared=tuple(progs))


# -- detectors ------------------------------------------------------------------------------

def read_rows(conn, adapter=None) -> list[Row]:
    custom = getattr(adapter, "rows", None)
    if callable(custom):
        return list(custom(conn))
    return [Row(*r) for r in conn.execute("select " + ", ".join(COLUMNS) + " from agent_memory").fetchall()]


def _has_token(rows: Sequence[Row], fid: str, carrier: Carrier) -> bool:
    tok = carrier.token(fid)
    return any(tok <= carrier.parse(r.provenance_id) for r in rows)


def detect(operator: str, rows: Sequence[Row], outcomes: dict[str, object], *, policies=(), callbacks=(),
           confirmed_before_write: dict[str, bool] | None = None,
           carrier: Carrier = Carrier.MULTILINEAR) -> list[str]:
    """What the operator's exposed anomaly looks like in this run ([] when absent).

    ``outcomes`` maps each *committed* agent to what its write returned (WriteOutcome-like:
    action, fact_id, winner_id, loser_id, at); ``rows`` is the final agent_memory;
    ``policies`` rows (set_key, chosen_index, active, policy_id); ``callbacks`` rows
    (request_hash, chosen_index, status); ``confirmed_before_write`` says per agent whether the
    confirmer had committed before the agent's write began (a confirmation that arrives later
    cannot bind it; when no confirmation exists ⊕? may fall back to the judge, docs/design.md#the-write-path step 5).
    """
    found: list[str] = []
    if operator == "lww":
        for s, o in outcomes.items():
            fid = getattr(o, "fact_id", None)
            if fid and not _has_token(rows, fid, carrier):
                found.append(f"P4: the committed write of {fid} ({s}) left no trace: x_{fid} is in no row")
            if getattr(o, "action", None) == "superseded" and o.loser_id:
                closed = [r for r in rows if r.fact_id == o.loser_id and r.row_kind == "current"
                          and r.system_time_end == o.at]
                winner = [r for r in rows if r.fact_id == o.winner_id and r.row_kind == "current"
                          and r.system_time_start == o.at]
                if not closed:
                    found.append(f"P4: {s} superseded {o.loser_id}, but its close was lost "
                                 f"(no version of {o.loser_id} was closed by it)")
                elif winner and not carrier.parse(closed[0].provenance_id) <= carrier.parse(winner[0].provenance_id):
                    found.append(f"P4: {o.winner_id} ({s}) was computed from a stale read of {o.loser_id}: "
                                 f"the closed row's committed provenance {closed[0].provenance_id} is not in "
                                 f"the winner's {winner[0].provenance_id}")
    elif operator == "evi":
        for subj, pred, t in memory.slots_with_several_current(list(rows)):
            vals = sorted({r.object for r in rows if r.row_kind == "current" and r.system_time_end == SENTINEL
                           and r.subject == subj and r.predicate == pred and r.valid_from <= t < r.valid_to})
            if len(vals) > 1:  # two rows of one object are a missed duplicate merge, not a contradiction
                found.append(f"A5B: slot ({subj}, {pred}) holds {len(vals)} contradicting current values "
                             f"{vals} at {t:%Y-%m-%d}")
    elif operator == "await":
        cbs = {k: (idx, status) for k, idx, status in callbacks}
        for s, o in outcomes.items():
            if getattr(o, "action", None) not in ("superseded", "rejected") or not o.loser_id:
                continue
            pair = sorted((o.winner_id, o.loser_id))
            key, want = "|".join(pair), pair.index(o.winner_id)
            got = cbs.get(key)
            delivered = got is not None and got[1] == "delivered"
            if delivered and (confirmed_before_write or {}).get(s, True) and got[0] != want:
                found.append(f"callback boundary: the confirmer chose {pair[got[0]]} for {key} before {s} wrote, "
                             f"but {s} kept {o.winner_id}")
            elif not delivered and getattr(o, "vote_source", None) == "callback":
                found.append(f"callback boundary: {s} kept {o.winner_id} over {o.loser_id} on a confirmation, "
                             f"but none was delivered for that pair (a confirmation of another pair was applied)")
    elif operator == "rule":
        pol = [tuple(p) for p in policies]
        if memory.duplicate_active([(p[0], p[2]) for p in pol]):
            keys = sorted({p[0] for p in pol if p[2]})
            for k in keys:
                act = [p for p in pol if p[0] == k and p[2]]
                if len(act) > 1:
                    found.append(f"P3: set {k} has {len(act)} active policies "
                                 f"({', '.join(f'{p[3]} -> {p[1]}' for p in act)})")
        for s, o in outcomes.items():
            if getattr(o, "action", None) not in ("superseded", "rejected") or not o.loser_id:
                continue
            pair = sorted((o.winner_id, o.loser_id))
            act = [p for p in pol if p[0] == "|".join(pair) and p[2]]
            if act and all(p[1] != pair.index(o.winner_id) for p in act):
                found.append(f"P3: {s} kept {o.winner_id}, against every active policy for {'|'.join(pair)}")
    else:
        raise ConfigError(f"unknown operator {operator!r}", fix=f"use one of {', '.join(OPERATORS)}")
    return found


# -- running and searching -------------------------------------------------------------------

@dataclass
class Trial:
    workload: Workload
    schedule: Schedule
    result: RunResult
    anomalies: list[str]
    committed: list[str]


@dataclass
class Witness:
    workload: Workload
    schedule: Schedule  # SQL and op steps only, with [expect.LEVEL]
    level: Level
    anomalies: list[str]
    replayed: bool | None = None

    @property
    def toml(self) -> str:
        return to_toml(self.schedule)


@dataclass
class Verdict:
    """One contract cell: operator x level."""

    adapter: str
    operator: str
    level: str
    anomaly: str
    precondition: str
    at_or_above: bool
    status: str  # holds | violated | found | not-found | no-weaker-level | unverifiable
    examples: int = 0
    budget: int = 0
    seed: int = 0
    elapsed_s: float = 0.0
    witness: Witness | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        """True when the result agrees with the paper's contract for this cell."""
        return self.status in ("holds", "found", "no-weaker-level")

    @property
    def contract_holds(self) -> bool:
        """No anomaly found (what `toki certify` gates on)."""
        return self.status in ("holds", "not-found", "no-weaker-level")

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in ("adapter", "operator", "level", "anomaly", "precondition",
                                           "at_or_above", "status", "examples", "budget", "seed", "note")}
        d["elapsed_s"] = round(self.elapsed_s, 3)
        if self.witness is not None:
            d["witness"] = {"schedule": self.witness.toml, "anomalies": self.witness.anomalies,
                            "context_switches": context_switches(self.witness.workload.order),
                            "workload": self.witness.workload.describe(), "replayed": self.witness.replayed}
        return d


class ContractChecker:
    """Runs contract examples for one adapter on one lane (schema and connections reused)."""

    def __init__(self, adapter=None, *, server=None, runner: Runner | None = None, mode: str = "audit_row",
                 step_limit_s: float = 10.0):
        self.adapter = adapter if adapter is not None else TokiWritePath("lww")
        self.runner = runner or Runner(server, record_history=False, step_limit_s=step_limit_s)
        self.mode = mode
        self._lane: Lane | None = None
        self.trials = 0

    @property
    def name(self) -> str:
        return getattr(self.adapter, "name", type(self.adapter).__name__)

    @property
    def lane(self) -> Lane:
        if self._lane is None:
            self._lane = self.runner.lane("contract", store=True)
            setup = getattr(self.adapter, "setup", None)
            if callable(setup):
                setup(self._lane.admin)
        return self._lane

    def close(self) -> None:
        if self._lane is not None:
            self._lane.close()
            self._lane = None

    def __enter__(self) -> "ContractChecker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, w: Workload) -> Trial:
        lane = self.lane
        lane.admin.execute(_RESET)
        reset = getattr(self.adapter, "reset", None)
        if callable(reset):
            reset(lane.admin)
        sched = build_schedule(w, self.adapter, mode=self.mode)
        result = self.runner.run(sched, w.level, lane=lane, check_expect=False)
        self.trials += 1
        failed = {st.session for st in result.steps if st.status == "error"}
        agents = [a.session for a in w.agents]
        native = getattr(self.adapter, "native_ops", False)
        committed = [s for s in agents if s not in failed and (not native or result.sessions.get(s) == "committed")]
        outcomes, silent = {}, []
        for s in committed:
            o = result.outcomes.get(s) if native else result.contexts.get(s, {}).get("outcome")
            if o is not None:
                outcomes[s] = o
            else:
                silent.append(s)
        conn = lane.admin
        confirmed = {}
        if w.operator == "await":
            pos = {i: k for k, i in enumerate(result.executed)}
            cb_commit = next(i for i, stp in enumerate(sched.steps) if stp.session == "CB" and stp.sql == "commit")
            for a in w.agents:
                write = next(i for i, stp in enumerate(sched.steps) if stp.session == a.session
                             and stp.name == f"{a.session} write")
                confirmed[a.session] = pos.get(cb_commit, 10**9) < pos.get(write, -1)
        anomalies = detect(
            w.operator, read_rows(conn, None if native else self.adapter), outcomes,
            policies=conn.execute("select set_key, chosen_index, active, policy_id from policy").fetchall(),
            callbacks=conn.execute("select request_hash, chosen_index, status from callback_log").fetchall(),
            confirmed_before_write=confirmed)
        # Fail closed: a detector that is told nothing finds nothing, so silence must not pass.
        anomalies.extend(f"{NO_OUTCOME}: {s} committed, but its write() reported no outcome (return a "
                         "toki.db.store.WriteOutcome: action, fact_id, winner_id, loser_id, at)" for s in silent)
        if committed and not read_rows(conn, None if native else self.adapter):
            anomalies.append(f"{NO_OUTCOME}: {len(committed)} write(s) committed, but the memory read back is "
                             "empty (agent_memory, or the adapter's rows(conn))")
        return Trial(w, sched, result, anomalies, committed)

    # -- witnesses --------------------------------------------------------------------------
    def witness(self, w: Workload) -> Witness:
        """Re-run a found example and write it down as a replayable schedule with its outcome."""
        trial = self.run(w)
        if getattr(self.adapter, "native_ops", False):
            steps = list(trial.schedule.steps)
        else:
            steps = []
            for pos, stp in enumerate(trial.schedule.steps):
                if stp.op != "call":
                    steps.append(stp)
                    continue
                for sql in trial.result.contexts.get(stp.session, {}).get("sql", {}).get(pos, []):
                    steps.append(Step(stp.session, sql=sql, name=stp.name))
        errors = {}
        for st_ in trial.result.steps:
            if st_.status == "error":
                errors[st_.index] = st_.sqlstate
        native = getattr(self.adapter, "native_ops", False)
        exp = Expect(final=[f["rows"] for f in trial.result.final])
        if native:
            exp.sessions = dict(trial.result.sessions)
            if all(v for v in errors.values()):
                exp.errors = {i: v for i, v in errors.items()}
        desc = (f"Witness: {ANOMALY[w.operator]} ({ANOMALY_NAME[ANOMALY[w.operator]]}) for {w.operator} "
                f"({self.name}) at {w.level.name}.\n{w.describe()}\n" + "\n".join(trial.anomalies))
        sched = Schedule(name=trial.schedule.name + "-witness", steps=steps, description=desc,
                         setup=list(trial.schedule.setup), final=list(FINAL), on_blocked="defer", store=True,
                         expect={w.level.isolation.cli_name: exp},
                         sessions_declared=trial.schedule.sessions_declared)
        sched.validate()
        return Witness(w, sched, w.level, trial.anomalies)

    def replay(self, witness: Witness) -> bool:
        """Run the witness schedule in a fresh schema (as ``toki run`` does): does it reproduce?"""
        res = self.runner.run(witness.schedule, witness.level)
        witness.replayed = bool(res.expect["checked"] and res.expect["ok"])
        return witness.replayed


def _search_settings(budget: int) -> settings:
    return settings(max_examples=budget, deadline=None, database=None, derandomize=False,
                    phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck),
                    report_multiple_bugs=False)


def check(checker: ContractChecker, operator: str | None = None, level: Level | str | None = None, *,
          budget: int | None = None, seed: int = 0, replay: bool = True) -> Verdict:
    """Search one contract cell with a stated budget (examples tried, shrinking excluded)."""
    from .profiles import budget as profile_budget

    op = operator or checker.adapter.operator
    lvl = PRECONDITION[op] if level is None else (parse_level(level) if isinstance(level, str) else level)
    n = budget if budget is not None else profile_budget()
    if n < 1:
        raise ConfigError(f"budget {n} must be at least 1", fix="pass --budget 25 (ci) or more")
    pre = PRECONDITION[op]
    above = lvl.at_least(pre)
    anomaly = ANOMALY[op]
    v = Verdict(checker.name, op, lvl.name, anomaly, pre.name, above, "holds", budget=n, seed=seed)
    t0 = time.perf_counter()
    if lvl.isolation == Isolation.RU:
        v.note = "PostgreSQL runs READ UNCOMMITTED as READ COMMITTED"
    tried = 0

    def anomalous(w: Workload) -> bool:
        nonlocal tried
        tried += 1
        return bool(checker.run(w).anomalies)

    try:
        example = find(workloads(op, lvl), anomalous, settings=_search_settings(n), random=random.Random(seed))
    except (NoSuchExample, Unsatisfiable):
        example = None
    v.examples = tried
    if example is None:
        v.status = "holds" if above else "not-found"
        if not above:
            v.note = (v.note + "; " if v.note else "") + (
                f"no {anomaly} found in {n} examples below the precondition {pre.name}")
    else:
        v.status = "violated" if above else "found"
        v.witness = checker.witness(example)
        if v.witness.anomalies and all(a.startswith(NO_OUTCOME) for a in v.witness.anomalies):
            v.status = "unverifiable"
            v.note = "the adapter reports nothing a detector can check: a contract told nothing cannot hold"
        if replay:
            checker.replay(v.witness)
        if above:
            v.note = (f"contradicts the paper: {op} at {lvl.name} (at or above its precondition {pre.name}) "
                      f"admits {anomaly}")
    v.elapsed_s = time.perf_counter() - t0
    return v


def weaker_level(operator: str) -> Level | None:
    """The level one step below the operator's precondition that PostgreSQL can actually run."""
    pre = PRECONDITION[operator]
    if pre.callback:
        return Level(pre.isolation, False)
    if pre.isolation == Isolation.RC:
        return None  # READ UNCOMMITTED behaves as READ COMMITTED on PostgreSQL
    return Level(Isolation(pre.isolation - 1), False)


def contract_cells(operator: str) -> list[Level]:
    """The levels a suite visits: RC, SI, SR (and their +cb forms for ⊕?, whose axis it is)."""
    if operator == "await":
        return list(MATRIX_LEVELS)
    return [lv for lv in MATRIX_LEVELS if not lv.callback]


def suite(checker: ContractChecker, operator: str | None = None, *, budget: int | None = None, seed: int = 0,
          levels: Sequence[Level] | None = None, replay: bool = True,
          on_verdict: Callable[[Verdict], None] | None = None) -> list[Verdict]:
    """Every level for one operator, plus the 'no weaker level' report where PostgreSQL has none."""
    op = operator or checker.adapter.operator
    out = []
    if weaker_level(op) is None and levels is None:
        out.append(Verdict(checker.name, op, "RU", ANOMALY[op], PRECONDITION[op].name, False, "no-weaker-level",
                           note="below RC there is READ UNCOMMITTED, which PostgreSQL runs as READ COMMITTED: "
                                "no weaker level to search"))
        if on_verdict:
            on_verdict(out[-1])
    for lv in (levels or contract_cells(op)):
        out.append(check(checker, op, lv, budget=budget, seed=seed, replay=replay))
        if on_verdict:
            on_verdict(out[-1])
    return out


def certify(adapter, level: Level | str, *, operator: str | None = None, budget: int | None = None,
            seed: int = 0, server=None, mode: str = "audit_row") -> Verdict:
    """Certify an adapter (object, factory or ``module:factory``) at one level."""
    ad = load_adapter(adapter, operator)
    with ContractChecker(ad, server=server, mode=mode) as checker:
        return check(checker, ad.operator, level, budget=budget, seed=seed)


__all__ = ["ANOMALY", "Agent", "ContractChecker", "Trial", "Verdict", "Witness", "Workload", "build_schedule",
           "certify", "check", "contract_cells", "detect", "programs_of", "suite", "weaker_level", "workloads"]
