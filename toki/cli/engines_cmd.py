"""``toki engines list``: the engines the harness can certify, real or modelled, and their scenarios."""

from __future__ import annotations

import textwrap

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
        entry = {"name": name, "description": info.description, "installed": available(info),
                 "executed": info.executed, "extra": info.extra}
        if entry["installed"] or info.executed == "blocked":
            try:
                eng = load_engine(name)
            except TokiError as e:
                entry.update(installed=False, error=str(e))
            else:
                # the system and version a verdict row stands for ("mem0 1.0.x", model), not the CLI name
                entry.update(system=str(getattr(eng, "system", None) or name), version=str(eng.version),
                             executed=getattr(eng, "executed", "real"),
                             scenarios={k: s.description for k, s in eng.scenarios.items()})
        doc.append(entry)
        if "error" in entry and info.executed == "blocked":  # the blocker in full is in --json
            status = "blocked (why: toki engines list --json)"
        elif "error" in entry:
            status = f"unavailable: {entry['error']}"
        elif not entry["installed"]:
            status = f"not installed ({info.install})"
        else:
            status = entry["version"].split(" (")[0]  # a model's version cites its sources at length
        from rich.markup import escape  # "toki[letta]" is not markup

        rows.append((name, entry.get("system", "-"), entry.get("executed", "-"), escape(status),
                     len(entry.get("scenarios", {})) or "-", escape(info.description)))
    if args.json is not None:
        emit_json(doc, out, None if args.json == "-" else args.json)
        return 0
    table(out, "engines (toki certify --engine NAME [--scenario S])",
          ["engine", "system", "executed", "version", "scenarios", "what"], rows)
    # The scenarios in full, outside the table: a table column would cut or fold their names.
    for entry in doc:
        if entry.get("scenarios"):
            out.write(textwrap.fill(", ".join(entry["scenarios"]), width=118, initial_indent=f"{entry['name']}: ",
                                    subsequent_indent="    ", break_long_words=False, break_on_hyphens=False) + "\n")
    return 0
