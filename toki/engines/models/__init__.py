"""Faithful models of memory engines that toki cannot run for real here, and a judge-free comparator.

Each module models one system's write path from its public code (the module docstring names the
repository, file, function and the date it was read, and says where the model is simpler):

- :mod:`toki.engines.models.letta` - Letta's memory blocks (step-start load, last-writer-wins
  flush, SQLAlchemy's optimistic version check around the final read and flush only);
- :mod:`toki.engines.models.mirix` - MIRIX's memory agents (update = delete old ids, then insert;
  hard delete; no history);
- :mod:`toki.engines.models.mem0_v2` - mem0 1.0.x (``Memory.add``: top-5 search, one LLM call
  answering ADD/UPDATE/DELETE/NONE, in-place update, hard delete, a side history database);
- :mod:`toki.engines.models.comparator` - the judge-free comparator ("WorldDB" in the paper): one
  serializable transaction per write, bitemporal close-and-insert, audit rows.

Every model keeps its data in a real SQLite database under the run's location, so each storage
call is a real ``sqlite3`` call the harness intercepts and grants; ``executed = "model"``. Where a
system asks an LLM to decide between an old and a new fact, the decision comes from a
:class:`toki.judges.FixtureJudge` through the model's own decision code, so N1 (the same conflict
re-judged differently) is measured, not assumed.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import sqlite3
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from toki.engines.engine import Detector
from toki.judges.fixture import FixtureJudge
from toki.model import Fact

READ_ON = "2026-12-01"


def connect(path: Path | str) -> sqlite3.Connection:
    """A connection in autocommit mode: each model issues BEGIN/COMMIT where its system does.

    Opened during a trial, ``sqlite3.connect`` is the harness's (busy timeout 0, every statement a
    granted step); opened outside one (the state read-out) it is the plain driver.
    """
    return sqlite3.connect(str(path), isolation_level=None)


def stable_id(prefix: str, *parts: str) -> str:
    """A deterministic stand-in for ``uuid4()``: unique per (agent, call number, content)."""
    return prefix + hashlib.sha256("|".join(parts).encode()).hexdigest()[:8]


def jid(text: str) -> str:
    """The judge's key for a fact: its text (ids are random or reused in these systems)."""
    return "fx-" + hashlib.sha256(text.encode()).hexdigest()[:10]


def judge_fact(text: str, day: str = "2026-01-01", subject: str = "Alice") -> Fact:
    return Fact(jid(text), subject, "model:fact", text, datetime.fromisoformat(day))


def agent_seed(agent: str, seed: int = 0) -> int:
    return seed * 7919 + zlib.crc32(agent.encode())


JudgeFactory = Callable[[str], Any]


def greedy_judge(pairs: Iterable[tuple[str, str]], model: str, temperature: float = 0.0) -> JudgeFactory:
    """The new fact always wins a listed contradiction (p = 0 that the stored fact, shown first, stands).

    p = 0 stays 0 at every temperature, so a model may keep its system's real temperature (mem0's
    0.1) and still decide deterministically."""
    table = {(jid(a), jid(b)): 0.0 for a, b in pairs}

    def make(agent: str) -> FixtureJudge:
        return FixtureJudge(table, seed=agent_seed(agent), temperature=temperature, default=1.0, model=model)
    return make


def wobbling_judge(pairs: Iterable[tuple[str, str]], model: str, p: float = 0.5, seed: int = 0,
                   temperature: float = 1.0) -> JudgeFactory:
    """A judge that re-judges the same contradiction differently (temperature 1, p = 0.5 by default)."""
    table = {(jid(a), jid(b)): p for a, b in pairs}

    def make(agent: str) -> FixtureJudge:
        return FixtureJudge(table, seed=agent_seed(agent, seed), temperature=temperature, default=1.0, model=model)
    return make


