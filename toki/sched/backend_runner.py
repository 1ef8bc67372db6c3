"""Running schedules on the databases beyond PostgreSQL (MariaDB/MySQL, SQLite, DuckDB).

The same contract as :mod:`toki.sched.runner` (docs/design.md#schedule-files-toml, docs/design.md#run-result-json), through the backend seam
(:mod:`toki.backends`). How a statement "blocks" differs per database, and so does the driving:

* MariaDB/MySQL queue lock waits like PostgreSQL: each session's statements go through its own
  worker thread, and a statement that has not returned is blocked once the InnoDB monitor lists
  its connection as waiting for a lock (never a fixed sleep).
* SQLite never queues: with a busy timeout of 0 a statement that needs a lock another
  connection holds fails at once with SQLITE_BUSY. The runner records the step as blocked and
  re-issues it whenever another session has moved. When every session in a transaction is
  stuck on SQLITE_BUSY nothing can ever release them (SQLite's own busy handler gives up in
  exactly this case): toki rolls back one of them, a session whose blocked step is not a commit
  (the reader that tried to become a writer), and reports the step failed with SQLITE_BUSY,
  as an application that follows SQLite's advice would.
* DuckDB never waits: a conflicting write fails at once.

Steps are SQL (sent as written) or Python ``call`` steps (the matrix's programs, whose SQL the
portable connection rewrites); write-path ``op`` steps need PostgreSQL's write path and are
refused with a message (``needs_postgresql``). Errors record the database's own code
(MySQL error number, SQLite extended result name, DuckDB exception class) where PostgreSQL
results carry the SQLSTATE.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import secrets
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as fwait
from typing import Any

from toki.backends.base import ErrorKind
from toki.backends.portable import PortableConnection
from toki.errors import ScheduleError, StepTimeout
from toki.levels import Level, parse_level
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

#: how long a statement seen waiting on a deadlock_at_once server may take to fail as a deadlock
#: victim and count as not blocked (InnoDB's check takes microseconds; the rest is load)
DEADLOCK_GRACE_S = 0.05

_NO_ROWS = re.compile(r"^\s*(insert|update|delete|create|drop|alter|truncate|set|begin|start|commit|rollback|end)\b",
                      re.I)


def needs_postgresql(schedule: Schedule) -> str | None:
    """Why a schedule cannot run outside PostgreSQL (None when it can)."""
    if any(s.op not in (None, "sleep", "call") for s in schedule.steps):
        return "write-path op steps need PostgreSQL's write path (toki.db.store)"
    return None


class _Done:
    """A completed Future stand-in for databases whose statements run inline (never wait)."""

    def __init__(self, fn):
        self._value = self._exc = None
        try:
            self._value = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller like Future.result()
            self._exc = e

    def done(self) -> bool:
        return True

    def result(self):
        if self._exc is not None:
            raise self._exc
        return self._value


class _Session:
    def __init__(self, name: str, conn, threaded: bool, ident: Any):
        self.name, self.conn, self.ident = name, conn, ident
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"toki-{name}") if threaded else None
        self.reset()

    def reset(self) -> None:
        self.state = "idle"
        self.in_txn = False
        self.pending: tuple[int, Any] | None = None
        self.busy = False  # the pending step failed SQLITE_BUSY and waits to be re-issued
        self.deferred: deque[int] = deque()
        self.ctx: dict[str, Any] = {}

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(Exception):
            self.conn.close()


class BackendLane:
    """Connections (one per session, plus an admin one) on one database, reusable across runs.

    Like PostgreSQL lanes, which work in a schema of their own, a lane keeps what it creates apart:
    on MariaDB/MySQL in a database of its own (``toki_run_...``), on SQLite and DuckDB in a file of
    its own next to the DSN's (``PATH.toki_run_...``); both are removed when the lane closes.
    Connections speak toki's SQL through :class:`~toki.backends.portable.PortableConnection`.
    """

    def __init__(self, server, *, label: str = "run", store: bool = False, judge_log_form: str = "unique",
                 **_ignored):
        self.server = server
        self.kind = server.seam.name
        label = re.sub(r"[^a-z0-9_]", "_", label.lower())[:20]
        name = f"toki_run_{label}_{secrets.token_hex(4)}"
        self.database: str | None = None
        self.files: list[str] = []
        if self.kind == "mysql":
            self.seam = server.seam
            self.database = name
        else:
            self.seam = copy.copy(server.seam)
            self.seam.path = f"{server.seam.path}.{name}"
            self.files = [self.seam.path + ext for ext in ("", "-journal", "-wal", "-shm", ".wal")]
        self.admin = self._connect()
        if self.database:
            self.admin.execute(f"create database {self.database}")
            self.admin.execute(f"use {self.database}")
        self.sessions: dict[str, _Session] = {}
        self.judge_log_form: str | None = None
        if store:
            self.ensure_store(judge_log_form)

    def _connect(self) -> PortableConnection:
        return PortableConnection(self.seam.connect(), self.kind)

    def ensure_store(self, judge_log_form: str = "unique") -> None:
        """The toki tables (agent_memory, judge_log, ...), compiled for this database."""
        if self.judge_log_form == judge_log_form:
            return
        from toki.db import schema as dbschema

        if self.judge_log_form is not None:
            for t in dbschema.TABLES:
                self.admin.execute(f"drop table if exists {t}")
            if self.kind == "duckdb":
                self.admin.execute("drop sequence if exists judge_log_seq")
        for stmt in dbschema.ddl_for(self.kind, judge_log_form):
            self.admin.execute(stmt)
        self.judge_log_form = judge_log_form

    def reset_store(self) -> None:
        from toki.db import schema as dbschema

        for t in dbschema.TABLES:
            self.admin.execute(f"delete from {t}")

    def session(self, name: str) -> _Session:
        s = self.sessions.get(name)
        if s is None:
            conn = self._connect()
            if self.database:
                conn.execute(f"use {self.database}")
                s = _Session(name, conn, True, conn.raw.thread_id())
            else:
                s = _Session(name, conn, False, name)
            self.sessions[name] = s
        return s

    def execute(self, conn: PortableConnection, sql: str) -> tuple[list, None]:
        """Run one statement; its rows (empty for a statement that returns none)."""
        res = conn.execute(sql)
        if res.description is None or (_NO_ROWS.match(sql) and "returning" not in sql.lower()):
            return [], None  # DuckDB answers an UPDATE with a row holding its count: not a result
        return [list(r) for r in res.fetchall()], None

    def close(self) -> None:
        for s in self.sessions.values():
            s.close()
        self.sessions.clear()
        if self.database:
            with contextlib.suppress(Exception):
                self.admin.execute(f"drop database if exists {self.database}")
        with contextlib.suppress(Exception):
            self.admin.close()
        close = getattr(self.seam, "close", None)
        if close:
            with contextlib.suppress(Exception):
                close()
        for f in self.files:
            with contextlib.suppress(OSError):
                os.unlink(f)

    def __enter__(self) -> "BackendLane":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run(runner, schedule: Schedule, level: Level | str = "read-committed", *, lane: BackendLane | None = None,
        on_blocked: str | None = None, check_expect: bool = True, reset: bool = False, **_ignored) -> RunResult:
    lvl = parse_level(level) if isinstance(level, str) else level
    seam = runner.server.seam
    why = needs_postgresql(schedule)
    if why:
        raise ScheduleError(f"{schedule.source}: {why}; {seam.name} runs SQL steps only",
                            fix="run this schedule on PostgreSQL (drop --dsn) or write its steps as SQL")
    seam.begin_sql(lvl.isolation)  # a level the database lacks is an error naming the ones it has
    # Where a database blocks differs (InnoDB's SERIALIZABLE locks plain reads, SQLite locks the
    # whole file), so a step sent to a session still blocked waits for it (the executed order
    # is recorded) unless the caller asks for the strict mode.
    mode = on_blocked or "defer"
    own = lane is None
    lane = lane or BackendLane(runner.server, label=schedule.name)
    t0 = time.perf_counter()
    try:
        if schedule.store:
            lane.ensure_store(schedule.judge_log_form)
            if reset:
                lane.reset_store()
        for sql in schedule.setup:
            _admin(lane, sql, schedule, "setup")
        sessions = {name: lane.session(name) for name in schedule.sessions}
        for s in sessions.values():
            s.reset()
            for sql in schedule.session_setup.get(s.name, []):
                try:
                    lane.execute(s.conn, sql)
                except Exception as e:
                    c = seam.classify(e)
                    raise ScheduleError(f"{schedule.source}: setup of session {s.name} failed ({c.code}): {c.message}",
                                        fix="fix the session's setup SQL") from None
        ex = _Execution(runner, schedule, lvl, mode, lane, sessions)
        try:
            ex.go()
        finally:
            ex.finish()
        final = [{"sql": sql, "rows": jsonable(_admin(lane, sql, schedule, "final"))} for sql in schedule.final]
        for s in sessions.values():
            for sql in schedule.session_teardown.get(s.name, []):
                with contextlib.suppress(Exception):
                    lane.execute(s.conn, sql)
        for sql in schedule.teardown:
            _admin(lane, sql, schedule, "teardown")
        d = runner.server.describe()
        result = RunResult(
            schedule=schedule.name, level=lvl.isolation.cli_name + ("+cb" if lvl.callback else ""),
            backend={"name": d["name"], "version": d["version"]}, steps=ex.results,
            sessions={n: s.state for n, s in sessions.items()}, final=final, executed=ex.executed,
            elapsed_s=time.perf_counter() - t0, contexts={n: s.ctx for n, s in sessions.items()})
        if any(s.name for s in schedule.steps):
            result.permutation = [s.name for s in schedule.steps]
        if check_expect:
            result.expect = check_expectation(schedule, lvl, result, database=expectation_keys(runner.server))
        return result
    finally:
        if own:
            lane.close()


def expectation_keys(server) -> tuple[str, ...]:
    """The names a schedule's per-database expectations may use for this server, most specific first."""
    return tuple(server.seam.expectation_keys())


