"""One run of a scenario under a chooser, and the serial outcomes it is compared with.

A trial opens fresh storage, seeds it, starts one agent thread per scenario agent with the
storage hooks installed, lets the controller grant their storage calls, then reads the state
back through the engine's public API. An *outcome* is that state plus which agents failed and
how; an anomaly is an outcome that no serial order of the same calls produces.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toki.errors import ConfigError, TokiError
from toki.harness import effects, file_calls, file_locks, mysql_calls, pg_calls, sqlite_calls, threads
from toki.harness.controller import (STEP_LIMIT_S, Chooser, Controller, ReplayChooser, ReplayDiverged, RunTrace,
                                     RunAbandoned, SerialChooser, Unverifiable, thread_idle)
from toki.harness.engine import DetectorError, Engine, PluginError, Scenario, optional, plugin_call
from toki.harness.findings import Finding

_ONE_RUN = threading.Lock()


def _fingerprint(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time. SQLite's shared-memory
    index (``-shm``) is left out: it is written through a memory map whose times the kernel
    updates when it pleases."""
    out: dict[str, tuple[int, int]] = {}
    stack = [str(root)]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            elif not e.name.endswith("-shm"):
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                out[e.path[len(str(root)) + 1:]] = (st.st_size, st.st_mtime_ns)
    return out


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass
class Outcome:
    """The state the agents leave, and which of them completed.

    An agent whose call was aborted cleanly (:func:`clean_abort`) counts as not having run: the
    outcome is serializable when the state equals a serial order of the agents that completed.
    A call that fails half-way and leaves some of its writes behind, or that fails in a way no
    serial order fails, therefore shows up as an anomaly.
    """

    state: Any
    errors: dict[str, str]
    completed: tuple[str, ...] = ()
    failed: dict[str, str] = field(default_factory=dict)  # errors that are not clean aborts
    observed: dict[str, Any] | None = None  # what each completed call returned (observe=True scenarios)

    @property
    def key(self) -> str:
        return canonical({"state": self.state, "completed": sorted(self.completed), "failed": self.failed,
                          "observed": self.observed})


def clean_abort(exc: BaseException) -> bool:
    """Did the engine refuse the call as a whole (a database abort, toki's own refusal)?

    Such a failure is compared with serial runs of the agents that completed. Any other
    failure (a crash on a torn file, an error half-way through) is part of the outcome, so it
    is an anomaly unless a serial order fails the same way.
    """
    from toki.backends.base import ErrorKind
    from toki.errors import DatabaseError, WriteRefused

    aborts = {ErrorKind.BUSY, ErrorKind.BUSY_SNAPSHOT, ErrorKind.SERIALIZATION, ErrorKind.DEADLOCK,
              ErrorKind.LOCK_TIMEOUT, ErrorKind.UNIQUE, ErrorKind.FAILED_TXN}
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (WriteRefused, DatabaseError)):
            return True
        mod = type(e).__module__
        if mod.startswith("sqlite3"):
            from toki.backends.sqlite import classify
            if classify(e).kind in aborts:
                return True
        elif mod.startswith("psycopg"):
            from toki.backends.postgres import classify
            if classify(e).kind in aborts:
                return True
        e = e.__cause__ or e.__context__
    return False


@dataclass
class TrialResult:
    trace: RunTrace
    outcome: Outcome
    anomalies: list[Finding] = field(default_factory=list)  # what was found (empty when serializable)
    serializable: bool = True


@contextlib.contextmanager
def hooks_installed(location: Path):
    """sqlite3, psycopg, PyMySQL and file calls become steps of the agents (refused on other
    threads during a run); locks and queues engine code creates are instrumented."""
    import sqlite3
    import sqlite3.dbapi2

    saved = sqlite3.connect, sqlite3.dbapi2.connect  # SQLAlchemy's pysqlite dialect uses the latter
    sqlite3.connect = sqlite3.dbapi2.connect = sqlite_calls.controlled_connect
    excepthook = threading.excepthook
    threading.excepthook = functools.partial(_quiet_stop, excepthook)
    try:
        with pg_calls.installed(), mysql_calls.installed(), file_calls.FileHook(location).installed(), \
                file_locks.FileLockHook(location).installed(), threads.installed(), effects.installed(location):
            yield
    finally:
        sqlite3.connect, sqlite3.dbapi2.connect = saved
        threading.excepthook = excepthook


