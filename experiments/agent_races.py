"""Agent races on agent_memory: the independent reproduction of docs/tables/index.md, naive vs guarded writer.

Two agents both read the slot before either writes (the barrier is the schedule order, run by
the barrier-controlled runner on one lane; no sleeps), then write, then commit, ``--runs``
times per scenario, writer and level:

* ``lost-update``: alice's medication is penicillin (provenance ``x_rx1``). Each agent confirms
  it with its own evidence (``x_a``, ``x_b``). Admitted (anomaly): both commit and no current
  row carries both agents' evidence: one confirmation was lost.
* ``double-supersede``: both agents replace penicillin, one with amoxicillin, one with
  cephalexin. Admitted: two current values remain.
* ``cleanup-write-skew``: the slot holds two current values (amoxicillin, cephalexin); each
  cleanup agent sees both and keeps a different one. Admitted: the slot does not end with
  exactly one current value (zero for the naive writer).

Values are distinct current objects (``distinct_values``); ``current_values`` counts current
rows (the guarded writer's cleanup can leave a duplicate row of the kept value).

Writers:

* ``naive``: "close then insert", as the reproduction did: ``update ... set
  system_time_end`` on the row it read (by primary key, no check of what the update did), then
  ``insert`` the new version; a cleanup agent only closes the value it retires.
* ``toki``: the guarded write path (docs/design.md#the-write-path; ``toki.db.store.WriteTxn``) as op steps: read
  candidates, write (a close or a provenance merge that affects zero rows means a concurrent
  writer got there first: re-read), commit. A cleanup agent runs the n-ary ⊕t fold over the
  slot (``Store.begin_consolidate``): both agents pick the same winner, so they close the same
  loser and the second finds the work done.

Published (docs/tables/index.md, PostgreSQL 17, naive writer, 50 runs): READ COMMITTED 50/50 occurs,
50/50 two current values, 50/50 zero current values; REPEATABLE READ 50/50 one aborts,
50/50 one aborts, 50/50 zero current values; SERIALIZABLE 50/50 one aborts in each (40001).
"""

from __future__ import annotations

from collections import Counter

from toki.render import table
from toki.db.server import resolve
from toki.errors import ConfigError
from toki.sched import Runner, Schedule, Step

NAME = "agent-races"
TABLE = "docs/tables/index.md independent reproduction: lost update, double supersede, cleanup write skew at RC/RR/SR"

SCENARIOS = ("lost-update", "double-supersede", "cleanup-write-skew")
WRITERS = ("naive", "toki")
LEVELS = ("read-committed", "repeatable-read", "serializable")

# What docs/tables/index.md reports for the naive writer: (runs with the anomaly, runs with one agent aborted)
PUBLISHED = {
    ("lost-update", "read-committed"): (50, 0), ("double-supersede", "read-committed"): (50, 0),
    ("cleanup-write-skew", "read-committed"): (50, 0),
    ("lost-update", "repeatable-read"): (0, 50), ("double-supersede", "repeatable-read"): (0, 50),
    ("cleanup-write-skew", "repeatable-read"): (50, 0),
    ("lost-update", "serializable"): (0, 50), ("double-supersede", "serializable"): (0, 50),
    ("cleanup-write-skew", "serializable"): (0, 50),
}
PUBLISHED_RUNS = 50

_SLOT = ("subject = 'alice' and predicate = 'medication' and row_kind = 'current'"
         " and system_time_end = '9999-12-31'")
_COLS = ("fact_id, subject, predicate, object, valid_from, valid_to, system_time_start, system_time_end,"
         " provenance_id, confidence, resolution_strategy_id, row_kind")
_READ = f"select fact_id, object, system_time_start, provenance_id from agent_memory where {_SLOT} order by fact_id"
_FINAL = f"select fact_id, object, provenance_id from agent_memory where {_SLOT} order by fact_id"
_T0 = "2026-03-01 00:00:00"


def _row(fact_id: str, obj: str, sts: str, prov: str) -> str:
    return (f"('{fact_id}', 'alice', 'medication', '{obj}', '2026-03-01', '9999-12-31', '{sts}', '9999-12-31',"
            f" '{prov}', 0.5, 'lww', 'current')")


def _insert(*rows: str) -> str:
    return f"insert into agent_memory ({_COLS}) values " + ", ".join(rows)


def _close(fact_id: str, sts: str, at: str) -> str:
    # The naive close: by primary key, whatever the row's state now; nobody looks at the row count.
    return (f"update agent_memory set system_time_end = '{at}'"
            f" where fact_id = '{fact_id}' and system_time_start = '{sts}'")


