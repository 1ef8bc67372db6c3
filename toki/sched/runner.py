"""The barrier-controlled runner (docs/design.md#decisions, docs/design.md#schedule-files-toml, docs/design.md#run-result-json).

One connection per session. Each step runs in a greenlet of its session on the runner's own
thread (:mod:`toki.sched.green`): a query is sent, and while libpq waits for the answer the
runner waits on the socket itself, as PostgreSQL's isolation tester does with its asynchronous
libpq calls. A step that has not completed within a short window is either slow or waiting on a
lock: only then does the runner ask an observer connection
(``pg_isolation_test_session_is_blocked``); it never sleeps a fixed time to "let it block".
After a step that may have released locks (a commit, a rollback, an error, an unlock) it asks
again about earlier blocked steps: one the observer no longer reports blocked is waited for, and
records ``completed_at``.

Sessions get a low ``deadlock_timeout`` so deadlocks resolve in milliseconds. Errors are
classified by SQLSTATE. A step that neither completes nor blocks within the per-step limit is
cancelled and reported as a :class:`~toki.errors.StepTimeout` naming the step.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import deque
from collections.abc import Sequence
from datetime import date, datetime
from types import SimpleNamespace
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from toki.db import schema as dbschema
from toki.db.server import Server, create_run_schema, drop_schema, resolve
from toki.db.store import SchemaMode, Store, WriteTxn
from toki.errors import ScheduleError, StepTimeout, TokiError
from toki.judges.base import SimulatedJudge
from toki.levels import Level, parse_level
from toki.model import Fact
from toki.operators import set_key
from toki.sched.green import GreenConnection, Task, Worker, poll_any
from toki.sched.drive import StepLoop
from toki.sched.results import (
    BEGIN_SQL,
    COMMIT_SQL,
    ROLLBACK_SQL,
    RunResult,
    StepResult,
    check_expectation,
    jsonable,
)
from toki.sched.schedule import Schedule, Step

DEADLOCK_TIMEOUT_MS = 20
STEP_LIMIT_S = 10.0
# SQL after which a blocked session may have been released (a lock ended by something other than
# the end of a transaction, which the connection's status shows)
_RELEASES = re.compile(r"\b(commit|rollback|abort|end|release|unlock|prepare|savepoint|cancel|terminate)", re.I)
FIRST_WINDOW_S = 0.0005  # a local statement answers in ~0.1 ms: silence beyond this asks the observer


class _Session:
    """A connection (a GreenConnection: its steps run as tasks on the runner's thread)."""

    def __init__(self, name: str, conn: psycopg.Connection):
        self.name = name
        self.conn = conn
        self.pid = conn.info.backend_pid
        self.worker = Worker()
        self.reset()

    def reset(self) -> None:
        self.state = "idle"
        self.txn: WriteTxn | None = None
        self.txns: list[WriteTxn] = []
        self.pending: tuple[int, Task] | None = None
        self.deferred: deque[int] = deque()
        self.ctx: dict[str, Any] = {}  # per-run scratch space of "call" steps (values read, ops done)

    def close(self) -> None:
        self.pending = None
        with contextlib.suppress(Exception):
            self.worker.kill()
        with contextlib.suppress(Exception):
            self.conn.close()


class Lane:
    """A run schema with one connection per session and an observer; reusable across runs.

    The matrix and the property suites run thousands of schedules: a lane keeps connections and
    the schema, and each run resets state instead of reconnecting.
    """

    def __init__(self, server: Server | None = None, *, label: str = "run",
                 deadlock_timeout_ms: int = DEADLOCK_TIMEOUT_MS, store: bool = False,
                 judge_log_form: str = "unique"):
        self.server = server or resolve()
        self.deadlock_timeout_ms = deadlock_timeout_ms
        self.admin = self.server.connect()
        self.schema = create_run_schema(self.admin, label)
        self.admin.execute(f"set search_path = {self.schema}")
        self.observer = self.server.connect(application_name="toki-observer")
        self.sessions: dict[str, _Session] = {}
        self._store: Store | None = None
        self.judge_log_form = judge_log_form
        if store:
            self.ensure_store(judge_log_form)

    def ensure_store(self, judge_log_form: str = "unique") -> Store:
        if self._store is None or self.judge_log_form != judge_log_form:
            if self._store is not None:
                for t in dbschema.TABLES:
                    self.admin.execute(f"drop table if exists {t} cascade")
            dbschema.create_all(self.admin, judge_log_form)
            self.judge_log_form = judge_log_form
            self._store = Store(server=self.server, schema=self.schema, judge_log_form=judge_log_form,
                                _conn=self.admin)
        return self._store

    def session(self, name: str) -> _Session:
        s = self.sessions.get(name)
        if s is None or s.conn.closed:
            conn = self.server.connect(schema=self.schema, deadlock_timeout_ms=self.deadlock_timeout_ms,
                                       application_name=f"toki-{name}", connection_class=GreenConnection)
            s = self.sessions[name] = _Session(name, conn)
        return s

    def is_blocked(self, pid: int, others: Sequence[int]) -> bool:
        row = self.observer.execute("select pg_isolation_test_session_is_blocked(%s, %s)",
                                    (pid, list(others)), prepare=True).fetchone()
        return bool(row[0])

    def in_wait_cycle(self, pid: int, pids: Sequence[int]) -> bool:
        """Whether ``pid`` is on a cycle of the waits-for graph among ``pids`` (hard or soft
        blocking, as pg_blocking_pids reports it): a deadlock the server's detector will break."""
        return bool(self.wait_cycle(pid, pids))

    def wait_cycle(self, pid: int, pids: Sequence[int]) -> set[int]:
        """The sessions on cycles through ``pid`` of the waits-for graph among ``pids`` (empty: none)."""
        rows = self.observer.execute("select p, pg_blocking_pids(p) from unnest(%s::int[]) as p",
                                     (list(pids),), prepare=True).fetchall()
        ours = set(pids)
        waits = {p: [b for b in (blockers or []) if b in ours] for p, blockers in rows}
        reach: dict[int, set[int]] = {}
        for start in ours:  # what each session (transitively) waits for
            seen, stack = set(), list(waits.get(start, []))
            while stack:
                q = stack.pop()
                if q not in seen:
                    seen.add(q)
                    stack.extend(waits.get(q, []))
            reach[start] = seen
        if pid not in reach.get(pid, set()):
            return set()
        return {q for q in ours if q in reach[pid] and pid in reach.get(q, set())}

    def close(self) -> None:
        for s in self.sessions.values():
            s.close()
        self.sessions.clear()
        with contextlib.suppress(Exception):
            self.observer.close()
        with contextlib.suppress(Exception):
            self.admin.close()
        drop_schema(self.server, self.schema)

    def __enter__(self) -> "Lane":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _fact(raw: Any, where: str) -> Fact:
    if isinstance(raw, Fact):
        return raw
    if not isinstance(raw, dict):
        raise ScheduleError(f"{where}: fact must be a table", fix='write fact = { fact_id = "f1", subject = ..., ... }')
    d = dict(raw)
    for k in ("valid_from", "valid_to", "system_time_start"):
        if isinstance(d.get(k), str):
            d[k] = datetime.fromisoformat(d[k])
    if isinstance(d.get("valid_from"), date) and not isinstance(d["valid_from"], datetime):
        d["valid_from"] = datetime.combine(d["valid_from"], datetime.min.time())
    try:
        return Fact(**d)
    except TypeError as e:
        raise ScheduleError(f"{where}: bad fact {raw!r}: {e}",
                            fix="facts take fact_id, subject, predicate, object, valid_from, "
                                "valid_to, confidence, provenance") from None
    except TokiError as e:
        raise ScheduleError(f"{where}: {e}", fix="fix the fact in the schedule") from None


def _ids(ids: Any) -> list[SimpleNamespace]:
    return [SimpleNamespace(fact_id=str(i)) for i in ids]


class Runner:
    """Runs schedules on a server: ``Runner().run(schedule, "read-committed")``."""

    def __init__(self, server: Server | None = None, *, step_limit_s: float = STEP_LIMIT_S,
                 deadlock_timeout_ms: int = DEADLOCK_TIMEOUT_MS, record_history: bool = True):
        if not step_limit_s > 0:  # also rejects NaN
            raise ScheduleError(f"step limit {step_limit_s:g}s must be positive",
                                fix=f"pass --step-limit {STEP_LIMIT_S:g} (seconds a step may hang)")
        self.server = server or resolve()
        self.step_limit_s = step_limit_s
        self.deadlock_timeout_ms = deadlock_timeout_ms
        self.record_history = record_history

    def lane(self, label: str = "run", **kw) -> Lane:
        if not self.server.is_postgres:
            from toki.sched.backend_runner import BackendLane

            return BackendLane(self.server, label=label, **kw)
        return Lane(self.server, label=label, deadlock_timeout_ms=self.deadlock_timeout_ms, **kw)

    # -- entry point ---------------------------------------------------------------------
    def run(self, schedule: Schedule, level: Level | str = "read-committed", *, lane: Lane | None = None,
            on_blocked: str | None = None, judge_seed: int = 0, check_expect: bool = True,
            reset: bool = False) -> RunResult:
        if not self.server.is_postgres:  # MariaDB/MySQL, SQLite, DuckDB: through the backend seam
            from toki.sched import backend_runner

            return backend_runner.run(self, schedule, level, lane=lane, on_blocked=on_blocked,
                                      check_expect=check_expect, reset=reset)
        lvl = parse_level(level) if isinstance(level, str) else level
        mode = on_blocked or schedule.on_blocked
        own = lane is None
        lane = lane or self.lane(schedule.name)
        t0 = time.perf_counter()
        try:
            if schedule.store:
                store = lane.ensure_store(schedule.judge_log_form)
                if reset:
                    dbschema.truncate_all(lane.admin)
            else:
                store = None
            for sql in schedule.setup:
                self._admin_exec(lane, sql, schedule, "setup")
            sessions = {name: lane.session(name) for name in schedule.sessions}
            for s in sessions.values():
                s.reset()
                for sql in schedule.session_setup.get(s.name, []):
                    try:
                        s.conn.execute(sql)
                    except psycopg.Error as e:
                        raise ScheduleError(f"{schedule.source}: setup of session {s.name} failed "
                                            f"({e.sqlstate}): {_msg(e)}", fix="fix the session's setup SQL") from None
            exec_run = _Execution(self, schedule, lvl, mode, lane, sessions, store, judge_seed)
            try:
                exec_run.go()
            finally:
                exec_run.finish()
            final = []
            for sql in schedule.final:
                rows = self._admin_exec(lane, sql, schedule, "final")
                final.append({"sql": sql, "rows": jsonable(rows)})
            for s in sessions.values():
                for sql in schedule.session_teardown.get(s.name, []):
                    with contextlib.suppress(psycopg.Error):
                        s.conn.execute(sql)
            for sql in schedule.teardown:
                self._admin_exec(lane, sql, schedule, "teardown")
            result = RunResult(
                schedule=schedule.name, level=lvl.isolation.cli_name + ("+cb" if lvl.callback else ""),
                backend={"name": self.server.backend, "version": self.server.version,
                         **({} if self.server.can_lower_deadlock_timeout else
                            {"deadlocks": "broken by toki through pg_blocking_pids (the role cannot lower "
                                          "deadlock_timeout)"})},
                steps=exec_run.results, sessions={n: s.state for n, s in sessions.items()},
                final=final, executed=exec_run.executed, elapsed_s=time.perf_counter() - t0,
                outcomes={n: s.txns[-1].outcome for n, s in sessions.items() if s.txns},
                contexts={n: s.ctx for n, s in sessions.items()},
            )
            if schedule.store and self.record_history:
                from toki.sched.history import from_sessions

                result.history = from_sessions(sessions, exec_run)
            if any(s.name for s in schedule.steps):
                result.permutation = [s.name for s in schedule.steps]
            if check_expect:
                result.expect = check_expectation(schedule, lvl, result)
            return result
        finally:
            if own:
                lane.close()

    def _admin_exec(self, lane: Lane, sql: str, schedule: Schedule, what: str) -> list:
        try:
            cur = lane.admin.execute(sql)
            rows = []
            while True:
                if cur.description is not None:
                    rows = [list(r) for r in cur.fetchall()]
                if not cur.nextset():
                    break
            return rows
        except psycopg.Error as e:
            with contextlib.suppress(psycopg.Error):
                lane.admin.execute("rollback")
            raise ScheduleError(f"{schedule.source}: {what} statement failed ({e.sqlstate}): {_msg(e)}: {sql.strip()[:80]}",
                                fix=f"fix the {what} SQL") from None


def _msg(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


class _Execution(StepLoop):
    """The state of one run: which steps are pending, blocked or deferred."""

    def __init__(self, runner: Runner, schedule: Schedule, level: Level, mode: str, lane: Lane,
                 sessions: dict[str, _Session], store: Store | None, judge_seed: int):
        self.r, self.s, self.level, self.mode, self.lane = runner, schedule, level, mode, lane
        self.sessions, self.store, self.judge_seed = sessions, store, judge_seed
        self.results = [StepResult(i, st.session, st.sql, st.op, st.name) for i, st in enumerate(schedule.steps)]
        self.executed: list[int] = []
        self.pids = {n: s.pid for n, s in sessions.items()}
        self.clock = 0  # index of the step most recently issued in file order
        self.released = False  # a step completed that may have released another session's lock
        self.broken: set[int] = set()  # steps cancelled by toki to break a deadlock (non-superuser)

    # -- driving: the step loop is toki.sched.drive.StepLoop.go -----------------------------------
    def _issue(self, idx: int) -> None:
        step = self.s.steps[idx]
        sess = self.sessions[step.session]
        task = sess.worker.start(self._execute, sess, step, idx)  # runs until it first waits on the server
        sess.pending = (idx, task)
        self.executed.append(idx)
        self._await_issued(sess, idx, task)

    def _others(self, sess: _Session) -> list[int]:
        return [pid for name, pid in self.pids.items() if name != sess.name]

    def _await_issued(self, sess: _Session, idx: int, task: Task) -> None:
        """Return once the step completed or is known to be blocked on another session."""
        deadline = time.monotonic() + self.r.step_limit_s
        step = self.s.steps[idx]
        window = FIRST_WINDOW_S
        while True:
            if task.poll(window):
                self._complete(sess, idx, task, at=idx)
                return
            if step.star_marker or self.lane.is_blocked(sess.pid, self._others(sess)):
                others_blocked = [s for s in self.sessions.values() if s is not sess and s.pending]
                cycle = others_blocked and self.lane.in_wait_cycle(sess.pid, list(self.pids.values()))
                if cycle and not self.lane.server.can_lower_deadlock_timeout:
                    self._break_deadlock(sess, deadline)
                    self.results[idx].blocked = True
                    return
                if others_blocked and (step.star_marker or cycle):
                    # Possibly a deadlock: give the detector (deadlock_timeout) time to break it.
                    end = time.monotonic() + 3 * self.lane.deadlock_timeout_ms / 1000 + 0.02
                    tasks = [task] + [s.pending[1] for s in others_blocked]
                    while not task.done() and time.monotonic() < end:
                        poll_any(tasks, end - time.monotonic())
                    if task.done():
                        # isolationtester's (*) marker: the step is reported as waiting even when
                        # it finishes within the deadlock window (the detector reordered a queue).
                        self.results[idx].blocked = step.star_marker
                        self._complete(sess, idx, task, at=idx)
                        return
                self.results[idx].blocked = True
                return
            if time.monotonic() > deadline:
                self._cancel(sess)
                raise StepTimeout(
                    f"{self.s.source}: step {idx} ({step.describe()}) neither finished nor blocked "
                    f"within {self.r.step_limit_s:g}s",
                    fix="the statement hangs (or waits on something outside the schedule); fix it or raise --step-limit")
            window = min(window * 2, 0.01)

    def _break_deadlock(self, sess: _Session, deadline: float) -> None:
        """``sess`` closed a waits-for cycle and the role cannot lower deadlock_timeout, so the
        server would break it only after its own timeout (1 s by default), and which waiter it
        picked, and which steps show as blocked, would depend on timing. Break it now, as the
        server does when the cycle closes within its timeout: the session that has waited longest
        (its deadlock timer fires first) loses. Its statement is cancelled (pg_cancel_backend
        works on the role's own sessions) and reported as the deadlock it is (40P01), its
        transaction aborted; the others go on."""
        members = self.lane.wait_cycle(sess.pid, list(self.pids.values()))
        waiting = sorted((s.pending[0], s.name) for s in self.sessions.values()
                         if s.pending and s is not sess and s.pid in members)
        if not waiting:
            return
        vidx, vname = waiting[0]
        victim = self.sessions[vname]
        self.broken.add(vidx)
        self.lane.observer.execute("select pg_cancel_backend(%s)", (victim.pid,))
        while not victim.pending[1].poll(0.01):
            if time.monotonic() > deadline:
                raise StepTimeout(f"{self.s.source}: step {vidx} ({self.s.steps[vidx].describe()}) was cancelled to "
                                  f"break a deadlock and did not end within {self.r.step_limit_s:g}s",
                                  fix="raise --step-limit, or run as a role that may set deadlock_timeout")
        self.released = True

    def _settle(self, wait_any: bool = False) -> bool:
        """Collect blocked steps that have finished; issue deferred steps. True if anything moved."""
        if not wait_any and not any(s.pending is not None or s.deferred for s in self.sessions.values()):
            self.released = False
            return False
        moved = False
        progress = True
        while progress:
            progress = False
            recheck, self.released = self.released or wait_any, False
            for sess in self.sessions.values():
                if sess.pending is None:
                    if sess.deferred:
                        nxt = sess.deferred.popleft()
                        self._issue(nxt)
                        progress = moved = True
                    continue
                idx, task = sess.pending
                if not task.poll(0.0) and recheck and not self.lane.is_blocked(sess.pid, self._others(sess)):
                    # Released: it is running now; wait for it to finish (or block again).
                    deadline = time.monotonic() + self.r.step_limit_s
                    while not task.poll(0.002):
                        if self.lane.is_blocked(sess.pid, self._others(sess)):
                            break
                        if time.monotonic() > deadline:
                            self._cancel(sess)
                            raise StepTimeout(f"{self.s.source}: step {idx} ({self.s.steps[idx].describe()}) "
                                              f"did not finish within {self.r.step_limit_s:g}s after it was released",
                                              fix="raise --step-limit or look for a hang")
                if task.done():
                    self._complete(sess, idx, task, at=self.clock)
                    progress = moved = True
        if not moved and wait_any:
            tasks = [s.pending[1] for s in self.sessions.values() if s.pending]
            if tasks and poll_any(tasks, 0.05):
                self.released = True
                self._settle()
                moved = True
        return moved

    def _complete(self, sess: _Session, idx: int, task: Task, *, at: int) -> None:
        res = self.results[idx]
        res.completed_at = at if res.blocked else idx
        sess.pending = None
        step = self.s.steps[idx]
        try:
            rows, status_msg = task.result()
            res.status, res.rows = "ok", rows
            self._track_ok(sess, step, status_msg)
            if (sess.conn.info.transaction_status != TransactionStatus.INTRANS
                    or (step.op is not None and step.op != "call") or _RELEASES.search(step.sql or "")):
                self.released = True
        except psycopg.Error as e:
            res.status, res.sqlstate, res.error = "error", e.sqlstate, _msg(e)
            if idx in self.broken and e.sqlstate == "57014":
                res.sqlstate = "40P01"
                res.error = ("deadlock detected (a waits-for cycle seen through pg_blocking_pids; toki cancelled this "
                             "statement: the role cannot lower deadlock_timeout)")
            self._track_error(sess)
            self.released = True
        except TokiError as e:
            res.status, res.error = "error", str(e)
            res.sqlstate = getattr(e, "sqlstate", None)
            self._track_error(sess)
            self.released = True

    # -- session state --------------------------------------------------------------------
    def _track_ok(self, sess: _Session, step: Step, status_msg: str | None) -> None:
        tx = sess.conn.info.transaction_status
        if step.op is not None:
            if step.op == "commit":  # a commit after the write path failed stays "aborted" (see _execute_op)
                sess.state = "aborted" if sess.state == "aborted" else "committed"
            elif step.op == "rollback":
                sess.state = "rolled-back"
            elif tx == TransactionStatus.INTRANS:
                sess.state = "open"
            return
        sql = step.sql or ""
        if COMMIT_SQL.match(sql):
            sess.state = "aborted" if (status_msg or "").upper().startswith("ROLLBACK") else "committed"
        elif ROLLBACK_SQL.match(sql):
            sess.state = "rolled-back"
        elif tx == TransactionStatus.INTRANS:
            sess.state = "open"
        elif tx == TransactionStatus.INERROR:
            sess.state = "failed"

    def _track_error(self, sess: _Session) -> None:
        tx = sess.conn.info.transaction_status
        sess.state = "failed" if tx == TransactionStatus.INERROR else "aborted"

    # -- executing one step (in the session's worker thread) ----------------------------------
    def _execute(self, sess: _Session, step: Step, idx: int):
        if step.op is not None:
            return self._execute_op(sess, step, idx), None
        sql = step.sql
        if BEGIN_SQL.match(sql):
            sql = f"begin isolation level {self.level.isolation.sql}"
        cur = sess.conn.execute(sql)
        rows: list = []
        while True:
            if cur.description is not None:
                rows = [list(r) for r in cur.fetchall()]
            if not cur.nextset():
                break
        return rows, cur.statusmessage

    def _execute_op(self, sess: _Session, step: Step, idx: int):
        a = step.args
        where = f"{self.s.source}: step {idx} ({step.describe()})"
        op = step.op
        if op == "sleep":
            time.sleep(float(a.get("seconds", 0)))
            return []
        if op == "call":
            # A step of a transaction program written in Python (the matrix's agents): it gets the
            # session's connection and scratch space, so later steps can use what earlier ones read.
            fn = a.get("fn")
            if not callable(fn):
                raise ScheduleError(f"{where}: op call needs fn, a callable(conn, ctx)",
                                    fix="build call steps in Python; they have no TOML form")
            return fn(sess.conn, sess.ctx) or []
        if op in ("deliver_callback", "policy"):
            ids = a.get("ids")
            if not ids or "index" not in a:
                raise ScheduleError(f"{where} needs ids = [...] and index", fix='write ids = ["f1", "f2"], index = 1')
            if op == "deliver_callback":
                self.store.deliver_callback(_ids(ids), int(a["index"]), conn=sess.conn)
            else:
                key = set_key(_ids(ids))
                sess.conn.execute("insert into policy (policy_id, set_key, chosen_index, source) values (%s, %s, %s, %s)",
                                  (f"policy::{key}::{idx}", key, int(a["index"]), f"step-{idx}"))
            return []
        if op == "consolidate":  # a cleanup agent: fold the slot's current values (then write, commit)
            if "subject" not in a or "predicate" not in a:
                raise ScheduleError(f"{where}: consolidate needs subject and predicate",
                                    fix='write subject = "alice", predicate = "medication"')
            level = parse_level(a["level"]) if "level" in a else self.level
            sess.txn = self.store.begin_consolidate(
                a["subject"], a["predicate"], operator=a.get("operator", "lww"), level=level,
                mode=SchemaMode.parse(a.get("mode", "audit_row")), guard=bool(a.get("guard", True)),
                at=a.get("at"), conn=sess.conn, session=sess.name)
            sess.txn.step_log = [("begin", idx)]
            sess.txns.append(sess.txn)
            sess.txn.begin()
            return []
        if op == "begin" or (sess.txn is None and "fact" in a):
            if "fact" not in a:
                raise ScheduleError(f"{where}: begin needs a fact", fix="add fact = { ... } to the step")
            judge_args = a.get("judge") or {}
            judge = SimulatedJudge(p=float(judge_args.get("p", 0.5)),
                                   seed=int(judge_args.get("seed", self.judge_seed)))
            level = parse_level(a["level"]) if "level" in a else self.level
            sess.txn = self.store.begin_write(
                _fact(a["fact"], where), operator=a.get("operator", "lww"), level=level,
                mode=SchemaMode.parse(a.get("mode", "audit_row")), judge=judge, guard=bool(a.get("guard", True)),
                at=a.get("at"), conn=sess.conn, canonicalize=bool(a.get("canonicalize", True)), session=sess.name,
                slot_lock=bool(a.get("slot_lock", False)))
            sess.txn.step_log = []  # (phase, step index) for histories
            sess.txns.append(sess.txn)
            sess.txn.begin()
            sess.txn.step_log.append(("begin", idx))
            if op == "begin":
                return []
        txn = sess.txn
        if txn is None:
            raise ScheduleError(f"{where}: no write in progress in session {sess.name}",
                                fix="start it with op = \"begin\" and a fact")
        if op == "commit" and txn.done and sess.state == "aborted":
            # Like SQL COMMIT in a failed transaction: the write path already rolled back, so the
            # commit ends as a rollback, without an error of its own; the session stays aborted.
            return []
        txn.step_log.append((op, idx))
        if op == "read_candidates":
            return [[r.fact_id, r.object] for r in txn.read_candidates()]
        if op == "judge":
            v = txn.judge_step()
            return [[v.index]] if v else []
        if op == "read_callback":
            v = txn.read_callback()
            return [[v]] if v is not None else []
        if op == "write":
            o = txn.write()
            return [[o.action, o.winner_id]]
        if op == "commit":
            o = txn.commit()
            return [[o.action, o.winner_id]] if o else []
        if op == "rollback":
            txn.rollback()
            return []
        raise ScheduleError(f"{where}: unknown op {op!r}", fix="see toki.sched.schedule.OPS")

    # -- clean-up -----------------------------------------------------------------------
    def _cancel(self, sess: _Session) -> None:
        with contextlib.suppress(Exception):
            sess.conn.cancel_safe(timeout=2)

    def finish(self) -> None:
        """End every session: cancel what still runs, roll back what is still open."""
        for sess in self.sessions.values():
            if sess.pending is not None:
                self._cancel(sess)
                if not sess.pending[1].poll(5):
                    # The server ignored the cancel: unwind the step (its connection is closed below).
                    with contextlib.suppress(Exception):
                        sess.worker.kill()
                sess.pending = None
        for sess in self.sessions.values():
            tx = sess.conn.info.transaction_status
            if tx in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
                if sess.state not in ("failed",) and tx == TransactionStatus.INTRANS:
                    sess.state = "open"
                with contextlib.suppress(psycopg.Error):
                    sess.conn.execute("rollback")
            elif tx == TransactionStatus.ACTIVE or tx == TransactionStatus.UNKNOWN:
                with contextlib.suppress(Exception):
                    sess.conn.close()
