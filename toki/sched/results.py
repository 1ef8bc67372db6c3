"""What a run returns: its steps' results, the run's result, and the check of a run against a
schedule's golden outcome. Shared by the PostgreSQL runner (:mod:`toki.sched.runner`) and the
runner for the other databases (:mod:`toki.sched.backend_runner`), which import it and not
each other."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from toki.levels import Level
from toki.sched.schedule import Schedule

BEGIN_SQL = re.compile(r"^\s*(begin|start\s+transaction)(\s+(transaction|work))?\s*;?\s*$", re.I)
COMMIT_SQL = re.compile(r"^\s*(commit|end)(\s+(transaction|work))?\s*;?\s*$", re.I)
ROLLBACK_SQL = re.compile(r"^\s*(rollback|abort)(\s+(transaction|work))?\s*;?\s*$", re.I)

def jsonable(v: Any) -> Any:
    """Rows as JSON values in column order (timestamps as ISO strings)."""
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (bytes, memoryview)):
        return bytes(v).hex()
    return v


@dataclass
class StepResult:
    index: int
    session: str
    sql: str | None
    op: str | None = None
    name: str | None = None
    blocked: bool = False
    completed_at: int | None = None
    status: str = "pending"  # ok | error | pending
    rows: list = field(default_factory=list)
    # The database's own code for the error, what a schedule's ``expect.errors`` names: the SQLSTATE on
    # PostgreSQL, the error number on MySQL ("1213"), the result-code name on SQLite ("SQLITE_BUSY"),
    # the exception class on DuckDB. The JSON names it ``code``; its ``sqlstate`` and ``errno`` are
    # the two below (set by the other databases' runner) or, on PostgreSQL, this code and null.
    sqlstate: str | None = None
    error: str | None = None
    errno: int | None = None  # the vendor's error number: MySQL's (1213), SQLite's extended result code
    standard_sqlstate: str | None = None  # the SQLSTATE proper, where the database has one (MySQL: 40001)
    own_code: bool = False  # ``sqlstate`` holds the database's own code, not a SQLSTATE (not PostgreSQL)

    @property
    def std_sqlstate(self) -> str | None:
        """The SQLSTATE proper: 40001 for MySQL's 1213; None where the database has none (SQLite, DuckDB)."""
        return self.standard_sqlstate if self.own_code else self.sqlstate

    def to_json(self) -> dict:
        d = {"index": self.index, "session": self.session, "sql": self.sql, "blocked": self.blocked,
             "completed_at": self.completed_at, "status": self.status, "rows": jsonable(self.rows),
             "sqlstate": self.std_sqlstate, "errno": self.errno,
             "code": self.sqlstate, "error": self.error}
        if self.op is not None:
            d["op"] = self.op
        if self.name is not None:
            d["name"] = self.name
        return d


@dataclass
class RunResult:
    schedule: str
    level: str
    backend: dict
    steps: list[StepResult]
    sessions: dict[str, str]
    final: list[dict]
    executed: list[int]  # step indexes in the order they were sent
    expect: dict = field(default_factory=lambda: {"checked": False, "ok": True, "diff": []})
    history: list[dict] | None = None
    outcomes: dict[str, Any] = field(default_factory=dict)  # session -> WriteOutcome (write-path runs)
    elapsed_s: float = 0.0
    permutation: list[str] | None = None
    contexts: dict[str, dict] = field(default_factory=dict)  # session -> its "call" steps' scratch space

    @property
    def ok(self) -> bool:
        return bool(self.expect.get("ok", True))

    def sqlstates(self) -> list[str]:
        return [s.sqlstate for s in self.steps if s.sqlstate]

    def to_json(self) -> dict:
        d = {"schedule": self.schedule, "level": self.level, "backend": self.backend,
             "steps": [s.to_json() for s in self.steps], "sessions": self.sessions,
             "final": self.final, "expect": self.expect, "executed": self.executed,
             "elapsed_s": round(self.elapsed_s, 6)}
        if self.permutation is not None:
            d["permutation"] = self.permutation
        if self.history is not None:
            d["history"] = self.history
        return d


def check_expectation(schedule: Schedule, level: Level, result: RunResult,
                      database: tuple[str, ...] = ()) -> dict:
    """Compare a run with the schedule's golden outcome for its level.

    ``database`` names the database the run used, most specific first (``("mariadb", "mysql")``);
    empty means PostgreSQL, whose expectations are the plain ``[expect.LEVEL]`` tables.
    """
    exp = schedule.expectation(level.isolation, database)
    if exp is None:
        return {"checked": False, "ok": True, "diff": []}
    diff = []
    blocked = [s.index for s in result.steps if s.blocked]
    if exp.blocked is not None and sorted(exp.blocked) != blocked:
        diff.append(f"blocked steps: expected {sorted(exp.blocked)}, got {blocked}")
    if exp.errors is not None:
        got = {s.index: s.sqlstate for s in result.steps if s.status == "error"}
        want = {int(k): str(v) for k, v in exp.errors.items()}
        if got != want:
            diff.append(f"errors: expected {want}, got {got}")
    if exp.rows is not None:
        for idx, want in sorted(exp.rows.items()):
            got = jsonable(result.steps[idx].rows) if result.steps[idx].status == "ok" else None
            if jsonable(want) != got:
                diff.append(f"rows of step {idx}: expected {jsonable(want)}, got {got}")
    if exp.final is not None:
        got = [f["rows"] for f in result.final]
        if jsonable(exp.final) != got:
            diff.append(f"final: expected {jsonable(exp.final)}, got {got}")
    if exp.sessions is not None and exp.sessions != {k: result.sessions.get(k) for k in exp.sessions}:
        diff.append(f"sessions: expected {exp.sessions}, got {result.sessions}")
    return {"checked": True, "ok": not diff, "diff": diff}
