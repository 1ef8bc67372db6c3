"""Lost update with w concurrent writers on one hot row, at RC, RR and SR; then with retries.

Each writer reads the hot partition of ``agent_memory`` (one current fact), keeps the
confidence it saw and writes back seen + one step (``experiments/_hot_row.py``). In the
default ``barrier`` mode every writer begins and reads before any writes (a schedule run by
the barrier-controlled runner on one lane reused across runs), then each writes and commits in
a seeded order. A run *admits* a lost update when fewer increments survive than writers
committed. Per cell (level x writers): admit rate (runs that lost an update), abort rate
(writers aborted, by SQLSTATE), commits per second (wall clock over the cell's runs, resets
included).

The second pass repeats every cell with bounded retry: an aborted writer sleeps a seeded,
exponentially growing, fully jittered backoff and re-runs its whole transaction (read, pause,
write, commit), at most ``--max-retries`` times, concurrently with the other retrying writers.
It reports how many aborted writes a retry recovers and what that costs (attempts per commit,
extra wall time per run, commits per second).

``--mode free`` runs the writers as real threads released together instead (no barrier after
the read): outcomes then depend on timing, which is what the barrier removes.
"""

from __future__ import annotations

import os
import random
import statistics
import time

from toki.render import table
from toki.db.server import resolve
from toki.experiments import _hot_row as hr
from toki.levels import Isolation
from toki.sched import Runner

NAME = "multi-writer"
TABLE = ("PostgreSQL multi-writer lost update, w in {1,2,4,8,16} x {RC, RR, SR}, 30 runs: admit and abort "
         "rates, commits/s; then bounded retry with backoff (docs/tables/index.md)")

WRITERS = (1, 2, 4, 8, 16)
#: docs/tables/index.md, "same harness, throughput (commits/s)"
PUBLISHED_COMMITS_PER_S = {
    "read-committed": {1: 6.76, 2: 13.92, 4: 26.26, 8: 42.07, 16: 44.81},
    "repeatable-read": {1: 7.13, 2: 6.99, 4: 6.72, 8: 5.03, 16: 3.07},
    "serializable": {1: 7.23, 2: 7.02, 4: 6.68, 8: 5.16, 16: 3.05},
}


def published_rates(level: Isolation, w: int) -> dict:
    """docs/tables/index.md: RC admits 1.00 for w >= 2 with no aborts; RR and SR admit 0 aborting (w-1)/w."""
    if level == Isolation.RC:
        return {"admit_rate": 1.0 if w >= 2 else 0.0, "abort_rate": 0.0}
    return {"admit_rate": 0.0, "abort_rate": round((w - 1) / w, 4)}


def add_arguments(p) -> None:
    p.add_argument("--writers", default="1,2,4,8,16", help="comma-separated writer counts (default 1,2,4,8,16)")
    p.add_argument("--levels", default="rc,rr,sr", help="isolation levels (default rc,rr,sr)")
    p.add_argument("--runs", type=int, default=30, help="runs per cell (default 30)")
    p.add_argument("--mode", choices=("barrier", "free"), default="barrier",
                   help="barrier: all read before any writes (default); free: threads race")
    p.add_argument("--pause-ms", type=float, default=0.0,
                   help="pause between the reads and the writes, like an agent's LLM call (default 0; the "
                        "published harness paused 50 ms)")
    p.add_argument("--max-retries", type=int, default=3,
                   help="retries per aborted write in the retry pass (default 3; 0 skips the retry pass)")
    p.add_argument("--backoff-ms", type=float, default=2.0,
                   help="backoff base: retry k sleeps uniform(0, base * 2**(k-1)) ms (default 2)")


def _rate(num: int, den: int) -> float:
    return round(num / den, 4) if den else 0.0


