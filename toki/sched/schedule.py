"""Schedules: sessions, steps, expectations, and their TOML format (docs/design.md#schedule-files-toml).

A step is either SQL (``sql = "..."``) or a write-path phase of the Store
(``op = "read_candidates"`` with a ``fact``), so an agent's read, LLM and write windows are
schedules too. Validation names the file, the step and the fix.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from toki.errors import ScheduleError, TokiError
from toki.levels import parse_isolation

#: write-path phases a step may name (an extension of the schedule format; see toki.db.store.WriteTxn)
OPS = ("begin", "read_candidates", "judge", "read_callback", "write", "commit", "rollback",
       "deliver_callback", "policy", "sleep", "call", "consolidate")
ON_BLOCKED = ("error", "defer")
#: databases a schedule may give expectations for: [expect.DATABASE.LEVEL] (plain [expect.LEVEL] is PostgreSQL)
#: (SQLite's keys name its journal and begin mode: its blocking depends on both; mariadb-snapshot is
#: MariaDB with innodb_snapshot_isolation on, a different REPEATABLE READ)
DATABASES = ("postgresql", "postgres", "mysql", "mariadb", "mariadb-snapshot", "duckdb", "sqlite", "sqlite-wal",
             "sqlite-immediate", "sqlite-exclusive", "sqlite-wal-immediate", "sqlite-wal-exclusive")


@dataclass
class Step:
    session: str
    sql: str | None = None
    op: str | None = None
    name: str | None = None  # the step's name in an isolationtester spec
    args: dict[str, Any] = field(default_factory=dict)  # op arguments: fact, operator, mode, guard, ...
    # isolationtester blocking markers: the step is expected to wait for these steps (by name)
    await_steps: tuple[str, ...] = ()
    star_marker: bool = False  # isolationtester "(*)": report the step as waiting, let it finish later
    # the same step in another database's SQL: {"mysql": "..."} (picked by the database's expectation keys)
    variants: dict[str, str] = field(default_factory=dict)

    def sql_for(self, database: tuple[str, ...] = ()) -> str | None:
        for name in database:
            if name in self.variants:
                return self.variants[name]
        return self.sql

    def describe(self) -> str:
        what = self.sql if self.sql is not None else f"op={self.op}"
        return f"{self.session}: {what}"


@dataclass
class Expect:
    blocked: list[int] | None = None
    errors: dict[int, str] | None = None
    final: list[list[list[Any]]] | None = None
    sessions: dict[str, str] | None = None
    rows: dict[int, list[list[Any]]] | None = None  # step index -> rows it shows (Hermitage's "shows")


@dataclass
class Schedule:
    name: str
    steps: list[Step]
    description: str = ""
    setup: list[str] = field(default_factory=list)
    teardown: list[str] = field(default_factory=list)
    final: list[str] = field(default_factory=list)
    session_setup: dict[str, list[str]] = field(default_factory=dict)
    session_teardown: dict[str, list[str]] = field(default_factory=dict)
    expect: dict[str, Expect] = field(default_factory=dict)  # keyed by CLI level name (PostgreSQL's)
    # other databases' expectations: [expect.mysql.repeatable-read] -> {"mysql": {"repeatable-read": ...}}
    expect_db: dict[str, dict[str, Expect]] = field(default_factory=dict)
    on_blocked: str = "error"
    store: bool = False  # create the toki tables (agent_memory, judge_log, ...) in the run schema
    judge_log_form: str = "unique"
    source: str = "<memory>"
    sessions_declared: tuple[str, ...] = ()

    def expectations(self, database: tuple[str, ...] = ()) -> dict[str, Expect]:
        """The level -> expectation tables for a database (most specific name first; () is PostgreSQL)."""
        for name in database:
            if name in ("postgresql", "postgres"):
                return self.expect
            if name in self.expect_db:
                return self.expect_db[name]
        return self.expect if not database else {}

    def expectation(self, isolation, database: tuple[str, ...] = ()) -> Expect | None:
        found = None
        for name, e in self.expectations(database).items():
            if parse_isolation(name) == isolation:
                found = e
        return found

    @property
    def sessions(self) -> list[str]:
        seen: dict[str, None] = dict.fromkeys(self.sessions_declared)
        for s in self.steps:
            seen.setdefault(s.session, None)
        return list(seen)

    def validate(self) -> "Schedule":
        where = self.source
        if not self.steps:
            raise ScheduleError(f"{where}: schedule {self.name!r} has no steps",
                                fix="add a steps = [ {session = ..., sql = ...}, ... ] list")
        if self.on_blocked not in ON_BLOCKED:
            raise ScheduleError(f"{where}: on_blocked = {self.on_blocked!r} is not known",
                                fix="use 'error' (hand-written schedules) or 'defer' (generated ones)")
        declared = set(self.sessions_declared)
        for i, s in enumerate(self.steps):
            label = f"{where}: step {i} ({s.describe()})"
            if not s.session:
                raise ScheduleError(f"{label} has no session", fix="give every step a session name")
            if declared and s.session not in declared:
                raise ScheduleError(f"{label} names unknown session {s.session!r}",
                                    fix=f"use one of {sorted(declared)} or declare it in sessions")
            if (s.sql is None) == (s.op is None):
                raise ScheduleError(f"{label} needs exactly one of sql or op",
                                    fix="write { session = ..., sql = \"...\" } or { session = ..., op = \"...\" }")
            if s.op is not None and s.op not in OPS:
                raise ScheduleError(f"{label} has unknown op {s.op!r}", fix=f"use one of {', '.join(OPS)}")
            if s.op is not None and s.op != "sleep":  # write-path ops need the toki tables
                self.store = True
        for level in self.expect:
            try:
                parse_isolation(level)
            except TokiError:
                raise ScheduleError(f"{where}: [expect.{level}] is not an isolation level",
                                    fix="use read-committed, repeatable-read, serializable (or ru/rc/rr/sr)") from None
        n = len(self.steps)
        tables = [(lv, e) for lv, e in self.expect.items()]
        for db, levels in self.expect_db.items():
            for lv in levels:
                try:
                    parse_isolation(lv)
                except TokiError:
                    raise ScheduleError(f"{where}: [expect.{db}.{lv}] is not an isolation level",
                                        fix="use read-committed, repeatable-read, serializable (or ru/rc/rr/sr)") from None
            tables += [(f"{db}.{lv}", e) for lv, e in levels.items()]
        for level, e in tables:
            for idx in list(e.blocked or []) + list((e.errors or {}).keys()) + list((e.rows or {}).keys()):
                if not 0 <= idx < n:
                    raise ScheduleError(f"{where}: [expect.{level}] names step {idx}, but steps are 0..{n - 1}",
                                        fix="expectations index steps from 0 in file order")
        return self


# -- TOML --------------------------------------------------------------------------------

_TOP_KEYS = {"name", "description", "setup", "teardown", "steps", "final", "expect", "on_blocked",
             "sessions", "store", "judge_log", "session_setup", "session_teardown"}


def _str_list(value: Any, what: str, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ScheduleError(f"{where}: {what} must be a list of SQL strings", fix=f'write {what} = ["...", "..."]')
    return list(value)


def _expect(e: dict, level: str, source: str) -> Expect:
    bad = set(e) - {"blocked", "errors", "final", "sessions", "rows"}
    if bad:
        raise ScheduleError(f"{source}: [expect.{level}] has unknown key(s) {sorted(bad)}",
                            fix="use blocked, errors, rows, final and sessions")
    errors = e.get("errors")
    if errors is not None:
        try:
            errors = {int(k): str(v) for k, v in errors.items()}
        except (ValueError, AttributeError):
            raise ScheduleError(f"{source}: [expect.{level}] errors must map step indexes to SQLSTATEs",
                                fix='write errors = { 5 = "40001" }') from None
    rows = e.get("rows")
    if rows is not None:
        try:
            rows = {int(k): v for k, v in rows.items()}
        except (ValueError, AttributeError):
            raise ScheduleError(f"{source}: [expect.{level}] rows must map step indexes to row lists",
                                fix='write rows = { 3 = [[1, 10], [2, 20]] }') from None
    return Expect(blocked=e.get("blocked"), errors=errors, final=e.get("final"),
                  sessions=e.get("sessions"), rows=rows)


def parse_toml(text: str, source: str = "<string>") -> Schedule:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScheduleError(f"{source}: not valid TOML: {e}", fix="fix the TOML syntax at the position given") from None
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise ScheduleError(f"{source}: unknown top-level key(s) {sorted(unknown)}",
                            fix=f"known keys are {sorted(_TOP_KEYS)}")
    if "steps" not in doc:
        raise ScheduleError(f"{source}: no steps", fix="add steps = [ { session = \"T1\", sql = \"begin\" }, ... ]")
    if not isinstance(doc["steps"], list):
        raise ScheduleError(f"{source}: steps must be a list of tables", fix="steps = [ { session = ..., sql = ... } ]")
    steps = []
    for i, raw in enumerate(doc["steps"]):
        if not isinstance(raw, dict):
            raise ScheduleError(f"{source}: step {i} is not a table", fix="write { session = ..., sql = ... }")
        if "session" not in raw:
            raise ScheduleError(f"{source}: step {i} has no session", fix="add session = \"T1\" to the step")
        raw = dict(raw)
        session = str(raw.pop("session"))
        sql = raw.pop("sql", None)
        op = raw.pop("op", None)
        name = raw.pop("name", None)
        variants = {k: raw.pop(k) for k in list(raw) if k in DATABASES and sql is not None}
        if any(not isinstance(v, str) for v in variants.values()):
            raise ScheduleError(f"{source}: step {i} ({session}): a database's variant must be SQL text",
                                fix='write mysql = "update ..." next to sql = "..."')
        if sql is not None and raw:
            raise ScheduleError(f"{source}: step {i} ({session}) has unknown field(s) {sorted(raw)}",
                                fix="an SQL step takes session, sql, name and per-database variants "
                                    f"({', '.join(DATABASES)})")
        steps.append(Step(session=session, sql=sql, op=op, name=name, args=raw, variants=variants))
    expect: dict[str, Expect] = {}
    expect_db: dict[str, dict[str, Expect]] = {}
    for level, e in (doc.get("expect") or {}).items():
        if not isinstance(e, dict):
            raise ScheduleError(f"{source}: [expect.{level}] must be a table", fix="write [expect.read-committed]")
        if level in DATABASES:
            for lv, e2 in e.items():
                if not isinstance(e2, dict):
                    raise ScheduleError(f"{source}: [expect.{level}.{lv}] must be a table",
                                        fix=f"write [expect.{level}.repeatable-read]")
                target = expect if level in ("postgresql", "postgres") else expect_db.setdefault(level, {})
                target[lv] = _expect(e2, f"{level}.{lv}", source)
            continue
        expect[level] = _expect(e, level, source)
    sched = Schedule(
        name=str(doc.get("name") or Path(source).stem),
        description=str(doc.get("description", "")),
        steps=steps,
        setup=_str_list(doc.get("setup", []), "setup", source),
        teardown=_str_list(doc.get("teardown", []), "teardown", source),
        final=_str_list(doc.get("final", []), "final", source),
        session_setup={k: _str_list(v, f"session_setup.{k}", source) for k, v in (doc.get("session_setup") or {}).items()},
        session_teardown={k: _str_list(v, f"session_teardown.{k}", source)
                          for k, v in (doc.get("session_teardown") or {}).items()},
        expect=expect,
        expect_db=expect_db,
        on_blocked=str(doc.get("on_blocked", "error")),
        store=bool(doc.get("store", False)),
        judge_log_form=str(doc.get("judge_log", "unique")),
        source=source,
        sessions_declared=tuple(doc.get("sessions", ())),
    )
    return sched.validate()


# -- writing (witnesses printed as schedule files) ------------------------------------------

def _jsonable(v: Any) -> Any:
    if isinstance(v, datetime):
        return v
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _expect_doc(e: Expect) -> dict:
    return {k: v for k, v in (("blocked", e.blocked),
                              ("errors", {str(i): c for i, c in (e.errors or {}).items()} if e.errors is not None else None),
                              ("rows", {str(i): r for i, r in e.rows.items()} if e.rows is not None else None),
                              ("final", e.final), ("sessions", e.sessions)) if v is not None}


def to_toml(s: Schedule) -> str:
    """A schedule file ``toki run`` executes (inverse of :func:`parse_toml`)."""
    import tomli_w

    doc: dict[str, Any] = {"name": s.name}
    if s.description:
        doc["description"] = s.description
    if s.on_blocked != "error":
        doc["on_blocked"] = s.on_blocked
    if s.store:
        doc["store"] = True
    if s.judge_log_form != "unique":
        doc["judge_log"] = s.judge_log_form
    if s.setup:
        doc["setup"] = s.setup
    if s.teardown:
        doc["teardown"] = s.teardown
    steps = []
    for st in s.steps:
        d: dict[str, Any] = {"session": st.session}
        if st.sql is not None:
            d["sql"] = st.sql
            d.update(st.variants)
        else:
            d["op"] = st.op
            d.update(_jsonable(st.args))
        if st.name:
            d["name"] = st.name
        steps.append(d)
    doc["steps"] = steps
    if s.final:
        doc["final"] = s.final
    if s.expect:
        doc["expect"] = {lvl: _expect_doc(e) for lvl, e in s.expect.items()}
    for db, levels in s.expect_db.items():
        doc.setdefault("expect", {})[db] = {lvl: _expect_doc(e) for lvl, e in levels.items()}
    header = "".join(f"# {line}\n" for line in (s.description or s.name).splitlines())
    return header + tomli_w.dumps(doc, multiline_strings=False)