def _quiet_stop(excepthook, args) -> None:
    # A library's worker loop that does not catch what toki raises in it when it stops a run (the
    # run's own result says why) would print that as a traceback: not the engine's error, not shown.
    if isinstance(args.exc_value, (RunAbandoned, Unverifiable)):
        return
    excepthook(args)


def scratch_base() -> Path | None:
    """Where trials keep their storage: tmpfs when there is one, since engines commit and fsync on
    every call and a trial's files live for milliseconds (None: the system's temporary folder)."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


class TrialRunner:
    """Runs trials of one engine's scenario; keeps a scratch directory per trial."""

    def __init__(self, engine: Engine, scenario: str | Scenario, *, step_limit_s: float = STEP_LIMIT_S,
                 pg_observer=None, workdir: Path | None = None):
        self.engine = engine
        if isinstance(scenario, str):
            if scenario not in engine.scenarios:
                raise ConfigError(f"engine {engine.name} has no scenario {scenario!r}",
                                  fix="choose one of " + ", ".join(engine.scenarios))
            scenario = engine.scenarios[scenario]
        self.scenario: Scenario = scenario
        self.step_limit_s, self.pg_observer = step_limit_s, pg_observer
        self.observers: dict = {}  # database observers the controller opened, reused by later runs
        self._setup_per_trial = not optional(engine, "storage_in_location")
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="toki-engine-", dir=scratch_base()))
        self._template: Path | None = None
        self._n = 0
        self._serial: dict[str, list[str]] | None = None
        self.last_serial_grants: list[str] | None = None
        self.silent = False  # the engine's read-out says nothing: no check can pass on it
        self.serial_errors: dict[str, str] = {}
        self.serial_runs: list[tuple[tuple[str, ...], RunTrace, Outcome]] = []  # orders of all the agents
        self._sessions: set[tuple[str, int]] = set()  # database sessions the agents used, over all runs
        self.kept_sessions: set[tuple[str, int]] = set()  # of those, the ones a later run used again

    def close(self) -> None:
        for obs in self.observers.values():
            obs.close()
        self.observers.clear()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "TrialRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- one run ------------------------------------------------------------------------------
    def run(self, chooser: Chooser, agents: tuple[str, ...] | None = None) -> tuple[RunTrace, Outcome]:
        # The hooks are process-wide: two runs at once (a threaded Dask worker) would judge each
        # other's calls. One at a time.
        with _ONE_RUN:
            try:
                return self._run(chooser, agents)
            except (Unverifiable, ReplayDiverged) as e:
                if not self.kept_sessions or "different run" not in e.problem and not isinstance(e, ReplayDiverged):
                    raise
                kept = ", ".join(f"{k} session {i}" for k, i in sorted(self.kept_sessions)[:4])
                raise type(e)(
                    f"{e.problem}; the likely cause: the plug-in keeps database connections across runs ({kept} "
                    "served earlier runs), and a pool's kept connections make runs differ (first-connect queries, "
                    "the order connections come back, what a failed run left in a session)",
                    fix="dispose of the pool in discard(location) (SQLAlchemy: engine.dispose(); psycopg_pool: "
                        "pool.close() and a new pool in open()), or open the connections in open()") from e

    def _run(self, chooser: Chooser, agents: tuple[str, ...] | None) -> tuple[RunTrace, Outcome]:
        self._n += 1
        loc = self.workdir / f"t{self._n}"
        if loc.exists():
            shutil.rmtree(loc)
        loc.mkdir(parents=True)
        eng, sc = self.engine, self.scenario
        who = sc.agents if agents is None else agents
        # Serial runs and replays check themselves: storage must not change between steps.
        checked = isinstance(chooser, (SerialChooser, ReplayChooser))
        observer = self.pg_observer if self.pg_observer is not None else optional(eng, "pg_observer")
        # Self-checked runs also scan the process's descriptors: an effect through a path no hook
        # sees (a C driver's connection, a native store's file elsewhere) changes them between steps.
        scan = effects.DescriptorScan(loc) if checked else None
        ctl = Controller(chooser, step_limit_s=self.step_limit_s, pg_observer=observer, observers=self.observers,
                         fingerprint=(lambda: {**_fingerprint(loc), **scan()}) if checked else None)
        handles: list[Any] = []
        serial = isinstance(chooser, SerialChooser)
        ran = False
        before = set(threading.enumerate())
        try:
            with hooks_installed(loc), threads.locks_swapped(eng):
                self._seed(loc)
                calls = open_agents(eng, sc, loc, who, ctl, handles)
                _quiesce(set(threading.enumerate()) - before)
                try:
                    trace = ctl.run(calls)
                finally:
                    used = {(k, i) for k, ids in ctl.db_sessions.items() for i in ids}
                    self.kept_sessions |= used & self._sessions
                    self._sessions |= used
                ran = True
        finally:
            for h in dict.fromkeys(map(id, handles)):
                h = next(x for x in handles if id(x) == h)
                if not ran:  # the run failed: a library worker may be gone, and a close waiting for it with it
                    _bounded(lambda h=h: eng.close(h), 2.0)
                    continue
                try:
                    eng.close(h)
                except Exception as e:  # noqa: BLE001 - after an interleaved run a close may fail on what the run left
                    if serial and not isinstance(e, TokiError):
                        raise PluginError(eng, "close", e) from e
        try:
            reader = plugin_call(eng, "open", eng.open, loc)
            try:
                state = plugin_call(eng, "state", eng.state, reader)
            finally:
                with contextlib.suppress(Exception):
                    eng.close(reader)
        except PluginError as e:
            if serial:
                raise
            # A store that no longer opens or reads after an interleaving is an outcome (every serial
            # order read it back), not a broken plug-in.
            cause = e.__cause__
            state = {"unreadable": f"{e.method}() raised {type(cause).__name__}"}
        shutil.rmtree(loc, ignore_errors=True)
        discard = optional(eng, "discard")
        if callable(discard):
            plugin_call(eng, "discard", discard, loc)
        # The plug-in names the library's own conflict errors that a caller retries (an ORM's
        # optimistic version check, a store's "modified concurrently"): clean aborts, like 40001.
        own = tuple(optional(eng, "clean_aborts") or ())
        failed = {a: type(e).__name__ for a, e in sorted(trace.errors.items())
                  if not clean_abort(e) and not (own and isinstance(e, own))}
        observed = {a: trace.results[a] for a in sorted(trace.results)} if sc.observe else None
        return trace, Outcome(state, trace.outcome_errors(), tuple(sorted(trace.results)), failed, observed)

    def _seed(self, loc: Path) -> None:
        """Run the scenario's setup on the storage this trial uses. Where the engine's storage is
        its folder, set up once and copy the folder (an optimisation); where setup leaves the
        folder empty, the storage is elsewhere (a database server): set up every trial."""
        eng, sc = self.engine, self.scenario
        if sc.setup is None:
            return
        if self._setup_per_trial:
            self._setup_in(loc)
            return
        if self._template is None:
            tpl = self.workdir / "template"
            shutil.rmtree(tpl, ignore_errors=True)
            tpl.mkdir(parents=True)
            self._setup_in(tpl)
            if not any(tpl.iterdir()):
                self._setup_per_trial = True
                discard = optional(eng, "discard")
                if callable(discard):
                    plugin_call(eng, "discard", discard, tpl)
                self._setup_in(loc)
                return
            self._template = tpl
        shutil.rmtree(loc)
        shutil.copytree(self._template, loc)

    def _setup_in(self, loc: Path) -> None:
        eng = self.engine
        h = plugin_call(eng, "open", eng.open, loc)
        try:
            plugin_call(eng, "setup", self.scenario.setup, h)
        finally:
            with contextlib.suppress(Exception):
                eng.close(h)

    # -- serial orders and verdicts ----------------------------------------------------------
    def serial_outcomes(self) -> dict[str, list[str]]:
        """Outcome key -> the serial orders that produce it.

        Every order of every subset of the agents: a run in which some agents fail is compared
        with the serial runs of the agents that completed.
        """
        if self._serial is None:
            self._serial = {}
            agents = self.scenario.agents
            states = []
            for k in range(len(agents), -1, -1):
                for subset in itertools.combinations(agents, k):
                    for order in itertools.permutations(subset):
                        trace, out = self.run(SerialChooser(order), agents=tuple(order))
                        if k == len(agents):
                            _took_steps(trace)
                            # Self-check: a serial order run again must give the same outcome; one
                            # that varies was decided by something the harness does not control.
                            _, again = self.run(SerialChooser(order), agents=tuple(order))
                            if again.key != out.key:
                                raise Unverifiable(
                                    f"the serial order {' then '.join(order)} gave two different outcomes in two "
                                    f"runs ({_differ(out, again)}); the outcome depends on something the harness "
                                    "does not control (time, randomness, a thread or process of the engine's own, "
                                    "state left from an earlier run)",
                                    fix="make state() leave out wall-clock times and random ids, seed the engine's "
                                        "randomness, and give each trial fresh storage")
                            self.last_serial_grants = trace.grants
                            states.append(out)
                            self.serial_runs.append((order, trace, out))
                        self._serial.setdefault(out.key, []).append(" then ".join(order) or "no agent")
            _some_call_completed(self.serial_runs)
            self.silent = all(not o.state for o in states) or any(o.state is None for o in states)
            self.serial_errors = {a: e for o in states for a, e in o.errors.items()}
        return self._serial

    def adopt_serial_outcomes(self, outcomes: dict[str, list[str]]) -> None:
        """Judge against the serial outcomes another runner of the same engine and scenario
        computed and self-checked (a sharded search's shards: the worker that searched the lower
        bounds ran the serial orders once for all of them)."""
        self._serial = {k: list(v) for k, v in outcomes.items()}

    def by_design(self, out: Outcome) -> list[Finding]:
        """Findings of the scenario's ``always`` detectors (properties of the design) on an outcome."""
        found = []
        for d in self.scenario.detectors:
            if getattr(d, "always", False):
                found.extend(_detect(self.engine, d, out))
        return found

    def trial(self, chooser: Chooser) -> TrialResult:
        serial = self.serial_outcomes()
        trace, out = self.run(chooser)
        if out.key in serial:
            return TrialResult(trace, out, [], True)
        findings = []
        for d in self.scenario.detectors:
            if getattr(d, "always", False):
                continue
            findings.extend(_detect(self.engine, d, out))
        # An agent's failure stays visible next to what the detectors name: it may be the anomaly's
        # cause (a torn file read), or a second finding.
        findings.extend(Finding("failed-call", f"agent {a} failed with {e}, which no serial order of the same calls "
                                "does (not a clean abort)", {"agent": a, "error": e})
                        for a, e in out.failed.items() if not any(f"agent {a} failed" in f for f in findings))
        if not findings:
            findings.append(Finding("non-serializable", "an outcome that no serial order of the same calls produces "
                                    f"(serial orders give {len(serial)} distinct outcome(s))",
                                    {"serial_outcomes": len(serial)}))
        return TrialResult(trace, out, findings, False)


