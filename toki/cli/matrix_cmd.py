"""``toki matrix``: the 54-cell anomaly matrix, variant rows and the N3 schema grid (docs/design.md#matrix-json).

Runs on the embedded PostgreSQL unless ``--dsn``/``TOKI_DSN`` says otherwise; on MariaDB/MySQL,
SQLite or DuckDB the cells the database cannot express (a level it lacks, the write path of the
N3 grid) show ``n/a`` and the reason, never a rate of 0. ``--expect paper``
compares every cell with the paper's guard map and exits 1 listing the cells that differ.

``--cluster ADDRESS`` runs the cells on a Dask cluster (a scheduler address, or ``local:N``);
``--composition`` runs the composition grid instead (toki.matrix.composition).
"""

from __future__ import annotations

import time

from rich.console import Group
from rich.live import Live
from rich.table import Table

from toki.cli import add_dsn_option
from toki.render import console, emit_json
from toki.render import progress as bar


def register(sub) -> None:
    p = sub.add_parser("matrix", help="run the 9 x 6 anomaly matrix (plus variants and the N3 grid)",
                       description=__doc__)
    add_dsn_option(p)
    p.add_argument("--trials", type=int, default=None,
                   help="schedules per cell (default 100, as the paper; 50 with --composition, as the paper)")
    p.add_argument("--seed", type=int, default=42, help="seed of every random choice (default 42, as the paper)")
    p.add_argument("--mode", choices=("witness", "random"), default="witness",
                   help="witness: each trial runs the predicate's minimal witness (the paper's semantics); "
                        "random: a uniformly random interleaving of the same programs")
    p.add_argument("--workers", type=int, default=None, help="parallel lanes (processes); default min(4, cores)")
    p.add_argument("--only", action="append", metavar="PREDICATE", help="only these rows (repeatable)")
    p.add_argument("--no-variants", action="store_true", help="skip the P3 re-read and N1 unique-log rows")
    p.add_argument("--no-n3", action="store_true", help="skip the N3 schema grid")
    p.add_argument("--n2-grid", action="store_true",
                   help="also run the N2 partition grid (RC, SI, SR x size 2,4,8,16 x contention 0.5,0.75,1.0)")
    p.add_argument("--n2-schedules", type=int, default=200, help="schedules per N2 grid cell (default 200)")
    p.add_argument("--json", metavar="PATH", help="write the result document (JSON) to PATH ('-' for stdout)")
    p.add_argument("--png", metavar="PATH", help="draw the matrix as a heatmap (the paper's Fig. 4a layout)")
    p.add_argument("--expect", choices=("paper",), help="exit 1 and list the cells that differ from the guard map")
    p.add_argument("--step-limit", type=float, default=10.0, help="seconds a step may hang before it is an error")
    p.add_argument("--quiet", action="store_true", help="no live table or progress bar")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run on a Dask cluster: a scheduler address (tcp://host:8786) or local:N for N worker "
                        "processes here (needs the cluster extra: pip install 'toki[cluster]')")
    p.add_argument("--composition", action="store_true",
                   help="run the composition grid: 1,364 operator pipelines x 6 levels on PostgreSQL (docs/tables/index.md)")
    p.add_argument("--noise", type=float, default=0.0,
                   help="with --composition: per-stage noise ε (the published grid used 0.02; default 0)")
    p.add_argument("--pipelines", type=int, default=None, metavar="N",
                   help="with --composition: a seeded sample of N pipelines (default: all 1,364)")
    p.add_argument("--history", metavar="PATH",
                   help="instead of the matrix: run the phantom row (--only P3, the default, or P3-reread) at one "
                        "--level and write its transactions as a Jepsen history with predicate reads to PATH, "
                        "for toki check --workload predicate")
    p.add_argument("--level", metavar="L", help="with --history: the level (rc, rr, sr, or their long names)")
    p.set_defaults(func=run)


