"""``toki faults --system NAME`` / ``--replay FILE``: inject faults at every fault point of a write path.

Systems: ``toki`` (TOKI's write path: each operator in each schema mode; connection terminated
between two statements, COMMIT acknowledgement lost, process killed, server crashed and
restarted), ``toki-async-commit`` (the same with synchronous_commit=off), ``toki-engine`` and
every engine of the harness (process killed at each storage call, file write torn), or ``all``.
Without ``--dsn`` the write path runs on a private PostgreSQL of its own (the shared embedded
server is never restarted); with ``--dsn`` server restarts are not injected.

Prints one fault table per system; ``--json PATH`` writes every fault with provenance,
``--witness-dir DIR`` one replayable fault file per (case, fault) that was not survived.
Exit status: 0 every fault point survived, 1 some did not (or a replay reproduced its finding),
2 bad input.
"""

from __future__ import annotations

import time
from pathlib import Path

from toki.cli import add_dsn_option
from toki.render import emit_json, progress, table
from toki.errors import ConfigError, TokiError

KINDS = ("terminate", "ack-lost", "kill", "restart", "torn")


def register(sub) -> None:
    p = sub.add_parser("faults", help="inject crashes, lost connections and lost commit acknowledgements; "
                       "check what survives", description=__doc__.split("\n\n")[0],
                       epilog="exit status: 0 every fault point survived, 1 some did not, 2 bad input")
    p.add_argument("--system", action="append", metavar="NAME",
                   help="toki, toki-async-commit, toki-engine, an engine name (toki engines list), or all (repeatable)")
    p.add_argument("--case", action="append", metavar="CASE",
                   help="only this case: OPERATOR/MODE for toki (e.g. lww/audit_row), a scenario for an engine")
    p.add_argument("--kind", action="append", choices=KINDS, help="only this kind of fault (repeatable)")
    p.add_argument("--max-points", type=int, default=None, metavar="N",
                   help="at most N fault points per case and kind, evenly spread (default: every point)")
    p.add_argument("--replay", metavar="FILE", help="inject the fault a fault file records, again")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                   help="write every fault and the tables as JSON (to PATH, or stdout)")
    p.add_argument("--witness-dir", metavar="DIR", help="write a fault file per (case, fault) not survived")
    p.add_argument("--step-limit", type=float, default=10.0, help="seconds an engine's step may hang")
    add_dsn_option(p)
    p.set_defaults(func=run)


def _spread(points: list[int], n: int | None) -> list[int]:
    if n is None or len(points) <= n:
        return points
    if n == 1:
        return [points[-1]]
    return sorted({points[round(i * (len(points) - 1) / (n - 1))] for i in range(n)})


def _validate(args) -> list[str]:
    from toki.faults.systems import names

    if args.replay:
        if args.system or args.case or args.kind:
            raise ConfigError("--replay runs the one fault its file records",
                              fix="drop --system, --case and --kind, or drop --replay")
        return []
    if not args.system:
        raise ConfigError("no system named", fix="pass --system toki (or an engine: toki engines list), or --system all")
    if args.max_points is not None and args.max_points < 1:
        raise ConfigError(f"--max-points {args.max_points} must be at least 1", fix="pass --max-points 10, or omit it")
    if not args.step_limit > 0:
        raise ConfigError(f"--step-limit {args.step_limit:g} must be positive", fix="pass --step-limit 10")
    known = names()
    chosen = known if "all" in args.system else list(dict.fromkeys(args.system))
    for s in chosen:
        if s not in known:
            raise ConfigError(f"unknown system {s!r}", fix="choose one of " + ", ".join(known) + ", or all")
    if args.witness_dir and Path(args.witness_dir).exists() and not Path(args.witness_dir).is_dir():
        raise ConfigError(f"--witness-dir {args.witness_dir} is a file", fix="name a folder")
    return chosen


def run(args, out) -> int:
    chosen = _validate(args)
    if args.replay:
        return replay(args, out)
    from toki.runinfo import provenance

    args._out = out

    t_all = time.perf_counter()
    options = {"systems": chosen, "cases": args.case, "kinds": args.kind, "max_points": args.max_points,
               "dsn": args.dsn}
    docs, failed, witnesses = [], False, []
    for name in chosen:
        try:
            doc = _run_system(name, args, options, witnesses, many=len(chosen) > 1)
        except Exception as e:  # noqa: BLE001 - an engine's own failure to start is reported, not a traceback
            if len(chosen) == 1 and isinstance(e, TokiError):
                raise
            # A system that cannot run (its database is full, an extra is missing, the engine fails
            # before any fault) does not hide the others' tables; it is reported, and the run does
            # not pass.
            why = str(e) if isinstance(e, TokiError) else f"{type(e).__name__}: {str(e).strip()[:200]}"
            doc = {"system": name, "not_run": why, "table": [], "faults": []}
            out.write(f"toki faults --system {name}: not run: {' '.join(why.split())}\n")
        failed |= bool(doc.get("not_run")) or any(r["failed"] for r in doc["table"])
        docs.append(doc)
    if args.json is not None:
        prov = provenance(seed=0, options=options, elapsed_s=round(time.perf_counter() - t_all, 3))
        emit_json({"provenance": prov, "systems": docs}, out, None if args.json == "-" else args.json)
    return 1 if failed else 0