def _detect(engine, d, out: Outcome) -> list[Finding]:
    """One detector's findings on an outcome, each named after the detector. A detector returns
    messages (strings) or :class:`Finding` objects with evidence. A detector that raises is a
    broken plug-in (one line naming it and the state it got), never a traceback."""
    try:
        msgs = d.check(out.state, out.errors, out.observed or {}) if d.observes else d.check(out.state, out.errors)
        msgs = list(msgs or [])
    except Exception as e:  # noqa: BLE001 - the plug-in's code: named in one line
        raise DetectorError(engine, d, out, e) from e
    return [Finding(d.anomaly, m.message, m.evidence) if isinstance(m, Finding) else Finding(d.anomaly, str(m))
            for m in msgs]


def _quiesce(started: set[threading.Thread], limit_s: float = 2.0) -> None:
    """Let the threads a library started in open() finish starting (connect, create tables, reach
    their first wait) before the agents run: what they do then is set-up, not an agent's call."""
    deadline = time.monotonic() + limit_s
    settled: dict[int, tuple[bool, int]] = {}
    while time.monotonic() < deadline:
        live = [t for t in started if t.is_alive() and t.native_id is not None]
        now = {t.native_id: thread_idle(t.native_id) for t in live}
        if all(v is not None and v[0] and settled.get(k) == v for k, v in now.items()):
            return
        settled = now
        time.sleep(0.002)