def _fact(fact_id: str, obj: str, prov: str | None = None) -> dict:
    f = {"fact_id": fact_id, "subject": "alice", "predicate": "medication", "object": obj,
         "valid_from": "2026-03-01T00:00:00"}
    if prov:
        f["provenance"] = prov
    return f


# Each agent's plan: what it writes, per scenario. Times are the agents' write stamps (A before B).
_AT = {"A": "2026-03-02 10:00:00", "B": "2026-03-02 11:00:00"}


def _setup(scenario: str) -> list[str]:
    if scenario == "cleanup-write-skew":  # what a double supersede left behind
        return [_insert(_row("rx-2", "amoxicillin", "2026-03-01 10:00:00", "x_rx2"),
                        _row("rx-3", "cephalexin", "2026-03-01 11:00:00", "x_rx3"))]
    return [_insert(_row("rx-1", "penicillin", _T0, "x_rx1"))]


def _naive_writes(scenario: str, agent: str) -> list[str]:
    at = _AT[agent]
    if scenario == "lost-update":
        token = "x_a" if agent == "A" else "x_b"
        return [_close("rx-1", _T0, at), _insert(_row("rx-1", "penicillin", at, f"x_rx1 + {token}"))]
    if scenario == "double-supersede":
        fid, obj = ("rx-2", "amoxicillin") if agent == "A" else ("rx-3", "cephalexin")
        return [_close("rx-1", _T0, at), _insert(_row(fid, obj, at, f"x_{fid.replace('-', '')}"))]
    # cleanup: A keeps amoxicillin (retires rx-3), B keeps cephalexin (retires rx-2)
    if agent == "A":
        return [_close("rx-3", "2026-03-01 11:00:00", at)]
    return [_close("rx-2", "2026-03-01 10:00:00", at)]


def _toki_fact(scenario: str, agent: str) -> dict:
    if scenario == "lost-update":  # a confirmation: same object, the agent's own evidence
        return _fact(f"rx-{agent.lower()}", "penicillin", "x_a" if agent == "A" else "x_b")
    if scenario == "double-supersede":
        return _fact("rx-2", "amoxicillin") if agent == "A" else _fact("rx-3", "cephalexin")
    return _fact("rx-4", "amoxicillin") if agent == "A" else _fact("rx-5", "cephalexin")


def build(scenario: str, writer: str) -> Schedule:
    """The race as a schedule: both agents read, then A writes, B writes, A commits, B commits."""
    if scenario not in SCENARIOS:
        raise ConfigError(f"unknown scenario {scenario!r}", fix=f"use one of {', '.join(SCENARIOS)}")
    if writer == "naive":
        steps = [Step("A", sql="begin"), Step("B", sql="begin"),
                 Step("A", sql=_READ), Step("B", sql=_READ)]
        steps += [Step("A", sql=s) for s in _naive_writes(scenario, "A")]
        steps += [Step("B", sql=s) for s in _naive_writes(scenario, "B")]
        steps += [Step("A", sql="commit"), Step("B", sql="commit")]
    elif writer == "toki":
        if scenario == "cleanup-write-skew":  # a TOKI cleanup agent folds the slot with ⊕t
            first = [Step(agent, op="consolidate", args={"subject": "alice", "predicate": "medication"})
                     for agent in ("A", "B")]
        else:
            first = [Step(agent, op="begin", args={"fact": _toki_fact(scenario, agent)}) for agent in ("A", "B")]
        steps = [*first,
                 Step("A", op="read_candidates"), Step("B", op="read_candidates"),
                 Step("A", op="write"), Step("B", op="write"),
                 Step("A", op="commit"), Step("B", op="commit")]
    else:
        raise ConfigError(f"unknown writer {writer!r}", fix=f"use one of {', '.join(WRITERS)}")
    # A blocked agent's later steps wait for it (defer): the order executed is recorded per run.
    return Schedule(name=f"{scenario}-{writer}", steps=steps, setup=_setup(scenario), final=[_FINAL],
                    on_blocked="defer", store=True, source=f"agent-races:{scenario}:{writer}").validate()


def anomaly(scenario: str, result) -> bool:
    rows = result.final[0]["rows"]
    committed = all(v == "committed" for v in result.sessions.values())
    if scenario == "lost-update":
        both = [r for r in rows if "x_a" in r[2] and "x_b" in r[2]]
        return committed and not both
    values = {r[1] for r in rows}  # distinct current objects (a duplicate row is not a second value)
    if scenario == "double-supersede":
        return len(values) >= 2
    return len(values) != 1


