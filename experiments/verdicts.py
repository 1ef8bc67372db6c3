"""The verdict matrix over memory systems (the paper's Table 4), executed through the engine harness.

Every system toki can run (real engines from the ``engines`` extra, models of the others, TOKI's
own write path) x every anomaly (N1, N2, N3, lost update, double supersede, duplicate insert, and
any a system's scenarios add). A cell is executed, never transcribed:

* the system's scenarios tagged with the anomaly are run; first every serial order (a detector
  marked ``always`` finds properties of the design, such as N3 when a loser is destroyed with no
  trace: "admits (by design)"), then a Hypothesis search of ``--budget`` interleavings for an
  outcome no serial order produces that a detector names as the anomaly;
* a search that finds nothing goes on with a bounded-exhaustive one (every interleaving with at
  most one preemption, up to ``--budget`` runs): a race in a window a few steps wide (a reader
  between two writes) is found where random tapes seldom land;
* ``rate`` is the share of ``--trials`` seeded random interleavings that show it (by design:
  the share of serial orders);
* every "admits" has a witness file that ``toki certify --replay`` re-executes;
* a system whose design rules an anomaly out abstains, and the row names that design fact.

Rows are named by the system and version they stand for (``system``: "mem0 2.2.1", "mem0 1.0.x");
``engine`` is toki's name for it (``--systems``, ``toki certify --engine``) and ``executed`` says
whether its own code ran ("real") or a model of it.

The paper's cells (its Table 4, several transcribed from design, not executed) are printed
beside the measured ones; a difference is reported with its witness.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from toki.render import table
from toki.errors import ConfigError, TokiError

NAME = "verdicts"
TABLE = "Table 4: N1 / N2 / N3 verdicts over memory systems (plus lost update, double supersede, duplicate insert)"

ANOMALIES = ("N1", "N2", "N3", "lost-update", "double-supersede", "duplicate-insert")
# toki's name for a system -> the paper's Table 4 row (N1, N2, N3): A admits, X excludes, - abstains
PAPER = {
    "mem0-v2": ("-", "-", "A"),
    "mem0": ("A", "A", "A"),  # mem0 2.x is the paper's "mem0 v3"
    "graphiti": ("A", "-", "A"),
    "letta": ("-", "A", "A"),
    "letta-sqlite": ("-", "A", "A"),
    "letta-postgres": ("-", "A", "A"),
    "mem0-v1": ("-", "-", "A"),  # mem0 1.0.x is the paper's "mem0 v2"
    "zep": ("-", "A", "A"),
    "mirix": ("A", "A", "-"),
    "comparator": ("X", "X", "X"),  # the paper's judge-free WorldDB
    "toki": ("X", "X", "X"),
}
# Cells run on a variant of the system's engine, with the reason (printed in the row).
VARIANTS = {
    ("graphiti", "N1"): ("toki.engines.graphiti_engine:graphiti_rejudge",
                         "resolve_edge at temperature 1, Graphiti's own setting for that call"),
    ("zep", "N1"): ("toki.engines.graphiti_engine:zep_rejudge",
                    "resolve_edge at temperature 1, Graphiti's own setting for that call"),
}
# Letta and mem0 1.0.x run for real where their extras are installed (each in an environment of its own:
# letta-sqlite, letta-postgres, mem0-v1); their models (letta, mem0-v2) are the rows an environment without
# them executes. memori, a-mem and cognee are rows naming what blocks them (toki.engines.blocked).
SYSTEMS = ("toki", "sodamem", "atommem", "mem0", "mem0-v1", "mem0-v2", "graphiti", "zep", "letta-sqlite",
           "letta-postgres", "letta", "mirix", "langmem", "langmem-postgres", "memori", "a-mem", "cognee", "comparator")


def add_arguments(p) -> None:
    p.add_argument("--budget", type=int, default=30, help="interleavings searched per scenario (default 30)")
    p.add_argument("--trials", type=int, default=20, help="random interleavings per scenario for the rate (default 20)")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help="comma-separated systems (default: all; unavailable ones are reported, not skipped)")
    p.add_argument("--witness-dir", default=None, help="where witness files go (default: next to --json)")


def _paper(system: str, anomaly: str) -> str | None:
    row = PAPER.get(system)
    if row is None or anomaly not in ("N1", "N2", "N3"):
        return None
    return {"A": "admits", "X": "excludes", "-": "abstains"}[row[("N1", "N2", "N3").index(anomaly)]]


def system_of(engine) -> str:
    """The system and version a row stands for ("mem0 2.2.1"); toki's engine name if it says nothing."""
    return str(getattr(engine, "system", None) or engine.name)


