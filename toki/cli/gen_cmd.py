"""``toki gen history``: histories from simulated databases (serializable, snapshot isolation,
read committed), for benchmarks and tests of ``toki check``."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("gen", help="generate inputs: Jepsen histories from simulated databases",
                       description=__doc__)
    gsub = p.add_subparsers(dest="what", metavar="WHAT", parser_class=type(p))
    h = gsub.add_parser("history", help="a Jepsen history (JSON or EDN) from a simulated database")
    h.add_argument("--workload", choices=("list-append", "rw-register"), default="list-append")
    h.add_argument("--txns", type=int, default=1000, help="number of transactions (default 1000)")
    h.add_argument("--keys", type=int, default=10, help="active keys at any time (default 10)")
    h.add_argument("--db", choices=("serializable", "snapshot-isolation", "read-committed"),
                   default="serializable", help="simulated database (default serializable)")
    h.add_argument("--seed", type=int, default=0, help="random seed (default 0); recorded with the options in PATH.provenance.json (or on stderr)")
    h.add_argument("--concurrency", type=int, default=10, help="client processes (default 10)")
    h.add_argument("--min-txn-length", type=int, default=1)
    h.add_argument("--max-txn-length", type=int, default=5)
    h.add_argument("--max-writes-per-key", type=int, default=32,
                   help="retire a key after this many writes (bounds list length; default 32)")
    h.add_argument("--plant", choices=("g2-item",), default=None,
                   help="plant one anomaly in the middle of the history (g2-item: a write skew on two fresh keys)")
    h.add_argument("--format", choices=("json", "edn"), default="json")
    h.add_argument("--out", metavar="PATH", default="-", help="output file (default stdout)")
    h.set_defaults(func=run)
    p.set_defaults(func=_no_what)


def _no_what(args, out) -> int:
    from toki.errors import ConfigError

    raise ConfigError("nothing to generate", fix="toki gen history --txns N")


def run(args, out) -> int:
    from toki.check.gen import generate, write_edn, write_json
    from toki.check.reading.history import no_gc

    ops = generate(workload=args.workload, txns=args.txns, keys=args.keys, db=args.db, seed=args.seed,
                   concurrency=args.concurrency, min_txn_length=args.min_txn_length,
                   max_txn_length=args.max_txn_length, max_writes_per_key=args.max_writes_per_key)
    if args.plant:
        from toki.check.gen import plant

        ops = plant(ops, args.plant, at=args.txns, workload=args.workload)  # about half of the 2 * txns ops
    writer = write_json if args.format == "json" else write_edn
    import json

    from toki.render import emit_json
    from toki.runinfo import provenance

    # How the history was made goes next to it: a Jepsen history has no place for it inside.
    made = provenance(seed=args.seed, options={k: v for k, v in vars(args).items() if k not in ("func", "what")})
    with no_gc():
        if args.out == "-":
            writer(ops, out)
            sys.stderr.write("provenance: " + json.dumps(made, default=str) + "\n")
        else:
            with open(args.out, "w") as f:
                n = writer(ops, f)
            emit_json(made, out, args.out + ".provenance.json")
            sys.stderr.write(f"wrote {n} ops ({args.txns} transactions, {args.db}, seed {args.seed}) to {args.out}"
                             f" and how it was made to {args.out}.provenance.json\n")
    return 0
