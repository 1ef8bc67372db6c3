"""``toki certify``: contract suites and engine certification as a CI gate.

Three ways in: ``--adapter module:factory --level L`` (a write path re-written against toki's
``agent_memory`` table, searched for its operator's anomaly), ``--engine NAME`` or
``--engine-module pkg.mod:factory`` (an unmodified memory engine under the engine harness,
see :mod:`toki.cli.certify_engine`), and ``--replay WITNESS`` (re-execute an engine witness).

Runs the contract suite of the adapter's declared operator (lww, evi, await, rule) at level
``L`` against its write path on a real database: Hypothesis draws agents, claims and
interleavings (``--budget`` examples, ``--seed``), and a detector looks for the operator's
exposed anomaly (lww: P4 lost update, evi: A5B write skew, await: callback boundary, rule: P3
phantom). Exit 0: no anomaly in the budget (the contract holds as far as searched); 1: an
anomaly, printed as the minimal witness schedule that ``toki run FILE --level L`` replays;
2: bad input (adapter not importable, unknown level). ``--junit PATH`` writes JUnit XML.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path

from toki.cli import add_dsn_option
from toki.render import emit_json, table
from toki.errors import ConfigError


def register(sub) -> None:
    p = sub.add_parser("certify", help="certify a memory engine's write path against its operator's isolation contract",
                       description=__doc__.split("\n\n")[1],
                       epilog="exit status: 0 contract holds within the budget (an engine's by-design findings "
                              "are notes unless --fail-on-design; with --baseline, every finding is one the file "
                              "accepts), 1 an anomaly (witness printed) or an unverifiable run (with --baseline: a "
                              "verdict worse than the file accepts), 2 bad input, a malformed baseline or a broken "
                              "plug-in, 3 not certified: --time-budget ended a search before it finished and "
                              "nothing worse was found")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--adapter", metavar="MODULE:FACTORY",
                      help="a write path on toki's table, e.g. toki.properties.adapter:toki_lww or mypkg.memory:adapter")
    what.add_argument("--engine", metavar="NAME", help="an engine toki ships (see `toki engines list`), e.g. sodamem")
    what.add_argument("--engine-module", metavar="MODULE:FACTORY",
                      help="your own engine plug-in (see the README: open, scenarios, state)")
    what.add_argument("--replay", metavar="WITNESS", help="re-execute an engine witness file; exit 1 when a replayed "
                      "run shows an anomaly or a by-design finding, 0 only when none does")
    p.add_argument("--level", help="(--adapter) level the write path runs at: RC, SI, SR (+cb), or rc/rr/sr")
    p.add_argument("--scenario", help="(--engine) one scenario, or 'all' (default: all)")
    p.add_argument("--png", metavar="PATH", help="(--engine, --replay) draw the witness as a swimlane picture; with "
                   "--engine one per scenario, PATH's name + .SCENARIO (w.png -> w.double-supersede.png)")
    p.add_argument("--svg", metavar="PATH", help="(--engine, --replay) the same picture as SVG")
    p.add_argument("--fail-on-design", action="store_true",
                   help="(--engine) exit 1 on a by-design finding too (a property serial orders show; default: a note)")
    p.add_argument("--cluster", metavar="ADDRESS", help="(--engine) certify the scenarios on a Dask cluster: a "
                   "scheduler address, or local:N worker processes (pip install 'toki[cluster]')")
    p.add_argument("--keep-going", action="store_true",
                   help="(--engine --exhaustive) cover the whole bound past the first anomaly and count the anomalous "
                        "interleavings (the witness is the one with the fewest switches)")
    p.add_argument("--reduction", choices=("dpor", "sleep"), default=None,
                   help="(--engine --exhaustive) how equivalent interleavings are skipped: dpor (default) runs one "
                        "per class of equivalent interleavings, a scenario per worker; sleep uses sleep sets alone, "
                        "more runs, whose tree --workers/--cluster cut into shards")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="(--engine --exhaustive) search each scenario's tree in N processes on this machine, cut "
                        "into the same shards as --cluster (default 1: one process, unsharded)")
    p.add_argument("--times", type=int, default=1, help="(--replay) how many times to re-execute (default 1)")
    p.add_argument("--step-limit", type=float, default=10.0, metavar="SECONDS",
                   help="(--engine) longest an agent may take to reach its next storage call (default 10)")
    p.add_argument("--operator", choices=("lww", "evi", "await", "rule"),
                   help="override the operator the adapter declares")
    p.add_argument("--budget", type=int, default=None,
                   help="examples to try (default: the Hypothesis profile's, ci 25, dev 60, paper 2000)")
    p.add_argument("--seed", type=int, default=0, help="search seed (recorded in the output)")
    from toki.harness import strategy_options

    for o in strategy_options():  # each search strategy's own option (a strategy is one file in harness/strategies)
        p.add_argument(f"--{o.name}", type=int, metavar=o.metavar, default=None, help=o.help)
    p.add_argument("--mode", default="audit_row", choices=("audit_row", "dual_row", "base"),
                   help="schema mode for TOKI's own write path")
    p.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="(--engine) end every search (random, PCT, exhaustive, sharded) at this many seconds from "
                        "the start; a search it cuts short certifies nothing: complete false, out_of_time true in "
                        "--json, exit 3 unless something worse was found")
    p.add_argument("--baseline", metavar="FILE",
                   help="(--engine) accepted findings (TOML, written by --write-baseline): fail only on a verdict "
                        "worse than the file accepts (a new race or anomaly kind, an unverifiable run), and say which")
    p.add_argument("--write-baseline", metavar="FILE",
                   help="(--engine) record this run's findings as accepted, races apart from by-design findings, "
                        "each with a TODO reason to edit (with --baseline, its reasons are kept); the exit status "
                        "is the run's own")
    p.add_argument("--junit", metavar="PATH", help="write a JUnit XML report")
    p.add_argument("--witness", metavar="PATH", help="write the witness: a schedule file for --adapter; for --engine a "
                   "JSON witness per scenario, PATH's name + .SCENARIO (w.json -> w.double-supersede.json)")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH", help="print the verdict as JSON")
    add_dsn_option(p)
    # --time-budget counts from here (the command line parsed, before any engine is imported)
    p.set_defaults(func=run, started=time.monotonic())


def junit_xml(verdicts, elapsed_s: float) -> str:
    suite = ET.Element("testsuite", name="toki-certify", tests=str(len(verdicts)),
                       failures=str(sum(not v.contract_holds for v in verdicts)), errors="0",
                       time=f"{elapsed_s:.3f}")
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"toki.certify.{v.adapter}",
                             name=f"{v.operator}-{v.level}-no-{v.anomaly}", time=f"{v.elapsed_s:.3f}")
        props = ET.SubElement(case, "properties")
        for k in ("operator", "level", "anomaly", "precondition", "status", "examples", "budget", "seed"):
            ET.SubElement(props, "property", name=k, value=str(getattr(v, k)))
        if not v.contract_holds:
            w = v.witness
            fail = ET.SubElement(case, "failure", type=v.anomaly,
                                 message="; ".join(w.anomalies) if w else v.status)
            fail.text = w.toml if w else v.note
        elif v.note:
            ET.SubElement(case, "system-out").text = v.note
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def run(args, out) -> int:
    if not (args.engine or args.engine_module):
        given = [opt for opt, v in (("--time-budget", args.time_budget), ("--baseline", args.baseline),
                                    ("--write-baseline", args.write_baseline)) if v is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} gate(s) an engine's certification",
                              fix="use with --engine NAME or --engine-module MODULE:FACTORY")
    if args.engine or args.engine_module:
        from toki.cli.certify_engine import run_engine

        return run_engine(args, out)
    if args.replay:
        from toki.cli.certify_engine import run_replay

        return run_replay(args, out)
    if not args.level:
        raise ConfigError("--adapter needs --level", fix="pass --level RC (or SI, SR, RC+cb, ...)")
    return run_adapter(args, out)


def run_adapter(args, out) -> int:
    from toki.db.server import resolve
    from toki.levels import PRECONDITION, parse_level
    from toki.properties.adapter import load_adapter
    from toki.properties.contracts import ContractChecker, check
    from toki.properties.profiles import budget as profile_budget
    from toki.runinfo import provenance

    level = parse_level(args.level)  # bad level: exit 2 before anything else
    if args.budget is not None and args.budget < 1:
        raise ConfigError(f"--budget {args.budget} must be at least 1", fix="pass --budget 25 or more")
    adapter = load_adapter(args.adapter, args.operator)
    op = adapter.operator
    n = args.budget if args.budget is not None else profile_budget()
    server = resolve(args.dsn)
    t0 = time.perf_counter()
    with ContractChecker(adapter, server=server, mode=args.mode) as checker:
        v = check(checker, op, level, budget=n, seed=args.seed)
    elapsed = time.perf_counter() - t0
    pre = PRECONDITION[op]
    if args.junit:
        path = Path(args.junit)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(junit_xml([v], elapsed) + "\n")
    if args.witness and v.witness is not None:
        Path(args.witness).parent.mkdir(parents=True, exist_ok=True)
        Path(args.witness).write_text(v.witness.toml)
    if args.json is not None:
        doc = {"verdict": v.to_json(), "provenance": provenance(
            seed=args.seed, options={"adapter": args.adapter, "level": level.name, "budget": n, "mode": args.mode},
            backend=server.describe(), elapsed_s=round(elapsed, 3))}
        emit_json(doc, out, None if args.json == "-" else args.json)
        if args.json == "-":
            return 0 if v.contract_holds else 1
    verdict = "holds" if v.contract_holds else ("UNVERIFIABLE" if v.status == "unverifiable" else "VIOLATED")
    table(out, f"toki certify {args.adapter} at {level.name}",
          ["operator", "precondition", "level", "anomaly", "examples", "verdict"],
          [(op, pre.name, level.name, v.anomaly, f"{v.examples} (budget {n}, seed {args.seed})", verdict)])
    if not level.at_least(pre):
        out.write(f"note: {level.name} is below {op}'s precondition {pre.name}; the paper expects {v.anomaly} here\n")
    if v.note and v.contract_holds:
        out.write(f"note: {v.note}\n")
    if v.witness is not None:
        w = v.witness
        out.write("\n".join(w.anomalies) + "\n")
        out.write(f"minimal witness ({len(w.workload.order)} steps; replays with "
                  f"`toki run FILE --level {level.isolation.cli_name}`"
                  + ("" if w.replayed is None else f"; replay {'reproduced' if w.replayed else 'did NOT reproduce'}")
                  + "):\n\n")
        out.write(w.toml)
    return 0 if v.contract_holds else 1