def run(args, out) -> dict:
    writers = hr.int_list(args.writers, "writers")
    levels = hr.level_list(args.levels)
    runs = hr.positive(args.runs, "runs", hi=10_000)
    max_retries = hr.positive(args.max_retries, "max-retries", lo=0, hi=50)
    pause_s = hr.float_list(str(args.pause_ms), "pause-ms")[0] / 1000
    backoff_s = hr.float_list(str(args.backoff_ms), "backoff-ms")[0] / 1000
    server = resolve(args.dsn)
    runner = Runner(server, record_history=False)
    seed = args.seed

    cells, retry_cells = [], []
    lane = runner.lane("multi_writer")
    try:
        hot = hr.HotRow(lane)
        policy = hr.RetryPolicy(max_retries, backoff_s) if max_retries else None
        for level in levels:
            for w in writers:
                # each retry cell runs right after its plain twin, so both see the same machine load
                cells.append(_cell(args.mode, runner, lane, hot, level, w, runs, pause_s, None, seed))
                if policy:
                    retry_cells.append(_cell(args.mode, runner, lane, hot, level, w, runs, pause_s, policy, seed))
    finally:
        lane.close()

    plain = {(c["level"], c["writers"]): c for c in cells}
    for c in retry_cells:
        base = plain[(c["level"], c["writers"])]
        c["extra_ms_per_run_median"] = round(c["run_ms_median"] - base["run_ms_median"], 3)
        c["commits_per_s_without_retry"] = base["commits_per_s"]

    mismatches = []
    if args.mode == "barrier":
        for c in cells:
            exp = c["published"]
            if c["admit_rate"] != exp["admit_rate"] or c["abort_rate"] != exp["abort_rate"]:
                mismatches.append(f"{c['level']} w={c['writers']}: admit {c['admit_rate']} abort {c['abort_rate']}, "
                                  f"published admit {exp['admit_rate']} abort {exp['abort_rate']}")

    _print(out, cells, retry_cells, args.mode, pause_s)
    if args.mode == "barrier":
        out.write(f"published admit/abort rates reproduced in {len(cells) - len(mismatches)} of {len(cells)} cells\n")
        for m in mismatches:
            out.write(f"  not reproduced: {m}\n")
    return {
        "experiment": NAME,
        "backend": {"name": server.backend, "version": server.version},
        "mode": args.mode,
        "pause_ms": pause_s * 1000,
        "runs": runs,
        "workload": {"read": hr.READ_SQL, "write": hr.WRITE_SQL, "step": hr.STEP},
        "cells": cells,
        "retry": {"max_retries": max_retries, "backoff_ms": backoff_s * 1000,
                  "backoff": "retry k sleeps uniform(0, backoff * 2**(k-1)), seeded per writer", "cells": retry_cells},
        "published_commits_per_s": PUBLISHED_COMMITS_PER_S,
        "reproduced": {"cells": len(cells) - len(mismatches), "of": len(cells), "mismatches": mismatches}
        if args.mode == "barrier" else None,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "exit_status": 1 if mismatches else 0,
    }


