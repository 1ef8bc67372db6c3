"""Run one program under frontrun and print one JSON line: the verdict, how many interleavings, the time.

    frontrun python -m benchmarks.frontrun_programs.run_frontrun --program sqlite-racy --strategy dpor

frontrun's ``explore`` only runs under its ``frontrun`` launcher (it preloads its I/O
interposition library), so ``bench_frontrun.py`` runs this module in a subprocess through it,
one run per process: no state (patched modules, leftover threads) carries from one run to the next.

The counterexample's replays are frontrun's own: ``reproduce_on_failure=N`` re-runs the failing
schedule N times and counts the runs that break the invariant again. frontrun's random strategy
does not re-run a counterexample in which a worker raised (it returns at once); for that one this
module replays the schedule itself through frontrun's public ``frontrun.bytecode.run_with_schedule``
(the function its reproduction uses) and counts the runs that raise again or break the invariant.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `benchmarks.` and `toki`

from benchmarks.frontrun_programs import module  # noqa: E402


def verdict(result) -> str:
    """frontrun's tri-state ``property_holds``: False a counterexample, True a pass, None inconclusive."""
    return {False: "found", True: "cleared", None: "inconclusive"}[result.property_holds]


def replay(schedule: list[int], setup, workers, invariant, times: int) -> int:
    """How many of ``times`` re-runs of a random-strategy schedule fail again (a worker raises, or the
    invariant breaks); a frontrun timeout or deadlock is not a reproduction, as in frontrun's own count."""
    from frontrun._deadlock import DeadlockError  # what a replay that deadlocks raises (not public)
    from frontrun.bytecode import run_with_schedule

    hits = 0
    for _ in range(times):
        try:
            state = run_with_schedule(schedule, setup, list(workers))
        except (TimeoutError, DeadlockError):
            continue
        except Exception:  # noqa: BLE001 - the worker's own error again: the crash reproduced
            hits += 1
            continue
        hits += not invariant(state)
    return hits


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", required=True)
    ap.add_argument("--strategy", choices=("dpor", "random"), required=True)
    ap.add_argument("--seed", type=int, default=0, help="random strategy: frontrun's schedule seed")
    ap.add_argument("--max-attempts", type=int, default=100, help="random strategy: schedules to try")
    ap.add_argument("--total-timeout", type=float, default=120.0, help="seconds for the whole exploration")
    ap.add_argument("--replays", type=int, default=10, help="re-runs of a counterexample")
    ap.add_argument("--dsn", default=None, help="the PostgreSQL programs' server")
    ap.add_argument("--lock-timeout", type=int, default=None,
                    help="DPOR: frontrun's lock_timeout (ms), SET on each new PostgreSQL connection")
    a = ap.parse_args(argv)

    import frontrun

    mod, variant = module(a.program)
    case = mod.frontrun_case(variant, a.dsn)
    workers = case.explore_workers()
    options = {k: v for k, v in workers.items() if k != "workers"}  # count=n, for one function run n times
    options |= {"strategy": a.strategy, "total_timeout": a.total_timeout, "reproduce_on_failure": a.replays}
    if a.strategy == "random":
        options |= {"seed": a.seed, "max_attempts": a.max_attempts}
    if a.lock_timeout is not None:
        options["lock_timeout"] = a.lock_timeout
    out = {"tool": f"frontrun-{a.strategy}", "program": a.program, "agents": len(case.workers), "options": options}
    t = time.perf_counter()
    try:
        r = frontrun.explore(setup=case.setup, workers=workers["workers"], invariant=case.invariant, **options)
        out |= {"verdict": verdict(r), "explored": r.num_explored, "unique": r.unique_interleavings,
                "replays": r.reproduction_attempts, "replayed": r.reproduction_successes,
                "reason": r.inconclusive_reason,
                "counterexample_len": len(r.counterexample) if isinstance(r.counterexample, list) else None,
                "replay_by": "frontrun" if r.reproduction_attempts else None,
                "explanation": (r.explanation or "").strip().splitlines()[0][:300] if r.property_holds is False else None}
        if (a.strategy == "random" and r.property_holds is False and not r.reproduction_attempts
                and isinstance(r.counterexample, list)):
            out["replayed"] = replay(r.counterexample, case.setup, case.workers, case.invariant, a.replays)
            out |= {"replays": a.replays, "replay_by": "bench: frontrun.bytecode.run_with_schedule"}
    except Exception as e:  # noqa: BLE001 - explore() itself raised: that is the result of this run
        out |= {"verdict": "error", "explored": None, "replays": 0, "replayed": 0,
                "reason": f"explore() raised {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}",
                "traceback": traceback.format_exc(limit=-3)}
    out["elapsed_s"] = round(time.perf_counter() - t, 3)
    case.cleanup()
    print("FRONTRUN-RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
