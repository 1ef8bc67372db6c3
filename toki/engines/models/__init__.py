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
import re
import sqlite3
import zlib
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from toki.harness.engine import Detector
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
