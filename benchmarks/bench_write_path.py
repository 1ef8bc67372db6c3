#!/usr/bin/env python
"""Single-writer write-path throughput and latency, next to a bare INSERT round trip.

For each size N of facts already stored (bulk-loaded with COPY into their own slots), on one
connection of the embedded PostgreSQL (or --dsn / TOKI_DSN):

* ``insert``    - Store.write of a fact into an empty slot (begin, candidate read, insert, commit);
* ``supersede`` - Store.write of a fact that contradicts the current fact of a loaded slot and
  wins under ⊕t (begin, candidate read, close, insert winner, insert #pre remainder, insert
  audit row, commit), in the default audit_row schema at READ COMMITTED;
* ``bare INSERT`` - one autocommitted INSERT of an agent_memory row on the same connection:
  the floor that any write path pays.

Usage:  python benchmarks/bench_write_path.py [--sizes 0 1000 10000 100000] [--writes 1000]
        [--seed 42] [--json results/bench_write_path.json] [--dsn DSN]

Not a test: it prints figures and asserts nothing. Keep --writes modest on shared machines.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import datetime, timedelta

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from toki.render import emit_json, table
from toki.db.server import resolve
from toki.db.store import COLUMNS, Store
from toki.model import SENTINEL, Fact
from toki.runinfo import provenance

T0 = datetime(2026, 1, 1)
LOADED_AT = datetime(2026, 1, 1, 0, 0)


def bulk_load(store: Store, n: int, prefix: str = "bg") -> None:
    """n current facts, one per slot (subject bg<i>, predicate p), written with COPY."""
    if n <= 0:
        return
    with store.conn.cursor() as cur:
        with cur.copy(f"copy agent_memory ({', '.join(COLUMNS)}) from stdin") as cp:
            for i in range(n):
                cp.write_row((f"{prefix}-{i}", f"{prefix}{i}", "p", f"o{i}", T0, SENTINEL, LOADED_AT, SENTINEL,
                              f"x_{prefix}-{i}", 0.5, "lww", "current"))
    store.conn.execute("analyze agent_memory")


def candidate_plan(store: Store) -> str:
    """The plan of the write path's candidate read as a generic (prepared) plan."""
    from toki.db.store import _CANDIDATES

    sql = _CANDIDATES
    for i in range(1, 5):
        sql = sql.replace("%s", f"${i}", 1)
    c = store.conn
    c.execute("set plan_cache_mode = force_generic_plan")
    c.execute("prepare toki_bench_candidates (text, text, timestamp, timestamp) as " + sql)
    plan = [r[0] for r in c.execute("explain (costs off) execute toki_bench_candidates"
                                    " ('hot1', 'p', '9999-12-31', '2026-02-01')")]
    c.execute("deallocate toki_bench_candidates")
    c.execute("reset plan_cache_mode")
    return " / ".join(line.strip() for line in plan)


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def summary(lat_s: list[float], elapsed: float) -> dict:
    ms = [x * 1e3 for x in lat_s]
    return {"n": len(ms), "per_s": len(ms) / elapsed, "p50_ms": percentile(ms, 0.50),
            "p99_ms": percentile(ms, 0.99), "mean_ms": statistics.fmean(ms)}


def run(args) -> dict:
    server = resolve(args.dsn)
    rng = random.Random(args.seed)
    results = []
    console = Console(stderr=True)
    total = len(args.sizes) * 3 * args.writes
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        bar = progress.add_task("write path", total=total)
        for n in args.sizes:
            with Store.open(server=server, label="bench") as store:
                progress.update(bar, description=f"N={n}: loading with COPY")
                t = time.perf_counter()
                bulk_load(store, n)
                # the slots the supersede writes hit: loaded like the rest, then ANALYZEd
                bulk_load(store, args.writes, prefix="hot")
                load_s = time.perf_counter() - t
                for _ in range(args.warmup):  # let psycopg prepare its statements
                    store.write(Fact(f"warm-{rng.getrandbits(48):x}", "warm", "p", "o", T0))
                row = {"facts": n, "load_s": load_s}
                # 1. write path into empty slots
                progress.update(bar, description=f"N={n}: write path, new slot")
                lat = []
                t0 = time.perf_counter()
                for i in range(args.writes):
                    f = Fact(f"new-{n}-{i}", f"new{i}", "p", "o", T0 + timedelta(days=1))
                    s = time.perf_counter()
                    store.write(f, operator="lww", level="read-committed")
                    lat.append(time.perf_counter() - s)
                    progress.advance(bar)
                row["insert"] = summary(lat, time.perf_counter() - t0)
                # 2. write path superseding the current fact of a loaded slot
                progress.update(bar, description=f"N={n}: write path, supersede")
                order = list(range(args.writes))
                rng.shuffle(order)
                lat = []
                t0 = time.perf_counter()
                for i in order:
                    f = Fact(f"sup-{n}-{i}", f"hot{i}", "p", f"new-o{i}", T0 + timedelta(days=30))
                    s = time.perf_counter()
                    out = store.write(f, operator="lww", level="read-committed")
                    lat.append(time.perf_counter() - s)
                    assert out.action == "superseded", out
                    progress.advance(bar)
                row["supersede"] = summary(lat, time.perf_counter() - t0)
                # 3. the floor: one autocommitted INSERT round trip on the same connection
                progress.update(bar, description=f"N={n}: bare INSERT")
                sql = (f"insert into agent_memory ({', '.join(COLUMNS)}) values "
                       f"(%s, %s, 'p', 'o', %s, %s, %s, %s, 'x', 0.5, 'lww', 'current')")
                lat = []
                t0 = time.perf_counter()
                for i in range(args.writes):
                    s = time.perf_counter()
                    store.conn.execute(sql, (f"bare-{n}-{i}", f"bare{i}", T0, SENTINEL, LOADED_AT, SENTINEL))
                    lat.append(time.perf_counter() - s)
                    progress.advance(bar)
                row["bare_insert"] = summary(lat, time.perf_counter() - t0)
                row["rows_at_end"] = store.conn.execute("select count(*) from agent_memory").fetchone()[0]
                row["candidate_plan"] = candidate_plan(store)
                results.append(row)
    return {"backend": server.describe(), "seed": args.seed, "writes": args.writes, "results": results}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[0, 1_000, 10_000, 100_000])
    p.add_argument("--writes", type=int, default=1000, help="writes per measurement (default 1000)")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--dsn", default=None)
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = p.parse_args(argv)
    t = time.perf_counter()
    res = run(args)
    res["provenance"] = provenance(seed=args.seed, options=vars(args), backend=res["backend"],
                                   elapsed_s=time.perf_counter() - t)
    b = res["backend"]
    rows = []
    for r in res["results"]:
        for kind in ("insert", "supersede", "bare_insert"):
            s = r[kind]
            rows.append((f"{r['facts']:,}", {"insert": "write path, new slot", "supersede": "write path, supersede",
                                             "bare_insert": "bare INSERT"}[kind],
                         f"{s['per_s']:,.0f}", f"{s['p50_ms']:.3f}", f"{s['p99_ms']:.3f}"))
    table(sys.stdout, f"single writer, {b['name']} {b['version']} ({b['how']}), {args.writes} writes each",
          ["facts stored", "operation", "per second", "p50 ms", "p99 ms"], rows)
    last = res["results"][-1]
    print(f"candidate read at {last['facts']:,} facts (generic plan): {last['candidate_plan']}")
    if args.json:
        emit_json(res, sys.stdout, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
