"""How close to its --time-budget a gate ends, measured as a CI step runs it.

    python benchmarks/bench_gates.py [--budget 30] [--runs 1] [--json PATH] [--quick] [--case TEXT]

Each case is ``toki certify ... --time-budget B --json FILE`` in a process of its own, timed from
before the process starts to after it exits (interpreter start, imports, the engine's serial
orders, the search, the shards' processes, the report, exit), on searches that need much longer
than the budget:

- ``sodamem-fixed --exhaustive 2 --reduction sleep``: all 14 scenarios, about 6 minutes in one
  process here (sleep sets alone: with DPOR, the default, the same certificate takes about 16 s,
  too short to be cut);
- the same with ``--workers 2`` (2 min 29 s unbounded), the deadline handed to each shard;
- ``sodamem-fixed --scenario double-supersede --budget 1000000`` (random) and ``--pct 3``.

Each row: wall seconds, the excess over the budget, the exit status (3: not certified), and
how far the search got (interleavings explored, scenarios out of time). ``--quick`` runs only
the first case.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the `toki` command of the checkout this script is in (run from its root, so that it imports that toki)
TOKI = [sys.executable, "-c", "import sys; from toki.cli import entry; sys.argv[0] = 'toki'; entry()"]

CASES = {
    "exhaustive K=2, 14 scenarios": ["--engine", "sodamem-fixed", "--exhaustive", "2", "--reduction", "sleep"],
    "exhaustive K=2, 14 scenarios, --workers 2": ["--engine", "sodamem-fixed", "--exhaustive", "2", "--reduction",
                                                  "sleep", "--workers", "2"],
    "random, double-supersede, budget 10^6": ["--engine", "sodamem-fixed", "--scenario", "double-supersede",
                                              "--budget", "1000000"],
    "PCT depth 3, double-supersede, 10^6 runs": ["--engine", "sodamem-fixed", "--scenario", "double-supersede",
                                                 "--pct", "3", "--budget", "1000000"],
}


def one(argv: list[str], budget: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "certify.json"
        t = time.monotonic()
        proc = subprocess.run([*TOKI, "certify", *argv, "--time-budget", str(budget), "--json", str(out)],
                              cwd=ROOT, capture_output=True, text=True, env=dict(os.environ))
        wall = time.monotonic() - t
        doc = json.loads(out.read_text()) if out.exists() else {"verdicts": []}
    rows = doc["verdicts"]
    return {"wall_s": round(wall, 2), "over_s": round(wall - budget, 2), "exit": proc.returncode,
            "explored": sum(v["search"]["explored"] for v in rows),
            "complete": sum(bool(v["search"]["complete"]) for v in rows),
            "out_of_time": sum(bool(v["search"].get("out_of_time")) for v in rows), "scenarios": len(rows),
            "stderr": proc.stderr.strip().splitlines()[-1:] if proc.returncode not in (0, 1, 3) else []}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=30.0, help="--time-budget for every case (default 30)")
    ap.add_argument("--runs", type=int, default=1, help="runs of each case (default 1)")
    ap.add_argument("--quick", action="store_true", help="the first case only")
    ap.add_argument("--case", default="", help="only the cases whose name contains this")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"--time-budget {args.budget:g} s, load average {load:.2f} at the start, {os.cpu_count()} cores")
    results = []
    for name, argv in [c for c in CASES.items() if args.case in c[0]][:1 if args.quick else None]:
        for i in range(args.runs):
            r = {"case": name, "run": i + 1, **one(argv, args.budget)}
            results.append(r)
            print(f"{name:45} run {i + 1}: {r['wall_s']:6.2f} s wall ({r['over_s']:+.2f} s), exit {r['exit']}, "
                  f"{r['explored']} interleavings, {r['out_of_time']} of {r['scenarios']} scenario(s) out of time, "
                  f"{r['complete']} complete" + (f"  {r['stderr']}" if r["stderr"] else ""), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"budget_s": args.budget, "load_average": load,
                                               "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
