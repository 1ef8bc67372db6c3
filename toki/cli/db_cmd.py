"""``toki db info``: which database, which version, where, how it was chosen, which levels it offers.

Works for every ``--dsn`` scheme (PostgreSQL, MariaDB/MySQL, SQLite, DuckDB); for MariaDB it also
says whether REPEATABLE READ runs with ``innodb_snapshot_isolation``.
"""

from __future__ import annotations

from toki.cli import add_dsn_option
from toki.render import emit_json, table


def register(sub) -> None:
    p = sub.add_parser("db", help="database server information and housekeeping")
    dsub = p.add_subparsers(dest="db_command", metavar="ACTION", parser_class=type(p))
    info = dsub.add_parser("info", help="print backend, version, where the server runs and how it was chosen")
    add_dsn_option(info)
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=_info)
    gc = dsub.add_parser("gc", help="drop run schemas (PostgreSQL, this host) or run databases (MariaDB/MySQL, "
                         "none in use) left behind by killed runs")
    add_dsn_option(gc)
    gc.add_argument("--json", action="store_true", help="print JSON")
    gc.set_defaults(func=_gc)
    p.set_defaults(func=lambda args, out: (p.print_help(out), 2)[1])


def _info(args, out) -> int:
    from toki.db.server import resolve

    server = resolve(args.dsn)
    d = server.describe()
    if server.is_postgres:
        d["superuser"] = server.is_superuser
    if isinstance(d.get("levels"), list) and not args.json:
        d["levels"] = ", ".join(d["levels"])
    if args.json:
        emit_json(d, out)
    else:
        table(out, "toki database", ["field", "value"], [(k, v) for k, v in d.items()])
    return 0


def _gc(args, out) -> int:
    from toki.db.server import collect_garbage, resolve

    server = resolve(args.dsn)
    if server.is_postgres:
        dropped = collect_garbage(server)
    elif hasattr(server.seam, "orphaned_run_databases"):  # MariaDB/MySQL: run databases nobody is in
        dropped = server.seam.orphaned_run_databases()
        for name in dropped:
            server.seam.drop_database(name)
    else:
        dropped = []  # SQLite, DuckDB: a run's file next to the DSN's is removed when the run ends
    if args.json:
        emit_json({"dropped": dropped}, out)
    else:
        out.write(f"dropped {len(dropped)} stale run schema(s)" + (f": {', '.join(dropped)}" if dropped else "") + "\n")
    return 0
