"""``toki conformance [--dsn DSN] [--json PATH] [--png PATH]``: Hermitage's table for a database.

Runs Hermitage's cases (G0 G1a G1b G1c OTV PMP P4 G-single G2-item G2) at every isolation level
the database offers and decides each cell from what happened in the run, with no golden outcome:
prevented by blocking (a statement waited), by an abort (serialization failure, deadlock, write
conflict), by a snapshot (reads returned an older version at once), or the anomaly observed.
On PostgreSQL and MariaDB/MySQL the table is compared with Hermitage's published column and
every difference is listed with its reason (docs/conformance.md).

Exit: 0 every cell decided, 1 a cell's run did not finish (shown as ?, never as prevented),
2 bad input or no database.
"""

from __future__ import annotations

import time

from toki.cli import add_dsn_option
from toki.render import console, emit_json

_COLOUR = {"✓": "green", "—": "red", "R/O": "yellow", "?": "magenta"}
_SHORT = {"blocking": "B", "abort": "A", "snapshot": "S"}


def register(sub) -> None:
    p = sub.add_parser("conformance", help="Hermitage's isolation table for a database, decided from what happened",
                       description=__doc__)
    add_dsn_option(p)
    p.add_argument("--json", metavar="PATH", help="write every cell and how it was decided (JSON) to PATH ('-': stdout)")
    p.add_argument("--png", metavar="PATH", help="draw the table (Hermitage's layout) to PATH")
    p.add_argument("--case", action="append", metavar="CASE", help="only this case (repeatable): G0, G1a, ..., G2")
    p.add_argument("--level", action="append", metavar="LEVEL", help="only this level (repeatable): rc, rr, ...")
    p.add_argument("--step-limit", type=float, default=10.0, help="seconds a step may hang before its cell is unknown")
    p.set_defaults(func=run)


def run(args, out) -> int:
    from toki.conformance import measure
    from toki.conformance.measure import pick_cases
    from toki.db.server import resolve
    from toki.levels import parse_isolation
    from toki.runinfo import provenance

    pick_cases(args.case)  # bad input fails before any database is touched
    for lv in args.level or ():
        parse_isolation(lv)
    server = resolve(args.dsn)
    t0 = time.perf_counter()
    doc = measure(server, cases=args.case, levels=args.level, step_limit_s=args.step_limit)
    doc["provenance"] = provenance(backend=doc["database"], elapsed_s=round(time.perf_counter() - t0, 3),
                                   options={"dsn": args.dsn, "case": args.case, "level": args.level,
                                            "step_limit_s": args.step_limit})
    if args.json == "-":
        emit_json(doc, out)
    else:
        _print(doc, out)
        if args.json:
            emit_json(doc, out, args.json)
            out.write(f"wrote {args.json}\n")
    if args.png:
        from toki.cli.conformance_plot import draw

        draw(doc, args.png)
        out.write(f"wrote {args.png}\n")
    return 1 if any(c["outcome"] == "unknown" for c in doc["cells"]) else 0


def _text(c: dict) -> str:
    mark = f"[{_COLOUR[c['label']]}]{c['label']}[/]"
    if c["outcome"] == "prevented":
        mark += " " + "+".join(_SHORT.get(h, h) for h in c["how"].split("+"))
    if c.get("differs_from_hermitage"):
        mark += " *"
    return mark


def _on(v):
    return {True: "ON", False: "OFF"}.get(v, v) if isinstance(v, bool) else v


def _print(doc: dict, out) -> None:
    from rich.markup import escape
    from rich.table import Table

    con = console(out)
    db = doc["database"]
    con.print(f"[bold]Hermitage's table for {escape(db['config'])}[/]")
    t = Table()
    t.add_column("level", no_wrap=True)
    for case in doc["cases"]:
        t.add_column(case, no_wrap=True)
    by = {(c["level"], c["case"]): c for c in doc["cells"]}
    for lv in doc["levels"]:
        t.add_row(lv, *(_text(by[(lv, case)]) for case in doc["cases"]))
    con.print(t)
    con.print("✓ prevented, by B blocking (a statement waited), A abort (the database ended a transaction), "
              "S snapshot (reads returned an older version at once)\n— anomaly observed   R/O prevented for "
              "read-only transactions only   ? the run did not finish (never counted as prevented)")
    settings = ", ".join(f"{k}={_on(v)}" for k, v in db["settings"].items() if v is not None and " " not in str(k))
    if settings:
        con.print(escape(f"settings: {settings}"))
    h = doc.get("hermitage")
    if h is None:
        con.print("Hermitage publishes no column for this database: this table is new.")
    else:
        con.print(f"Hermitage's column for {h['column']}: {h['agree']} of {h['compared']} cells agree"
                  + (f"; levels it does not test: {', '.join(h['levels_not_in_hermitage'])}"
                     if h["levels_not_in_hermitage"] else ""))
        by_why: dict[str, list[dict]] = {}
        for d in h["differ"]:
            by_why.setdefault(d["why"], []).append(d)
        for why, ds in by_why.items():
            cells = "; ".join(f"{d['case']} at {d['level']} (Hermitage {d['published']}, measured {d['measured']})"
                              for d in ds)
            con.print(escape(f"  * {cells}: {why}"), soft_wrap=True)
    for c in doc["cells"]:
        if c["outcome"] == "unknown":
            con.print(f"[magenta]? {c['case']} at {c['level']}[/]: {escape(c['why'])}", soft_wrap=True)