def ask_judge(judge, stored: str, new: str, votes: list[dict], stored_day: str = "2026-01-01",
              new_day: str = "2026-01-01") -> bool:
    """One judge call over (stored, new), shown in that order; True when the new fact wins.

    The vote is appended to ``votes`` with its read set and θ: these systems keep no judge log, so
    the caller's record is the only trace of the decision."""
    vote = judge.vote((judge_fact(stored, stored_day), judge_fact(new, new_day)))
    new_wins = vote.index == 1
    votes.append({"stored": stored, "new": new, "new_wins": new_wins,
                  "read_set": sorted([jid(stored), jid(new)]), "theta": judge.theta()})
    return new_wins


_TOKEN = re.compile(r"[a-z0-9]+")


def embed(text: str, dim: int = 32) -> list[float]:
    """Bag of words hashed into ``dim`` buckets, unit length: shared words give cosine overlap."""
    v = [0.0] * dim
    for tok in _TOKEN.findall(text.lower()):
        v[int.from_bytes(hashlib.sha256(tok.encode()).digest()[:4], "big") % dim] += 1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [round(x / n, 4) for x in v]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


# -- detectors shared by the models ---------------------------------------------------------------

def rejudged() -> Detector:
    """N1: two judge calls on the same read set disagreed (no judge log pins the first answer).

    A design property: with a temperature > 0 judge it happens in serial runs too."""
    def check(state, errors, observed):
        seen: dict[tuple, set] = {}
        for agent, res in sorted((observed or {}).items()):
            for v in (res or {}).get("votes", []) if isinstance(res, dict) else []:
                seen.setdefault((tuple(v["read_set"]), v["stored"], v["new"]), set()).add((agent, v["new_wins"]))
        out = []
        for (_, stored, new), answers in sorted(seen.items()):
            if len({w for _, w in answers}) > 1:
                who = ", ".join(f"{a}: {'new' if w else 'stored'} wins" for a, w in sorted(answers))
                out.append(f"the contradiction ({stored!r}, {new!r}) was judged twice with different answers "
                           f"({who}); no judge log keyed by the read set pins the first answer")
        return out
    return Detector("N1", check, observes=True, always=True)


# -- the races users reported (docs/tables/verdicts.md), attached to the model each fits ---------------------------

@dataclass(frozen=True)
class ReportedRace:
    """One reported race and the model scenario that replays it.

    ``expect`` says how a reproduction shows: "race" (an outcome no serial order produces, named
    ``anomaly``), "clean-abort" (the engine refuses one writer with ``error``; the outcome is that of
    a serial run), "design" (the anomaly in serial runs too), "judge-failure" (a judge answer loses
    the fact in a serial run: not an isolation failure), "not-applicable" (``note`` says why)."""

    system: str
    report: str
    engine: str | None
    scenario: str | None
    expect: str
    anomaly: str | None = None
    error: str | None = None
    note: str = ""


