"""The three-way report: the paper's guard map, the matrix z3 derived, PostgreSQL's measured cells.

The guard map lives here and only here: the axioms and predicates of
:mod:`toki.verify.isolation` never see it, so the derived matrix cannot be copied from it.
"""

from __future__ import annotations

import json
from pathlib import Path

from toki.errors import InputError
from toki.levels import parse_level
from toki.verify.isolation import LEVELS, MATRIX_PREDICATES

#: docs/design.md#anomalies-and-guards: the lowest level that excludes each predicate (the paper's claim under test).
PAPER_GUARDS = {"P0": "RC", "P1": "RC", "P2": "SI", "P3": "SR", "P4": "SI",
                "A5A": "SI", "A5B": "SR", "N1": "SR", "N2": "SR"}


def paper_cell(pred: str, level: str) -> str:
    """A cell is admitted iff the level is below the guard; the callback axis changes no guard."""
    guard = parse_level(PAPER_GUARDS[pred])
    at = parse_level(level)
    return "excluded" if at.isolation >= guard.isolation else "admitted"


def load_measured(path: str | Path) -> dict[tuple[str, str], dict]:
    """Cells of a ``toki matrix --json`` file, keyed by (predicate, level)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(f"matrix file {str(p)!r} does not exist", fix="run `toki matrix --json PATH` first") from None
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"matrix file {str(p)!r} is not JSON: {e}", fix="pass the file `toki matrix --json` wrote") from None
    cells = doc.get("cells") if isinstance(doc, dict) else None
    if isinstance(cells, list) and isinstance(doc.get("variants"), list):
        cells = cells + doc["variants"]  # other forms (P3-reread, N1-unique) measured by `toki matrix`
    if not isinstance(cells, list):
        raise InputError(f"matrix file {str(p)!r} has no 'cells' list",
                         fix='expected {"cells": [{"predicate", "level", "rate", ...}]} from `toki matrix --json`')
    out = {}
    for k, c in enumerate(cells):
        if not isinstance(c, dict) or not {"predicate", "level", "rate"} <= set(c):
            raise InputError(f"matrix file {str(p)!r}: cell {k} lacks predicate, level or rate",
                             fix="pass the file `toki matrix --json` wrote")
        try:
            level = parse_level(c["level"]).name
        except Exception:
            raise InputError(f"matrix file {str(p)!r}: cell {k} has unknown level {c['level']!r}",
                             fix="levels are RC, RC+cb, SI, SI+cb, SR, SR+cb") from None
        rate = c["rate"]
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
            raise InputError(f"matrix file {str(p)!r}: cell {k} has rate {rate!r}", fix="a rate is a number in [0, 1]")
        out[(str(c["predicate"]), level)] = c
    return out


def three_way(derived: dict[str, dict[str, str]], measured: dict[tuple[str, str], dict] | None = None,
              variants: dict[str, dict[str, str]] | None = None) -> dict:
    """Rows per cell with the three verdicts and a list of every disagreement.

    Other forms of a row (``variants``: P3-reread, N1-unique, ...) are compared the same way,
    against the paper's claim for the row they are a form of, and listed apart: the paper
    makes no claim about them, docs/design.md#anomalies-and-guards asks to report them."""
    rows, disagreements, form_rows, form_disagreements = [], [], [], []
    todo = [(p, derived, rows, disagreements, p) for p in MATRIX_PREDICATES]
    for p, v in (variants or {}).items():
        base = p.split("-")[0]
        todo.append((p, variants, form_rows, form_disagreements, base))
    for pred, source, out_rows, out_dis, base in todo:
        if base not in PAPER_GUARDS:
            continue
        for level in LEVELS:
            paper = paper_cell(base, level)
            z3v = source.get(pred, {}).get(level, "not run")
            row = {"predicate": pred, "level": level, "paper": paper, "z3": z3v}
            if measured is not None:
                cell = measured.get((pred, level))
                if cell is None:
                    row["postgresql"] = "not measured"
                else:
                    row["postgresql"] = "admitted" if cell["rate"] > 0 else "excluded"
                    row["rate"] = cell["rate"]
                    if cell.get("sqlstates"):
                        row["sqlstates"] = cell["sqlstates"]
            out_rows.append(row)
            verdicts = {k: row[k] for k in ("paper", "z3", "postgresql") if k in row
                        and row[k] in ("admitted", "excluded")}
            if len(set(verdicts.values())) > 1:
                out_dis.append({**row, "who": ", ".join(f"{k}={v}" for k, v in verdicts.items())})
    return {"rows": rows, "disagreements": disagreements, "form_rows": form_rows,
            "form_disagreements": form_disagreements}