def _run_system(name: str, args, options: dict, witnesses: list, many: bool) -> dict:
    from toki.faults import report
    from toki.faults.systems import system
    from toki.runinfo import provenance

    out = args._out
    sys_ = system(name, dsn=args.dsn, kinds=tuple(args.kind or ()), step_limit_s=args.step_limit)
    try:
        cases = sys_.cases()
        if args.case:
            unknown = [c for c in args.case if c not in cases]
            if unknown and not many:
                raise ConfigError(f"{name} has no case {unknown[0]!r}", fix="choose one of " + ", ".join(cases))
            cases = [c for c in cases if c in args.case]
        plan = [(c, k, p) for c in cases for k in sys_.kinds for p in _spread(sys_.points(c, k), args.max_points)]
        results = []
        t0 = time.perf_counter()
        with progress() as bar:
            task = bar.add_task(f"faults {name}", total=len(plan))
            for c, k, p in plan:
                results.append(sys_.run(c, k, p))
                bar.advance(task)
        rows = report.summarize(results)
        doc = {"system": name, "version": sys_.version, "executed": sys_.executed, "backend": sys_.backend,
               "elapsed_s": round(time.perf_counter() - t0, 3), "table": rows,
               "faults": [r.to_json() for r in results]}
        bad = [r for r in results if not r.survived and not r.skipped]
        if args.witness_dir:
            seen = set()
            for r in bad:
                if (r.case, r.kind) in seen:
                    continue
                seen.add((r.case, r.kind))
                fname = f"{name}.{r.case.replace('/', '-')}.{r.kind}.{r.point}.json"
                prov = provenance(seed=0, options={**options, "system": name}, backend=doc["backend"])
                path = report.save(report.fault_file(r, version=sys_.version, executed=sys_.executed,
                                                     options={"dsn": args.dsn,
                                                              "step_limit": args.step_limit},
                                                     provenance=prov),
                                   Path(args.witness_dir) / fname)
                witnesses.append(str(path))
            doc["witnesses"] = [w for w in witnesses if Path(w).name.startswith(name + ".")]
        if args.json != "-":  # JSON on stdout stays parseable
            _print_system(out, doc)
        return doc
    finally:
        sys_.close()


def _print_system(out, doc: dict) -> None:
    rows = []
    for r in doc["table"]:
        rows.append((r["case"], r["kind"], r["tried"], r["survived"], r["failed"],
                     (r["first"] or "")[:110]))
    tried = sum(r["tried"] for r in doc["table"])
    survived = sum(r["survived"] for r in doc["table"])
    title = (f"toki faults --system {doc['system']} ({doc['executed']}, {doc['version']}): "
             f"{survived}/{tried} fault points survived in {doc['elapsed_s']:.1f} s")
    table(out, title, ["case", "fault", "points", "survived", "not survived", "first finding (point: what)"], rows)


def replay(args, out) -> int:
    from toki.faults import report
    from toki.faults.systems import system

    d = report.load(args.replay)
    sys_ = system(d["system"], dsn=args.dsn or d.get("options", {}).get("dsn"), kinds=(d["kind"],),
                  step_limit_s=float(d.get("options", {}).get("step_limit", args.step_limit)))
    try:
        if d["kind"] not in sys_.kinds:
            raise ConfigError(f"{d['system']} takes no {d['kind']!r} fault", fix="re-record the fault file")
        if d["case"] not in sys_.cases():
            raise ConfigError(f"{d['system']} has no case {d['case']!r}",
                              fix="the engine changed since the file was recorded")
        points = sys_.points(d["case"], d["kind"])
        if d["point"] not in points:
            raise ConfigError(f"{d['system']} {d['case']}: no {d['kind']} fault point {d['point']} "
                              f"(there are {len(points)})", fix="the engine changed since the file was recorded")
        r = sys_.run(d["case"], d["kind"], d["point"])
    finally:
        sys_.close()
    same = r.statement == d.get("statement", r.statement)
    verdict = "reproduced" if not r.survived else "not reproduced (survived)"
    out.write(f"{d['system']} {d['case']} {d['kind']} at point {d['point']} ({r.statement}): {verdict}\n")
    if not same:
        out.write(f"note: the point's statement was {d.get('statement')!r} when recorded\n")
    out.write(f"reported: {r.reported}; retried: {r.retried}\n")
    for f in r.findings:
        out.write(f"- {f}\n")
    if args.json is not None:
        emit_json({"replayed": args.replay, "result": r.to_json(), "recorded": d.get("findings", [])}, out,
                  None if args.json == "-" else args.json)
    return 0 if r.survived else 1