REPORTED: tuple[ReportedRace, ...] = (
    ReportedRace("Letta", "two writers to one block get a conflict error from its version check (P4 detected, "
                 "not lost)", "letta", "two-writers-one-block", "clean-abort", error="BlockVersionConflict",
                 note="also found: when only the LLM steps overlap, the version check passes and one edit is lost "
                      "(anomaly lost-update)"),
    ReportedRace("Letta", "a shared block change is not seen until the agent's next step (stale read)", "letta",
                 "shared-block-stale-read", "race", "N2"),
    ReportedRace("LangMem and others", "a blind put overwrites a concurrent writer's record and destroys the loser "
                 "(P4 and N3)", "mem0-v2", "concurrent-update", "race", "lost-update",
                 note="LangMem is not modelled; mem0 1.0.x's Qdrant upsert is the same blind put (N3: scenario "
                      "update-overwrites, by design)"),
    ReportedRace("LangMem and others", "two concurrent \"remember\" calls both replace one memory, leaving two latest "
                 "versions (A5B)", "mirix", "concurrent-update", "race", "double-supersede",
                 note="MIRIX's update is delete-then-insert, the shape the report describes"),
    ReportedRace("LangMem and others", "a long LLM consolidation writes back over memories added meanwhile (P4)",
                 "letta", "consolidation-overwrites", "race", "lost-update",
                 note="on Letta's memory_rethink (a sleep-time agent's consolidation)"),
    ReportedRace("LangMem and others", "order by ingestion instead of event time lets an older fact replace a newer "
                 "one", "mem0-v2", "ingestion-order", "design", "ingestion-order",
                 note="mem0 1.0.x keeps no event time: the later arrival wins in a serial run"),
    ReportedRace("mem0", "two concurrent add of the same text both pass the duplicate check on a stale snapshot and "
                 "both insert", "mem0-v2", "duplicate-add", "race", "duplicate-insert",
                 note="the 1.0.x model; the real mem0 2.x engine replays it too"),
    ReportedRace("mem0", "a list of linked memory ids read, changed and written back without a lock loses one of two "
                 "concurrent additions (P4)", None, None, "not-applicable",
                 note="mem0 1.0.x's vector path keeps no linked-id list (entity linking is mem0 2.x: the real "
                      "engine's scenarios)"),
    ReportedRace("mem0", "\"I love Chinese food\" then \"I hate Chinese food\" leaves an empty store (the judge "
                 "deleted and added nothing: no audit, N3)", "mem0-v2", "love-then-hate", "judge-failure",
                 "judge-failure"),
    ReportedRace("mem0", "the ADD-only pipeline keeps both contradicting facts current (by design)", None, None,
                 "not-applicable", note="mem0 1.0.x answers UPDATE/DELETE; ADD-only is mem0 2.x (the real engine)"),
    ReportedRace("(a testbed)", "\"concurrent writes drop facts\" was the judge returning nothing because of a prompt "
                 "bug", "mem0-v2", "love-then-hate", "judge-failure", "judge-failure",
                 note="the same classification: the fact is lost in a serial run, by the judge's answer"),
)


def replay_reported(race: ReportedRace, *, budget: int = 30, seed: int = 0) -> dict:
    """Run one reported race on its model and classify it (reproduced, not reproduced, judge failure, n/a)."""
    from toki.engines.controller import TapeChooser
    from toki.engines.registry import load_engine
    from toki.engines.search import search
    from toki.engines.trial import TrialRunner

    row = {"system": race.system, "report": race.report, "engine": race.engine, "scenario": race.scenario,
           "expect": race.expect, "budget": budget, "note": race.note}
    if race.engine is None:
        return {**row, "classification": "not applicable", "evidence": race.note}
    engine = load_engine(race.engine)
    with TrialRunner(engine, race.scenario) as runner:
        runner.serial_outcomes()
        design = [f for _, _, out in runner.serial_runs for f in runner.by_design(out)
                  if f.split(":", 1)[0] == race.anomaly]
        if race.expect in ("design", "judge-failure"):
            raced = search(runner, budget=budget, seed=seed, shrink=False)
            cls = ("judge failure, not a race" if race.expect == "judge-failure" else "reproduced (by design)") \
                if design else "not reproduced"
            return {**row, "classification": cls, "evidence": design[0] if design else None,
                    "race_found": raced.admits}
        if race.expect == "clean-abort":
            rng = random.Random(seed)
            for _ in range(budget):
                tape = [rng.randrange(2) for _ in range(200)]
                res = runner.trial(TapeChooser(tape))
                errs = sorted(res.outcome.errors.values())
                if race.error in errs and res.serializable:
                    return {**row, "classification": "reproduced (clean abort)",
                            "evidence": f"{race.error} for one writer; the outcome equals a serial run of the other"}
            return {**row, "classification": "not reproduced", "evidence": None}
        res = search(runner, budget=budget, seed=seed,
                     want=lambda r: any(a.split(":", 1)[0] == race.anomaly for a in r.anomalies))
        if res.admits:
            return {**row, "classification": "reproduced",
                    "evidence": next(a for a in res.found.anomalies if a.split(":", 1)[0] == race.anomaly),
                    "grants": list(res.found.trace.grants)}
        return {**row, "classification": "not reproduced", "evidence": None}
