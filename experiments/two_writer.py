"""Two-writer companions of the multi-writer experiment: A5A, A5B and P3 at RC, RR and SR.

Each case is a two-session schedule on agent-memory tables, run by the barrier-controlled
runner on one lane (state reset before every run), ``--runs`` times per level:

* ``A5A`` read skew: the two candidate values of a slot carry confidences that sum to 1.
  T1 (a belief query) reads the first; T2 (a revision) moves 0.25 from the first to the second
  and commits; T1 reads the second. Admitted: the two confidences T1 saw do not sum to 1.
* ``A5B`` write skew, the cleanup agents of the independent reproduction: a slot holds two
  current values; each cleanup agent counts them, sees two, and retires a different one
  (only when it saw at least two). Admitted: no current value is left.
* ``P3`` phantom, predicate-write form: no active ⊕c policy exists for a conflict set; T1 and
  T2 both read "no active policy" and both insert one. Admitted: two active policies.
* ``P3-reread`` phantom, re-read form (docs/design.md#anomalies-and-guards note): T1 counts active policies, T2 inserts one
  and commits, T1 counts again. Admitted: the two counts differ. On PostgreSQL REPEATABLE READ
  the re-read sees T1's snapshot, so this form does not show there.

Published (docs/tables/index.md): A5A RC 1, RR/SR 0; A5B RC and RR 1, SR 0 aborting half; P3 RC and RR 1,
SR 0. The re-read form of P3 has no published row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from toki.render import table
from toki.db.server import resolve
from toki.errors import ConfigError, DatabaseError
from toki.experiments import _hot_row as hr
from toki.levels import Isolation, Level
from toki.sched import Runner, Schedule, Step

NAME = "two-writer"
TABLE = "Two-writer companions: A5A, A5B and P3 at read-committed, repeatable-read, serializable (docs/tables/index.md)"

_OPEN = "row_kind = 'current' and system_time_end = '9999-12-31'"
_SLOT = f"subject = 'patient:12' and predicate = 'prescribed' and {_OPEN}"
_ROW = ("insert into agent_memory (fact_id, subject, predicate, object, valid_from, valid_to, system_time_start,"
        " system_time_end, provenance_id, confidence, resolution_strategy_id) values "
        "('{id}', 'patient:12', 'prescribed', '{obj}', '2026-01-01', '9999-12-31', '2026-01-02', '9999-12-31',"
        " 'x_{id}', {conf}, 'evi')")
_RESET_MEMORY = ["delete from agent_memory where subject = 'patient:12'",
                 _ROW.format(id="a", obj="amoxicillin", conf=0.5),
                 _ROW.format(id="b", obj="cephalexin", conf=0.5)]
_POLICY_KEY = "a|b"
_ACTIVE = f"policy where set_key = '{_POLICY_KEY}' and active"
_INSERT_POLICY = ("insert into policy (policy_id, set_key, chosen_index, source) select 'policy::{s}', "
                  f"'{_POLICY_KEY}', 1, '{{s}}' where current_setting('toki.seen')::int = 0")


@dataclass(frozen=True)
class Case:
    name: str
    claim: str
    schedule: Schedule
    admitted: Callable  # RunResult -> bool
    published: dict  # level cli name -> (admit rate, abort rate or None when docs/tables/index.md gives none)


def _rows(result, index: int) -> list:
    st = result.steps[index]
    return st.rows if st.status == "ok" else []


def _a5a() -> Case:
    steps = [
        Step("T1", sql="begin"),
        Step("T2", sql="begin"),
        Step("T1", sql="select confidence from agent_memory where fact_id = 'a' and " + _OPEN),  # 2
        Step("T2", sql="update agent_memory set confidence = confidence - 0.25 where fact_id = 'a' and " + _OPEN),
        Step("T2", sql="update agent_memory set confidence = confidence + 0.25 where fact_id = 'b' and " + _OPEN),
        Step("T2", sql="commit"),
        Step("T1", sql="select confidence from agent_memory where fact_id = 'b' and " + _OPEN),  # 6
        Step("T1", sql="commit"),
    ]
    sched = Schedule("A5A-read-skew", steps, setup=_RESET_MEMORY,
                     description="r1[a] w2[a] w2[b] c2 r1[b] c1: a belief query reads across a revision").validate()

    def admitted(res) -> bool:
        a, b = _rows(res, 2), _rows(res, 6)
        return bool(a and b) and a[0][0] + b[0][0] != 1.0

    return Case("A5A", "the belief query saw confidences that do not sum to 1", sched, admitted,
                {"read-committed": (1.0, None), "repeatable-read": (0.0, None), "serializable": (0.0, None)})


def _a5b() -> Case:
    def count(s):
        return Step(s, sql=f"select set_config('toki.seen', count(*)::text, true) from agent_memory where {_SLOT}")

    def retire(s, fact):
        return Step(s, sql=f"update agent_memory set system_time_end = '2026-02-01' where fact_id = '{fact}' "
                           f"and {_OPEN} and current_setting('toki.seen')::int >= 2")

    steps = [Step("T1", sql="begin"), Step("T2", sql="begin"), count("T1"), count("T2"),
             retire("T1", "a"), retire("T2", "b"), Step("T1", sql="commit"), Step("T2", sql="commit")]
    sched = Schedule("A5B-cleanup-write-skew", steps, setup=_RESET_MEMORY,
                     final=[f"select count(*) from agent_memory where {_SLOT}"],
                     description="r1[slot] r2[slot] w1[a] w2[b] c1 c2: two cleanup agents each retire a "
                                 "different one of two current values").validate()

    def admitted(res) -> bool:
        return res.final[0]["rows"][0][0] == 0

    return Case("A5B", "no current value is left in the slot", sched, admitted,
                {"read-committed": (1.0, None), "repeatable-read": (1.0, None), "serializable": (0.0, 0.5)})


def _p3() -> Case:
    def read(s):
        return Step(s, sql=f"select set_config('toki.seen', count(*)::text, true) from {_ACTIVE}")

    steps = [Step("T1", sql="begin"), Step("T2", sql="begin"), read("T1"), read("T2"),
             Step("T2", sql=_INSERT_POLICY.format(s="T2")), Step("T2", sql="commit"),
             Step("T1", sql=_INSERT_POLICY.format(s="T1")), Step("T1", sql="commit")]
    sched = Schedule("P3-phantom-insert", steps, setup=["delete from policy"],
                     final=[f"select count(*) from {_ACTIVE}"],
                     description="r1[policy where active] r2[same] w2[insert active] c2 w1[insert active] c1: "
                                 "both install a policy after seeing none").validate()

    def admitted(res) -> bool:
        return res.final[0]["rows"][0][0] > 1

    return Case("P3", "two active policies for one conflict set", sched, admitted,
                {"read-committed": (1.0, None), "repeatable-read": (1.0, None), "serializable": (0.0, None)})


def _p3_reread() -> Case:
    read = f"select count(*) from {_ACTIVE}"
    steps = [Step("T1", sql="begin"), Step("T2", sql="begin"), Step("T1", sql=read),  # 2
             Step("T2", sql=f"insert into policy (policy_id, set_key, chosen_index, source) values "
                            f"('policy::T2', '{_POLICY_KEY}', 1, 'T2')"),
             Step("T2", sql="commit"), Step("T1", sql=read),  # 5
             Step("T1", sql="commit")]
    sched = Schedule("P3-phantom-reread", steps, setup=["delete from policy"],
                     description="r1[policy where active] w2[insert active] c2 r1[same predicate] c1").validate()

    def admitted(res) -> bool:
        a, b = _rows(res, 2), _rows(res, 5)
        return bool(a and b) and a[0][0] != b[0][0]

    return Case("P3-reread", "T1's second read of the predicate returned a new row", sched, admitted, {})


CASES = {"A5A": _a5a, "A5B": _a5b, "P3": _p3, "P3-reread": _p3_reread}


def add_arguments(p) -> None:
    p.add_argument("--runs", type=int, default=50, help="runs per case and level (default 50)")
    p.add_argument("--levels", default="rc,rr,sr", help="isolation levels (default rc,rr,sr)")
    p.add_argument("--cases", default=",".join(CASES), help=f"cases (default {','.join(CASES)})")


def _cases(text: str) -> list[Case]:
    names = [c.strip() for c in text.split(",") if c.strip()]
    lookup = {k.lower(): k for k in CASES}
    bad = [n for n in names if n.lower() not in lookup]
    if not names or bad:
        raise ConfigError(f"unknown case(s) {bad or text!r}", fix=f"use some of {', '.join(CASES)}")
    return [CASES[lookup[n.lower()]]() for n in dict.fromkeys(names)]


def run(args, out) -> dict:
    cases = _cases(args.cases)
    levels = hr.level_list(args.levels)
    runs = hr.positive(args.runs, "runs", hi=100_000)
    server = resolve(args.dsn)
    runner = Runner(server, record_history=False)
    cells = []
    lane = runner.lane("two_writer", store=True)
    try:
        for case in cases:
            for level in levels:
                cells.append(_cell(runner, lane, case, level, runs))
    finally:
        lane.close()
    mismatches = [f"{c['case']} at {c['level']}: admit {c['admit_rate']}, abort {c['abort_rate']}; published "
                  f"admit {c['published_admit']}" + (f", abort {c['published_abort']}" if c['published_abort'] is not None
                                                     else "")
                  for c in cells if c["matches_published"] is False]
    rows = [(c["case"], c["level"], c["runs"], f"{c['admit_rate']:.2f}",
             "" if c["published_admit"] is None else f"{c['published_admit']:.2f}", f"{c['abort_rate']:.2f}",
             "" if c["published_abort"] is None else f"{c['published_abort']:.2f}",
             ", ".join(f"{k} x{v}" for k, v in c["sqlstates"].items()) or "-",
             {True: "yes", False: "NO", None: "-"}[c["matches_published"]]) for c in cells]
    table(out, "two-writer companions", ["case", "level", "runs", "admit", "published", "abort", "published",
                                         "SQLSTATE", "reproduced"], rows)
    for m in mismatches:
        out.write(f"not reproduced: {m}\n")
    return {
        "experiment": NAME,
        "backend": {"name": server.backend, "version": server.version},
        "runs": runs,
        "cases": {c.name: {"claim": c.claim, "schedule": c.schedule.description,
                           "steps": [s.describe() for s in c.schedule.steps]} for c in cases},
        "cells": cells,
        "mismatches": mismatches,
        "exit_status": 1 if mismatches else 0,
    }


def _cell(runner: Runner, lane, case: Case, level: Isolation, runs: int) -> dict:
    admitted = aborted = 0
    states: dict[str, int] = {}
    for _ in range(runs):
        res = runner.run(case.schedule, Level(level), lane=lane, check_expect=False)
        for st in res.steps:
            if st.status == "error":
                if st.sqlstate not in hr.ABORT_STATES:
                    raise DatabaseError(f"{case.name} at {level.cli_name}: step {st.index} failed: {st.error}",
                                        sqlstate=st.sqlstate, fix="report this: only serialization failures and "
                                                                  "deadlocks are expected")
                states[st.sqlstate] = states.get(st.sqlstate, 0) + 1
        aborted += sum(s != "committed" for s in res.sessions.values())
        admitted += bool(case.admitted(res))
    admit_rate = round(admitted / runs, 4)
    abort_rate = round(aborted / (2 * runs), 4)
    pub = case.published.get(level.cli_name)
    pub_admit, pub_abort = pub if pub else (None, None)
    if pub is None:
        matches = None
    else:
        matches = admit_rate == pub_admit and (pub_abort is None or abort_rate == pub_abort)
    return {"case": case.name, "level": level.cli_name, "runs": runs, "admit_rate": admit_rate,
            "abort_rate": abort_rate, "admitted": admitted, "aborted": aborted, "sqlstates": states,
            "published_admit": pub_admit, "published_abort": pub_abort, "matches_published": matches}
