"""Scaling of a campaign on a Dask cluster: schedules per second at local:1 and local:2, side by side.

The same seeded sample of the composition grid runs on a LocalCluster of each size; the
cluster's start-up is timed apart (it is paid once per campaign, not per schedule). The two
documents must be identical apart from timings (the benchmark checks it), so the speed-up is
for the same work. Prints a table and writes JSON with provenance.

    .venv/bin/python benchmarks/bench_cluster.py [--pipelines 40] [--trials 10] [--sizes 1,2] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from toki.cluster import Cluster, shards_of
from toki.matrix import composition as cm
from toki.runinfo import provenance


def run(size: int, pipes, trials: int, seed: int, noise: float) -> dict:
    t_start = time.perf_counter()
    with Cluster(f"local:{size}") as cl:
        startup = time.perf_counter() - t_start
        info = cl.describe()
        # Warm each worker's lane (schema, connections) outside the timed part, as a long campaign
        # amortises it: one tiny shard per worker.
        cl.map(cm.shard, [[cm.pipeline_name(("lww",))]] * size, 1, seed, 0.0, None, 10.0)
        t0 = time.perf_counter()
        res = cl.map(cm.shard, shards_of([cm.pipeline_name(p) for p in pipes], 1), trials, seed, noise, None, 10.0)
        elapsed = time.perf_counter() - t0
    cells = [c for shard in res for c in shard]
    n = sum(c["trials"] for c in cells)
    return {"cluster": info, "startup_s": round(startup, 2), "elapsed_s": round(elapsed, 2), "schedules": n,
            "schedules_per_s": round(n / elapsed, 1), "cells": cells}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipelines", type=int, default=40)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--sizes", default="1,2")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--noise", type=float, default=0.02)
    ap.add_argument("--json", default="results/bench_cluster/bench_cluster.json")
    args = ap.parse_args()
    pipes = cm.plan(pipelines_n=args.pipelines, seed=args.seed)
    runs = {}
    for size in (int(s) for s in args.sizes.split(",")):
        runs[size] = run(size, pipes, args.trials, args.seed, args.noise)
        r = runs[size]
        print(f"local:{size}: {r['schedules']} schedules in {r['elapsed_s']} s = {r['schedules_per_s']} schedules/s "
              f"(cluster start-up {r['startup_s']} s)", flush=True)
    sizes = sorted(runs)
    same = all(runs[s]["cells"] == runs[sizes[0]]["cells"] for s in sizes)
    base = runs[sizes[0]]["schedules_per_s"]
    print(f"{'size':>6} {'schedules/s':>12} {'speed-up':>9}")
    for s in sizes:
        print(f"{'local:' + str(s):>6} {runs[s]['schedules_per_s']:>12} {runs[s]['schedules_per_s'] / base:>8.2f}x")
    print(f"same cells at every size: {same}; cores: {os.cpu_count()}; load average {os.getloadavg()}")
    doc = {"benchmark": "cluster scaling (composition sample)", "pipelines": args.pipelines, "trials": args.trials,
           "noise": args.noise, "identical_results": same, "load_average": os.getloadavg(), "cores": os.cpu_count(),
           "runs": {f"local:{s}": {k: v for k, v in runs[s].items() if k != "cells"} for s in sizes},
           "provenance": provenance(seed=args.seed, options=vars(args))}
    doc["provenance"]["cluster"] = [runs[s]["cluster"] for s in sizes]
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {args.json}")
    if not same:
        raise SystemExit("the cells differ between cluster sizes")


if __name__ == "__main__":
    main()