def _bounded(fn, limit_s: float) -> None:
    t = threading.Thread(target=_quiet, args=(fn,), daemon=True,
                         name="toki-close")
    t.start()
    t.join(limit_s)


def _quiet(fn) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - closing after a failed run: nothing to report
        pass


# Drivers whose calls the harness does not intercept: named when an agent made no controlled call.
_UNHOOKED = ("psycopg2", "asyncpg", "aiomysql", "MySQLdb", "mysql.connector", "redis", "neo4j", "pymongo", "motor",
             "qdrant_client", "chromadb", "httpx", "requests", "lancedb", "duckdb")


# Steps that order agents without touching storage: an agent that made only these changed nothing
# the harness can interleave.
_SYNC_ONLY = ("start", "resume", "lock", "wait", "handoff", "sleep", "file-lock")


def _took_steps(trace: RunTrace) -> None:
    """Every agent that completed must have made at least one storage call the harness controls:
    one that made none either touches no storage (no race to judge) or storage reached another
    way (a server over a socket through a driver toki does not intercept). Either way no verdict
    can rest on it. Locks, waits and hand-offs alone are not enough: an agent that takes a lock
    and then changes a dict in memory has every one of its effects between two steps, where no
    interleaving toki runs can split it, and an "excludes" on it would be a certificate of
    nothing (a misplaced lock's lost update in memory was certified complete this way)."""
    stepped = {s.agent for s in trace.steps if s.kind not in _SYNC_ONLY}
    idle = sorted(a for a in trace.results if a not in stepped)
    if idle:
        import sys

        synced = sorted({s.agent for s in trace.steps if s.kind in ("lock", "wait", "handoff", "file-lock")}
                        & set(idle))
        loaded = [m for m in _UNHOOKED if m in sys.modules]
        raise Unverifiable(
            f"agent(s) {', '.join(idle)} completed without one storage call the harness controls"
            + (f" ({', '.join(synced)} only took locks or waited: what they change lives in memory or storage "
               "the harness does not see, and nothing between two of their steps is interleaved)" if synced else "")
            + (f" (loaded drivers it does not intercept: {', '.join(loaded)})" if loaded else ""),
            fix="toki intercepts sqlite3, psycopg 3, PyMySQL and files under the run's folder; an engine on "
                "another driver, a server over a socket, or state kept in memory cannot be certified by it")


