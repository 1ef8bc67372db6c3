"""Interleavings tried per second against the embedded server (issue 6 target: >= 100/s).

Each interleaving is one contract-suite example: reset the lane's tables, insert the setup
row, run the schedule (agents' write-path phases interleaved, barrier-controlled, with blocking
detection), then run the operator's detector. One lane (schema and connections) is reused, as
the suites do. Examples are drawn by Hypothesis up front (seeded), so drawing is not timed.

    .venv/bin/python benchmarks/bench_interleavings.py [--n 300] [--seed 0] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from toki.db.server import resolve
from toki.levels import parse_level
from toki.properties.adapter import TokiWritePath
from toki.properties.contracts import ContractChecker, workloads
from toki.runinfo import provenance

CELLS = [("lww", "RC"), ("lww", "SR"), ("evi", "SI"), ("await", "RC+cb"), ("rule", "SR")]


def draw(strategy, n: int, seed: int) -> list:
    from hypothesis import given, settings

    out: list = []

    @settings(max_examples=n, database=None, deadline=None, derandomize=True)
    @given(strategy)
    def collect(x):
        out.append(x)

    collect()
    random.Random(seed).shuffle(out)
    return out[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="interleavings per cell")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--json", default=None, help="write the numbers to this file")
    args = ap.parse_args()
    server = resolve(args.dsn)
    rows = []
    t_all, n_all = 0.0, 0
    for op, lvl in CELLS:
        examples = draw(workloads(op, parse_level(lvl)), args.n, args.seed)
        with ContractChecker(TokiWritePath(op), server=server) as checker:
            checker.run(examples[0])  # warm the lane
            times, steps, found = [], 0, 0
            for w in examples:
                t = time.perf_counter()
                trial = checker.run(w)
                times.append(time.perf_counter() - t)
                steps += len(trial.schedule.steps)
                found += bool(trial.anomalies)
        total = sum(times)
        t_all += total
        n_all += len(times)
        rows.append({"operator": op, "level": lvl, "interleavings": len(times), "per_s": round(len(times) / total, 1),
                     "p50_ms": round(statistics.median(times) * 1000, 2),
                     "p99_ms": round(sorted(times)[int(0.99 * (len(times) - 1))] * 1000, 2),
                     "steps_mean": round(steps / len(times), 1), "anomalous": found})
    print(f"{'operator':8} {'level':6} {'n':>5} {'per s':>7} {'p50 ms':>7} {'p99 ms':>7} {'steps':>6} {'anomalous':>9}")
    for r in rows:
        print(f"{r['operator']:8} {r['level']:6} {r['interleavings']:>5} {r['per_s']:>7} {r['p50_ms']:>7} "
              f"{r['p99_ms']:>7} {r['steps_mean']:>6} {r['anomalous']:>9}")
    overall = round(n_all / t_all, 1)
    print(f"overall: {n_all} interleavings in {t_all:.2f} s = {overall} per second (target >= 100)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cells": rows, "overall_per_s": overall,
                       "provenance": provenance(seed=args.seed, options={"n": args.n},
                                                backend=server.describe())}, f, indent=2)


if __name__ == "__main__":
    main()