def _history(args, out) -> int:
    """``--history PATH``: the phantom row's transactions at one level (toki.matrix.history_export)."""
    import sys

    from toki.db.server import resolve
    from toki.errors import ConfigError
    from toki.matrix.history_export import ROWS, history
    from toki.runinfo import provenance

    rows = args.only or ["P3"]
    if len(rows) != 1 or rows[0] not in ROWS:
        raise ConfigError(f"--history exports one phantom row, not {', '.join(rows)}",
                          fix="pass --only P3 or --only P3-reread (or no --only: P3)")
    if not args.level:
        raise ConfigError("--history needs the level of the run", fix="add --level rr (or rc, sr)")
    trials = args.trials or 10
    server = resolve(args.dsn)
    t0 = time.perf_counter()
    with bar() as prog:
        task = prog.add_task(f"{rows[0]} at {args.level}", total=trials, visible=not args.quiet)
        ops = history(rows[0], args.level, trials=trials, seed=args.seed, mode=args.mode, dsn=args.dsn,
                      on_trial=lambda: prog.advance(task))
    emit_json(ops, out, args.history)
    made = provenance(seed=args.seed, backend={"name": server.backend, "version": server.version},
                      elapsed_s=round(time.perf_counter() - t0, 3),
                      options={"row": rows[0], "level": args.level, "trials": trials, "mode": args.mode})
    emit_json(made, out, args.history + ".provenance.json")
    sys.stderr.write(f"wrote {len(ops)} ops ({trials} trials of {rows[0]} at {args.level}) to {args.history} and how "
                     f"they were made to {args.history}.provenance.json\n")
    return 0


def _cell_text(c: dict | None) -> str:
    if c is None:
        return "…"
    if c.get("rate") is None:
        return "n/a"
    mark = "" if c.get("expected") is None or c["rate"] == c["expected"] else " ≠"
    ab = f" ({c['aborted']} ab)" if c["aborted"] else ""
    return f"{c['rate']:.2f}{ab}{mark}"


