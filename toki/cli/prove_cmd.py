"""``toki prove``: z3 proofs of the operator and provenance laws, and the anomaly matrix derived
from Adya's isolation axioms (issue 7).

One line per obligation: proved, refuted (with the countermodel) or unknown; unknown is never
reported as proved. Exit status: 0 every obligation has the status the paper's claims require,
1 one does not (a law expected to hold is refuted, a deliberate refutation is not found, or z3
answered unknown), 2 bad input.
"""

from __future__ import annotations

import json

from toki.render import emit_json, table
from toki.errors import InputError


def register(sub) -> None:
    p = sub.add_parser(
        "prove", help="prove the operator/provenance laws and derive the anomaly matrix with z3",
        description=(__doc__ or "").strip(),
        epilog="exit status: 0 all as expected, 1 an obligation has another status than expected "
               "(refuted law, missing refutation, unknown), 2 bad input")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                   help="write JSON (to PATH, or stdout when no PATH is given)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="z3 time limit per query in seconds (default 30); a timeout is 'unknown'")
    p.add_argument("--only", action="append", metavar="NAME",
                   help="only obligations with this name, prefix (lww, semiring, matrix.P4) or glob (repeatable)")
    p.add_argument("--matrix", metavar="PATH",
                   help="a `toki matrix --json` file: add PostgreSQL's measured cells to the comparison")
    p.add_argument("--witness-dir", metavar="DIR",
                   help="write each witness history as a schedule file `toki run` executes")
    p.set_defaults(func=run)


def _short(v) -> str:
    if v is None:
        return ""
    if isinstance(v, dict) and set(v) <= {"history", "schedule"}:
        return v.get("history", "") + (f"  -> {v['schedule']}" if "schedule" in v else "")
    return json.dumps(v, ensure_ascii=False, default=str)


def run(args, out) -> int:
    from toki.verify import prove, solver
    from toki.verify.compare import load_measured, three_way
    from toki.verify.isolation import LEVELS, MATRIX_PREDICATES

    if not args.timeout > 0:
        raise InputError(f"--timeout {args.timeout} is not positive", fix="give seconds, e.g. --timeout 30")
    measured = load_measured(args.matrix) if args.matrix else None
    as_json = args.json is not None
    to_stdout_json = args.json == "-"

    def progress(row):
        if to_stdout_json:
            return
        mark = "" if row["expected"] is None or row["status"] == row["expected"] else f"  (expected {row['expected']})"
        line = f"{row['status']:8} {row['seconds']:7.2f}s  {row['name']}{mark}"
        if row["status"] != "proved" and row["countermodel"] is not None:
            line += f"  {_short(row['countermodel'])}"
        elif row["status"] == "unknown" and row["detail"]:
            line += f"  {row['detail']}"
        out.write(line + "\n")
        out.flush() if hasattr(out, "flush") else None

    rep = prove.run(only=args.only, timeout_s=args.timeout, witness_dir=args.witness_dir, progress=progress)
    comparison = three_way(rep.derived_matrix, measured, rep.variants) if rep.derived_matrix or rep.variants else None
    doc = {
        "obligations": [{k: o[k] for k in ("name", "status", "expected", "seconds", "countermodel", "claim",
                                           "method", "detail")} | ({"extra": o["extra"]} if "extra" in o else {})
                        for o in rep.obligations],
        "derived_matrix": rep.derived_matrix,
        "variants": rep.variants,
        "comparison": comparison,
        "summary": {"obligations": len(rep.obligations),
                    "proved": sum(o["status"] == "proved" for o in rep.obligations),
                    "refuted": sum(o["status"] == "refuted" for o in rep.obligations),
                    "unknown": sum(o["status"] == "unknown" for o in rep.obligations),
                    "not_as_expected": [o["name"] for o in rep.failures], "seconds": rep.seconds},
        "model": "Adya 1999 / Adya, Liskov, O'Neil ICDE 2000: RC = PL-2, SI = PL-SI, SR = PL-3",
        "z3": solver.version(),
    }
    if as_json:
        from toki.runinfo import provenance
        doc["provenance"] = provenance(options={"timeout": args.timeout, "only": args.only, "matrix": args.matrix,
                                                "witness_dir": args.witness_dir}, elapsed_s=rep.seconds)
        emit_json(doc, out, args.json)
    if not to_stdout_json:
        if rep.derived_matrix:
            rows = [[p] + [rep.derived_matrix.get(p, {}).get(lv, "") for lv in LEVELS] for p in MATRIX_PREDICATES
                    if p in rep.derived_matrix]
            table(out, "derived matrix (z3, Adya's axioms)", ["predicate", *LEVELS], rows)
        if rep.variants:
            rows = [[p] + [v.get(lv, "") for lv in LEVELS] for p, v in rep.variants.items()]
            table(out, "other forms (informational)", ["predicate", *LEVELS], rows)
        if comparison is not None:
            if comparison["disagreements"]:
                table(out, "disagreements (paper, z3" + (", PostgreSQL" if measured is not None else "") + ")",
                      ["predicate", "level", "paper", "z3"] + (["postgresql", "rate"] if measured is not None else []),
                      [[d["predicate"], d["level"], d["paper"], d["z3"]]
                       + ([d.get("postgresql"), d.get("rate")] if measured is not None else [])
                       for d in comparison["disagreements"]])
            else:
                out.write("three-way comparison: no disagreement"
                          + (" (paper, z3, PostgreSQL)\n" if measured is not None else " (paper, z3)\n"))
            if comparison["form_disagreements"]:
                table(out, "other forms against the paper's row (expected to differ; docs/design.md#anomalies-and-guards notes)",
                      ["form", "level", "paper (row)", "z3"] + (["postgresql", "sqlstates"] if measured is not None else []),
                      [[d["predicate"], d["level"], d["paper"], d["z3"]]
                       + ([d.get("postgresql"), d.get("sqlstates", "")] if measured is not None else [])
                       for d in comparison["form_disagreements"]])
        s = doc["summary"]
        out.write(f"{s['obligations']} obligations: {s['proved']} proved, {s['refuted']} refuted, "
                  f"{s['unknown']} unknown in {s['seconds']:.1f} s; "
                  + (f"not as expected: {', '.join(s['not_as_expected'])}\n" if s["not_as_expected"]
                     else "all as expected\n"))
    return 1 if rep.failures else 0
