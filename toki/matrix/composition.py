"""The composition grid (docs/design.md#the-four-operators, docs/tables/index.md): operator pipelines executed on a real database.

A pipeline is a sequence of 1..5 operators (lww ⊕t, evi ⊕p, await ⊕?, rule ⊕c): 4 + 16 + 64 +
256 + 1024 = 1,364 pipelines, each run at the six matrix levels (8,184 cells). Its joined guard
is the join of its operators' preconditions (:func:`toki.levels.pipeline_guard`).

One trial of a cell is ONE schedule, executed by the runner at the cell's level: the stages'
write-path races one after the other, each on its own (subject, predicate) slot and its own
sessions (``1.T1``, ``1.T2``, ``2.T1``...). Each operator's stage is the race its write path is
exposed to when the level is below the operator's precondition, in its minimal witness order
(the paper's semantics, as ``toki matrix --mode witness``):

* ⊕t (lww, needs RC): two supersedes write a pair of rows (P0, dirty write; guard RC);
* ⊕p (evi, needs SI): two evidence revisions read a confidence and write it back plus their
  evidence (P4, lost update; guard SI). The paper's operator table says ⊕p is exposed to A5B, whose guard
  is SR: that cannot be, since ⊕p's precondition is SI and PostgreSQL's SI admits A5B (the
  54-cell matrix measures it). The race whose guard equals ⊕p's precondition is P4;
* ⊕? (await, needs RC+cb): the human's confirmation is delivered (session ``CB``), and the agent
  resolves two contradicting current values. At a +cb level the schedule holds the callback
  read between the candidate read and the write, and the agent writes the confirmed winner;
  at a level without it, the agent writes its provisional pick, which in the witness draw is
  the other one (as N1's trial uses the draw in which two judge calls disagree): the callback
  boundary is crossed;
* ⊕c (rule, needs SR on the policy table): two agents find no active policy for a pair and each
  inserts one (P3, predicate-write form; guard SR).

A stage admits when its detector (:mod:`toki.matrix.workloads`) fires on what happened, and a
trial admits when any stage does. A stage whose transaction the database aborted counts as not
admitted (its SQLSTATE is counted), as in the matrix.

Noise (``noise = ε``): the published grid used a per-stage noise ε = 0.02 (docs/tables/index.md) without
saying what it was. toki injects the one docs/design.md#judges describes: with probability ε (a seeded draw
per trial and stage, independent of the stage's data) the stage's agent asks a
nondeterministic judge twice without a keyed log, and the two calls disagree: two committed
votes under one judge key, an N1 inconsistency. It is executed: each call's vote is inserted
into ``judge_log`` and committed by a judge session between the agent's candidate read and
its write (docs/design.md#the-write-path: the vote is recorded before the operator commits), so it stands whether
or not the agent's own transaction later aborts.
A pipeline of n stages then admits at or above its guard with probability 1 - (1 - ε)^n
(:func:`noise_expectation` computes the grid's mean from the plan; nothing is fitted).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import SimpleNamespace

from toki.errors import ConfigError
from toki.levels import MATRIX_LEVELS, PRECONDITION, Level, pipeline_guard
from toki.matrix import memory
from toki.matrix.cells import error_labels
from toki.matrix.cells import RESET_TABLES, schedule_step, worker_bench
from toki.matrix.workloads import (
    B,
    C,
    Trial,
    current_facts,
    draw_slot,
    insert_fact,
    reading_step,
    p0,
    p3,
    p4,
)
from toki.model import SENTINEL
from toki.sched.schedule import Schedule

OPERATORS = tuple(PRECONDITION)  # lww, evi, await, rule
SYMBOL = {"lww": "⊕t", "evi": "⊕p", "await": "⊕?", "rule": "⊕c"}
STAGE_RACE = {"lww": "P0", "evi": "P4", "await": "callback boundary", "rule": "P3"}
MAX_LENGTH = 5
PUBLISHED = {"at_or_above": {"cells": 2219, "rate": 0.0904}, "below": {"cells": 5965, "rate": 1.0},
             "trials": 50, "noise": 0.02, "pipelines": 1364, "source": "docs/tables/index.md (the paper's composition grid)"}


def pipelines(max_length: int = MAX_LENGTH) -> list[tuple[str, ...]]:
    """Every pipeline of length 1..max_length, shortest first, in itertools.product order."""
    return [p for n in range(1, max_length + 1) for p in itertools.product(OPERATORS, repeat=n)]


def pipeline_name(pipe: Iterable[str]) -> str:
    return ">".join(pipe)


def parse_pipeline(text: str) -> tuple[str, ...]:
    ops = tuple(o.strip() for o in text.split(">") if o.strip())
    pipeline_guard(ops)  # rejects unknown operators with a fix
    return ops


def trial_rng(seed: int, *parts: object) -> random.Random:
    return random.Random(":".join(map(str, (seed, "composition", *parts))))


# -- stages ---------------------------------------------------------------------------------------

def await_stage(rng: random.Random, *, callback: bool) -> Trial:
    """⊕?: resolve two contradicting current values by an external confirmation."""
    s, p, objs = draw_slot(rng, "await")
    f, g = f"f-{rng.randrange(10**9)}", f"g-{rng.randrange(10**9)}"
    ordered = sorted((f, g))  # ⊕? picks by index over the canonically ordered set (docs/design.md#the-four-operators)
    objects = {f: objs[0], g: objs[1]}
    key = f"await::{'|'.join(ordered)}"
    chosen = rng.randrange(2)
    provisional = 1 - chosen  # the witness draw: the agent's own pick is not the human's

    def setup(conn):
        insert_fact(conn, f, s, p, objs[0], 0.5, "await")
        insert_fact(conn, g, s, p, objs[1], 0.5, "await")

    def deliver(conn, ctx):
        conn.execute("insert into callback_log (request_hash, read_set_hash, chosen_index, status, delivered_at)"
                     " values (%s, %s, %s, 'delivered', clock_timestamp())", (key, key, chosen))

    def read_callback(conn, ctx):
        row = conn.execute("select chosen_index from callback_log where request_hash = %s and status = 'delivered'",
                           (key,)).fetchone()
        ctx["callback"] = None if row is None else int(row[0])
        return [[ctx["callback"]]]

    def resolve(conn, ctx):
        vote = ctx.get("callback")
        if vote is None:
            vote = provisional  # no callback in this schedule: act without the confirmation
        loser = ordered[1 - vote]
        conn.execute("update agent_memory set system_time_end = clock_timestamp()::timestamp"
                     " where fact_id = %s and system_time_end = %s", (loser, SENTINEL))

    agent = [(B, B), ("r1[candidates]", reading_step("seen", lambda conn: current_facts(conn, s, p)))]
    if callback:
        agent.append(("r1[callback]", read_callback))
    agent += [("w1[resolve]", resolve), (C, C)]
    programs = {"CB": [(B, B), ("deliver confirmation", deliver), (C, C)], "T1": agent}
    witness = [("CB", i) for i in range(3)] + [("T1", i) for i in range(len(agent))]

    def detect(result, conn):
        if result.sessions.get("T1") != "committed":
            return False
        row = conn.execute("select chosen_index from callback_log where request_hash = %s", (key,)).fetchone()
        if row is None:
            return False
        confirmed = objects[ordered[int(row[0])]]
        current = [r[0] for r in current_facts(conn, s, p)]
        return current != [confirmed]

    return Trial("await", programs, witness, detect, setup, ("T1", 1), cb_key=key, data={"chosen": chosen})


def stage_trial(op: str, rng: random.Random, level: Level) -> Trial:
    if op == "lww":
        return p0(rng)
    if op == "evi":
        return p4(rng)
    if op == "rule":
        return p3(rng)
    if op == "await":
        return await_stage(rng, callback=level.callback)
    raise ConfigError(f"unknown operator {op!r}", fix="use lww, evi, await or rule")


def add_noise(trial: Trial, rng: random.Random) -> str:
    """Two disagreeing judge calls without a keyed log, between the stage's candidate read and
    its write; returns the judge key. Each call's vote is committed in its own transaction by
    session ``J`` (docs/design.md#the-write-path step 5: the vote is recorded before the operator commits), so the
    noise stands whether or not the operator's own transaction commits."""
    key = f"noise::{rng.randrange(10**12)}"
    vote = rng.randrange(2)
    agent, after = "T1", 1  # after the agent's first step past begin

    def ask(v):
        def step(conn, ctx):
            conn.execute("insert into judge_log (judge_key, read_set, theta, vote, session) values (%s, %s, %s, %s, %s)",
                         (key, "noise", "theta", v, "noise"))
            return [[v]]
        return step

    trial.programs["J"] = [(B, B), ("j(R,θ)", ask(vote)), (C, C),
                           (B, B), ("j(R,θ) again, unlogged", ask(1 - vote)), (C, C)]
    witness = []
    for s, i in trial.witness:
        witness.append((s, i))
        if (s, i) == (agent, after):
            witness += [("J", k) for k in range(6)]
    trial.witness = witness
    return key


# -- one trial: one schedule ----------------------------------------------------------------------

@dataclass
class Stage:
    op: str
    trial: Trial
    prefix: str
    noise_key: str | None


def build(pipe: tuple[str, ...], level: Level, seed: int, t: int, noise: float) -> tuple[Schedule, list[Stage]]:

    rng = trial_rng(seed, pipeline_name(pipe), level.name, t)
    # The noise draws have their own rng, so a run with noise executes the same stage data.
    noise_rng = trial_rng(seed, "noise", pipeline_name(pipe), level.name, t)
    stages, steps, sessions = [], [], []
    for k, op in enumerate(pipe):
        trial = stage_trial(op, rng, level)
        key = add_noise(trial, noise_rng) if noise > 0 and noise_rng.random() < noise else None
        prefix = f"{k + 1}."
        stages.append(Stage(op, trial, prefix, key))
        sessions += [_session(prefix, s) for s in trial.programs if _session(prefix, s) not in sessions]
        for s, i in trial.witness:
            label, body = trial.programs[s][i]
            steps.append(schedule_step(_session(prefix, s), label, body))
    return Schedule(name=f"pipeline-{pipeline_name(pipe)}", steps=steps, on_blocked="defer", store=True,
                    judge_log_form="append", sessions_declared=tuple(sessions)), stages


# The agents' sessions are per stage (their detectors read what each saw and whether it
# committed). The callback deliverer and the noise's judge keep no scratch space and nobody asks
# whether they committed, so one of each serves every stage: a lane then holds at most
# 2 x 5 + 2 connections for its sessions instead of 4 x 5 (a server's max_connections is shared
# by every worker's lane).
_SHARED = ("CB", "J")


def _session(prefix: str, name: str) -> str:
    return name if name in _SHARED else prefix + name


def _view(result, prefix: str):
    """The part of a run one stage's detector may see, under the stage's own session names."""
    cut = len(prefix)
    return SimpleNamespace(
        sessions={s[cut:]: v for s, v in result.sessions.items() if s.startswith(prefix)},
        contexts={s[cut:]: v for s, v in result.contexts.items() if s.startswith(prefix)},
        steps=[st for st in result.steps if st.session.startswith(prefix)])


def run_trial(bench, pipe: tuple[str, ...], level: Level, seed: int, t: int, noise: float) -> dict:

    lane = bench.lane("append")
    schedule, stages = build(pipe, level, seed, t, noise)
    if hasattr(lane, "reset_store"):
        lane.reset_store()
    else:
        lane.admin.execute(RESET_TABLES)
    for st in stages:
        st.trial.setup(lane.admin)
    result = bench.runner.run(schedule, level, lane=lane, check_expect=False)
    admitted, aborted, states, noisy, by_isolation = [], False, [], 0, False
    for st in stages:
        view = _view(result, st.prefix)
        errs = list(error_labels(view.steps)[0])
        fired = False
        if errs:
            aborted = True
            states += errs
        elif st.trial.detect(view, lane.admin):
            fired = by_isolation = True
        if st.noise_key is not None:
            noisy += 1
            votes = lane.admin.execute("select judge_key, vote from judge_log where judge_key = %s",
                                       (st.noise_key,)).fetchall()
            fired = fired or memory.conflicting_votes(votes)
        admitted.append(fired)
    return {"admitted": any(admitted), "aborted": aborted, "sqlstates": states, "noisy_stages": noisy,
            "stages_admitted": sum(admitted), "by_isolation": by_isolation}


def run_cell(bench, pipe: tuple[str, ...], level: Level, trials: int, seed: int, noise: float,
             on_trial: Callable[[], None] | None = None) -> dict:
    admitted = aborted = noisy = isolation = 0
    sqlstates: Counter = Counter()
    for t in range(trials):
        r = run_trial(bench, pipe, level, seed, t, noise)
        admitted += r["admitted"]
        isolation += r["by_isolation"]
        aborted += r["aborted"]
        noisy += r["noisy_stages"]
        sqlstates.update(r["sqlstates"])
        if on_trial:
            on_trial()
    guard = pipeline_guard(pipe)
    return {"pipeline": pipeline_name(pipe), "length": len(pipe), "level": level.name, "guard": guard.name,
            "at_or_above": level.at_least(guard), "trials": trials, "admitted": admitted, "aborted": aborted,
            "noisy_stages": noisy, "sqlstates": dict(sorted(sqlstates.items())),
            "rate": round(admitted / trials, 4) if trials else 0.0,
            # the same trials read without the noise's judge calls: the stages' own detectors only
            # (the noise runs in its own sessions and rows, and draws from its own rng)
            "admitted_by_isolation": isolation}


# -- plan, shards, summary --------------------------------------------------------------------------

def plan(*, pipelines_n: int | None, seed: int, max_length: int = MAX_LENGTH,
         only: Iterable[str] | None = None) -> list[tuple[str, ...]]:
    """All pipelines, or a seeded sample of ``pipelines_n`` of them (kept in plan order)."""
    if not 1 <= max_length <= MAX_LENGTH:
        raise ConfigError(f"--max-length {max_length} must be 1..{MAX_LENGTH}", fix="pass --max-length 5")
    every = pipelines(max_length)
    if only:
        chosen = [parse_pipeline(p) for p in only]
        return chosen
    if pipelines_n is None:
        return every
    if not 1 <= pipelines_n <= len(every):
        raise ConfigError(f"--pipelines {pipelines_n} must be between 1 and {len(every)}",
                          fix=f"pass --pipelines 40 for a quick look, or leave it out for all {len(every)}")
    pick = set(random.Random(f"{seed}:composition:sample").sample(range(len(every)), pipelines_n))
    return [p for i, p in enumerate(every) if i in pick]


def shard(pipe_names: list[str], trials: int, seed: int, noise: float, dsn: str | None,
          step_limit_s: float) -> list[dict]:
    """One shard (a few pipelines, all six levels each) on this process's lane."""

    bench = worker_bench(dsn, step_limit_s, "composition")
    return [run_cell(bench, parse_pipeline(p), lv, trials, seed, noise) for p in pipe_names for lv in MATRIX_LEVELS]


def noise_expectation(pipes: Iterable[tuple[str, ...]], noise: float) -> dict:
    """What per-stage noise alone predicts: the mean over at-or-above cells of 1 - (1 - ε)^n."""
    at = [1 - (1 - noise) ** len(p) for p in pipes for lv in MATRIX_LEVELS if lv.at_least(pipeline_guard(p))]
    return {"at_or_above_rate": round(sum(at) / len(at), 4) if at else None, "below_rate": 1.0,
            "formula": "mean over cells at or above the guard of 1 - (1 - ε)^length"}


def summarise(cells: list[dict], *, trials: int, noise: float, seed: int, pipes: list[tuple[str, ...]]) -> dict:
    def part(which: list[dict]) -> dict:
        n = sum(c["trials"] for c in which)
        adm = sum(c["admitted"] for c in which)
        iso = sum(c["admitted_by_isolation"] for c in which)
        return {"cells": len(which), "rate": round(adm / n, 4) if n else None, "trials": n, "admitted": adm,
                "rate_by_isolation": round(iso / n, 4) if n else None,
                "aborted": sum(c["aborted"] for c in which),
                "cells_rate_0": sum(1 for c in which if c["rate"] == 0.0),
                "cells_rate_1": sum(1 for c in which if c["rate"] == 1.0)}

    at = [c for c in cells if c["at_or_above"]]
    below = [c for c in cells if not c["at_or_above"]]
    by_length = {}
    for n in sorted({c["length"] for c in cells}):
        a = [c for c in at if c["length"] == n]
        if a:
            by_length[str(n)] = part(a)["rate"]
    return {"cells": cells, "at_or_above": part(at), "below": part(below), "noise": noise, "trials": trials,
            "seed": seed, "pipelines": len(pipes), "levels": [lv.name for lv in MATRIX_LEVELS],
            "stages": {op: {"symbol": SYMBOL[op], "precondition": PRECONDITION[op].name, "race": STAGE_RACE[op]}
                       for op in OPERATORS},
            "at_or_above_rate_by_length": by_length,
            "noise_expectation": noise_expectation(pipes, noise),
            "published": PUBLISHED,
            "full_grid": len(pipes) == len(pipelines())}


def level_names() -> list[str]:
    return [lv.name for lv in MATRIX_LEVELS]


def check_noise(noise: float) -> float:
    if not 0.0 <= noise < 1.0:  # also rejects NaN
        raise ConfigError(f"--noise {noise} must be in [0, 1)", fix="pass --noise 0.02 (the published ε) or 0")
    return noise


__all__ = [
    "OPERATORS",
    "PUBLISHED",
    "noise_expectation",
    "pipelines",
    "plan",
    "run_cell",
    "shard",
    "summarise",
]
