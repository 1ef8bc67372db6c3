"""Witness histories as schedule files `toki run` executes (docs/design.md#schedule-files-toml).

Every row of the abstract history is a row of one table ``toki_obj(id, grp, val)``: an item
read is a point select, a predicate read selects the group, a write updates a row that exists
before the history or inserts one that a later insert creates, a commit or abort ends the
session. Schedules are generated, so they run with ``on_blocked = "defer"``: on PostgreSQL a
write that waits for a row lock is deferred, and the order actually executed is recorded.

The witness is a history the abstract level admits (Adya's axioms); PostgreSQL may still
block, abort or return other values when it runs the schedule. That difference is the point
of the three-way report.
"""

from __future__ import annotations

from pathlib import Path

from toki.sched.schedule import Schedule, Step, to_toml
from toki.verify.isolation import Cell, WitnessHistory

TABLE = "toki_obj"


def _lit(v: str | None) -> str:
    return "null" if v is None else "'" + v.replace("'", "''") + "'"


def to_schedule(w: WitnessHistory, *, claim: str = "", bound: str = "") -> Schedule:
    rows = {r.name: r for r in w.rows}
    setup = [f"create table {TABLE} (id text primary key, grp text, val int not null)"]
    born = [r for r in w.rows if r.born]
    if born:
        values = ", ".join(f"({_lit(r.name)}, {_lit(r.group)}, 0)" for r in born)
        setup.append(f"insert into {TABLE} (id, grp, val) values {values}")
    steps: list[Step] = []
    begun: set[str] = set()
    for e in w.events:
        if e.session not in begun:
            steps.append(Step(e.session, sql="begin"))
            begun.add(e.session)
        if e.kind == "read":
            sql = f"select val from {TABLE} where id = {_lit(e.row)}"
        elif e.kind == "pread":
            sql = f"select id, val from {TABLE} where grp = {_lit(w.group)} order by id"
        elif e.kind == "write":
            r = rows[e.row]
            if r.born:
                sql = f"update {TABLE} set val = {e.value} where id = {_lit(r.name)}"
            else:
                sql = f"insert into {TABLE} (id, grp, val) values ({_lit(r.name)}, {_lit(r.group)}, {e.value})"
        elif e.kind == "commit":
            sql = "commit"
        elif e.kind == "abort":
            sql = "rollback"
        else:  # pragma: no cover - the extractor makes no other kinds
            raise ValueError(e.kind)
        steps.append(Step(e.session, sql=sql))
    lines = [f"Witness found by z3 (toki prove): {w.predicate} is admitted at abstract level {w.level}.",
             f"History (Adya notation; a read names the writer of the version it returned): {w.notation()}"]
    if claim:
        lines.append(f"Predicate: {claim}")
    if bound:
        lines.append(f"Bound: {bound}")
    lines.append("Levels are Adya's PL-2 (RC), PL-SI (SI), PL-3 (SR); PostgreSQL may block, abort or read "
                 "other versions when it runs this schedule.")
    return Schedule(
        name=f"z3-{w.predicate}-{w.level}".replace("+", "-"),
        description="\n".join(lines),
        setup=setup,
        teardown=[f"drop table {TABLE}"],
        steps=steps,
        final=[f"select id, grp, val from {TABLE} order by id"],
        on_blocked="defer",
    ).validate()


def schedule_text(cell: Cell, claim: str = "") -> str:
    if cell.history is None:
        raise ValueError(f"{cell.predicate} at {cell.level} has no witness ({cell.status})")
    return to_toml(to_schedule(cell.history, claim=claim, bound=cell.bound))


def file_name(predicate: str, level: str) -> str:
    return f"{predicate}-{level.replace('+', '-')}.toml"


def write(cell: Cell, folder: str | Path, claim: str = "") -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(cell.predicate, cell.level)
    path.write_text(schedule_text(cell, claim))
    return path
