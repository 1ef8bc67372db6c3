"""Record real engines from several worker processes (``toki record``) and check what was recorded
(``toki check --workload memory``): which races show under real concurrency, after how many ops,
and whether the fixed write paths stay valid over long recordings (issue 36, "Real engines,
recorded").

Each configuration is one recording through :func:`toki.record.run.record` (worker processes
spawned, each its own engine on one shared store; the embedded PostgreSQL unless ``--dsn`` or
``$TOKI_DSN``), then one check through :func:`toki.check.memory.check`. For every anomaly type
found the script reports how many cases and **after how many ops** it first showed: the position,
among the history's completed ops (ok, info, fail, in index order), of the latest op named in the
anomaly's earliest case (the anomaly is complete once that op is in the history). Nothing is
asserted: it is a measurement, and real concurrency decides what shows.

    .venv/bin/python benchmarks/bench_recorded_engines.py                        # the racy variants, 800 ops each
    .venv/bin/python benchmarks/bench_recorded_engines.py --only toki toki-evi-si-locked --total 100000 \\
        --slots 100 --mix add=4,recall=3,history=1 --json results/bench_recorded_fixed.json

Long recordings need more slots and fewer audit reads: a history read returns the slot's whole
audit, so its size grows with the adds to the slot (at 10^5 ops over 2 slots, each audit read would
hold tens of thousands of claims).

SodaMem (one SQLite file shared by every worker) is recorded the same way; ``--store-dir /dev/shm``
puts its store on a tmpfs, where a commit's fsync costs nothing (durability is not under test, and
the racy variant commits about twelve times an ingest), and ``--duration`` caps a long run, after which
what was recorded is checked (every op is in the history as soon as it completes)::

    nice -n 19 .venv/bin/python benchmarks/bench_recorded_engines.py --only sodamem-fixed --total 100000 \\
        --slots 100 --mix add=4,recall=3,history=1 --store-dir /dev/shm --duration 3900 --json PATH
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# name -> (engine, engine module, variant described, fixed)
CONFIGS: dict[str, tuple[str | None, str | None, str, bool]] = {
    "toki": ("toki", None, "lww at RC, re-read guard, slot lock (the fixed write path)", True),
    "toki-evi-si-locked": (None, "toki.engines.toki_engine:recorded_evi_si_locked",
                           "evi at its precondition SI with the slot lock", True),
    "toki-lww-rc-unlocked": (None, "toki.engines.toki_engine:recorded_lww_unlocked",
                             "lww at RC with the guard, no slot lock", False),
    "toki-lww-unguarded": (None, "toki.engines.toki_engine:recorded_lww_unguarded",
                           "lww at RC without the re-read guard", False),
    "toki-evi-rc": (None, "toki.engines.toki_engine:recorded_evi_rc", "evi one level below its precondition (RC)",
                    False),
    "langmem-postgres": ("langmem-postgres", None, "LangMem's manager, enable_deletes (no fixed variant)", False),
    "mem0": ("mem0", None, "mem0 2.x's Memory.add, ADD-only (no fixed variant)", False),
    "sodamem": ("sodamem", None, "SodaMem's unmodified ingest on one SQLite file", False),
    "sodamem-fixed": ("sodamem-fixed", None, "SodaMem with each ingest inside one BEGIN IMMEDIATE (the wrapper fix)",
                      True),
}


def _indices(x, out: list[int]) -> None:
    if isinstance(x, dict):
        if isinstance(x.get("index"), int) and "type" in x:
            out.append(x["index"])
        for v in x.values():
            _indices(v, out)
    elif isinstance(x, list):
        for v in x:
            _indices(v, out)


def first_seen(result: dict, completed_at: dict[int, int]) -> dict[str, dict]:
    """Anomaly type -> {"cases", "after_ops"}: after how many completed ops its earliest case was whole."""
    out = {}
    for typ, cases in (result.get("anomalies") or {}).items():
        ends = []
        for case in cases if isinstance(cases, list) else []:
            idx: list[int] = []
            _indices(case, idx)
            if idx:
                ends.append(max(idx))
        first = min(ends) if ends else None
        after = None
        if first is not None:
            after = max((n for i, n in completed_at.items() if i <= first), default=0)
        out[typ] = {"cases": len(cases) if isinstance(cases, list) else 1, "after_ops": after}
    return out


def run(name: str, args) -> dict:
    from toki.check.memory import check
    from toki.record.run import Plan, parse_mix, record

    engine, module, variant, fixed = CONFIGS[name]
    out = Path(args.dir) / f"{name}-{int(time.time())}.jsonl"
    per_client = max(1, args.total // (args.processes * args.clients)) if args.total else args.ops
    store = ""
    if args.store_dir:  # the engine's store (a SQLite file) here, e.g. on a tmpfs: no fsync per commit
        Path(args.store_dir).mkdir(parents=True, exist_ok=True)
        store = tempfile.mkdtemp(dir=args.store_dir, prefix=f"toki-record-{name}-")
    plan = Plan(engine=engine, module=module, out=str(out), processes=args.processes, clients=args.clients,
                ops=per_client, duration=args.duration, mix=parse_mix(args.mix), seed=args.seed, slots=args.slots,
                dsn=args.dsn, store=store)
    loads: list[float] = []
    t0 = time.perf_counter()
    last = [t0]
    counter = Path(str(out) + ".index")

    def progress() -> None:  # every --progress seconds: lines written so far, the load average
        now = time.perf_counter()
        if now - last[0] < args.progress:
            return
        last[0] = now
        loads.append(os.getloadavg()[0])
        try:
            lines = int(counter.read_bytes()[:32] or 0)
        except (OSError, ValueError):
            lines = 0
        print(f"  {name}: {now - t0:7.0f} s  {lines:>8d} lines (~{lines // 2} ops)  "
              f"{lines / 2 / (now - t0):6.1f} ops/s  load {loads[-1]:.2f}", flush=True)

    summary = record(plan, progress=progress)
    rec_s = time.perf_counter() - t0
    loads.append(os.getloadavg()[0])
    if store:
        shutil.rmtree(store, ignore_errors=True)
    completed_at, n = {}, 0
    with open(out) as f:
        for line in f:
            op = json.loads(line)
            if op.get("type") in ("ok", "info", "fail"):
                n += 1
                completed_at[op["index"]] = n
    t1 = time.perf_counter()
    result = check(str(out))
    check_s = time.perf_counter() - t1
    row = {"config": name, "engine": summary["engine"], "version": summary["version"], "variant": variant,
           "fixed": fixed, "processes": args.processes, "clients": args.clients, "slots": args.slots,
           "mix": args.mix, "seed": args.seed, "ops": n, "ops_by_type": summary["ops"],
           "record_s": round(rec_s, 1), "ops_per_s": round(n / rec_s, 1) if rec_s else None,
           "check_s": round(check_s, 1), "valid": result["valid"],
           "load_avg_1min": {"min": min(loads), "max": max(loads), "mean": round(sum(loads) / len(loads), 2)},
           "store_dir": args.store_dir or tempfile.gettempdir(), "duration_cap_s": args.duration,
           "anomalies": first_seen(result, completed_at), "errors": summary["errors"][:3],
           "history_bytes": out.stat().st_size}
    if not args.keep:
        out.unlink()
        Path(str(out) + ".index").unlink(missing_ok=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None, choices=sorted(CONFIGS), help="configurations to run")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--ops", type=int, default=100, help="ops per client (default 100)")
    ap.add_argument("--total", type=int, default=None, help="ops in all (overrides --ops)")
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--mix", default="add=4,recall=2,history=1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--duration", type=float, default=None, metavar="S",
                    help="stop recording after S seconds even if --ops/--total is not reached (then check what exists)")
    ap.add_argument("--store-dir", default=None, metavar="DIR",
                    help="where the engine's store folder goes (default: the temporary folder); /dev/shm puts a "
                         "SQLite store on a tmpfs, where a commit's fsync costs nothing")
    ap.add_argument("--progress", type=float, default=60.0, metavar="S", help="print progress every S seconds")
    ap.add_argument("--dir", default=None, help="where histories go (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the histories")
    ap.add_argument("--json", default=None, metavar="PATH")
    args = ap.parse_args(argv)
    args.dir = args.dir or tempfile.mkdtemp(prefix="toki-bench-recorded-")
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    from toki.runinfo import provenance

    rows = []
    for name in args.only or list(CONFIGS):
        row = run(name, args)
        rows.append(row)
        found = ", ".join(f"{t} x{a['cases']} (after {a['after_ops']} ops)" for t, a in sorted(row["anomalies"].items()))
        print(f"{name:22s} {row['processes']}x{row['clients']} {row['ops']:>7d} ops  record {row['record_s']:>6.1f} s  "
              f"check {row['check_s']:>5.1f} s  valid={row['valid']}  {found or 'no anomaly'}", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        doc = {"rows": rows, "provenance": provenance(seed=args.seed, options=vars(args))}
        Path(args.json).write_text(json.dumps(doc, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