def _rate(runner, anomaly: str, trials: int, seed: int) -> float:
    """The share of ``trials`` seeded random tapes whose run shows ``anomaly``."""
    from toki.harness import TapeChooser

    rng = random.Random(seed)
    hits = 0
    for i in range(trials):
        rate = (1, 4, 2, 3)[i % 4]
        tape = [rng.randrange(TapeChooser.SPAN) for _ in range(2 * len(runner.last_serial_grants or []) + 8)]
        r = runner.trial(TapeChooser(tape, rate))
        hits += (not r.serializable) and any(a.anomaly == anomaly for a in r.anomalies)
    return hits / trials if trials else 0.0


def cell(engine, anomaly: str, *, budget: int, trials: int, seed: int, witness_dir: Path) -> dict:
    """One executed cell of the matrix: :func:`toki.harness.certify` asked about one anomaly, its
    serial orders first (a design property settles it), then random tapes, then one preemption
    everywhere; the cell renders the verdict and writes its witness."""
    from toki.harness import Decision, Exhaustive, Random, TrialRunner, certify

    row = {"system": system_of(engine), "engine": engine.name, "version": str(engine.version),
           "executed": getattr(engine, "executed", "real"),
           "anomaly": anomaly, "verdict": "excludes", "rate": 0.0, "trials": 0, "witness": None, "budget": budget,
           "paper": _paper(engine.name, anomaly), "scenarios": [], "how": None, "evidence": None}
    scenarios = [s for s in engine.scenarios.values() if anomaly in getattr(s, "anomalies", ())]
    if not scenarios:
        why = getattr(engine, "abstains", {}).get(anomaly)
        row.update(verdict="abstains", reason=why or f"no scenario of {engine.name} exercises {anomaly} (and the "
                   "engine names no design fact that rules it out)")
        return row
    for sc in scenarios:
        row["scenarios"].append(sc.name)
        with TrialRunner(engine, sc) as runner:
            # No shrinking: a verdict needs a witness that replays, not the smallest one (and
            # shrinking is most of the time on slow engines); `toki certify` shrinks. Random tapes
            # seldom land in a window a few steps wide (a reader between two writes): a search that
            # finds nothing goes on with one preemption, every place.
            for strategy, how in ((Random(budget=budget, seed=seed, shrink=False), "race"),
                                  (Exhaustive(preemptions=1, budget=budget, seed=seed, iterative=False),
                                   "race, bounded-exhaustive search (1 preemption)")):
                v = certify(engine, sc.name, strategy, anomaly=anomaly, design_first=True, runner=runner)
                if v.silent:  # told nothing: the cell cannot read "excludes"
                    row.update(verdict="unverifiable", reason=f"{engine.name}'s read-out is empty in every serial "
                               f"order of {sc.name}: nothing to judge (make state() return what the engine stores)")
                    return row
                if v.decision is Decision.UNVERIFIABLE:
                    raise v.error
                if v.decision is Decision.BY_DESIGN:
                    d = v.by_design[0]
                    path = v.witness.save(witness_dir / f"{engine.name}.{anomaly}.{sc.name}.json")
                    row.update(verdict="admits", how="by design (every serial order)" if d.orders == d.of
                               else "by design (some serial orders)", rate=d.orders / d.of, trials=d.of,
                               witness=str(path), evidence=d.finding)
                    return row
                row["trials"] += v.tried
                if v.admits:
                    w = v.witness
                    path = w.save(witness_dir / f"{engine.name}.{anomaly}.{sc.name}.json")
                    rate = _rate(runner, anomaly, trials, seed)
                    row.update(verdict="admits", how=f"{how} ({w.context_switches} context switches)", rate=rate,
                               trials=trials, witness=str(path),
                               evidence=next(a for a in v.found.anomalies if a.anomaly == anomaly))
                    return row
    design_only = all(getattr(d, "always", False) for sc in scenarios for d in sc.detectors if d.anomaly == anomaly)
    row["reason"] = (f"in no serial order of {', '.join(row['scenarios'])}" if design_only else
                     f"not found in {row['trials']} interleavings of {', '.join(row['scenarios'])}")
    return row


