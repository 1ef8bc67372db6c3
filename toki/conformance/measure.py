"""Running every Hermitage case at every level a database offers, and the cells that come out.

One lane (a schema, a database or a file of its own, see :mod:`toki.sched`) serves every run, so a
whole table costs one connection per session and seconds of work. Steps sent to a session still
blocked wait for it (``on_blocked = "defer"``): where a database blocks is what is measured, the
schedules were written for PostgreSQL's.
"""

from __future__ import annotations

import contextlib
import time

from toki.conformance.cases import CASES, FORMS
from toki.conformance.database import describe
from toki.conformance.hermitage import compare
from toki.conformance.judge import Decision, decide
from toki.errors import ConfigError, ScheduleError, StepTimeout
from toki.levels import Isolation, parse_isolation

SYMBOL = {"prevented": "✓", "anomaly": "—", "unknown": "?"}


def pick_cases(names) -> tuple[str, ...]:
    if not names:
        return CASES
    by_key = {c.lower(): c for c in CASES}
    bad = [n for n in names if n.lower() not in by_key]
    if bad:
        raise ConfigError(f"unknown case(s) {', '.join(map(repr, bad))}", fix="use " + ", ".join(CASES))
    return tuple(c for c in CASES if c.lower() in {n.lower() for n in names})


def pick_levels(server, names) -> tuple[Isolation, ...]:
    offered = tuple(server.levels())
    if not names:
        return offered
    from toki.backends.base import check_level

    wanted = [parse_isolation(n) for n in names]
    for lv in wanted:
        check_level(server.describe()["name"], offered, lv)
    return tuple(lv for lv in offered if lv in wanted)


def combine(case: str, level: str, decided: list[tuple[str, bool, Decision, dict]]) -> dict:
    """One cell from its forms: an anomaly in any form is an anomaly (observed is certain); a form
    that did not finish makes the cell unknown; prevented needs every form prevented."""
    anomalous = [d for d in decided if d[2].outcome == "anomaly"]
    unknown = [d for d in decided if d[2].outcome == "unknown"]
    if anomalous:
        outcome = "anomaly"
        how = "observed"
        ro = [d for d in decided if d[1]]
        # Hermitage's R/O: the read-only forms are prevented, a form with writes shows the anomaly.
        label = "R/O" if ro and all(d[2].outcome == "prevented" for d in ro) else "—"
        why = "; ".join(f"{d[0]}: {d[2].why}" for d in anomalous)
    elif unknown:
        outcome, how, label = "unknown", "incomplete", "?"
        why = "; ".join(f"{d[0]}: {d[2].why}" for d in unknown)
    else:
        outcome, label = "prevented", "✓"
        how = "+".join(dict.fromkeys(d[2].how for d in decided))
        why = "; ".join(f"{d[0]}: {d[2].why}" for d in decided)
    return {"case": case, "level": level, "outcome": outcome, "how": how, "label": label, "why": why,
            "forms": [{"schedule": name, "read_only": ro, **d.to_json(), "run": run}
                      for name, ro, d, run in decided]}


def _run_json(res) -> dict:
    d = res.to_json()
    d.pop("expect", None)  # no golden outcome is consulted here
    return d


def measure(server, *, cases=None, levels=None, step_limit_s: float = 10.0, forms: dict | None = None) -> dict:
    """``{"database", "levels", "cases", "cells", "hermitage"}``: every cell in table order (levels
    down, cases across), the database and its settings, and the comparison with Hermitage's column.
    ``forms`` replaces a case's forms (:data:`toki.conformance.cases.FORMS`), for testing the judge."""
    from toki.sched import Runner

    chosen = pick_cases(cases)
    lvls = pick_levels(server, levels)
    runner = Runner(server, step_limit_s=step_limit_s, record_history=False)
    table = {**FORMS, **(forms or {})}
    forms = [(c, f, f.load()) for c in chosen for f in table[c]]
    cells = []
    lane = runner.lane("conformance")
    try:
        database = describe(server, lane)
        for lv in lvls:
            for case in chosen:
                decided = []
                for c, form, sched in forms:
                    if c != case:
                        continue
                    if lane is None:
                        lane = runner.lane("conformance")
                    t0 = time.perf_counter()
                    try:
                        res = runner.run(sched, lv.cli_name, lane=lane, on_blocked="defer", check_expect=False)
                    except (StepTimeout, ScheduleError) as e:
                        # Fail closed: the cell is unknown, and a lane left mid-transaction is replaced.
                        decided.append((form.schedule, form.read_only, Decision("unknown", "incomplete", str(e)),
                                        {"elapsed_s": round(time.perf_counter() - t0, 6)}))
                        with contextlib.suppress(Exception):
                            lane.close()
                        lane = None
                        continue
                    decided.append((form.schedule, form.read_only, decide(res, list(form.needs)), _run_json(res)))
                cells.append(combine(case, lv.cli_name, decided))
    finally:
        if lane is not None:
            lane.close()
    return {"database": database, "levels": [lv.cli_name for lv in lvls], "cases": list(chosen),
            "cells": cells, "hermitage": compare(database, cells)}
