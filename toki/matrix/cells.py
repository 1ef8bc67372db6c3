"""The anomaly matrix (docs/design.md#matrix-json, docs/design.md#anomalies-and-guards, docs/tables/index.md): 9 predicates x 6 levels on a real database.

Each cell runs ``trials`` trials of the predicate's programs (:mod:`toki.matrix.workloads`) at
one level, either in the predicate's minimal witness interleaving (``witness``, the paper's
semantics) or in a uniformly random interleaving (``random``). A trial admits the anomaly when
its detector fires on what happened; a trial in which the database aborted a transaction is
excluded and its SQLSTATE counted. ``+cb`` levels add the ⊕? callback: an external session
delivers the callback row and the agent reads it between its candidate read and its write.

Also here: extra variant rows (P3 re-read form, N1 with a unique-keyed log), the N3 schema
grid (6 levels x {base, audit_row}) and the N2 partition grid (levels x partition size x
contention). Trials reuse one lane (schema and connections) per worker and reset state with
one round trip; ``workers`` runs independent lanes in separate processes.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from toki.errors import ConfigError
from toki.levels import MATRIX_LEVELS, Isolation, Level, parse_level
from toki.matrix.workloads import BUILDERS, FORMS, PREDICATES, VARIANTS, Trial
from toki.sched.runner import Lane, Runner
from toki.sched.schedule import Schedule, Step

GUARD: dict[str, Level] = {
    "P0": Level(Isolation.RC), "P1": Level(Isolation.RC),
    "P2": Level(Isolation.SI), "P4": Level(Isolation.SI), "A5A": Level(Isolation.SI),
    "P3": Level(Isolation.SR), "A5B": Level(Isolation.SR), "N1": Level(Isolation.SR), "N2": Level(Isolation.SR),
    "P3-reread": Level(Isolation.SR), "N1-unique": Level(Isolation.SR),
}
MODES = ("witness", "random")
_TABLES = ("agent_memory", "judge_log", "callback_log", "policy", "belief_cache")
RESET_TABLES = "; ".join(f"delete from {t}" for t in _TABLES)


def expected_rate(predicate: str, level: Level) -> float:
    """The paper's guard map: 1 below the guard, 0 at or above it (Theorem 1)."""
    return 0.0 if level.isolation >= GUARD[predicate].isolation else 1.0


def trial_rng(seed: int, *parts: object) -> random.Random:
    return random.Random(":".join(map(str, (seed, *parts))))


# -- building schedules ---------------------------------------------------------------------

def schedule_step(session: str, label: str, body) -> Step:
    if isinstance(body, str):
        return Step(session=session, sql=body, name=label)
    if isinstance(body, dict):
        args = dict(body)
        return Step(session=session, op=args.pop("op"), name=label, args=args)
    return Step(session=session, op="call", name=label, args={"fn": body})


def with_callback(trial: Trial) -> tuple[dict[str, list], list[tuple[str, int]]]:
    """Programs and witness of the ``+cb`` variant of a trial."""
    agent, after = trial.cb_after
    key = trial.cb_key

    def deliver(conn, ctx):
        conn.execute("insert into callback_log (request_hash, read_set_hash, chosen_index, status, delivered_at)"
                     " values (%s, %s, 1, 'delivered', clock_timestamp()) on conflict (request_hash) do update"
                     " set status = 'delivered', chosen_index = 1", (key, key))

    def read_callback(conn, ctx):
        row = conn.execute("select chosen_index, status from callback_log where request_hash = %s", (key,)).fetchone()
        ctx["callback"] = None if row is None else tuple(row)
        return [list(row)] if row else []

    programs = {s: list(p) for s, p in trial.programs.items()}
    programs[agent].insert(after + 1, ("read callback", read_callback))
    programs["CB"] = [("begin", "begin"), ("deliver callback", deliver), ("commit", "commit")]
    witness: list[tuple[str, int]] = []
    for s, i in trial.witness:
        witness.append((s, i + 1 if s == agent and i > after else i))
        if (s, i) == (agent, after):
            witness += [("CB", 0), ("CB", 1), ("CB", 2), (agent, after + 1)]
    return programs, witness


def random_order(programs: dict[str, list], rng: random.Random) -> list[tuple[str, int]]:
    """A uniformly random interleaving that keeps each program's order (shuffle of a multiset)."""
    labels = [s for s, p in programs.items() for _ in p]
    rng.shuffle(labels)
    pos: Counter = Counter()
    order = []
    for s in labels:
        order.append((s, pos[s]))
        pos[s] += 1
    return order


