"""Faults in TOKI's own write path (:meth:`toki.db.store.Store.write`), statement by statement.

One *case* is an operator (lww, evi, await, rule) and a schema mode (audit_row, dual_row, base):
an incumbent ``f_0`` (object "park") is stored, then ``f_a`` ("lee") contradicts it. A dry run
lists the statements the write sends; the fault points are "before statement i" for each of
them and "after the COMMIT returned". At each point one fault is injected for real:

- ``terminate``: another connection runs ``pg_terminate_backend`` on the session's backend
  between two statements (the next statement finds its connection gone);
- ``ack-lost`` (at the COMMIT only): the session talks through :class:`~toki.faults.proxy.Proxy`,
  which forwards the COMMIT and swallows its answer, then closes the client's socket;
- ``kill``: the write runs in a forked child process, which SIGKILLs itself at the point (no
  ``finally``, no rollback, no goodbye to the server);
- ``restart``: the server is crashed and restarted (``pg_ctl stop -m immediate``; only for a
  server the fault run owns, see :mod:`toki.faults.private_server`).

Then the agent recovers as the write path's documentation says: reconnect, and retry with
``retry=True`` unless the write was acknowledged to a process that survived. Checked on the
state read back through the store (rows of every kind, judge log, policies, callbacks):

- *nothing half-written*: after the fault, before any retry, the state is the state before the
  write or the state after it, nothing in between (a winner without its audit row, a closed
  incumbent with no winner, two or no current values are named when they show);
- *nothing committed lost*: a write acknowledged to a live client is there after recovery;
- *honest outcome*: a write reported failed did not commit; a lost acknowledgement is reported
  ``unknown``, never failed;
- *retries not duplicated*: after the retry the state is exactly the fault-free run's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

import psycopg

from toki.db.server import Server
from toki.errors import DatabaseError, TokiError
from toki.faults.child import killed, wait_child
from toki.faults.proxy import FaultTimeout, Proxy
from toki.model import SENTINEL, Fact

OPERATORS = ("lww", "evi", "await", "rule")
MODES = ("audit_row", "dual_row", "base")
KINDS = ("terminate", "ack-lost", "kill", "restart")
T0 = datetime(2026, 1, 1)
INCUMBENT_AT = datetime(2000, 1, 1)
WAIT_LIMIT_S = 10.0  # every wait of an injection is bounded by this (FaultTimeout names it)


def incumbent() -> Fact:
    return Fact("f_0", "alice", "medication", "park", T0, SENTINEL, confidence=0.7)


def newcomer() -> Fact:
    return Fact("f_a", "alice", "medication", "lee", T0, SENTINEL, confidence=0.5)


def _judge():
    # A judge that always answers the same (p=1: the first of the canonical pair): a retry that
    # has to ask again gets the vote the fault-free run got, so states compare exactly.
    from toki.judges.base import SimulatedJudge

    return SimulatedJudge(p=1.0, seed=0)


# -- a connection whose statements can be interrupted -------------------------------------------

class FaultingConnection(psycopg.Connection):
    """A psycopg connection that counts its statements and runs a hook around statement ``at``.

    ``before(i, sql, conn)`` runs before statement ``i`` is sent; ``after(i, sql, conn)`` after it
    returned. Statements are what the write path sends with ``conn.execute``.
    """

    def _arm(self, before: Callable | None = None, after: Callable | None = None) -> None:
        self._faults_before, self._faults_after = before, after
        self._faults_n = 0
        self.statements: list[str] = []

    def execute(self, query, params=None, **kw):
        n = getattr(self, "_faults_n", None)
        if n is None:
            return super().execute(query, params, **kw)
        self._faults_n = n + 1
        text = query if isinstance(query, str) else str(query)
        self.statements.append(" ".join(text.split())[:80])
        if self._faults_before is not None:
            self._faults_before(n, text, self)
        cur = super().execute(query, params, **kw)
        if self._faults_after is not None:
            self._faults_after(n, text, self)
        return cur


# -- canonical state ----------------------------------------------------------------------------

def read_state(conn: psycopg.Connection) -> dict:
    """Everything the write path stores, with times and timestamps taken out."""
    rows = conn.execute(
        "select row_kind, case when row_kind = 'audit' then 'audit::' || split_part(fact_id, '::', 2) "
        "else fact_id end, object, system_time_end = '9999-12-31', provenance_id, resolution_strategy_id "
        "from agent_memory order by 1, 2, 4, 3, 5").fetchall()
    judge = conn.execute("select judge_key, vote from judge_log order by 1, 2").fetchall()
    policy = conn.execute("select set_key, chosen_index, active, source from policy order by 1, 4, 2").fetchall()
    callbacks = conn.execute("select request_hash, status, chosen_index from callback_log order by 1").fetchall()
    return {"rows": [list(r) for r in rows], "judge_log": [list(r) for r in judge],
            "policy": [list(r) for r in policy], "callbacks": [list(r) for r in callbacks]}


def half_written(state: dict, mode: str) -> list[str]:
    """Named shapes of a half-done supersession in a state."""
    out = []
    cur_open = [r for r in state["rows"] if r[0] == "current" and r[3]]
    cur_closed = [r for r in state["rows"] if r[0] == "current" and not r[3]]
    audits = [r for r in state["rows"] if r[0] == "audit"]
    objs = sorted({r[2] for r in cur_open})
    if len(objs) > 1:
        out.append(f"two current values {objs}")
    if not cur_open:
        out.append("no current value")
    if cur_closed and mode != "base" and not any(r[1] != cur_closed[0][1] for r in cur_open):
        out.append(f"a closed incumbent ({cur_closed[0][1]}) with no winner")
    if mode == "audit_row" and cur_closed and not audits:
        out.append(f"a winner without its audit row ({cur_closed[0][1]} closed, no audit row)")
    if mode == "audit_row" and audits and not cur_closed and len(state["rows"]) > 2:
        out.append("an audit row without the supersession it records")
    return out


def describe_diff(got: dict, want: dict) -> str:
    parts = []
    for k in want:
        g, w = got.get(k), want.get(k)
        if g != w:
            extra = [x for x in g if x not in w]
            missing = [x for x in w if x not in g]
            parts.append(f"{k}: " + "; ".join(
                ([f"extra {extra}"] if extra else []) + ([f"missing {missing}"] if missing else [])))
    return " | ".join(parts) or "equal"


# -- one case -----------------------------------------------------------------------------------

@dataclass
class Case:
    operator: str
    mode: str

    @property
    def name(self) -> str:
        return f"{self.operator}/{self.mode}"


@dataclass
class FaultResult:
    system: str
    case: str
    kind: str
    point: int  # before statement `point`; == len(statements) means after the COMMIT returned
    statement: str  # the statement at the point ("after commit" for the last)
    reported: str  # what the write told its caller: an action, "failed: ...", "killed", "crashed: ..."
    survived: bool = True
    findings: list[str] = field(default_factory=list)
    retried: str | None = None  # the retry's action
    seconds: float = 0.0
    skipped: str | None = None

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("system", "case", "kind", "point", "statement", "reported",
                                              "survived", "findings", "retried", "seconds", "skipped")}


class WritePathFaults:
    """Fault points of the write path on one server; :meth:`run` injects one fault at one point."""

    def __init__(self, server: Server, *, durable: bool = True, restart: Callable[[], float] | None = None):
        self.server = server
        self.durable = durable
        self.restart = restart  # None: the server is not ours to restart
        self._ref: dict[str, tuple[list[str], dict, dict]] = {}

    # -- a fresh store holding the incumbent -------------------------------------------------
    @contextlib.contextmanager
    def _store(self, case: Case) -> Iterator:
        from toki.db.store import Store

        store = Store.open(server=self.server, label="faults", mode=case.mode, durable=self.durable,
                           default_judge=_judge())
        try:
            store.write(incumbent(), operator=case.operator, at=INCUMBENT_AT, judge=_judge())
            yield store
        finally:
            with contextlib.suppress(Exception):
                store.close()

    def _conn(self, store, dsn: str | None = None) -> FaultingConnection:
        opts = f"-c synchronous_commit={'on' if self.durable else 'off'} -c search_path={store.schema}"
        conn = FaultingConnection.connect(dsn or self.server.dsn, autocommit=True, options=opts,
                                          application_name="toki-faults", connect_timeout=10)
        return conn

    def _write(self, store, conn, retry: bool = False):
        return store.write(newcomer(), operator=self_op(store), conn=conn, judge=_judge(), retry=retry)

    def reference(self, case: Case) -> tuple[list[str], dict, dict]:
        """The statements of a fault-free write, and the states before and after it."""
        if case.name not in self._ref:
            with self._store(case) as store:
                store._faults_operator = case.operator
                before = read_state(store.conn)
                conn = self._conn(store)
                conn._arm()
                try:
                    self._write(store, conn)
                finally:
                    conn.close()
                self._ref[case.name] = (list(conn.statements), before, read_state(store.conn))
        return self._ref[case.name]

    def points(self, case: Case, kind: str) -> list[int]:
        stmts = self.reference(case)[0]
        n = len(stmts)
        if kind == "ack-lost":
            return [i for i, s in enumerate(stmts) if s.lower().startswith("commit")]
        if kind == "terminate":
            return list(range(n))  # after the COMMIT returned there is no statement left to interrupt
        return list(range(n + 1))

    # -- one fault ------------------------------------------------------------------------------
    def run(self, case: Case, kind: str, point: int) -> FaultResult:
        stmts, before, after = self.reference(case)
        label = stmts[point] if point < len(stmts) else "after commit"
        res = FaultResult("toki", case.name, kind, point, label, reported="?")
        if kind == "restart" and self.restart is None:
            res.skipped = "the server is not toki's to restart (pass no --dsn to use a private one)"
            return res
        t0 = time.perf_counter()
        with self._store(case) as store:
            store._faults_operator = case.operator
            acked = self._inject(store, kind, point, res)
            state = self._read_after_fault(store, res)
            if state is not None:
                self._judge_state(case, state, before, after, acked, res)
                if not acked or res.reported in ("killed",):
                    self._retry(store, after, res)
        res.seconds = round(time.perf_counter() - t0, 3)
        res.survived = res.survived and not res.findings
        return res

    def _inject(self, store, kind: str, point: int, res: FaultResult) -> bool:
        """Run the write with the fault; True when a live client got an acknowledgement."""
        if kind == "kill":
            return self._killed(store, point, res)
        proxy = Proxy(self.server.dsn) if kind == "ack-lost" else None
        conn = self._conn(store, proxy.dsn if proxy else None)
        fired = []

        def before(i, sql, c):
            if i != point or fired:
                return
            fired.append(i)
            if kind == "terminate":
                self._terminate(c.info.backend_pid)
            elif kind == "restart":
                self.restart()
            elif kind == "ack-lost":
                proxy.link_of(c).lose_replies()

        def after(i, sql, c):
            if kind == "restart" and i + 1 == point and point == len(res_statements) and not fired:
                fired.append(i)
                self.restart()

        res_statements = self.reference(Case(store._faults_operator, store.mode.value))[0]
        conn._arm(before, after)
        try:
            out = self._write(store, conn)
            res.reported = out.action if out.action != "unknown" else f"unknown (would have been {out.intended})"
            if kind == "ack-lost" and out.action != "unknown":
                res.findings.append(f"the COMMIT's acknowledgement was lost but the write reported {out.action!r}")
            return out.action not in ("unknown",)
        except DatabaseError as e:
            res.reported = f"failed ({e.sqlstate or 'connection lost'})"
            if kind == "ack-lost":
                res.findings.append("a lost COMMIT acknowledgement was reported as a failure (it may have committed)")
            return False
        except TokiError as e:
            res.reported = f"refused: {e.problem[:60]}"
            return False
        except Exception as e:  # noqa: BLE001 - anything else is a crash of the write path itself
            res.reported = f"crashed: {type(e).__name__}"
            res.findings.append(f"the write path raised {type(e).__name__}: {str(e)[:120]}")
            return False
        finally:
            with contextlib.suppress(Exception):
                conn.close()
            if proxy is not None:
                proxy.close()

    def _killed(self, store, point: int, res: FaultResult) -> bool:
        """The write in a forked child that SIGKILLs itself at the point."""
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 3
            try:
                conn = self._conn(store)

                def before(i, sql, c):
                    if i == point:
                        os.kill(os.getpid(), signal.SIGKILL)
                conn._arm(before, None)
                self._write(store, conn)
                os.kill(os.getpid(), signal.SIGKILL)  # point == after the COMMIT returned
            except BaseException:
                code = 4
            os._exit(code)
        status = wait_child(pid, WAIT_LIMIT_S * 3, 0.005, f"the write process (pid {pid}) neither finished nor "
                            f"died within {WAIT_LIMIT_S * 3:g} s", fix="the write path hangs at this point")
        if killed(status):
            res.reported = "killed"
        else:
            res.reported = f"child exited {os.WEXITSTATUS(status)}"
            res.findings.append("the write process was not killed at the point (it failed first)")
        return False  # nobody alive holds an acknowledgement

    def _terminate(self, pid: int) -> None:
        with psycopg.connect(self.server.dsn, autocommit=True, connect_timeout=10) as admin:
            admin.execute("select pg_terminate_backend(%s)", (pid,))
            deadline = time.monotonic() + WAIT_LIMIT_S
            while admin.execute("select 1 from pg_stat_activity where pid = %s", (pid,)).fetchone():
                if time.monotonic() > deadline:
                    raise FaultTimeout(f"backend {pid} was still there {WAIT_LIMIT_S:g} s after "
                                       "pg_terminate_backend", fix="the role may lack the right to signal it")
                time.sleep(0.002)

    def _read_after_fault(self, store, res: FaultResult) -> dict | None:
        deadline = time.monotonic() + WAIT_LIMIT_S
        while True:
            try:
                with store.connect() as c:
                    return read_state(c)
            except psycopg.errors.UndefinedTable as e:  # the store's tables are gone, not unreachable
                res.findings.append(f"the store is gone after recovery ({str(e).strip().splitlines()[0]}): "
                                    "everything not yet flushed to the WAL was lost")
                return None
            except (psycopg.OperationalError, TokiError) as e:
                if time.monotonic() > deadline:
                    res.findings.append(f"the server did not come back within {WAIT_LIMIT_S:g} s: {e}")
                    return None
                time.sleep(0.05)

    def _judge_state(self, case: Case, state: dict, before: dict, after: dict, acked: bool,
                     res: FaultResult) -> None:
        if state not in (before, after):
            shapes = half_written(state, case.mode)
            res.findings.append("half-written: " + (", ".join(shapes) if shapes else describe_diff(state, after)))
            return
        if acked and state != after:
            res.findings.append(f"lost: the write was acknowledged ({res.reported}) but is not in the store "
                                "after recovery")
        if res.reported.startswith("failed") and state == after and after != before:
            res.findings.append("the write was reported failed but committed")

    def _retry(self, store, after: dict, res: FaultResult) -> None:
        try:
            with store.connect() as c:
                out = store.write(newcomer(), operator=store._faults_operator, conn=c, judge=_judge(), retry=True)
                res.retried = out.action
                state = read_state(c)
        except Exception as e:  # noqa: BLE001 - a failed retry is a finding, not a crash of the fault run
            res.retried = f"failed: {type(e).__name__}"
            res.findings.append(f"the retry failed: {str(e)[:120]}")
            return
        if state != after:
            res.findings.append("after the retry: " + describe_diff(state, after))


def self_op(store) -> str:
    return store._faults_operator


def cases(operators=OPERATORS, modes=MODES) -> list[Case]:
    return [Case(o, m) for o in operators for m in modes]