def matrix_table(cells: dict, rows: list[str], levels: list[str], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column("predicate")
    t.add_column("guard")
    for lv in levels:
        t.add_column(lv, justify="right")
    from toki.matrix.cells import GUARD

    for p in rows:
        t.add_row(p, GUARD[p].name, *(_cell_text(cells.get((p, lv))) for lv in levels))
    return t


def run(args, out) -> int:
    from toki.db.server import resolve
    from toki.errors import ConfigError
    from toki.levels import MATRIX_LEVELS
    from toki.matrix import cells as mx
    from toki.matrix.workloads import PREDICATES, VARIANTS
    from toki.runinfo import provenance

    if args.history:
        return _history(args, out)
    cluster_spec = None
    if args.cluster is not None:
        from toki.cluster import parse

        cluster_spec = parse(args.cluster)
        if args.workers is not None:
            raise ConfigError("--workers and --cluster both say where to run",
                              fix="keep one: --cluster local:N runs N worker processes here")
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers {args.workers} must be at least 1", fix="pass --workers 2")
    if not args.composition and (args.noise or args.pipelines is not None):
        raise ConfigError("--noise and --pipelines belong to the composition grid", fix="add --composition")
    if args.composition:
        from toki.cli import composition_cmd

        return composition_cmd.run(args, out, resolve(args.dsn), cluster_spec)
    if args.trials is None:
        args.trials = 100
    predicates = args.only or list(PREDICATES)
    jobs = mx.plan(trials=args.trials, mode=args.mode, seed=args.seed, predicates=predicates,
                   variants=not args.no_variants, n3=not args.no_n3, n2_grid=args.n2_grid,
                   n2_schedules=args.n2_schedules)
    server = resolve(args.dsn)
    if cluster_spec is not None and not server.is_postgres and server.backend != "mysql":
        raise ConfigError(f"{server.describe()['name']} is a file one process writes at a time; it cannot "
                          "take a cluster's workers", fix="drop --cluster, or use PostgreSQL or MariaDB")
    workers = args.workers or mx.default_workers(server)
    backend = server.describe()
    levels = [lv.name for lv in MATRIX_LEVELS]
    rows = list(predicates) + ([v for v in VARIANTS] if not args.no_variants else [])
    cells: dict = {}
    n3: dict = {}
    total = sum(j.trials for j in jobs)
    con = console(out)
    progress = bar(con, unit="schedules", eta=True)
    task = progress.add_task("[bold]toki matrix[/]", total=total)
    title = (f"anomaly admit rate, {args.mode} mode, {args.trials} schedules per cell, seed {args.seed}, "
             f"{backend['name']} {backend['version']} ({backend['how']})")

    def view():
        parts = [matrix_table(cells, rows, levels, title)]
        if n3:
            t = Table(title="N3 audit erasure by schema", title_justify="left")
            t.add_column("schema")
            for lv in levels:
                t.add_column(lv, justify="right")
            for schema in ("base", "audit_row"):
                t.add_row(schema, *(_cell_text(n3.get((schema, lv))) for lv in levels))
            parts.append(t)
        parts.append(progress)
        return Group(*parts)

    def on_result(job, res):
        res = dict(res)
        if job.kind in ("cell", "variant"):
            from toki.levels import parse_level

            res["expected"] = mx.expected_rate(job.predicate, parse_level(job.level))
            cells[(job.predicate, job.level)] = res
        elif job.kind == "n3":
            res["expected"] = 1.0 if job.builder_kw["mode"] == "base" else 0.0
            n3[(job.builder_kw["mode"], job.level)] = res
        if workers > 1 or cluster_spec is not None or job.kind == "n2" or res.get("rate") is None:
            progress.advance(task, job.trials)

    import contextlib

    cluster_info = None
    t0 = time.perf_counter()
    live = None if args.quiet else Live(view(), console=con, refresh_per_second=4, transient=False)
    on_trial = (lambda: progress.advance(task, 1)) if workers <= 1 and cluster_spec is None else None
    with contextlib.ExitStack() as stack:
        cluster = None
        if cluster_spec is not None:
            from toki.cluster import Cluster

            cluster = stack.enter_context(Cluster(cluster_spec))
            cluster_info = cluster.describe()
            workers = cluster_info["workers"]  # results stream back per job (one job per shard)
            t0 = time.perf_counter()  # the cluster's start-up is not the matrix's time
        try:
            if live:
                live.start()
            results = mx.execute(jobs, dsn=args.dsn, workers=workers, step_limit_s=args.step_limit,
                                 on_result=lambda j, r: (on_result(j, r), live and live.update(view())),
                                 on_trial=on_trial, cluster=cluster)
        finally:
            if live:
                live.update(view())
                live.stop()
                out.write("\n")
        elapsed = time.perf_counter() - t0
    doc = mx.assemble(results, trials=args.trials, mode=args.mode, seed=args.seed, elapsed_s=elapsed)
    doc["backend"] = backend
    doc["workers"] = workers
    doc["cluster"] = cluster_info
    doc["provenance"] = provenance(seed=args.seed, backend=backend, elapsed_s=round(elapsed, 3),
                                   options={k: v for k, v in vars(args).items() if k not in ("func", "dsn")})
    doc["provenance"]["cluster"] = cluster_info or {"address": None, "kind": "processes", "workers": workers}
    if args.quiet:
        con.print(matrix_table(cells, rows, levels, title))
    s = doc["summary"]
    out.write(f"{len(doc['cells'])} cells: {s['zero_at_or_above_guard']} of {s['expected_zero']} at or above the guard "
              f"admit 0; {s['one_below_guard']} of {s['expected_one']} below it admit 1. "
              f"{doc['schedules']} schedules in {doc['elapsed_s']:.1f} s ({doc['schedules_per_s']} schedules/s, "
              f"{workers} worker(s)).\n")
    out.write(f"P3 row: {doc['forms']['P3']}; N1 row: {doc['forms']['N1']}.\n")
    skipped = {}
    for c in doc["cells"] + doc["variants"] + doc["n3_grid"]:
        if c["rate"] is None:
            skipped.setdefault(c["not_expressible"], []).append(f"{c['predicate']} {c['level']}")
    for why, which in skipped.items():
        out.write(f"n/a ({len(which)} cell(s)): {why}.\n")
    if "n2_grid" in doc:
        out.write("N2 partition grid mean admit rate: "
                  + ", ".join(f"{lv} {r:.4f}" for lv, r in doc["n2_grid"]["mean_rate"].items())
                  + " (published RC 0.7496, SI 0.7462, SR 0.00)\n")
    if args.json:
        emit_json(doc, out, None if args.json == "-" else args.json)
        if args.json != "-":
            out.write(f"wrote {args.json}\n")
    if args.png:
        from toki.cli.matrix_plot import heatmap

        heatmap(doc, args.png)
        out.write(f"wrote {args.png}\n")
    if args.expect == "paper":
        if s["mismatches"]:
            out.write(f"{len(s['mismatches'])} cell(s) differ from the paper's guard map:\n")
            for m in s["mismatches"]:
                out.write(f"  {m['predicate']} at {m['level']}: measured {m['rate']:.2f}, expected {m['expected']:.0f}"
                          f" (aborted {m['aborted']}, SQLSTATE {m['sqlstates']}"
                          + (f", codes {m['codes']}" if m.get("codes") and m["codes"] != m["sqlstates"] else "")
                          + ")\n")
            return 1
        out.write("every cell matches the paper's guard map\n")
    return 0
