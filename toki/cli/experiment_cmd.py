"""``toki experiment NAME``: run one experiment, print its table, write its JSON (docs/design.md#experiment-results-json).

The experiment's own options are parsed only once NAME is known, so listing commands does not
import every experiment (and the database and scheduler layers behind them).
"""

from __future__ import annotations

import argparse
import time

from toki.cli import add_dsn_option
from toki.render import emit_json, table


def register(sub) -> None:
    from toki.experiments import names

    p = sub.add_parser("experiment", help="run an experiment that reproduces a published table",
                       description="Run an experiment ('toki experiment list' names them with the table each "
                                   "reproduces; 'toki experiment NAME --help' shows its options).")
    p.add_argument("name", metavar="NAME", choices=["list", *names()],
                   help="list, or one of: " + ", ".join(names()))
    p.add_argument("options", nargs=argparse.REMAINDER, help="the experiment's own options")
    p.set_defaults(func=_dispatch, _parser_class=type(p))


def _dispatch(args, out) -> int:
    from toki.experiments import load

    if args.name == "list":
        lst = args._parser_class(prog="toki experiment list", description="name the experiments")
        lst.add_argument("--json", action="store_true", help="print JSON")
        return _list(lst.parse_args(args.options), out)
    mod = load(args.name)
    ep = args._parser_class(prog=f"toki experiment {args.name}", description=(mod.__doc__ or "").strip() or None,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dsn_option(ep)
    ep.add_argument("--seed", type=int, default=42, help="seed for every random choice (default 42)")
    ep.add_argument("--json", metavar="PATH", default=None,
                    help=f"where to write the JSON (default results/{args.name}/{args.name}.json; '-' for stdout)")
    ep.add_argument("--cluster", metavar="ADDRESS", default=None,
                    help="run the experiment's shards on a Dask cluster: a scheduler address or local:N "
                         "(experiments that split into shards; needs pip install 'toki[cluster]')")
    mod.add_arguments(ep)
    try:
        opts = ep.parse_args(args.options)
    except SystemExit as e:  # --help (0) or a usage error (2), already printed by argparse
        return int(e.code or 0)
    return _run(args.name, mod, opts, out)


def _list(args, out) -> int:
    from toki.experiments import available

    rows = [(name, mod.TABLE) for name, mod in available().items()]
    if args.json:
        emit_json([{"name": n, "reproduces": t} for n, t in rows], out)
    else:
        table(out, "toki experiments", ["name", "reproduces"], rows)
    return 0


def _run(name, mod, args, out) -> int:
    from toki.runinfo import provenance

    t0 = time.perf_counter()
    cluster_info = None
    if getattr(args, "cluster", None):
        from toki.cluster import parse
        from toki.experiments import run_on_cluster

        doc, cluster_info = run_on_cluster(name, mod, args, out, parse(args.cluster))
    else:
        doc = mod.run(args, out)
    opts = {k: v for k, v in vars(args).items() if k != "dsn" and not callable(v)}
    doc.setdefault("experiment", name)
    doc["provenance"] = provenance(seed=args.seed, options=opts, backend=doc.get("backend"),
                                   elapsed_s=round(time.perf_counter() - t0, 3))
    doc["provenance"]["cluster"] = cluster_info or {"address": None, "kind": "in-process", "workers": 1}
    path = args.json or f"results/{name}/{name}.json"
    if path == "-":
        emit_json(doc, out)
    else:
        emit_json(doc, out, path)
        out.write(f"wrote {path}\n")
    return int(doc.get("exit_status", 0))