def run(args, out) -> dict:
    from toki.engines.registry import ENGINES, load_engine

    if args.budget < 1 or args.trials < 0:
        raise ConfigError("--budget must be at least 1 and --trials at least 0", fix="pass --budget 30 --trials 20")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in ENGINES]
    if unknown:
        raise ConfigError(f"unknown system(s) {', '.join(unknown)}", fix="choose from " + ", ".join(ENGINES))
    json_path = getattr(args, "json", None)
    base = Path(args.witness_dir) if args.witness_dir else (
        Path(json_path).parent / "witnesses" if json_path else Path("results") / NAME / "witnesses")
    base.mkdir(parents=True, exist_ok=True)
    rows, t0 = [], time.perf_counter()
    from toki.render import progress

    with progress() as bar:
        task = bar.add_task("verdicts", total=len(systems))
        for name in systems:
            info = ENGINES[name]
            try:
                engine = load_engine(name)  # not installed: says what and how; blocked: names the blocker
            except TokiError as e:
                rows.extend({"system": name, "engine": name, "version": None, "anomaly": a, "verdict": "abstains",
                             "executed": "blocked" if info.executed == "blocked" else None,
                             "rate": None, "trials": 0, "witness": None, "budget": args.budget,
                             "paper": _paper(name, a), "reason": f"not runnable here: {e}"} for a in ANOMALIES)
                bar.advance(task)
                continue
            from toki.harness import connect_database

            connect_database(engine, getattr(args, "dsn", None))
            extra = sorted({a for s in engine.scenarios.values() for a in getattr(s, "anomalies", ())} - set(ANOMALIES))
            for anomaly in ANOMALIES + tuple(extra):
                t = time.perf_counter()
                variant = VARIANTS.get((name, anomaly))
                eng = load_engine(None, variant[0]) if variant else engine
                r = cell(eng, anomaly, budget=args.budget, trials=args.trials, seed=args.seed, witness_dir=base)
                if variant:
                    r.update(system=system_of(engine), engine=name, variant=f"{variant[0]}: {variant[1]}")
                r["elapsed_s"] = round(time.perf_counter() - t, 2)
                rows.append(r)
            bar.advance(task)
    elapsed = time.perf_counter() - t0
    _print(out, rows)
    differ = [r for r in rows if _differs(r)]
    return {"rows": rows, "differences_from_paper": [
        {k: r.get(k) for k in ("system", "engine", "anomaly", "paper", "verdict", "witness", "evidence", "reason")} for r in differ],
        "elapsed_s": round(elapsed, 1), "budget": args.budget, "trials": args.trials, "systems": systems}


# --cluster (toki.experiments.run_on_cluster): one shard per system; a system's cells depend on it and
# --seed only, so the merged rows equal a local run's.
SHARD_OPTION = "systems"


def merge(docs: list[dict], args, out) -> dict:
    rows = [r for d in docs for r in d["rows"]]
    _print(out, rows)
    differ = [r for r in rows if _differs(r)]
    return {"rows": rows, "differences_from_paper": [
        {k: r.get(k) for k in ("system", "engine", "anomaly", "paper", "verdict", "witness", "evidence", "reason")} for r in differ],
        "elapsed_s": round(sum(d["elapsed_s"] for d in docs), 1), "budget": args.budget, "trials": args.trials,
        "systems": [s for d in docs for s in d["systems"]]}


def _differs(r: dict) -> bool:
    """A measured cell that differs from the paper's (a row that did not run measured nothing)."""
    ran = not str(r.get("reason") or "").startswith("not runnable here")
    return bool(r.get("paper")) and r["paper"] != r["verdict"] and ran


def _mark(r: dict) -> str:
    v = {"admits": "A", "excludes": "X", "abstains": "-", "unverifiable": "?"}[r["verdict"]]
    return v + ("*" if r.get("executed") == "model" else "")


def row_label(r: dict) -> str:
    """A table row's name: the system and version it stands for, and whether its code ran ("mem0 2.2.1 (real)")."""
    return f"{r['system']} ({r['executed']})" if r.get("executed") else f"{r['system']} (not run)"


def _print(out, rows: list[dict]) -> None:
    systems = list(dict.fromkeys(r["system"] for r in rows))
    labels = {r["system"]: row_label(r) for r in rows}
    anomalies = [a for a in ANOMALIES if any(r["anomaly"] == a for r in rows)]
    extra = [r for r in rows if r["anomaly"] not in ANOMALIES and r["verdict"] == "admits"]
    by = {(r["system"], r["anomaly"]): r for r in rows}
    body = []
    for s in systems:
        line = [labels[s]]
        for a in anomalies:
            r = by.get((s, a))
            if r is None:
                line.append("")
                continue
            cell_ = _mark(r)
            if r.get("paper"):
                cell_ += f" (paper {dict(admits='A', excludes='X', abstains='-')[r['paper']]})"
            line.append(cell_)
        body.append(line)
    table(out, "verdicts: A admits, X excludes, - abstains; * a model; (paper ...) the published cell",
          ["system"] + anomalies, body)
    for r in extra:
        out.write(f"{labels[r['system']]} also admits {r['anomaly']}: {(r.get('evidence') or '')[:110]}\n")
    for r in rows:
        if _differs(r):
            out.write(f"differs from the paper: {labels[r['system']]} {r['anomaly']}: paper {r['paper']}, measured "
                      f"{r['verdict']}: {(r.get('evidence') or r.get('reason') or '')[:110]}\n")