def run_cell(runner: Runner, lane, scenario: str, writer: str, level: str, runs: int) -> dict:
    sched = build(scenario, writer)
    anomalies = one_aborted = 0
    sqlstates: Counter = Counter()
    current: Counter = Counter()
    distinct: Counter = Counter()
    for _ in range(runs):
        r = runner.run(sched, level, lane=lane, reset=True, check_expect=False)
        anomalies += anomaly(scenario, r)
        aborted = [s for s, state in r.sessions.items() if state != "committed"]
        one_aborted += len(aborted) == 1
        for session in aborted:  # the error that aborted it (a later 25P02 is only its echo)
            first = next((st.sqlstate for st in r.steps if st.session == session and st.status == "error"), None)
            sqlstates[first or "none"] += 1
        rows = r.final[0]["rows"]
        current[str(len(rows))] += 1
        distinct[str(len({row[1] for row in rows}))] += 1
    return {"scenario": scenario, "writer": writer, "level": level, "runs": runs, "anomalies": anomalies,
            "one_aborted": one_aborted, "sqlstates": dict(sorted(sqlstates.items())),
            "current_values": dict(sorted(current.items())),
            "distinct_values": dict(sorted(distinct.items()))}


_WORDS = {0: "zero", 1: "one", 2: "two", 3: "three"}


def cell_text(c: dict) -> str:
    n = c["runs"]
    modal = max(c["distinct_values"].items(), key=lambda kv: kv[1])[0] if c["distinct_values"] else "?"
    values = f"{_WORDS.get(int(modal), modal)} current value{'s' if modal != '1' else ''}"
    if c["anomalies"]:
        return f"{c['anomalies']}/{n} occurs" + ("" if c["scenario"] == "lost-update" else f", {values}")
    if c["one_aborted"]:
        states = ", ".join(c["sqlstates"]) or "no SQLSTATE"
        return f"{c['one_aborted']}/{n} one aborts ({states})"
    return f"0/{n} occurs, {values}"


def published_text(scenario: str, level: str) -> str:
    a, o = PUBLISHED[(scenario, level)]
    return f"{a}/{PUBLISHED_RUNS} occurs" if a else f"{o}/{PUBLISHED_RUNS} one aborts"


def add_arguments(p) -> None:
    p.add_argument("--runs", type=int, default=50, help="runs per scenario, writer and level (default 50)")
    p.add_argument("--writers", default=",".join(WRITERS), help="comma-separated: naive,toki")
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated subset of " + ",".join(SCENARIOS))


def _list(text: str, allowed: tuple, what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        raise ConfigError(f"unknown {what} {bad or text!r}", fix=f"use a comma-separated subset of {','.join(allowed)}")
    return items


def run(args, out) -> dict:
    if args.runs < 1:
        raise ConfigError(f"--runs {args.runs} is not a positive number", fix="pass --runs 50 (or any n >= 1)")
    writers = _list(args.writers, WRITERS, "writer")
    scenarios = _list(args.scenarios, SCENARIOS, "scenario")
    server = resolve(args.dsn)
    runner = Runner(server, step_limit_s=10, record_history=False)
    cells = []
    with runner.lane("agent_races", store=True) as lane:
        for writer in writers:
            for scenario in scenarios:
                for level in LEVELS:
                    cells.append(run_cell(runner, lane, scenario, writer, level, args.runs))
    by = {(c["writer"], c["scenario"], c["level"]): c for c in cells}
    for writer in writers:
        rows = [(level.replace("-", " ").upper(), *(cell_text(by[(writer, s, level)]) for s in scenarios))
                for level in LEVELS]
        table(out, f"agent-races, writer {writer} ({args.runs} runs per cell, {server.backend} {server.version})",
              ["level", *(s.replace("-", " ") for s in scenarios)], rows)
    mismatches = []
    if "naive" in writers:
        for s in scenarios:
            for level in LEVELS:
                c = by[("naive", s, level)]
                a, o = PUBLISHED[(s, level)]
                want = (round(a * c["runs"] / PUBLISHED_RUNS), round(o * c["runs"] / PUBLISHED_RUNS))
                if (c["anomalies"], c["one_aborted"]) != want:
                    mismatches.append({"scenario": s, "level": level, "published": published_text(s, level),
                                       "measured": cell_text(c)})
        out.write("naive writer vs docs/tables/index.md: " + ("every cell reproduces the published table\n" if not mismatches
                  else f"{len(mismatches)} cell(s) differ: {mismatches}\n"))
    return {"experiment": NAME, "runs": args.runs, "backend": server.describe(), "cells": cells,
            "published": {f"{s}|{lvl}": published_text(s, lvl) for (s, lvl) in PUBLISHED},
            "naive_matches_published": not mismatches if "naive" in writers else None,
            "mismatches": mismatches}
