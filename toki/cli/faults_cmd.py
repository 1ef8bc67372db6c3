"""``toki faults --system NAME`` / ``--engine-module M:F`` / ``--replay FILE``: inject faults at every
fault point of a write path.

Systems: ``toki`` (TOKI's write path: each operator in each schema mode; connection terminated
between two statements, COMMIT acknowledgement lost, process killed, server crashed and
restarted), ``toki-async-commit`` (the same with synchronous_commit=off), ``toki-engine`` and
every engine of the harness (process killed at each storage call, file write torn, power lost:
the crash states its recorded file operations allow), or ``all``; ``--engine-module`` takes a
plug-in of ``toki certify``'s protocol, with the same fault kinds as the engines toki ships.
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

KINDS = ("terminate", "ack-lost", "kill", "restart", "torn", "power-loss")


def register(sub) -> None:
    p = sub.add_parser("faults", help="inject crashes, lost connections and lost commit acknowledgements; "
                       "check what survives", description=__doc__.split("\n\n")[0],
                       epilog="exit status: 0 every fault point survived, 1 some did not, 2 bad input")
    p.add_argument("--system", action="append", metavar="NAME",
                   help="toki, toki-async-commit, toki-engine, an engine name (toki engines list), or all (repeatable)")
    p.add_argument("--engine-module", metavar="MODULE:FACTORY",
                   help="a plug-in engine (the protocol of toki certify --engine-module): its scenarios are the cases")
    p.add_argument("--case", action="append", metavar="CASE",
                   help="only this case: OPERATOR/MODE for toki (e.g. lww/audit_row), a scenario for an engine")
    p.add_argument("--kind", action="append", choices=KINDS, help="only this kind of fault (repeatable)")
    p.add_argument("--max-points", type=int, default=None, metavar="N",
                   help="at most N fault points (power loss: crash states) per case and kind, evenly spread "
                        "(default: every one)")
    p.add_argument("--replay", metavar="FILE", help="inject the fault a fault file records, again")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                   help="write every fault and the tables as JSON (to PATH, or stdout)")
    p.add_argument("--witness-dir", metavar="DIR", help="write a fault file per (case, fault) not survived "
                   "(power loss: per kind of finding, the one with the shortest trace)")
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
        if args.system or args.case or args.kind or args.engine_module:
            raise ConfigError("--replay runs the one fault its file records",
                              fix="drop --system, --engine-module, --case and --kind, or drop --replay")
        return []
    if not args.system and not args.engine_module:
        raise ConfigError("no system named", fix="pass --system toki (or an engine: toki engines list), --system all, "
                          "or your own engine with --engine-module pkg.mod:factory")
    if args.max_points is not None and args.max_points < 1:
        raise ConfigError(f"--max-points {args.max_points} must be at least 1", fix="pass --max-points 10, or omit it")
    if not args.step_limit > 0:
        raise ConfigError(f"--step-limit {args.step_limit:g} must be positive", fix="pass --step-limit 10")
    if not args.system:
        return []
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
    options = {"systems": chosen, "engine_module": args.engine_module, "cases": args.case, "kinds": args.kind,
               "max_points": args.max_points, "dsn": args.dsn}
    docs, failed, witnesses = [], False, []
    targets = [(n, None) for n in chosen] + ([(args.engine_module, args.engine_module)] if args.engine_module else [])
    for name, module in targets:
        try:
            doc = _run_system(name, args, options, witnesses, many=len(targets) > 1, module=module)
        except Exception as e:  # noqa: BLE001 - an engine's own failure to start is reported, not a traceback
            if len(targets) == 1 and isinstance(e, TokiError):
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


def _run_system(name: str, args, options: dict, witnesses: list, many: bool, module: str | None = None) -> dict:
    from toki.faults import report
    from toki.faults.systems import system
    from toki.runinfo import provenance

    out = args._out
    sys_ = system(name, dsn=args.dsn, kinds=tuple(args.kind or ()), step_limit_s=args.step_limit, module=module)
    name = sys_.name
    try:
        if args.kind and not sys_.kinds:  # asked for faults this system cannot take: never an empty pass
            from toki.faults import engines, write_path

            takes = write_path.KINDS if name in ("toki", "toki-async-commit") else engines.KINDS
            raise ConfigError(f"{name} takes no {', '.join(args.kind)} fault",
                              fix="its kinds are " + ", ".join(takes) + "; power-loss needs files Python writes")
        cases = sys_.cases()
        if args.case:
            unknown = [c for c in args.case if c not in cases]
            if unknown and not many:
                raise ConfigError(f"{name} has no case {unknown[0]!r}", fix="choose one of " + ", ".join(cases))
            cases = [c for c in cases if c in args.case]
        t0 = time.perf_counter()
        with progress() as bar:
            plan = []
            prep = bar.add_task(f"faults {name}: fault points", total=len(cases) * len(sys_.kinds))
            for c in cases:
                for k in sys_.kinds:  # power loss records the run and builds its crash states here
                    plan.extend((c, k, p) for p in _spread(sys_.points(c, k), args.max_points))
                    bar.advance(prep)
            task = bar.add_task(f"faults {name}", total=len(plan))
            results = []
            for c, k, p in plan:
                results.append(sys_.run(c, k, p))
                bar.advance(task)
        rows = report.summarize(results)
        doc = {"system": name, "version": sys_.version, "executed": sys_.executed, "backend": sys_.backend,
               "elapsed_s": round(time.perf_counter() - t0, 3), "table": rows,
               "faults": [r.to_json() for r in results]}
        if module is not None:
            doc["engine_module"] = module
        if "power-loss" in sys_.kinds:
            doc["power_loss"] = report.power_summary(sys_, [r for r in results if r.kind == "power-loss"])
        bad = [r for r in results if not r.survived and not r.skipped]
        if args.witness_dir:
            for r in report.representatives(bad):
                tag = f".{report.category(r.findings[0])}" if r.kind == "power-loss" else ""
                fname = f"{name}.{r.case.replace('/', '-')}.{r.kind}{tag.replace(' ', '-')}.{r.point}.json"
                prov = provenance(seed=0, options={**options, "system": name}, backend=doc["backend"])
                path = report.save(report.fault_file(r, version=sys_.version, executed=sys_.executed,
                                                     options={"dsn": args.dsn,
                                                              "step_limit": args.step_limit},
                                                     provenance=prov, engine_module=module),
                                   Path(args.witness_dir) / fname)
                witnesses.append(str(path))
            doc["witnesses"] = [w for w in witnesses if Path(w).name.startswith(name + ".")]
        if args.json != "-":  # JSON on stdout stays parseable
            _print_system(out, doc)
        return doc
    finally:
        sys_.close()


def _clip(text: str | None, width: int = 160) -> str:
    """A table cell: whole words, and a mark where it stops (the JSON keeps the whole finding)."""
    import textwrap

    return textwrap.shorten(text or "", width=width, placeholder=" …")


def _print_system(out, doc: dict) -> None:
    rows = []
    for r in doc["table"]:
        rows.append((r["case"], r["kind"], r["tried"], r["survived"], r["failed"], _clip(r["first"])))
    tried = sum(r["tried"] for r in doc["table"])
    survived = sum(r["survived"] for r in doc["table"])
    title = (f"toki faults --system {doc['system']} ({doc['executed']}, {doc['version']}): "
             f"{survived}/{tried} fault points survived in {doc['elapsed_s']:.1f} s")
    table(out, title, ["case", "fault", "points", "survived", "not survived", "first finding (point: what)"], rows)
    if doc.get("power_loss"):
        _print_power(out, doc)


def _print_power(out, doc: dict) -> None:
    pl = doc["power_loss"]
    rows = []
    for case, c in pl.items():
        if c.get("not_run"):
            rows.append((case, "-", "-", "-", "-", "-", "-", c["not_run"].split(":", 1)[0]))
            continue
        rows.append((case, f"{c['explored']}" + (f" of {c['of']}" if c["of"] != c["explored"] else "")
                     + f" ({c['constructed']} built)", c["survived"], c["lost"], c["unopenable"],
                     c["half_done"], f"{c['states_per_s']:.0f}", _clip(c["first"])))
    table(out, f"power loss, {doc['system']}: crash states built from the recorded file operations (ALICE's model)",
          ["case", "crash states", "survived", "lost acknowledged data", "do not open", "half-done", "states/s",
           "first finding"], rows)
    for case, c in pl.items():
        if c.get("not_run"):
            out.write(f"{doc['system']} {case}: {c['not_run']}\n")
        for cat, m in (c.get("minimal") or {}).items():
            out.write(f"{doc['system']} {case}, {cat} (crash state {m['point']}): {m['finding']}\n")
            for line in m["trace"]:
                out.write(f"    {line}\n")


def replay(args, out) -> int:
    from toki.faults import report
    from toki.faults.systems import system

    d = report.load(args.replay)
    sys_ = system(d["system"], dsn=args.dsn or d.get("options", {}).get("dsn"), kinds=(d["kind"],),
                  step_limit_s=float(d.get("options", {}).get("step_limit", args.step_limit)),
                  module=d.get("engine_module"))
    try:
        if d["kind"] not in sys_.kinds:
            raise ConfigError(f"{d['system']} takes no {d['kind']!r} fault", fix="re-record the fault file")
        if d["case"] not in sys_.cases():
            raise ConfigError(f"{d['system']} has no case {d['case']!r}",
                              fix="the engine changed since the file was recorded")
        if d["kind"] == "power-loss":
            r = _replay_power(sys_, d, out)
        else:
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
    if d["kind"] != "power-loss":  # nothing is retried after a power loss: the state is judged as it reopens
        out.write(f"reported: {r.reported}; retried: {r.retried}\n")
    for f in r.findings:
        out.write(f"- {f}\n")
    trace = (getattr(r, "detail", None) or {}).get("trace", ())
    if trace:
        out.write("trace (+ kept, - lost, ~ kept in part; | an fsync):\n")
        for line in trace:
            out.write(f"    {line}\n")
    if args.json is not None:
        emit_json({"replayed": args.replay, "result": r.to_json(), "recorded": d.get("findings", [])}, out,
                  None if args.json == "-" else args.json)
    return 0 if r.survived else 1


def _replay_power(sys_, d: dict, out):
    """Record the scenario's file operations again, build the crash state the file names from them
    and reopen it; the operations must be the ones recorded."""
    from toki.faults.crash_states import CrashState

    detail = d.get("detail") or {}
    pl = sys_.power(d["case"])
    if "crash" not in detail:
        return sys_.run(d["case"], d["kind"], d["point"])  # a case power loss cannot judge: judged again
    try:
        crash = CrashState.from_json(detail["crash"])
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"fault file {d['system']}: its crash state is malformed",
                          fix="pass a file written by toki faults --witness-dir") from None
    if pl.applicable() is not None:
        raise ConfigError(f"{d['system']} {d['case']}: the scenario no longer makes file operations toki can crash",
                          fix="the engine changed since the file was recorded")
    ops = pl.trace().ops
    want = detail.get("ops")
    named = [*crash.persist, *(crash.partial[:1] if crash.partial else ()), *(() if crash.zeros is None else
                                                                          (crash.zeros,))]
    if crash.point > len(ops) or any(not 0 <= int(i) < len(ops) for i in named):
        raise ConfigError(f"{d['system']} {d['case']}: the crash state names operations the scenario no longer "
                          f"makes ({len(ops)} now)", fix="the engine changed since the file was recorded")
    if want is not None and [o.label() for o in ops[:crash.point]] != want[:crash.point]:
        out.write("note: the scenario's file operations differ from the recorded ones\n")
    return sys_.run(d["case"], d["kind"], d["point"], crash=crash)
