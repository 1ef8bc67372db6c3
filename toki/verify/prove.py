"""All obligations of ``toki prove`` and the runner that discharges them.

Groups: operator laws, provenance semirings, Theorem 3, pipelines (Table 10, Theorem 4),
Lemma 1, the isolation levels (non-vacuity, inclusions), and the matrix: one obligation per
(predicate, level) cell, "no history at this level exhibits the predicate". A cell's
obligation is proved (the cell is *excluded*) or refuted by a witness history (*admitted*).
Its ``expected`` comes from the paper's guard map, used only to compare, never to derive.
"""

from __future__ import annotations

import fnmatch
import time
from dataclasses import dataclass, field
from pathlib import Path

from toki.errors import InputError
from toki.verify import isolation as I
from toki.verify import laws, lemma1, witness
from toki.verify.compare import paper_cell
from toki.verify.obligations import PROVED, REFUTED, UNKNOWN, Obligation, Result

CELL_STATUS = {"excluded": PROVED, "admitted": REFUTED, "unknown": UNKNOWN}


def _cell_obligation(pred: I.Predicate, level: str, witness_dir: str | None, cells: dict) -> Obligation:
    def check(t: float) -> Result:
        cell = I.derive_cell(pred, level, timeout_s=t)
        cells[pred.name, level] = cell
        r = Result(CELL_STATUS[cell.status], detail=f"{cell.status}; bound: {cell.bound}")
        if cell.reason:
            r.detail += f"; z3: {cell.reason}"
        if cell.history is not None:
            r.countermodel = {"history": cell.history.notation()}
            if witness_dir:
                path = witness.write(cell, witness_dir, pred.meaning)
                r.countermodel["schedule"] = str(path)
        r.extra["cell"] = cell.status
        return r

    if level == "none":
        expected = REFUTED  # non-vacuity: the predicate has a history when nothing is enforced
        claim = f"sanity: some well-formed history exhibits {pred.name} (no isolation)"
    else:
        expected = (PROVED if paper_cell(pred.name, level) == "excluded" else REFUTED) if pred.variant_of is None else None
        claim = f"no history at {level} exhibits {pred.name} ({pred.meaning})"
    name = f"matrix.{pred.name}.{level}" if level != "none" else f"sanity.{pred.name}"
    return Obligation(name, claim, expected, check, "z3-bounded")


def _level_obligations() -> list[Obligation]:
    out = []
    for level in I.LEVELS:
        def sat(t, level=level):
            ans = I.level_satisfiable(level, timeout_s=t)
            status = {"found": PROVED, "none": REFUTED}.get(ans.verdict.value, UNKNOWN)
            return Result(status, detail="a history where both agents read, write and commit")
        out.append(Obligation(f"levels.nonvacuous.{level}", f"the axioms of {level} admit a history in which both "
                              "agents read, write and commit", PROVED, sat, "z3-bounded"))
    for strong, weak, expected in (("SI", "RC", PROVED), ("SR", "RC", PROVED), ("SR", "SI", None)):
        def inc(t, strong=strong, weak=weak):
            ans = I.level_inclusion(strong, weak, timeout_s=t)
            r = Result(ans.verdict.value)
            if ans.model is not None:
                r.detail = "a history allowed at the stronger level but not at the weaker"
            return r
        out.append(Obligation(f"levels.{strong}-within-{weak}", f"every bounded history allowed at {strong} is allowed "
                              f"at {weak} (Adya: PL-3 and PL-SI are incomparable, so SR ⊆ SI is informational)",
                              expected, inc, "z3-bounded"))
    return out


def all_obligations(witness_dir: str | None = None, cells: dict | None = None) -> list[Obligation]:
    cells = {} if cells is None else cells
    out = laws.all_law_obligations()
    out += lemma1.obligations()
    out += _level_obligations()
    for pred in I.PREDICATES:
        out.append(_cell_obligation(pred, "none", witness_dir, cells))
    for pred in I.PREDICATES:
        for level in I.LEVELS:
            out.append(_cell_obligation(pred, level, witness_dir, cells))
    return out


def select(obligations: list[Obligation], only: list[str] | None) -> list[Obligation]:
    """``--only``: names, prefixes (``lww``, ``matrix.P4``) or globs (``matrix.*.SI``)."""
    if not only:
        return obligations
    chosen = [o for o in obligations
              if any(o.name == pat or o.name.startswith(pat + ".") or fnmatch.fnmatchcase(o.name, pat) for pat in only)]
    if not chosen:
        groups = sorted({o.name.split(".")[0] for o in obligations})
        raise InputError(f"--only {' '.join(only)} matches no obligation",
                         fix=f"use a name, a prefix such as {', '.join(groups)}, or a glob like 'matrix.*.SI'")
    return chosen


@dataclass
class Report:
    obligations: list[dict] = field(default_factory=list)
    derived_matrix: dict[str, dict[str, str]] = field(default_factory=dict)
    variants: dict[str, dict[str, str]] = field(default_factory=dict)
    cells: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def failures(self) -> list[dict]:
        """Obligations whose status is not the expected one (unknown counts: it is never a pass)."""
        return [o for o in self.obligations if o["expected"] is not None and o["status"] != o["expected"]]


def run(*, only: list[str] | None = None, timeout_s: float = 30.0, witness_dir: str | Path | None = None,
        progress=None) -> Report:
    cells: dict = {}
    obligations = select(all_obligations(str(witness_dir) if witness_dir else None, cells), only)
    rep = Report(cells=cells)
    t0 = time.perf_counter()
    for ob in obligations:
        r = ob.run(timeout_s)
        row = {"name": ob.name, "status": r.status, "expected": ob.expected, "seconds": r.seconds,
               "countermodel": r.countermodel, "claim": ob.claim, "method": ob.method, "detail": r.detail}
        if r.extra:
            row["extra"] = {k: v for k, v in r.extra.items() if k != "cell"}
        rep.obligations.append(row)
        if progress:
            progress(row)
    rep.seconds = round(time.perf_counter() - t0, 3)
    for (pred, level), cell in cells.items():
        if level == "none":
            continue
        target = rep.derived_matrix if I.predicate(pred).variant_of is None else rep.variants
        target.setdefault(pred, {})[level] = cell.status
    return rep
