"""``toki matrix --composition``: the composition grid (docs/tables/index.md) on PostgreSQL, locally or on a cluster.

Kept apart from matrix_cmd.py so the 54-cell matrix's command stays as it was; matrix_cmd
dispatches here when ``--composition`` is given.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from rich.console import Group
from rich.live import Live
from rich.table import Table

from toki.render import console, emit_json
from toki.render import progress as bar
from toki.errors import ConfigError

# Pipelines per shard: a shard is a few seconds of work (one pipeline's six cells), small enough
# that a lost worker costs little and progress moves often, large enough that Dask's per-task
# overhead (about a millisecond) is noise. Fixed, so shards never depend on the worker count.
PIPELINES_PER_SHARD = 1


def _summary_table(sm: dict, done: int, total: int) -> Table:
    t = Table(title=f"composition grid: {done} of {total} cells", title_justify="left")
    for c in ("cells", "count", "admit rate", "published", "cells at 0", "cells at 1", "aborted trials"):
        t.add_column(c, justify="right" if c != "cells" else "left")
    pub = sm.get("published") or {}
    for name, key in (("at or above the joined guard", "at_or_above"), ("below it", "below")):
        part = sm[key]
        rate = "…" if part["rate"] is None else f"{part['rate']:.4f}"
        t.add_row(name, str(part["cells"]), rate, f"{pub.get(key, {}).get('rate', float('nan')):.4f}"
                  f" ({pub.get(key, {}).get('cells', '?')} cells)", str(part["cells_rate_0"]), str(part["cells_rate_1"]),
                  str(part["aborted"]))
    return t


def run(args, out, server, cluster_spec) -> int:
    from toki.matrix import composition as cm
    from toki.runinfo import provenance

    if not server.is_postgres:
        raise ConfigError(f"the composition grid runs on PostgreSQL; {server.describe()['name']} was given",
                          fix="drop --dsn (the embedded PostgreSQL) or pass a postgresql:// DSN")
    if args.only or args.n2_grid or args.mode != "witness" or args.png or args.expect:
        raise ConfigError("--composition takes none of --only, --n2-grid, --mode random, --png, --expect",
                          fix="use --pipelines N, --noise EPS, --trials N, --seed N, --cluster, --workers, --json")
    noise = cm.check_noise(args.noise)
    trials = 50 if args.trials is None else args.trials
    if trials < 1:
        raise ConfigError(f"--trials {trials} must be at least 1", fix="pass --trials 50 (the paper's count)")
    pipes = cm.plan(pipelines_n=args.pipelines, seed=args.seed)
    names = [cm.pipeline_name(p) for p in pipes]
    from toki.cluster import shards_of

    shards = shards_of(names, PIPELINES_PER_SHARD)
    levels = cm.level_names()
    total_cells = len(pipes) * len(levels)
    con = console(out)
    progress = bar(con, unit="schedules", eta=True)
    task = progress.add_task("[bold]toki matrix --composition[/]", total=total_cells * trials)
    cells: list[dict] = []

    def view():
        sm = cm.summarise(cells, trials=trials, noise=noise, seed=args.seed, pipes=pipes)
        return Group(_summary_table(sm, len(cells), total_cells), progress)

    live = None if args.quiet or not con.is_terminal else Live(view(), console=con, refresh_per_second=2,
                                                                 transient=False)
    by_shard: dict[int, list[dict]] = {}

    # Rich redraws only on a terminal; in a log (CI, nohup) a line every 30 s says how far it got.
    plain = not con.is_terminal and not args.quiet
    last = [time.perf_counter()]

    def shard_done(i, res):
        by_shard[i] = res
        cells.extend(res)
        progress.advance(task, len(res) * trials)
        if live and not plain:
            live.update(view())
        now = time.perf_counter()
        if plain and (now - last[0] >= 30 or len(cells) == total_cells):
            last[0] = now
            sm = cm.summarise(cells, trials=trials, noise=noise, seed=args.seed, pipes=pipes)
            rate = lambda part: "…" if sm[part]["rate"] is None else f"{sm[part]['rate']:.4f}"
            out.write(f"[{now - t0:7.0f} s] {len(cells)}/{total_cells} cells, {len(cells) * trials / (now - t0):.1f} "
                      f"schedules/s; at or above {rate('at_or_above')}, below {rate('below')}\n")
            out.flush()

    backend = server.describe()
    cluster_info = None
    workers = 1
    t0 = time.perf_counter()
    if live:
        live.start()
    try:
        if cluster_spec is not None:
            from toki.cluster import Cluster

            with Cluster(cluster_spec) as cl:
                cluster_info = cl.describe()
                workers = cluster_info["workers"]
                t0 = time.perf_counter()  # the cluster's start-up is not the grid's time
                cl.map(cm.shard, shards, trials, args.seed, noise, args.dsn, args.step_limit, on_result=shard_done)
        else:
            from toki.matrix.cells import default_workers

            workers = args.workers or default_workers(server)
            if workers <= 1:
                from toki.matrix.cells import worker_bench

                bench = worker_bench(args.dsn, args.step_limit, "composition")
                for i, sh in enumerate(shards):
                    res = [cm.run_cell(bench, cm.parse_pipeline(p), lv, trials, args.seed, noise)
                           for p in sh for lv in cm.MATRIX_LEVELS]
                    shard_done(i, res)
            else:
                with ProcessPoolExecutor(max_workers=workers) as pool:
                    futs = {pool.submit(cm.shard, sh, trials, args.seed, noise, args.dsn, args.step_limit): i
                            for i, sh in enumerate(shards)}
                    for fut in as_completed(futs):
                        shard_done(futs[fut], fut.result())
    finally:
        if live:
            live.update(view())
            live.stop()
            out.write("\n")
    elapsed = time.perf_counter() - t0
    ordered = [c for i in range(len(shards)) for c in by_shard[i]]  # plan order, whatever finished first
    sm = cm.summarise(ordered, trials=trials, noise=noise, seed=args.seed, pipes=pipes)
    n_sched = sum(c["trials"] for c in ordered)
    doc = {"composition": sm, "backend": backend, "workers": workers, "cluster": cluster_info,
           "shards": len(shards), "elapsed_s": round(elapsed, 3), "schedules": n_sched,
           "schedules_per_s": round(n_sched / elapsed, 1) if elapsed > 0 else None,
           "seconds_per_cell": round(elapsed / len(ordered), 4) if ordered else None}
    opts = {k: v for k, v in vars(args).items() if k not in ("func", "dsn")}
    doc["provenance"] = provenance(seed=args.seed, backend=backend, elapsed_s=round(elapsed, 3), options=opts)
    doc["provenance"]["cluster"] = cluster_info or {"address": None, "kind": "processes", "workers": workers}
    if args.quiet:
        con.print(_summary_table(sm, len(ordered), total_cells))
    a, b = sm["at_or_above"], sm["below"]
    ne = sm["noise_expectation"]["at_or_above_rate"]
    out.write(f"{len(ordered)} cells ({sm['pipelines']} pipelines x {len(levels)} levels, {trials} schedules each, "
              f"noise {noise}): {a['cells']} at or above the joined guard admit {a['rate']:.4f} "
              f"(published 0.0904 over 2219); {b['cells']} below admit {b['rate']:.4f} (published 1.00 over 5965). "
              f"Per-stage noise alone predicts {ne} at or above.\n")
    out.write(f"{n_sched} schedules in {elapsed:.1f} s ({doc['schedules_per_s']} schedules/s, "
              f"{doc['seconds_per_cell']} s per cell, {workers} worker(s)"
              + (f" on {cluster_info['address']}" if cluster_info else "") + ").\n")
    if args.json:
        emit_json(doc, out, None if args.json == "-" else args.json)
        if args.json != "-":
            out.write(f"wrote {args.json}\n")
    return 0
