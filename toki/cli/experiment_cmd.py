"""``toki experiment NAME``: run one experiment, print its table, write its JSON (DESIGN §4.5)."""

from __future__ import annotations

import time

from toki.cli import add_dsn_option
from toki.cli.render import emit_json, table


def register(sub) -> None:
    from toki.experiments import available

    p = sub.add_parser("experiment", help="run an experiment that reproduces a published table")
    esub = p.add_subparsers(dest="experiment", metavar="NAME", parser_class=type(p))
    lst = esub.add_parser("list", help="name the experiments and the table each reproduces")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=_list)
    for name, mod in available().items():
        ep = esub.add_parser(name, help=mod.TABLE, description=(mod.__doc__ or "").strip() or None)
        add_dsn_option(ep)
        ep.add_argument("--seed", type=int, default=42, help="seed for every random choice (default 42)")
        ep.add_argument("--json", metavar="PATH", default=None,
                        help=f"where to write the JSON (default results/{name}/{name}.json; '-' for stdout)")
        mod.add_arguments(ep)
        ep.set_defaults(func=_runner(name, mod))
    p.set_defaults(func=lambda args, out: (p.print_help(out), 2)[1])


def _list(args, out) -> int:
    from toki.experiments import available

    rows = [(name, mod.TABLE) for name, mod in available().items()]
    if args.json:
        emit_json([{"name": n, "reproduces": t} for n, t in rows], out)
    else:
        table(out, "toki experiments", ["name", "reproduces"], rows)
    return 0


def _runner(name, mod):
    def go(args, out) -> int:
        from toki.runinfo import provenance

        t0 = time.perf_counter()
        doc = mod.run(args, out)
        opts = {k: v for k, v in vars(args).items() if k not in ("func", "dsn") and not callable(v)}
        doc.setdefault("experiment", name)
        doc["provenance"] = provenance(seed=args.seed, options=opts, backend=doc.get("backend"),
                                       elapsed_s=round(time.perf_counter() - t0, 3))
        path = args.json or f"results/{name}/{name}.json"
        if path == "-":
            emit_json(doc, out)
        else:
            emit_json(doc, out, path)
            out.write(f"wrote {path}\n")
        return int(doc.get("exit_status", 0))
    return go
