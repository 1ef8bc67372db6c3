"""Races that users of memory engines reported (public issue trackers, 2024-2026), replayed.

Each report is a claim about an engine. It is run against the real engine where toki has it,
else against toki's model of it, through the engine harness, and classified:

* ``reproduced (race)``: the search finds an interleaving no serial order explains, named as
  the report names it; the witness replays with ``toki certify --replay``;
* ``reproduced (design)``: the claimed outcome happens in a serial order too: a property of
  the engine's design, not of concurrency;
* ``judge failure``: the outcome comes from what the judge decided, in serial orders as well:
  not an isolation failure (a testbed must tell them apart);
* ``not reproduced``: not found within the budget (the budget is stated);
* ``not runnable``: the engine or its scenario is not available here (the reason is stated).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

from toki.render import table
from toki.errors import TokiError

NAME = "reported-races"
TABLE = "Races users of mem0, Graphiti/Zep, Letta, LangMem and others reported, replayed and classified"


@dataclass(frozen=True)
class Report:
    id: str
    system: str
    claim: str
    engine: str  # toki's engine that runs it (real or model)
    scenario: str
    anomaly: str  # the detector name that shows the claim
    kind: str = "race"  # race | design | judge | clean-abort (anomaly then names the error raised)
    module: str | None = None  # run on this variant of the engine (module:factory), e.g. a judge setting


REPORTS = (
    Report("mem0-duplicate-add", "mem0", "two concurrent add() of the same text both pass the duplicate check on "
           "a stale snapshot and both insert", "mem0", "reported-duplicate-add", "duplicate-insert"),
    Report("mem0-linked-ids", "mem0", "a list of linked memory ids read, changed and written back without a lock "
           "loses one of two concurrent additions (P4)", "mem0", "reported-linked-ids-p4", "lost-update"),
    Report("mem0-love-hate", "mem0", "'I love Chinese food' then 'I hate Chinese food' leaves an empty store: the "
           "judge deleted and added nothing (no audit: N3)", "mem0-v2", "love-then-hate", "judge-failure", "judge"),
    Report("mem0-add-only-both-current", "mem0", "the ADD-only pipeline keeps both contradicting facts current",
           "mem0", "reported-add-only-both-current", "both-current", "design"),
    Report("graphiti-shared-driver", "Graphiti/Zep", "per-group workers share one driver, so a write lands in "
           "another group's graph", "graphiti", "groups-share-driver", "wrong-group"),
    Report("graphiti-out-of-order", "Graphiti/Zep", "episodes ingested out of order let an older fact ('lives in "
           "X') survive a newer one ('moved to Y')", "graphiti", "out-of-order-episodes", "stale-current"),
    Report("graphiti-wide-invalidation", "Graphiti/Zep", "invalidation searched too widely and retired facts "
           "that did not contradict (a judge error, N1)", "graphiti", "wide-invalidation", "judge-error", "judge"),
    Report("graphiti-one-in-nine", "Graphiti/Zep", "some contradictions are caught in one run out of nine (judge "
           "nondeterminism, N1); resolve_edge at temperature 1, Graphiti's own setting", "graphiti", "rejudge", "N1",
           module="toki.engines.graphiti_engine:graphiti_rejudge"),
    Report("letta-version-conflict", "Letta", "two writers to one block get a conflict error from its version "
           "check (P4 detected, not lost)", "letta", "two-writers-one-block", "BlockVersionConflict", "clean-abort"),
    Report("letta-stale-block", "Letta", "a shared block change is not seen until the agent's next step (stale "
           "read)", "letta", "shared-block-stale-read", "N2"),
    # LangMem's reports run on LangMem itself (langmem 0.0.30's memory manager on LangGraph's stores);
    # the same claims about "others" are replayed on the engines whose write paths match them.
    Report("langmem-blind-put", "LangMem", "a blind put overwrites a concurrent writer's record and destroys the "
           "loser (P4 and N3): two manager runs patch one memory, the later put wins", "langmem", "blind-put",
           "lost-update"),
    Report("langmem-blind-put-postgres", "LangMem", "the same on LangGraph's PostgresStore", "langmem-postgres",
           "blind-put", "lost-update"),
    Report("langmem-blind-put-n3", "LangMem", "... and destroys the loser (N3): a put overwrites the key's value and "
           "the store keeps no earlier version, in a serial run too", "langmem", "replace-overwrites", "N3", "design"),
    Report("langmem-double-remember", "LangMem", "two concurrent 'remember' calls both replace one memory, leaving "
           "two latest versions (A5B); with enable_deletes=True the model removes the old memory and inserts the "
           "new one", "langmem", "double-remember", "double-supersede"),
    Report("langmem-double-remember-defaults", "LangMem", "the same claim with LangMem's defaults (no deletes): the "
           "model patches the one key in place, so at most one version survives", "langmem", "double-patch",
           "double-supersede"),
    Report("langmem-consolidation", "LangMem", "a long LLM consolidation writes back over memories added meanwhile "
           "(P4): the manager writes back per key, so a memory added meanwhile under a new key survives (a memory "
           "changed meanwhile is the blind put above)", "langmem", "consolidation-vs-add", "lost-update"),
    Report("langmem-ingestion-order", "LangMem", "ordering by ingestion instead of event time lets an older fact "
           "replace a newer one: LangMem keeps no event time", "langmem", "ingestion-order", "ingestion-order",
           "design"),
    Report("others-blind-put-mem0-v2", "others", "the blind put replayed on mem0 1.0.x's upsert", "mem0-v2",
           "concurrent-update", "lost-update"),
    Report("others-double-remember-mirix", "others", "two remembers both replacing one memory, replayed on MIRIX's "
           "delete-then-insert", "mirix", "concurrent-update", "double-supersede"),
    Report("others-consolidation-letta", "others", "a consolidation writing back over memories added meanwhile, "
           "replayed on Letta's memory_rethink", "letta", "consolidation-overwrites", "lost-update"),
    Report("others-ingestion-order-mem0-v2", "others", "ingestion order replayed on mem0 1.0.x (no event time)",
           "mem0-v2", "ingestion-order", "ingestion-order", "design"),
    Report("others-ingestion-order-sodamem", "others", "the same claim against SodaMem, which orders by event time",
           "sodamem", "out-of-order-ingest", "stale-survives", "design"),
    # The same reports on the real code where its extra is installed (letta-sqlite: Letta 0.16.8; mem0-v1: mem0 1.0.11).
    Report("letta-version-conflict-real", "Letta", "two writers to one block get a conflict error from its version "
           "check (P4 detected, not lost), on Letta 0.16.8's own services", "letta-sqlite", "two-writers-one-block",
           "ConcurrentUpdateError", "clean-abort"),
    Report("letta-stale-block-real", "Letta", "a shared block change is not seen until the agent's next step: Letta "
           "0.16.8 loads an agent's memory once per request, so a request reads one snapshot (not an anomaly)",
           "letta-sqlite", "shared-block-stale-read", "N2"),
    Report("letta-conflict-retry", "Letta", "ConcurrentUpdateError on block updates (letta #3366): the LLM retries "
           "the tool in the same request, whose memory Letta does not reload, and the retry writes its stale copy "
           "over the other writer's change", "letta-sqlite", "conflict-retry", "lost-update"),
    Report("others-consolidation-letta-real", "others", "a consolidation writing back over memories added "
           "meanwhile, on Letta 0.16.8's memory_rethink", "letta-sqlite", "consolidation-overwrites", "lost-update"),
    Report("mem0-love-hate-v1", "mem0", "'I love Chinese food' then 'I hate Chinese food' leaves an empty store, on "
           "mem0 1.0.11's own Memory", "mem0-v1", "love-then-hate", "judge-failure", "judge"),
    Report("others-blind-put-mem0-v1", "others", "the blind put on mem0 1.0.11's own update (pgvector)", "mem0-v1",
           "concurrent-update", "lost-update"),
    # Engines toki cannot certify here (toki.engines.blocked): their users' reports are rows naming the blocker.
    Report("cognee-sqlite-locked", "cognee", "cognify() fails with 'database is locked': the pipeline's parallel "
           "tasks write one SQLite database at once (topoteretes/cognee #2717)", "cognee", "-", "database-locked"),
    Report("cognee-kuzu-lock", "cognee", "concurrent search() calls fail to set Kuzu's file lock (topoteretes/cognee "
           "#1100)", "cognee", "-", "lock-error"),
    Report("drops-facts-prompt-bug", "(several)", "'concurrent writes drop facts' was the judge returning nothing "
           "because of a prompt bug", "mem0-v2", "love-then-hate", "judge-failure", "judge"),
)


def add_arguments(p) -> None:
    p.add_argument("--budget", type=int, default=40, help="interleavings searched per report (default 40)")
    p.add_argument("--witness-dir", default=None, help="where witness files go (default: next to --json)")


def classify(report: Report, *, budget: int, seed: int, witness_dir: Path) -> dict:
    from toki.engines.registry import ENGINES, available, load_engine
    from toki.harness import Random, TapeChooser, TrialRunner, Witness, run

    row = {"id": report.id, "system": report.system, "claim": report.claim, "engine": report.engine,
           "scenario": report.scenario, "anomaly": report.anomaly, "budget": budget, "witness": None,
           "executed": None, "result": None, "evidence": None}
    info = ENGINES.get(report.engine)
    try:
        if info is None or not available(info) and info.executed != "blocked":  # a blocked one names its blocker
            raise TokiError(f"engine {report.engine} is not installed here"
                            + (f" ({info.install})" if info is not None else ""))
        engine = load_engine(None, report.module) if report.module else load_engine(report.engine)
    except TokiError as e:
        row.update(result="not runnable", evidence=str(e))
        return row
    row["executed"] = getattr(engine, "executed", "real")
    if report.scenario not in engine.scenarios:
        row.update(result="not runnable", evidence=f"{report.engine} has no scenario {report.scenario!r}: the "
                   "report's conditions are not modelled")
        return row
    with TrialRunner(engine, report.scenario) as runner:
        runner.serial_outcomes()
        if report.kind == "clean-abort":  # the engine refuses one writer; the outcome is a serial one
            rng = random.Random(seed)
            for i in range(budget):
                r = runner.trial(TapeChooser([rng.randrange(16) for _ in range(400)], (1, 4, 2, 3)[i % 4]))
                if report.anomaly in r.outcome.errors.values() and r.serializable:
                    row.update(result="reproduced (clean abort)", evidence=f"{report.anomaly} for one writer; "
                               "the outcome equals a serial run of the other (detected, not lost)")
                    return row
            row.update(result="not reproduced", evidence=f"no {report.anomaly} in {budget} interleavings")
            return row
        for _, trace, out in runner.serial_runs:
            found = [f for f in runner.by_design(out) if f.anomaly == report.anomaly]
            if found:
                w = Witness.from_serial(engine, report.scenario, trace, out, found, seed=seed, budget=budget)
                row.update(result="judge failure" if report.kind == "judge" else "reproduced (design)",
                           witness=str(w.save(witness_dir / f"{report.id}.json")), evidence=found[0])
                return row
        res = run(runner, Random(budget=budget, seed=seed),
                  want=lambda r: any(a.anomaly == report.anomaly for a in r.anomalies))
        if res.admits:
            w = Witness.from_trial(engine, report.scenario, res.found, seed=seed, budget=budget)
            row.update(result="reproduced (race)", witness=str(w.save(witness_dir / f"{report.id}.json")),
                       evidence=next(a for a in res.found.anomalies if a.anomaly == report.anomaly))
            return row
    row.update(result="not reproduced", evidence=f"not found in {res.tried} interleavings (budget {budget}, "
               f"seed {seed})")
    return row


def run(args, out) -> dict:
    json_path = getattr(args, "json", None)
    base = Path(args.witness_dir) if args.witness_dir else (
        Path(json_path).parent / "witnesses" if json_path and json_path != "-" else Path("results") / NAME / "witnesses")
    base.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = [classify(r, budget=args.budget, seed=args.seed, witness_dir=base) for r in REPORTS]
    table(out, "reported races", ["report", "engine (scenario)", "result", "evidence"],
          [(r["id"], f"{r['engine']}{'*' if r['executed'] == 'model' else ''} ({r['scenario']})", r["result"],
            (r["evidence"] or "")[:90]) for r in rows])
    return {"rows": rows, "elapsed_s": round(time.perf_counter() - t0, 1), "budget": args.budget}
