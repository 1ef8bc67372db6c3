"""``toki check FILE``: check a Jepsen history (JSON or EDN) the way Elle does (docs/design.md#histories-and-toki-check-output),
or a memory history (``--workload memory``, docs/memory-histories.md).

Exit status: 0 valid, 1 invalid or unknown (an empty transaction graph or a cycle search that
ran out of time is never a pass), 2 bad input (the message names the op and what is wrong).
"""

from __future__ import annotations

from pathlib import Path

from toki.render import emit_json

EPILOG = ("exit status: 0 valid, 1 invalid or unknown (never a pass), 2 bad input. "
          "Default models (none given): strict-serializable, as Elle; serializable for --workload memory, "
          "plus the memory's own anomalies (double-supersede, duplicate-insert, N1, N2, N3). "
          "elle-cli's flags work too: -m/--model list-append|rw-register (the workload), "
          "-c/--consistency-models A,B, -a/--anomalies A,B, -f/--format edn|json, -v/--verbose, several files.")

#: elle-cli's --model values (its checkers) -> toki's workload. No consistency model has these
#: names, so --model can mean either: a workload (elle-cli's habit) or a model (toki's).
ELLE_CLI_WORKLOADS = {"list-append": "list-append", "elle-list-append": "list-append",
                      "rw-register": "rw-register", "elle-rw-register": "rw-register"}


def register(sub) -> None:
    p = sub.add_parser("check", help="check a Jepsen history (list-append, rw-register, predicate reads) or a memory history like Elle",
                       description=__doc__.split("\n\n")[0], epilog=EPILOG)
    p.add_argument("file", nargs="*", help="history file(s): JSON array, JSON lines, or EDN (.edn)")
    p.add_argument("--workload", choices=("list-append", "rw-register", "predicate", "memory"), default=None,
                   help="the workload (default list-append); predicate: rw-register plus predicate reads "
                        "[\"rp\", {\"where\": {...}, \"range\": [lo, hi]}, [[k, v], ...]], checked for phantoms (G2); "
                        "memory: add/retract/current/history/decide micro-ops over slots (docs/memory-histories.md)")
    p.add_argument("--multi-valued", action="append", default=None, metavar="SLOT",
                   help="memory: a slot that may hold several current claims (repeatable; a glob such as '*/hobbies' "
                        "or '*' for all), on top of the history's header")
    p.add_argument("--plot", default=None, metavar="DIR",
                   help="draw each cycle found as an SVG picture in DIR (its path is added to the case as \"plot\")")
    p.add_argument("-m", "--model", action="append", default=None, metavar="M",
                   help="consistency model that must hold (repeatable), e.g. serializable, snapshot-isolation; "
                        "as in elle-cli, list-append or rw-register here names the workload")
    p.add_argument("--anomaly", action="append", default=None, metavar="A",
                   help="anomaly that must not occur (repeatable), e.g. G2-item, lost-update")
    p.add_argument("-c", "--consistency-models", action="append", default=None, metavar="M,N",
                   help="elle-cli's spelling: comma-separated consistency models")
    p.add_argument("-a", "--anomalies", action="append", default=None, metavar="A,B",
                   help="elle-cli's spelling: comma-separated anomalies")
    p.add_argument("-f", "--format", choices=("edn", "json"), default=None,
                   help="history format (default: .edn files are EDN, others JSON)")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                   help="print the result as JSON (or write it to PATH)")
    p.add_argument("-v", "--verbose", action="store_true", help="elle-cli's spelling of --json")
    p.add_argument("--cycle-search-timeout", type=float, default=None, metavar="S",
                   help="seconds of cycle search per strongly connected component (default 5)")
    p.add_argument("--wfr-keys", action="store_true", help="rw-register: writes follow reads inside a txn")
    p.add_argument("--sequential-keys", action="store_true",
                   help="rw-register: each key is sequential (version order from process order)")
    p.add_argument("--linearizable-keys", action="store_true",
                   help="rw-register: each key is linearizable (version order from real time)")
    p.add_argument("--lattice", action="store_true", help="print the consistency-model lattice (with sources) and exit")
    p.add_argument("--stats", action="store_true", help="add timings and graph sizes to the result")
    p.set_defaults(func=run)