def _admin(lane: BackendLane, sql: str, schedule: Schedule, what: str) -> list:
    try:
        return lane.execute(lane.admin, sql)[0]
    except Exception as e:
        c = lane.seam.classify(e)
        raise ScheduleError(f"{schedule.source}: {what} statement failed ({c.code}): {c.message}\n  {sql}",
                            fix=f"fix the {what} SQL for {lane.server.describe()['name']} (see the README's SQL "
                                "dialect notes)") from None


class _Execution(StepLoop):
    def __init__(self, runner, schedule: Schedule, level: Level, mode: str, lane: BackendLane, sessions):
        self.r, self.s, self.level, self.mode, self.lane = runner, schedule, level, mode, lane
        self.seam = lane.seam
        self.sessions: dict[str, _Session] = sessions
        self.results = [StepResult(i, st.session, st.sql, st.op, st.name) for i, st in enumerate(schedule.steps)]
        self.executed: list[int] = []
        self.clock = 0
        self.threaded = lane.kind == "mysql"
        self.keys = tuple(lane.seam.expectation_keys())

    # -- driving: the step loop is toki.sched.drive.StepLoop.go --------------------------------
    def _submit(self, sess: _Session, idx: int):
        step = self.s.steps[idx]
        if sess.pool is not None:
            return sess.pool.submit(self._execute, sess, step)
        return _Done(lambda: self._execute(sess, step))

    def _issue(self, idx: int) -> None:
        sess = self.sessions[self.s.steps[idx].session]
        fut = self._submit(sess, idx)
        sess.pending = (idx, fut)
        self.executed.append(idx)
        self._await_issued(sess, idx, fut)

    def _busy(self, fut) -> bool:
        if not fut.done():
            return False
        try:
            fut.result()
        except Exception as e:  # noqa: BLE001
            return self.seam.classify(e).kind is ErrorKind.BUSY
        return False

    def _await_issued(self, sess: _Session, idx: int, fut) -> None:
        if not self.threaded:
            if self._busy(fut):
                self.results[idx].blocked = sess.busy = True
                self._break_sqlite_deadlock()
            else:
                self._complete(sess, idx, fut, at=idx)
            return
        deadline = time.monotonic() + self.r.step_limit_s
        delay = 0.0002
        while True:
            fwait([fut], timeout=delay)
            if fut.done():
                self._complete(sess, idx, fut, at=idx)
                return
            if self.seam.is_blocked(sess.ident, []):
                if self._deadlock_victim_at_once(fut):  # it never waited for anyone: not blocked
                    self._complete(sess, idx, fut, at=idx)
                    return
                self.results[idx].blocked = True
                return
            if time.monotonic() > deadline:
                raise StepTimeout(f"{self.s.source}: step {idx} ({self.s.steps[idx].describe()}) neither finished "
                                  f"nor blocked within {self.r.step_limit_s:g}s",
                                  fix="the statement hangs; fix it or raise --step-limit")
            delay = min(delay * 2, 0.01)

    def _deadlock_victim_at_once(self, fut) -> bool:
        """Whether a statement just seen waiting is a server's deadlock victim the moment its wait
        began (``deadlock_at_once`` servers: InnoDB), not a blocked step: it fails with a
        deadlock within a short grace, while nothing else in the schedule moves."""
        if not getattr(self.seam, "deadlock_at_once", False):
            return False
        fwait([fut], timeout=DEADLOCK_GRACE_S)
        if not fut.done() or fut.exception() is None:
            return False
        return self.seam.classify(fut.exception()).kind is ErrorKind.DEADLOCK

    def _settle(self, wait_any: bool = False) -> bool:
        moved = False
        progress = True
        while progress:
            progress = False
            for sess in self.sessions.values():
                if sess.pending is None:
                    if sess.deferred:
                        self._issue(sess.deferred.popleft())
                        progress = moved = True
                    continue
                idx, fut = sess.pending
                if sess.busy:  # SQLite: re-issue the statement now that something else has moved
                    fut = self._submit(sess, idx)
                    if self._busy(fut):
                        continue
                    sess.busy = False
                    sess.pending = (idx, fut)
                elif not fut.done() and not self.seam.is_blocked(sess.ident, []):
                    deadline = time.monotonic() + self.r.step_limit_s
                    while not fut.done():
                        fwait([fut], timeout=0.002)
                        if fut.done() or self.seam.is_blocked(sess.ident, []):
                            break
                        if time.monotonic() > deadline:
                            raise StepTimeout(f"{self.s.source}: step {idx} did not finish within "
                                              f"{self.r.step_limit_s:g}s after it was released",
                                              fix="raise --step-limit or look for a hang")
                if fut.done():
                    self._complete(sess, idx, fut, at=self.clock)
                    progress = moved = True
        if not moved and not self.threaded:
            moved = self._break_sqlite_deadlock()
        if not moved and wait_any and self.threaded:
            futs = [s.pending[1] for s in self.sessions.values() if s.pending]
            if futs:
                fwait(futs, timeout=0.05, return_when="FIRST_COMPLETED")
                if any(f.done() for f in futs):
                    moved = self._settle() or True
        return moved

    def _break_sqlite_deadlock(self) -> bool:
        """Every session in a transaction is stuck on SQLITE_BUSY: roll one back (see module doc)."""
        open_ = [s for s in self.sessions.values() if s.in_txn or s.busy]
        if not open_ or not all(s.busy for s in open_):
            return False
        if len(open_) == 1:
            return False  # busy on something outside the schedule: the drain's step limit reports it
        victims = [s for s in open_ if not COMMIT_SQL.match(self.s.steps[s.pending[0]].sql or "")] or open_
        victim = max(victims, key=lambda s: s.pending[0])
        idx = victim.pending[0]
        res = self.results[idx]
        with contextlib.suppress(Exception):
            victim.conn.execute("rollback")
        res.status, res.sqlstate = "error", "SQLITE_BUSY"
        res.errno, res.own_code = 5, True  # SQLITE_BUSY: SQLite has no SQLSTATE
        res.error = "database is locked by a session that waits for this one (deadlock): toki rolled this one back"
        res.completed_at = self.clock
        victim.pending, victim.busy, victim.in_txn, victim.state = None, False, False, "aborted"
        self._settle()
        return True

    def _complete(self, sess: _Session, idx: int, fut, *, at: int) -> None:
        res = self.results[idx]
        res.completed_at = at if res.blocked else idx
        sess.pending = None
        step = self.s.steps[idx]
        try:
            rows = fut.result()
        except Exception as e:  # noqa: BLE001 - every driver error is classified
            c = self.seam.classify(e)
            res.status, res.sqlstate, res.error = "error", c.code, c.message.splitlines()[0] if c.message else c.kind.value
            res.errno, res.standard_sqlstate, res.own_code = c.errno, c.sqlstate, True
            if c.aborts or c.kind is ErrorKind.DEADLOCK:
                sess.state, sess.in_txn = "aborted", False
                if self.lane.kind != "mysql":  # DuckDB keeps the aborted transaction open until ROLLBACK
                    with contextlib.suppress(Exception):
                        self.lane.execute(sess.conn, "rollback")
            elif sess.in_txn:
                sess.state = "open"
            return
        res.status, res.rows = "ok", rows
        sql = step.sql or ""
        if step.op is not None:
            return
        if BEGIN_SQL.match(sql) or re.match(r"^\s*(begin|start\s+transaction)\b", sql, re.I):
            sess.state, sess.in_txn = "open", True
        elif COMMIT_SQL.match(sql):
            sess.state = "aborted" if sess.state == "aborted" else "committed"
            sess.in_txn = False
        elif ROLLBACK_SQL.match(sql):
            sess.state = "aborted" if sess.state == "aborted" else "rolled-back"
            sess.in_txn = False
        elif sess.in_txn:
            sess.state = "open"

    # -- one step --------------------------------------------------------------------------
    def _execute(self, sess: _Session, step: Step):
        if step.op == "sleep":
            time.sleep(float(step.args.get("seconds", 0)))
            return []
        if step.op == "call":
            fn = step.args.get("fn")
            return fn(sess.conn, sess.ctx) or []
        sql = step.sql_for(self.keys)
        if BEGIN_SQL.match(sql):
            for s in self.seam.begin_sql(self.level.isolation):
                self.lane.execute(sess.conn, s)
            return []
        if (COMMIT_SQL.match(sql) or ROLLBACK_SQL.match(sql)) and sess.state == "aborted":
            # The database already ended this transaction (deadlock victim, conflict): like COMMIT
            # in a failed PostgreSQL transaction, the commit ends nothing and the session stays aborted.
            with contextlib.suppress(Exception):
                self.lane.execute(sess.conn, "rollback")
            return []
        if COMMIT_SQL.match(sql):
            sql = "commit"  # PostgreSQL's END is not MySQL's
        elif ROLLBACK_SQL.match(sql):
            sql = "rollback"  # nor is its ABORT
        return self.lane.execute(sess.conn, sql)[0]

    def finish(self) -> None:
        for sess in self.sessions.values():
            if sess.pending is not None and not sess.busy and sess.pool is not None:
                with contextlib.suppress(Exception):
                    self.lane.execute(self.lane.admin, f"kill query {int(sess.ident)}")
                fwait([sess.pending[1]], timeout=5)
            sess.pending, sess.busy = None, False
        for sess in self.sessions.values():
            if sess.in_txn and sess.state not in ("failed",):
                sess.state = "open"
            with contextlib.suppress(Exception):
                self.lane.execute(sess.conn, "rollback")
            sess.in_txn = False