def _some_call_completed(runs: list[tuple[tuple[str, ...], RunTrace, Outcome]]) -> None:
    """Nothing ran, nothing certified: an agent whose call failed in every serial order of all the
    agents never did what the scenario is about, so no interleaving of it can be judged (a
    plug-in that seeded only the first run's storage, a call that raises on every input)."""
    if not runs:
        return
    agents = runs[0][0]
    never = [a for a in agents if all(a in trace.errors for _, trace, _ in runs)]
    if never:
        first = runs[0][1].errors
        named = "; ".join(f"{a}: {type(first[a]).__name__}: {str(first[a])[:160]}" for a in never)
        raise Unverifiable(
            f"agent(s) {', '.join(never)} failed in every serial order ({named}), so the scenario never ran the "
            "calls it is about and no verdict can rest on it",
            fix="run the scenario's call once by hand on a fresh store (open(), setup(), call()); when setup seeds "
                "storage outside the run's folder (a server), set storage_in_location = False so that it runs for "
                "every trial")


def _differ(a: Outcome, b: Outcome) -> str:
    parts = [k for k in ("state", "errors", "completed", "failed", "observed") if getattr(a, k) != getattr(b, k)]
    if a.state != b.state:
        return f"state {canonical(a.state)[:80]} vs {canonical(b.state)[:80]}"
    return "differ in " + ", ".join(parts)


def open_agents(engine, scenario: Scenario, location: Path, agents, controller, handles: list) -> dict:
    """The agents' calls for :meth:`Controller.run`: the engine's storage opened under ``location``
    (one handle shared by the agents, or one each: ``scenario.shared``), each handle given to the
    plug-in's ``prepare`` with ``controller``, and each agent's call bound to its handle. Every
    handle is appended to ``handles`` as it is opened, so that the caller closes them whatever
    happens."""
    if scenario.shared:
        shared = plugin_call(engine, "open", engine.open, location)
        handles.append(shared)
        per_agent = {a: shared for a in agents}
    else:
        for a in agents:
            handles.append(plugin_call(engine, "open", engine.open, location))
        per_agent = dict(zip(agents, handles))
    prepare = optional(engine, "prepare")
    if callable(prepare):
        for h in dict.fromkeys(map(id, handles)):
            plugin_call(engine, "prepare", prepare, next(x for x in handles if id(x) == h), controller)
    return {a: _bind(scenario.call, per_agent[a], a) for a in agents}


def _bind(call, handle, agent):
    def agent_call():
        return call(handle, agent)
    agent_call.__name__ = f"{agent}"
    return agent_call