def _cell(mode, runner, lane, hot, level: Isolation, w: int, runs: int, pause_s: float, policy, seed: int) -> dict:
    tag = "retry" if policy else "plain"

    def rng_for(r: int):
        """Backoff randomness of writer i in run r: seeded, independent of every other cell."""
        return lambda i: random.Random(f"{seed}:{tag}:{level.cli_name}:{w}:{r}:{i}")

    admitted = aborted_first = commits = lost_total = 0
    recovered = gave_up = attempts = 0
    recovery_ms: list[float] = []
    run_ms: list[float] = []
    retry_phase_ms: list[float] = []
    states: dict[str, int] = {}
    fw = hr.FreeWriters(runner.server, lane.schema, w) if mode == "free" else None
    try:
        # Untimed warm-up runs: connections open, statements prepared (psycopg prepares a statement
        # at its 5th execution), caches filled before the clock starts.
        for _ in range(hr.WARMUP_RUNS):
            hot.reset()
            if fw is None:
                hr.barrier_round(runner, lane, hot, w, level, random.Random(0))
            else:
                fw.run(hot, level, [1] * w)
        t0 = time.perf_counter()
        for r in range(runs):
            hot.reset()
            t_run = time.perf_counter()
            if fw is None:
                before = hot.count()
                rnd = hr.barrier_round(runner, lane, hot, w, level,
                                       random.Random(f"{seed}:order:{level.cli_name}:{w}:{r}"), pause_s)
                aborted_first += len(rnd.aborted)
                attempts += w
                ok = len(rnd.committed)
                for s in rnd.aborted.values():
                    states[s] = states.get(s, 0) + 1
                if policy and rnd.aborted:
                    conns = {n: lane.sessions[n].conn for n in rnd.aborted}
                    t_retry = time.perf_counter()
                    for tries in hr.retry_round(conns, rnd, level, policy, rng_for(r), pause_s, t_retry):
                        attempts += len(tries)
                        for a in tries:
                            if a.sqlstate:
                                states[a.sqlstate] = states.get(a.sqlstate, 0) + 1
                        if tries and tries[-1].status == "committed":
                            recovered += 1
                            ok += 1
                            recovery_ms.append(1000 * tries[-1].t_end)
                        else:
                            gave_up += 1
                    retry_phase_ms.append(1000 * (time.perf_counter() - t_retry))
                else:
                    gave_up += len(rnd.aborted)
                lost = ok - (hot.count() - before)
            else:
                rngs = [rng_for(r)(i + 1) for i in range(w)]
                fr = fw.run(hot, level, [1] * w, think_s=pause_s, policy=policy or hr.RetryPolicy(), rngs=rngs)
                attempts += len(fr.attempts)
                aborted_first += sum(a.status == "aborted" for a in fr.attempts if a.retry == 0)
                for a in fr.attempts:
                    if a.sqlstate:
                        states[a.sqlstate] = states.get(a.sqlstate, 0) + 1
                recovered += sum(a.retry > 0 and a.status == "committed" for a in fr.attempts)
                gave_up += w - fr.committed
                ok, lost = fr.committed, fr.lost
            run_ms.append(1000 * (time.perf_counter() - t_run))
            commits += ok
            lost_total += lost
            admitted += lost > 0
        elapsed = time.perf_counter() - t0
    finally:
        if fw is not None:
            fw.close()
    cell = {
        "level": level.cli_name,
        "writers": w,
        "runs": runs,
        "admit_rate": _rate(admitted, runs),
        # without retry: writers aborted on their only try; with retry: writes that never committed
        "abort_rate": _rate(gave_up, w * runs),
        "commits_per_s": round(commits / elapsed, 2) if elapsed > 0 else None,
        "commits": commits,
        "lost_updates": lost_total,
        "first_try_abort_rate": _rate(aborted_first, w * runs),
        "attempts": attempts,
        "sqlstates": states,
        "elapsed_s": round(elapsed, 4),
        "run_ms_median": round(_median(run_ms), 3),
        "published": published_rates(level, w),
        "published_commits_per_s": PUBLISHED_COMMITS_PER_S.get(level.cli_name, {}).get(w),
    }
    if policy:
        cell.update({
            "max_retries": policy.max_retries,
            "recovered": recovered,
            "recovered_rate": _rate(recovered, aborted_first),
            "gave_up": gave_up,
            "attempts_per_commit": round(attempts / commits, 3) if commits else None,
        })
        if recovery_ms:
            cell["recovery_ms_median"] = round(_median(recovery_ms), 3)
            cell["recovery_ms_max"] = round(max(recovery_ms), 3)
        if retry_phase_ms:
            cell["retry_phase_ms_median"] = round(_median(retry_phase_ms), 3)
    return cell


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def _print(out, cells, retry_cells, mode, pause_s) -> None:
    title = f"lost update on one hot row ({mode} mode, pause {pause_s * 1000:g} ms), no retry"
    rows = []
    for c in cells:
        pub = c["published"]
        pc = c["published_commits_per_s"]
        rows.append((c["level"], c["writers"], c["runs"], f"{c['admit_rate']:.2f}", f"{pub['admit_rate']:.2f}",
                     f"{c['abort_rate']:.2f}", f"{pub['abort_rate']:.2f}", c["commits_per_s"],
                     "" if pc is None else pc,
                     "" if not pc else f"{c['commits_per_s'] / pc:,.0f}x"))
    table(out, title, ["level", "w", "runs", "admit", "published", "abort", "published", "commits/s",
                       "published", "ratio"], rows)
    if retry_cells:
        short = {"read-committed": "RC", "repeatable-read": "RR", "serializable": "SR"}
        rows = [(short.get(c["level"], c["level"]), c["writers"], f"{c['first_try_abort_rate']:.2f}", c["recovered"], c["gave_up"],
                 f"{c['admit_rate']:.2f}", c["attempts_per_commit"], c["commits_per_s"],
                 c["commits_per_s_without_retry"], c.get("retry_phase_ms_median", "-"), f"{c['extra_ms_per_run_median']:.2f}")
                for c in retry_cells]
        table(out, f"with bounded retry (at most {retry_cells[0]['max_retries']} retries, exponential backoff, "
                   "full jitter)",
              ["level", "w", "aborted 1st", "recovered", "gave up", "admit", "tries/commit", "commits/s",
               "w/o retry", "retry ms", "run ms +/-"], rows)
