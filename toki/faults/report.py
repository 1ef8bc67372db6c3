"""The fault table of a system, and fault files: one injected fault as data, replayable.

A fault file names the system (toki's write path, or an engine of the harness), the case
(operator/mode, or the engine's scenario), the kind of fault, the point (the statement or the
granted storage call before which it was injected), what the statement was, the findings when it
was recorded, and how it was made (provenance). ``toki faults --replay FILE`` injects the same
fault again at the same point and says whether the findings reproduce.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from toki.errors import ConfigError
from toki.harness.findings import anomaly_of

FORMAT = 1
_FIELDS = ("system", "case", "kind", "point")


def summarize(results: Iterable) -> list[dict]:
    """One row per (case, kind): points tried, survived, not survived, the first finding."""
    rows: dict[tuple[str, str], dict] = {}
    for r in results:
        key = (r.case, r.kind)
        row = rows.setdefault(key, {"case": r.case, "kind": r.kind, "tried": 0, "survived": 0, "failed": 0,
                                    "skipped": 0, "first": None, "first_point": None, "finding_kinds": {}})
        if r.skipped:
            row["skipped"] += 1
            row["first"] = row["first"] or f"not run: {r.skipped}"
            continue
        row["tried"] += 1
        if r.survived:
            row["survived"] += 1
        else:
            row["failed"] += 1
            if row["first"] is None or row["first"].startswith("not run"):
                row["first"], row["first_point"] = f"at {r.point} ({r.statement[:50]}): {r.findings[0]}", r.point
            for f in r.findings:
                k = anomaly_of(f)
                row["finding_kinds"][k] = row["finding_kinds"].get(k, 0) + 1
    return list(rows.values())


def category(finding: str) -> str:
    """A finding's kind (``lost``, ``does not open``, ``half-done``...)."""
    return anomaly_of(finding)


def representatives(bad: list) -> list:
    """One not-survived fault per (case, kind), and for power loss one per (case, kind of finding):
    the one with the shortest trace (ALICE reports the smallest set of operations that shows it)."""
    best: dict[tuple, object] = {}
    for r in bad:
        key = (r.case, r.kind, category(r.findings[0]) if r.kind == "power-loss" and r.findings else "")
        cur = best.get(key)
        size = len((getattr(r, "detail", None) or {}).get("trace", ()))
        if cur is None or size < len((getattr(cur, "detail", None) or {}).get("trace", ())):
            best[key] = r
    return list(best.values())


def power_summary(sys_, results: list) -> dict:
    """Per case: crash states built and explored (distinct), survived, lost acknowledged data, do
    not open, half-done, states per second, and the minimal trace of each kind of finding."""
    out: dict[str, dict] = {}
    by_case: dict[str, list] = {}
    for r in results:
        by_case.setdefault(r.case, []).append(r)
    for case, rs in by_case.items():
        st = sys_.power_stats(case)
        why = st["why"]
        detail = rs[0].detail or {}
        if why is not None:
            out[case] = {"not_run": why, "sqlite": detail.get("sqlite"), "sqlite_files": detail.get("sqlite_files"),
                         "failed": not rs[0].survived}
            continue
        bad = [r for r in rs if not r.survived]
        cats = {"lost": 0, "does not open": 0, "half-done": 0}
        for r in bad:
            c = category(r.findings[0])
            cats[c] = cats.get(c, 0) + 1
        secs = sum(r.seconds for r in rs)
        minimal = {}
        for r in representatives(bad):
            minimal[category(r.findings[0])] = {"point": r.point, "finding": r.findings[0],
                                                "trace": r.detail["trace"]}
        first = bad and min(bad, key=lambda r: len(r.detail["trace"]))
        out[case] = {"constructed": st["constructed"], "explored": len(rs), "of": st["distinct"],
                     "operations": st["operations"], "survived": len(rs) - len(bad), "lost": cats["lost"],
                     "unopenable": cats["does not open"], "half_done": cats["half-done"],
                     "unverifiable": sum(n for c, n in cats.items() if c not in ("lost", "does not open", "half-done")),
                     "states_per_s": round(len(rs) / secs, 1) if secs else 0.0,
                     "first": f"{first.findings[0]}" if first else None, "minimal": minimal}
    return out


def fault_file(result, *, version: str, executed: str, options: dict, provenance: dict,
               engine_module: str | None = None) -> dict:
    doc = {"toki_faults": FORMAT, **{k: getattr(result, k) for k in _FIELDS}, "statement": result.statement,
           "version": version, "executed": executed, "options": options, "reported": result.reported,
           "findings": list(result.findings), "survived": result.survived, "provenance": provenance}
    if engine_module is not None:
        doc["engine_module"] = engine_module  # a plug-in: --replay loads it again
    detail = getattr(result, "detail", None)
    if detail is not None:
        doc["detail"] = detail
    return doc


def save(doc: dict, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")  # never a partial file: write aside, then move over
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    tmp.replace(p)
    return p


def load(path: str | Path) -> dict:
    """A fault file, validated: every problem is a ConfigError naming the file and the field."""
    p = Path(path)
    fix = "pass a file written by toki faults --witness-dir"
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError(f"fault file {p} does not exist", fix=fix) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise ConfigError(f"fault file {p} cannot be read ({type(e).__name__})", fix=fix) from None
    try:
        d = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        where = f" ({e.msg} at line {e.lineno})" if isinstance(e, json.JSONDecodeError) else ""
        raise ConfigError(f"fault file {p} is not JSON{where}", fix=fix) from None
    if not isinstance(d, dict) or d.get("toki_faults") != FORMAT:
        raise ConfigError(f"{p} is not a toki fault file (format {FORMAT})", fix=fix)
    for k, typ in (("system", str), ("case", str), ("kind", str), ("point", int)):
        v = d.get(k)
        if not isinstance(v, typ) or isinstance(v, bool) or (typ is str and not v):
            raise ConfigError(f"fault file {p}: field {k!r} is missing or not a {typ.__name__} (got {v!r:.40})",
                              fix=fix)
    if d["point"] < 0:
        raise ConfigError(f"fault file {p}: point {d['point']} is negative", fix=fix)
    if "engine_module" in d and (not isinstance(d["engine_module"], str) or ":" not in d["engine_module"]):
        raise ConfigError(f"fault file {p}: engine_module must be MODULE:FACTORY (got {d['engine_module']!r:.40})",
                          fix=fix)
    if not isinstance(d.get("detail", {}), dict):
        raise ConfigError(f"fault file {p}: detail must be a table", fix=fix)
    if not isinstance(d.get("options", {}), dict) or not isinstance(d.get("findings", []), list):
        raise ConfigError(f"fault file {p}: options must be a table and findings a list", fix=fix)
    return d