def build_schedule(trial: Trial, level: Level, mode: str, rng: random.Random) -> Schedule:
    if level.callback:
        programs, witness = with_callback(trial)
    else:
        programs, witness = trial.programs, trial.witness
    order = witness if mode == "witness" else random_order(programs, rng)
    steps = [schedule_step(s, programs[s][i][0], programs[s][i][1]) for s, i in order]
    return Schedule(name=f"{trial.predicate}-{mode}", steps=steps, on_blocked="defer", store=True,
                    judge_log_form=trial.judge_log_form, sessions_declared=tuple(programs))


# -- running ---------------------------------------------------------------------------------

@dataclass
class Outcome:
    admitted: bool
    aborted: bool
    sqlstates: tuple[str, ...]  # the SQLSTATE of each error ("none" where the database has no SQLSTATE)
    codes: tuple[str, ...] = ()  # the database's own code of each (MySQL's 1213, SQLITE_BUSY, ...)


def error_labels(steps) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The failed steps' SQLSTATEs and the database's own codes (the same on PostgreSQL); an error
    toki raised itself (no database code) is ``toki:Kind`` in both."""
    failed = [st for st in steps if st.status == "error"]
    own = tuple(st.sqlstate or f"toki:{(st.error or 'error').split(' ')[0]}" for st in failed)
    std = tuple(st.std_sqlstate or ("none" if st.sqlstate else code) for st, code in zip(failed, own))
    return std, own


class Bench:
    """A worker's lanes (one per judge-log form) and its runner."""

    def __init__(self, runner: Runner):
        self.runner = runner
        self.lanes: dict[str, Lane] = {}

    def lane(self, form: str) -> Lane:
        if form not in self.lanes:
            self.lanes[form] = self.runner.lane(f"matrix_{form}", store=True, judge_log_form=form)
        return self.lanes[form]

    def close(self) -> None:
        for lane in self.lanes.values():
            lane.close()
        self.lanes.clear()

    def trial(self, trial: Trial, level: Level, mode: str, rng: random.Random) -> Outcome:
        lane = self.lane(trial.judge_log_form)
        if hasattr(lane, "reset_store"):  # a database beyond PostgreSQL (toki.sched.backend_runner)
            lane.reset_store()
            trial.setup(lane.admin)
        else:
            # One round trip for the reset (psycopg's pipeline mode measured slower for this).
            lane.admin.execute(RESET_TABLES)
            trial.setup(lane.admin)
        schedule = build_schedule(trial, level, mode, rng)
        result = self.runner.run(schedule, level, lane=lane, check_expect=False)
        states, codes = error_labels(result.steps)
        if states:
            return Outcome(False, True, states, codes)
        return Outcome(bool(trial.detect(result, lane.admin)), False, ())


def run_cell(bench: Bench, predicate: str, level: Level, trials: int, mode: str, seed: int,
             builder_kw: dict | None = None, on_trial: Callable[[], None] | None = None) -> dict:
    admitted = aborted = 0
    sqlstates: Counter = Counter()
    codes: Counter = Counter()
    builder = BUILDERS[predicate]
    key = predicate + "".join(f"/{k}={v}" for k, v in sorted((builder_kw or {}).items()))
    for t in range(trials):
        rng = trial_rng(seed, key, level.name, mode, t)
        trial = builder(rng, **(builder_kw or {}))
        out = bench.trial(trial, level, mode, rng)
        admitted += out.admitted
        aborted += out.aborted
        sqlstates.update(out.sqlstates)
        codes.update(out.codes)
        if on_trial:
            on_trial()
    return {"predicate": predicate, "level": level.name, "trials": trials, "admitted": admitted,
            "aborted": aborted, "sqlstates": dict(sorted(sqlstates.items())), "codes": dict(sorted(codes.items())),
            "rate": round(admitted / trials, 4) if trials else 0.0}


# -- jobs and workers ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Job:
    kind: str  # cell | variant | n3 | n2
    predicate: str
    level: str
    trials: int
    mode: str
    seed: int
    kw: tuple = ()

    @property
    def builder_kw(self) -> dict:
        return dict(self.kw)


def worker_bench(dsn: str | None, step_limit_s: float, tag: str = "matrix") -> Bench:
    """This process's lanes for a campaign, kept across jobs and shards (pool worker, Dask worker
    or the main process alike). Keyed by (tag, dsn, step limit): two campaigns never share a lane."""
    from toki.cluster import worker_local
    from toki.db.server import resolve

    return worker_local(("bench", tag, dsn, float(step_limit_s)),
                        lambda: Bench(Runner(resolve(dsn), step_limit_s=step_limit_s, record_history=False)))


