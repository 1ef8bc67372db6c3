"""``toki run FILE|DIR [--level L] [--json]``: execute schedules (docs/design.md#schedule-files-toml, docs/design.md#run-result-json).

A TOML schedule runs at ``--level``, or at every level it has expectations for. A path under
``schedules/`` that does not exist in the current directory is looked up in the catalogue
installed with toki, so ``toki run schedules/ --level rc`` works from any directory. An
isolationtester ``.spec`` file runs every permutation (its SQL sets its own levels, so
``--level`` only changes what a bare ``begin`` means). A directory runs each file and prints a
pass/fail line per file and level. Exit: 0 ran and matched, 1 an expectation failed, 2 bad input.

``--dsn`` picks the database: PostgreSQL (default), ``mysql://``/``mariadb://``, ``sqlite:///PATH``,
``duckdb:///PATH``. Outside PostgreSQL a file is checked against its ``[expect.DATABASE.LEVEL]``
tables (``mariadb`` before ``mysql``), runs at every level the database offers when it has none,
and is skipped (with the reason) when it needs PostgreSQL's write path. A level the database
lacks is an error naming the levels it has.
"""

from __future__ import annotations

from pathlib import Path

from toki.cli import add_dsn_option
from toki.render import emit_json, table
from toki.errors import ScheduleError


def register(sub) -> None:
    p = sub.add_parser("run", help="run a schedule file (.toml or isolationtester .spec) or a directory of them")
    p.add_argument("path", help="a .toml schedule, a .spec file, or a directory")
    p.add_argument("--level", help="read-committed|repeatable-read|serializable (rc, rr, sr; '+cb' allowed); "
                   "default: every level the file has expectations for")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                   help="print the run result as JSON (to PATH if given)")
    p.add_argument("--on-blocked", choices=("error", "defer"), help="override the schedule's on_blocked mode")
    p.add_argument("--step-limit", type=float, default=10.0, help="seconds a step may hang before it is an error")
    add_dsn_option(p)
    p.set_defaults(func=run)


def _catalogue_fallback(path: Path) -> Path:
    """``schedules/...`` that does not exist here means the catalogue installed with toki."""
    if path.exists() or not path.parts or path.parts[0] != "schedules":
        return path
    from importlib.resources import files

    installed = Path(str(files("toki.schedules"))).joinpath(*path.parts[1:])
    return installed if installed.exists() else path


def _levels(sched, level, server):
    if level:
        return [level]
    if not server.is_postgres:
        from toki.sched.backend_runner import expectation_keys

        # Its own expectations, else every level it offers (a run without expectations reports "ran").
        return list(sched.expectations(expectation_keys(server))) or [lv.cli_name for lv in server.levels()]
    if sched.expect:
        return list(sched.expect)
    raise ScheduleError(f"{sched.source}: no --level given and the file has no [expect.LEVEL] tables",
                        fix="pass --level read-committed (or rc, rr, sr)")


def run(args, out) -> int:
    from toki.db.server import resolve
    from toki.levels import parse_level
    from toki.sched import Runner, load
    from toki.sched.spec import SpecFile

    if args.level:
        parse_level(args.level)  # bad level: exit 2 before touching the database
    path = _catalogue_fallback(Path(args.path))
    if not path.exists():
        raise ScheduleError(f"{path}: no such file or directory",
                            fix="give a .toml, a .spec or a folder of them (the installed catalogue is 'schedules/')")
    if path.is_dir():
        files = sorted([*path.rglob("*.toml"), *path.rglob("*.spec")])
        if not files:
            raise ScheduleError(f"{path}: no .toml or .spec files", fix="point at the schedules/ catalogue")
        loaded = [(f, load(f)) for f in files]  # parse everything first: bad input fails fast
    else:
        loaded = [(path, load(path))]
    server = resolve(args.dsn)
    if args.level:
        from toki.backends.base import check_level

        check_level(server.describe()["name"], server.levels(), parse_level(args.level).isolation)
    runner = Runner(server, step_limit_s=args.step_limit)
    docs, lines, failed = [], [], False
    for f, sched in loaded:
        if not server.is_postgres:
            from toki.sched.backend_runner import needs_postgresql

            why = "isolationtester specs are written for PostgreSQL" if isinstance(sched, SpecFile) \
                else needs_postgresql(sched)
            if why:
                if not path.is_dir():
                    raise ScheduleError(f"{f}: {why}", fix="run it on PostgreSQL (drop --dsn)")
                lines.append((str(f), "-", "skipped", why))
                continue
        if isinstance(sched, SpecFile):
            level = args.level or "read-committed"
            runs = [runner.run(s, level, on_blocked=args.on_blocked) for s in sched.schedules()]
            docs.append({"spec": sched.name, "permutations": [r.to_json() for r in runs]})
            errors = sum(1 for r in runs for st in r.steps if st.status == "error")
            lines.append((str(f), level, "ran", f"{len(runs)} permutation(s), {errors} step error(s)"))
            continue
        for level in _levels(sched, args.level, server):
            res = runner.run(sched, level, on_blocked=args.on_blocked)
            docs.append(res.to_json())
            if res.expect["checked"]:
                verdict = "pass" if res.expect["ok"] else "FAIL"
                failed |= not res.expect["ok"]
            else:
                verdict = "ran"
            lines.append((str(f), res.level, verdict, "; ".join(res.expect["diff"])))
    if args.json is not None:
        emit_json(docs[0] if len(docs) == 1 and not path.is_dir() else docs, out,
                  None if args.json == "-" else args.json)
        if args.json == "-":
            return 1 if failed else 0
    if len(loaded) == 1 and not path.is_dir() and args.json is None:
        for d in docs:
            _print_run(out, d)
    else:
        table(out, f"toki run {path}", ["file", "level", "verdict", "detail"], lines)
    return 1 if failed else 0


def _codes(s: dict) -> str:
    """An error's codes, each named: ``SQLSTATE 40001 (errno 1213)`` on MySQL, the SQLSTATE alone on
    PostgreSQL, ``SQLITE_BUSY (errno 5)`` on SQLite."""
    state, errno, code = s.get("sqlstate"), s.get("errno"), s.get("code")
    parts = [f"SQLSTATE {state}"] if state else ([code] if code and code != state else [])
    if errno is not None:
        parts.append(f"(errno {errno})")
    return " ".join(parts) or "-"


def _print_run(out, d: dict) -> None:
    runs = d["permutations"] if "spec" in d else [d]
    for r in runs:
        title = f"{r['schedule']} at {r['level']}" + (f"  permutation {' '.join(r['permutation'])}" if r.get("permutation") else "")
        rows = []
        for s in r["steps"]:
            what = s["sql"] if s["sql"] is not None else f"op {s.get('op')}"
            flag = ("blocked, done after " + str(s["completed_at"])) if s["blocked"] else ""
            res = (_codes(s) + " " + (s["error"] or "")) if s["status"] == "error" else (str(s["rows"]) if s["rows"] else "")
            rows.append((s["index"], s["session"], what[:60], flag, res[:60]))
        table(out, title, ["#", "session", "step", "blocking", "result"], rows)
        for f in r["final"]:
            out.write(f"final: {f['sql']} -> {f['rows']}\n")
        out.write(f"sessions: {r['sessions']}\n")
        e = r["expect"]
        if e["checked"]:
            out.write("expectation: " + ("met" if e["ok"] else "NOT met: " + "; ".join(e["diff"])) + "\n")