def run(args, out) -> int:
    from toki.check import check, lattice
    from toki.check.core import CYCLE_SEARCH_TIMEOUT
    from toki.check.accel.allocator import fast_malloc
    from toki.errors import ConfigError

    if args.lattice:
        emit_json(lattice(), out)
        return 0
    if not args.file:
        raise ConfigError("no history file given", fix="toki check FILE --workload list-append")
    workload, models, anomalies = _options(args)
    if workload in ("list-append", "memory") and (args.wfr_keys or args.sequential_keys or args.linearizable_keys):
        raise ConfigError("--wfr-keys, --sequential-keys and --linearizable-keys apply to rw-register only",
                          fix="drop them, or use --workload rw-register")
    if args.multi_valued and workload != "memory":
        raise ConfigError("--multi-valued applies to memory histories only", fix="add --workload memory, or drop it")
    extra = {"multi_valued": args.multi_valued or ()} if workload == "memory" else {}
    from toki.render import progress

    fast_malloc(_malloc_threshold(args.file))
    results = {}
    bar = progress()  # on stderr, only when it is a terminal (a large history takes minutes)
    # redrawn at each phase, not by rich's refresh thread: with another thread running, the
    # scanner could not fork its helper (toki.check.accel.children) and would scan in threads, slower
    bar.live.auto_refresh = False
    with bar:
        for f in args.file:
            task = bar.add_task(f"{f}: reading", total=3)

            def on_phase(name, f=f, task=task):
                bar.update(task, description=f"{f}: {name}", advance=0 if name == "reading" else 1, refresh=True)

            results[f] = check(f, workload=workload, models=models, anomalies=anomalies,
                               cycle_search_timeout=args.cycle_search_timeout or CYCLE_SEARCH_TIMEOUT,
                               wfr_keys=args.wfr_keys, sequential_keys=args.sequential_keys,
                               linearizable_keys=args.linearizable_keys, stats=args.stats, fmt=args.format,
                               on_phase=on_phase, **extra)
            bar.update(task, completed=3)
    if args.plot:
        from toki.check.draw import draw_cycles

        for f, res in results.items():
            prefix = "" if len(args.file) == 1 else f"{Path(f).stem}-"
            draw_cycles(res, args.plot, prefix=prefix)
    as_json = args.json or ("-" if args.verbose else None)
    if as_json:
        emit_json(results[args.file[0]] if len(args.file) == 1 else results, out, as_json)
    else:
        for f, res in results.items():
            if len(args.file) > 1:
                out.write(f"{f}\n")
            _human(res, out)
    return 0 if all(r["valid"] is True for r in results.values()) else 1


def _malloc_threshold(files) -> int:
    """Freed memory glibc may keep for reuse (toki.check.accel.allocator): 1 GiB, which spares page
    faults at 10^6 transactions, but a quarter of that for histories over a GiB, where the
    columns are the memory and holding a GiB of freed arrays on top would push the peak up."""
    import os

    try:
        size = sum(os.path.getsize(f) for f in files)
    except OSError:
        size = 0  # the check names the missing file
    return 1 << 30 if size < 1 << 30 else 1 << 28


def _options(args) -> tuple[str, list | None, list | None]:
    """toki's and elle-cli's flags to (workload, models, anomalies)."""
    from toki.errors import ConfigError

    workloads = [ELLE_CLI_WORKLOADS[m] for m in args.model or () if m in ELLE_CLI_WORKLOADS]
    models = [m for m in args.model or () if m not in ELLE_CLI_WORKLOADS]
    if args.workload:
        workloads.append(args.workload)
    if len(set(workloads)) > 1:
        raise ConfigError(f"two workloads given: {', '.join(sorted(set(workloads)))}",
                          fix="give one of --workload / --model list-append|rw-register")
    for group in args.consistency_models or ():
        models += [m.strip().lstrip(":") for m in group.split(",") if m.strip()]
    anomalies = list(args.anomaly or ())
    for group in args.anomalies or ():
        anomalies += [a.strip().lstrip(":") for a in group.split(",") if a.strip()]
    # Elle's default (strict-serializable) applies when neither models nor anomalies are given
    given_models = args.model is not None and models or args.consistency_models is not None
    return (workloads[0] if workloads else "list-append", models if given_models else None,
            anomalies if (args.anomaly is not None or args.anomalies is not None) else None)


def _human(res: dict, out) -> None:
    from toki.render import table

    v = res["valid"]
    out.write(f"valid: {str(v).lower() if isinstance(v, bool) else v}\n")
    if res["anomaly_types"]:
        rows = []
        for t in res["anomaly_types"]:
            cases = res["anomalies"][t]
            n = len(cases) if isinstance(cases, list) else 1
            rows.append((t, n, _first(t, cases)))
        table(out, "anomalies", ["type", "cases", "first case"], rows)
    plots = [c["plot"] for cs in res["anomalies"].values() if isinstance(cs, list)
             for c in cs if isinstance(c, dict) and "plot" in c]
    for path in plots:
        out.write(f"picture: {path}\n")
    if res["not"]:
        out.write(f"not: {', '.join(res['not'])}\n")
    if res["also_not"]:
        out.write(f"also not: {', '.join(res['also_not'])}\n")
    if "stats" in res:
        s = res["stats"]
        out.write(f"{s['txns']} transactions, {s['edges']} edges, {s['seconds']['total']:.3f} s\n")


def _first(t: str, cases) -> str:
    if not isinstance(cases, list) or not cases:
        return str(cases)
    c = cases[0]
    if "explanation" in c:
        return c["explanation"]
    if "steps" in c:
        names = c["names"]
        return "; ".join(f"{names[i]} -> {names[i + 1]}: {s.get('explanation', s['type'])}"
                         for i, s in enumerate(c["steps"]))
    if "scc_size" in c and "type" in c and t.endswith("cycle-exists"):
        return f"a cycle exists among {c['scc_size']} transactions: {c['scc'][:10]}"
    keep = {k: v for k, v in c.items() if k not in ("op", "writer", "txns")}
    if "op" in c:
        keep["op index"] = c["op"]["index"]
    return str(keep)[:300]