def close_worker_benches() -> None:
    from toki.cluster import close_worker_locals

    close_worker_locals(("bench",))


_POOL_ARGS: tuple[str | None, float] | None = None


def _worker_init(dsn: str | None, step_limit_s: float) -> None:
    global _POOL_ARGS
    _POOL_ARGS = (dsn, step_limit_s)
    worker_bench(dsn, step_limit_s)  # open the lanes before the first job is timed


def _run_job(job: Job) -> tuple[Job, dict]:
    assert _POOL_ARGS is not None
    return job, cluster_job(job, *_POOL_ARGS)


def cluster_job(job: Job, dsn: str | None, step_limit_s: float) -> dict:
    """One job as a shard (pool or Dask worker): the worker's own lanes, the job's seed."""
    bench = worker_bench(dsn, step_limit_s, "matrix")
    return run_cell(bench, job.predicate, parse_level(job.level), job.trials, job.mode, job.seed, job.builder_kw)


def plan(*, trials: int, mode: str, seed: int, predicates: Iterable[str] = PREDICATES,
         levels: Iterable[Level] = MATRIX_LEVELS, variants: bool = True, n3: bool = True,
         n2_grid: bool = False, n2_schedules: int = 200) -> list[Job]:
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}", fix="use witness or random")
    if trials < 1:
        raise ConfigError(f"--trials {trials} must be at least 1", fix="pass --trials 100 (the paper's count)")
    if n2_grid and n2_schedules < 1:
        raise ConfigError(f"--n2-schedules {n2_schedules} must be at least 1", fix="pass --n2-schedules 200")
    predicates = list(predicates)
    for p in predicates:
        if p not in PREDICATES:
            raise ConfigError(f"unknown predicate {p!r}", fix=f"use one of {', '.join(PREDICATES)}")
    levels = list(levels)
    jobs = [Job("cell", p, lv.name, trials, mode, seed) for p in predicates for lv in levels]
    if variants:
        jobs += [Job("variant", v, lv.name, trials, mode, seed) for v in VARIANTS for lv in levels]
    if n3:
        jobs += [Job("n3", "N3", lv.name, trials, mode, seed, (("mode", m),))
                 for lv in levels for m in ("base", "audit_row")]
    if n2_grid:
        jobs += [Job("n2", "N2", lv, n2_schedules, mode, seed, (("contention", c), ("size", n)))
                 for lv in ("RC", "SI", "SR") for n in (2, 4, 8, 16) for c in (0.5, 0.75, 1.0)]
    return jobs


def unexpressible(job: Job, server) -> str | None:
    """Why a database cannot run a job's cell (None when it can): the cell is marked, not zero."""
    if job.kind == "n3" and not server.is_postgres:
        return "N3 runs the write path (toki.db.store), which is PostgreSQL's"
    level = parse_level(job.level)
    offered = server.levels()
    if level.isolation not in offered:
        name = server.describe()["name"]
        return f"{name} has no {level.isolation.cli_name} level (it offers {', '.join(i.cli_name for i in offered)})"
    return None


def _not_run(job: Job, why: str) -> dict:
    return {"predicate": job.predicate, "level": job.level, "trials": 0, "admitted": 0, "aborted": 0,
            "sqlstates": {}, "codes": {}, "rate": None, "not_expressible": why}


