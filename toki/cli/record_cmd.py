"""``toki record``: run a memory engine from several worker processes on one store and record its
history (Jepsen's shape, JSON lines) for ``toki check FILE --workload memory``.

Exit status: 0 recorded, 1 recorded but some worker failed (named), 2 bad input.
"""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("record", help="record a memory engine's history under real concurrency (worker processes)",
                       description=__doc__.split("\n\n")[0],
                       epilog="exit status: 0 recorded, 1 a worker failed, 2 bad input. "
                              "Then: toki check OUT --workload memory")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--engine", metavar="NAME", help="an engine toki ships that can be recorded (mem0)")
    who.add_argument("--engine-module", metavar="M:F", help="a plug-in with record_client(store)")
    p.add_argument("--out", required=True, metavar="PATH", help="the history file to write (JSON lines; must be new)")
    p.add_argument("--processes", type=int, default=2, help="worker processes, each its own engine (default 2)")
    p.add_argument("--clients", type=int, default=2, help="client threads per process (default 2)")
    p.add_argument("--ops", type=int, default=None, help="operations per client (default 100 unless --duration)")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="record for S seconds instead")
    p.add_argument("--mix", default=None, metavar="K=W,...",
                   help="operation weights: add, retract, recall, history, decide (default add=4,retract=1,"
                        "recall=2,history=2,decide=1; kinds the engine lacks are skipped)")
    p.add_argument("--slots", type=int, default=2, help="slots the clients share (default 2: they collide)")
    p.add_argument("--claims", type=int, default=3, help="claims per slot (default 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of every client's choices (default 0)")
    p.add_argument("--nemesis", choices=("kill",), default=None,
                   help="kill: SIGKILL a worker mid-operation every few seconds and start a fresh one")
    p.add_argument("--dsn", default=None, help="the database (default $TOKI_DSN, else the embedded PostgreSQL)")
    p.add_argument("--cluster", default=None, metavar="ADDR|local:N",
                   help="run the workers on a Dask cluster (the --out file must be reachable by every worker)")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH", help="the summary as JSON")
    p.set_defaults(func=run)


def run(args, out) -> int:
    import json
    from pathlib import Path

    from toki.record.run import Plan, parse_mix, record
    from toki.render import emit_json
    from toki.runinfo import provenance

    ops = args.ops if args.ops is not None else (None if args.duration else 100)
    plan = Plan(engine=args.engine, module=args.engine_module, out=args.out, processes=args.processes,
                clients=args.clients, ops=ops, duration=args.duration, mix=parse_mix(args.mix), seed=args.seed,
                slots=args.slots, claims=args.claims, nemesis=args.nemesis, dsn=args.dsn)
    summary = record(plan, cluster=args.cluster)
    summary["cluster"] = args.cluster
    summary["provenance"] = provenance(seed=args.seed, options={**summary["options"], "cluster": args.cluster},
                                       elapsed_s=summary["elapsed_s"])
    Path(args.out + ".provenance.json").write_text(json.dumps(summary["provenance"], indent=2))
    if args.json:
        emit_json(summary, out, args.json)
    else:
        counts = ", ".join(f"{n} {t}" for t, n in sorted(summary["ops"].items()))
        out.write(f"recorded {summary['engine']} {summary['version']}: {counts} from {plan.processes} process(es) x "
                  f"{plan.clients} client(s) in {summary['elapsed_s']:.1f} s"
                  + (f", {summary['killed']} worker(s) killed" if summary["killed"] else "") + f" -> {args.out}\n")
        out.write(f"check it: toki check {args.out} --workload memory\n")
        for e in summary["errors"]:
            out.write(f"worker error: {e}\n")
    return 1 if summary["errors"] else 0
