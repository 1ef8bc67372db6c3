"""Measure Hermitage's table on every database toki reaches and write it into docs/conformance.md.

Runs ``toki conformance`` on PostgreSQL 18 (embedded), PostgreSQL 15, MariaDB 10.11 with
``innodb_snapshot_isolation`` off and on, SQLite (rollback journal and WAL) and DuckDB, keeps each
result as JSON (``results/conformance/NAME.json``, with its provenance), draws PostgreSQL 18's table
as ``docs/figures/conformance-postgresql.png``, and replaces the text between the
``<!-- measured:begin -->`` and ``<!-- measured:end -->`` markers of docs/conformance.md with the
tables, side by side with Hermitage's published PostgreSQL and MySQL columns. Nothing in the
page's tables is typed by hand.

Usage (from the repository root)::

    .venv/bin/python docs/make_conformance.py                       # measure, then write the page
    .venv/bin/python docs/make_conformance.py --reuse                # render the results already measured
    .venv/bin/python docs/make_conformance.py --pg15 postgresql://... --mariadb mysql://...
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "conformance.md"
FIGURE = ROOT / "docs" / "figures" / "conformance-postgresql.png"
BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"


def configs(args, tmp: str) -> list[tuple[str, str | None]]:
    return [("postgresql-18", None), ("postgresql-15", args.pg15),
            ("mariadb", args.mariadb), ("mariadb-snapshot", args.mariadb + "?snapshot_isolation=on"),
            ("sqlite", f"sqlite:///{tmp}/conformance.db"), ("sqlite-wal", f"sqlite:///{tmp}/conformance-wal.db?journal=wal"),
            ("duckdb", f"duckdb:///{tmp}/conformance.duckdb")]


def measure(args) -> dict[str, dict]:
    from toki.cli import main

    out_dir = Path(args.results)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ.pop("TOKI_DSN", None)  # the first column is the embedded server
    docs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, dsn in configs(args, tmp):
            path = out_dir / f"{name}.json"
            argv = ["conformance", "--json", str(path)] + (["--dsn", dsn] if dsn else [])
            if name == "postgresql-18":
                argv += ["--png", str(FIGURE)]
            err = io.StringIO()
            rc = main(argv, out=io.StringIO(), err=err)
            if rc != 0:
                sys.exit(f"{name}: toki conformance exited {rc}: {err.getvalue().strip()}")
            docs[name] = json.loads(path.read_text())
            print(f"{name}: {docs[name]['database']['config']}, {docs[name]['provenance']['elapsed_s']} s")
    return docs


def load(results: str) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(Path(results).glob("*.json"))}


_SHORT = {"blocking": "B", "abort": "A", "snapshot": "S"}


def _mark(c: dict) -> str:
    text = c["label"]
    if c["outcome"] == "prevented":
        text += " " + "+".join(_SHORT[h] for h in c["how"].split("+"))
    if c.get("differs_from_hermitage"):
        text += " *"
    return text


def render(docs: dict[str, dict]) -> str:
    from toki.conformance.cases import CASES
    from toki.conformance.hermitage import PUBLISHED, SOURCE

    head = "| database | level | " + " | ".join(CASES) + " |\n|---|---|" + "---|" * len(CASES) + "\n"
    lines = []

    def published(key: str) -> None:
        pub = PUBLISHED[key]
        first = True
        for level, row in pub["rows"].items():
            who = f"**{pub['title']}** (Hermitage, published)" if first else ""
            lines.append(f"| {who} | {level} | " + " | ".join(row[c] for c in CASES) + " |")
            first = False

    def measured(name: str) -> None:
        if name not in docs:
            return
        d = docs[name]
        cells = {(c["level"], c["case"]): c for c in d["cells"]}
        for i, level in enumerate(d["levels"]):
            who = f"**{d['database']['config']}** (measured)" if i == 0 else ""
            lines.append(f"| {who} | {level} | " + " | ".join(_mark(cells[(level, c)]) for c in CASES) + " |")

    published("postgresql")
    measured("postgresql-18")
    measured("postgresql-15")
    published("mysql")
    measured("mariadb")
    measured("mariadb-snapshot")
    measured("sqlite")
    measured("sqlite-wal")
    measured("duckdb")
    out = [head + "\n".join(lines), ""]
    out.append("✓ prevented, by **B** blocking (a statement waited), **A** abort (the database ended a "
               "transaction), **S** snapshot (reads returned an older version at once); — anomaly observed; "
               "R/O prevented for read-only transactions only; * differs from Hermitage's column. "
               f"Hermitage's marks are from its README ({SOURCE['repository']}, commit {SOURCE['commit'][:7]}).")
    out.append("")
    out.append("### Agreement with Hermitage")
    out.append("")
    for name, d in docs.items():
        h = d.get("hermitage")
        if not h:
            continue
        line = f"- {d['database']['config']} against {h['column']}: {h['agree']} of {h['compared']} cells agree"
        if h["levels_not_in_hermitage"]:
            line += f" (not in Hermitage's table: {', '.join(h['levels_not_in_hermitage'])})"
        out.append(line + ".")
        seen = {}
        for diff in h["differ"]:
            seen.setdefault(diff["why"], []).append(f"{diff['case']} at {diff['level']} ({diff['published']} → "
                                                    f"{diff['measured']})")
        for why, what in seen.items():
            out.append(f"    - {', '.join(what)}: {why}")
    out.append("")
    out.append("### What the new columns show")
    out.append("")
    for name in ("sqlite", "sqlite-wal", "duckdb"):
        if name not in docs:
            continue
        d = docs[name]
        anomalies = [c for c in d["cells"] if c["outcome"] == "anomaly"]
        hows = sorted({h for c in d["cells"] if c["outcome"] == "prevented" for h in c["how"].split("+")})
        text = f"- **{d['database']['config']}**: "
        text += "every case prevented" if not anomalies else \
            f"{len(anomalies)} of {len(d['cells'])} cells show the anomaly"
        text += f" (by {', '.join(hows)})." if hows else "."
        out.append(text)
        for c in anomalies:
            out.append(f"    - {c['case']} at {c['level']} ({c['label']}): {c['why']}")
    env = next(iter(docs.values()))["provenance"]
    out.append("")
    out.append(f"Measured with toki {env['toki_version']} at commit `{env['git_commit'][:12]}` on "
               f"{env['created'][:10]}; each run's JSON (every form's steps, rows, waits and errors) is in "
               "`results/conformance/` after `docs/make_conformance.py`.")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(ROOT / "results" / "conformance"),
                    help="where the JSON results go (or come from, with --reuse)")
    ap.add_argument("--reuse", action="store_true", help="do not measure: render the results already there")
    ap.add_argument("--pg15", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--mariadb", default="mysql://root@127.0.0.1:3306/test")
    args = ap.parse_args()
    docs = load(args.results) if args.reuse else measure(args)
    text = PAGE.read_text()
    a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
    PAGE.write_text(text[:a] + "\n" + render(docs) + "\n" + text[b:])
    print(f"wrote {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
