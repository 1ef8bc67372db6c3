"""``toki engines list``: the engines the harness can certify, real or modelled, and their scenarios."""

from __future__ import annotations

from toki.render import emit_json, table
from toki.errors import TokiError


def register(sub) -> None:
    p = sub.add_parser("engines", help="list the memory engines toki can certify (toki certify --engine NAME)",
                       description="The memory engines toki ships for `toki certify --engine NAME`: real engines "
                                   "(their unmodified code, from the `engines` extra) and models of engines with no "
                                   "package; plug in your own with `toki certify --engine-module pkg.mod:factory`.")
    p.add_argument("action", nargs="?", default="list", choices=("list",))
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH", help="print the list as JSON")
    p.set_defaults(func=run)


def run(args, out) -> int:
    from toki.engines.registry import ENGINES, available, load_engine

    rows, doc = [], []
    for name, info in ENGINES.items():
        entry = {"name": name, "description": info.description, "installed": available(info)}
        if entry["installed"]:
            try:
                eng = load_engine(name)
            except TokiError as e:
                entry.update(installed=False, error=str(e))
                rows.append((name, "-", f"unavailable: {e}", "", info.description))
                doc.append(entry)
                continue
            entry.update(version=str(eng.version), executed=getattr(eng, "executed", "real"),
                         scenarios={k: s.description for k, s in eng.scenarios.items()})
        doc.append(entry)
        rows.append((name, entry.get("executed", "-"), entry.get("version", "not installed (pip install "
                                                                        "'toki[engines]')"),
                     ", ".join(entry.get("scenarios", {})), info.description))
    if args.json is not None:
        emit_json(doc, out, None if args.json == "-" else args.json)
        return 0
    table(out, "engines (toki certify --engine NAME [--scenario S])",
          ["engine", "executed", "version", "scenarios", "what"], rows)
    return 0