def execute(jobs: list[Job], *, dsn: str | None = None, workers: int = 1, step_limit_s: float = 10.0,
            on_result: Callable[[Job, dict], None] | None = None,
            on_trial: Callable[[], None] | None = None, cluster=None) -> list[tuple[Job, dict]]:
    """Run the jobs; with ``workers > 1`` in that many processes, each with its own lanes; with
    ``cluster`` (a :class:`toki.cluster.Cluster`) one job per shard on its workers.

    Jobs the database cannot express (a level it lacks, the write path outside PostgreSQL) are
    not run: their result says why (``not_expressible``) and has no rate.
    """
    from toki.db.server import resolve

    results: list[tuple[Job, dict]] = []
    server = resolve(dsn)
    runner = Runner(server, step_limit_s=step_limit_s, record_history=False)  # bad options fail here, not in a worker
    runnable = []
    for job in jobs:
        why = unexpressible(job, server)
        if why is None:
            runnable.append(job)
            continue
        results.append((job, _not_run(job, why)))
        if on_result:
            on_result(job, results[-1][1])
    order = {j: i for i, j in enumerate(jobs)}
    jobs = runnable
    if cluster is not None:
        # Each job is a shard: its trials' seeds come from (seed, predicate, level, mode, trial),
        # so which worker runs it, and how many there are, changes no number.
        def done(i, res):
            results.append((jobs[i], res))
            if on_result:
                on_result(jobs[i], res)

        cluster.map(cluster_job, jobs, dsn, step_limit_s, on_result=done)
        results.sort(key=lambda jr: order[jr[0]])
        return results
    if workers <= 1:
        bench = Bench(runner)
        try:
            for job in jobs:
                res = run_cell(bench, job.predicate, parse_level(job.level), job.trials, job.mode, job.seed,
                               job.builder_kw, on_trial)
                results.append((job, res))
                if on_result:
                    on_result(job, res)
        finally:
            bench.close()
        results.sort(key=lambda jr: order[jr[0]])
        return results
    # Longest jobs first keeps the lanes evenly busy.
    ordered = sorted(jobs, key=lambda j: -j.trials)
    with ProcessPoolExecutor(max_workers=workers, initializer=_worker_init, initargs=(dsn, step_limit_s)) as pool:
        futures = [pool.submit(_run_job, j) for j in ordered]
        for fut in as_completed(futures):
            job, res = fut.result()
            results.append((job, res))
            if on_result:
                on_result(job, res)
    results.sort(key=lambda jr: order[jr[0]])
    return results


def default_workers(server=None) -> int:
    if server is not None and not server.is_postgres and server.backend != "mysql":
        return 1  # SQLite and DuckDB are files one process writes at a time
    return max(1, min(4, os.cpu_count() or 1))


# -- the document ---------------------------------------------------------------------------------

def assemble(results: list[tuple[Job, dict]], *, trials: int, mode: str, seed: int, elapsed_s: float) -> dict:
    cells, variants, n3_grid, n2_cells = [], [], [], []
    for job, res in results:
        level = parse_level(job.level)
        if job.kind in ("cell", "variant"):
            res = dict(res)
            res["guard"] = GUARD[job.predicate].name
            res["expected"] = expected_rate(job.predicate, level)
            if job.predicate in FORMS:
                res["form"] = FORMS[job.predicate]
            (cells if job.kind == "cell" else variants).append(res)
        elif job.kind == "n3":
            res = dict(res, schema=job.builder_kw["mode"], expected=1.0 if job.builder_kw["mode"] == "base" else 0.0)
            n3_grid.append(res)
        else:
            res = dict(res, size=job.builder_kw["size"], contention=job.builder_kw["contention"])
            n2_cells.append(res)
    ran = [c for c in cells if c["rate"] is not None]
    zero_at = sum(1 for c in ran if c["expected"] == 0.0 and c["rate"] == 0.0)
    one_below = sum(1 for c in ran if c["expected"] == 1.0 and c["rate"] == 1.0)
    mismatches = [{"predicate": c["predicate"], "level": c["level"], "rate": c["rate"], "expected": c["expected"],
                   "aborted": c["aborted"], "sqlstates": c["sqlstates"], "codes": c.get("codes", {})}
                  for c in ran if c["rate"] != c["expected"]]
    n_sched = sum(r["trials"] for _, r in results)
    doc = {
        "matrix": "toki anomaly matrix", "mode": mode, "trials": trials, "seed": seed,
        "levels": [lv.name for lv in MATRIX_LEVELS], "predicates": list(PREDICATES),
        "forms": {p: FORMS[p] for p in ("P3", "N1")},
        "cells": cells,
        "summary": {"cells": len(cells), "zero_at_or_above_guard": zero_at, "one_below_guard": one_below,
                    "expected_zero": sum(1 for c in ran if c["expected"] == 0.0),
                    "expected_one": sum(1 for c in ran if c["expected"] == 1.0),
                    "not_expressible": len(cells) - len(ran),
                    "mismatches": mismatches},
        "variants": variants,
        "n3_grid": n3_grid,
        "elapsed_s": round(elapsed_s, 3),
        "schedules": n_sched,
        "schedules_per_s": round(n_sched / elapsed_s, 1) if elapsed_s > 0 else None,
    }
    if n2_cells:
        by_level: dict[str, list[float]] = {}
        for c in n2_cells:
            if c["rate"] is not None:
                by_level.setdefault(c["level"], []).append(c["rate"])
        doc["n2_grid"] = {"cells": n2_cells,
                          "mean_rate": {lv: round(sum(v) / len(v), 4) for lv, v in by_level.items()},
                          "published_mean_rate": {"RC": 0.7496, "SI": 0.7462, "SR": 0.0}}
    return doc

