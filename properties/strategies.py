"""Hypothesis strategies for toki: interleavings, periods and Allen relations, facts and
contradicting pairs, operators, levels, and judge fixtures.

Every strategy shrinks toward the simple end: interleavings toward fewer context switches
(a serial execution is the simplest), periods toward early short ones, judge fixtures toward
deterministic, unbiased judges at temperature 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hypothesis import strategies as st

from toki.errors import ConfigError
from toki.judges.base import consistency, disagreement, temper
from toki.levels import MATRIX_LEVELS, PRECONDITION, Level
from toki.model import SENTINEL, Allen, Fact, Period
from toki.operators import OPERATORS

T0 = datetime(2026, 1, 1)
Order = list[tuple[str, int]]


# -- interleavings --------------------------------------------------------------------------

def _sizes(programs: Mapping[str, int | Sequence]) -> dict[str, int]:
    if not isinstance(programs, Mapping) or not programs:
        raise ConfigError("interleavings() needs a non-empty mapping session -> program (or its length)",
                          fix='pass {"T1": [...steps...], "T2": [...]} or {"T1": 4, "T2": 4}')
    sizes = {}
    for s, p in programs.items():
        n = p if isinstance(p, int) else len(p)
        if n < 0:
            raise ConfigError(f"program {s!r} has negative length {n}", fix="give a length >= 0")
        sizes[str(s)] = n
    return sizes


def context_switches(order: Sequence[tuple[str, int]]) -> int:
    """How often consecutive steps of an interleaving belong to different sessions."""
    return sum(1 for a, b in zip(order, order[1:]) if a[0] != b[0])


def interleavings(programs: Mapping[str, int | Sequence],
                  after: Mapping[tuple[str, int], Sequence[tuple[str, int]]] | None = None) -> st.SearchStrategy[Order]:
    """Merges of the programs that keep each program's order, as ``[(session, step index), ...]``.

    At every step the strategy draws whether to switch session (shrinks to "no") and to which
    one (shrinks to the first), so the shrinker moves toward fewer context switches and a serial
    execution is the simplest example. ``after`` adds cross-program constraints: step
    ``(s, i)`` may only run once all of ``after[(s, i)]`` have (for example: the agent reads the
    callback only after the confirmer committed it). Constraints must not form a cycle.
    """
    sizes = _sizes(programs)
    deps = {tuple(k): [tuple(d) for d in v] for k, v in (after or {}).items()}
    for (s, i), ds in deps.items():
        for d in ds:
            if d[0] not in sizes or not 0 <= d[1] < sizes[d[0]] or s not in sizes or not 0 <= i < sizes[s]:
                raise ConfigError(f"constraint {(s, i)} after {d} names a step that no program has",
                                  fix="use (session, index) pairs of the programs given")
    names = list(sizes)

    @st.composite
    def draw_order(draw) -> Order:
        pos = dict.fromkeys(names, 0)
        done: set[tuple[str, int]] = set()
        order: Order = []
        total = sum(sizes.values())

        def ready(s: str) -> bool:
            step = (s, pos[s])
            return pos[s] < sizes[s] and all(d in done for d in deps.get(step, ()))

        live = [s for s in names if ready(s)]
        cur = live[draw(st.integers(0, len(live) - 1))] if live else None
        while len(order) < total:
            live = [s for s in names if ready(s)]
            if not live:
                raise ConfigError("interleaving constraints form a cycle", fix="check the after= mapping")
            if cur not in live:
                cur = live[0]  # forced switch: not a choice, so it costs the shrinker nothing
            elif len(live) > 1 and draw(st.booleans()):
                others = [s for s in live if s != cur]
                cur = others[draw(st.integers(0, len(others) - 1))]
            order.append((cur, pos[cur]))
            done.add((cur, pos[cur]))
            pos[cur] += 1
        return order

    return draw_order()


# -- periods, Allen relations, facts --------------------------------------------------------

def _shape(rel: Allen, p: Sequence[datetime]) -> tuple[Period, Period]:
    """Two periods in relation ``rel`` built on four increasing instants p[0] < ... < p[3]."""
    p0, p1, p2, p3 = p
    base = {
        Allen.BEFORE: ((p0, p1), (p2, p3)), Allen.MEETS: ((p0, p1), (p1, p2)),
        Allen.OVERLAPS: ((p0, p2), (p1, p3)), Allen.STARTS: ((p0, p1), (p0, p2)),
        Allen.DURING: ((p1, p2), (p0, p3)), Allen.FINISHES: ((p1, p3), (p0, p3)),
        Allen.EQUALS: ((p0, p1), (p0, p1)),
    }
    if rel in base:
        a, b = base[rel]
    else:
        b, a = base[rel.inverse]
    return Period(*a), Period(*b)


@st.composite
def _instants(draw, open_ended: bool = True) -> list[datetime]:
    gaps = [draw(st.integers(1, 400)) for _ in range(4)]
    pts, t = [], T0
    for g in gaps:
        t = t + timedelta(days=g - 1 if not pts else g)
        pts.append(t)
    if open_ended and draw(st.booleans()):
        pts[3] = SENTINEL  # the open upper bound: a claim still believed
    return pts


def period_pairs(relation: Allen | None = None, *, open_ended: bool = True) -> st.SearchStrategy[tuple[Allen, Period, Period]]:
    """``(relation, a, b)`` with ``a.allen(b) == relation``; every one of Allen's 13 relations
    when ``relation`` is None (closed-open periods, sentinel as the open end)."""
    rels = st.sampled_from(list(Allen)) if relation is None else st.just(Allen(relation))
    return st.tuples(rels, _instants(open_ended)).map(lambda t: (t[0], *_shape(t[0], t[1])))


def periods(*, open_ended: bool = True) -> st.SearchStrategy[Period]:
    """One closed-open period; with ``open_ended`` sometimes up to the sentinel."""
    return _instants(open_ended).flatmap(lambda p: st.sampled_from([Period(p[0], p[1]), Period(p[0], p[3])]))


_ids = st.integers(0, 10**6)


def facts(*, subject: str | st.SearchStrategy[str] | None = None, predicate: str | None = None,
          objects: Sequence[str] = ("penicillin", "amoxicillin", "cephalexin"),
          fact_id: str | None = None) -> st.SearchStrategy[Fact]:
    """One claim; subjects, predicates and objects come from small pools so slots collide."""
    subj = st.sampled_from(["alice", "bob"]) if subject is None else (
        subject if isinstance(subject, st.SearchStrategy) else st.just(subject))
    pred = st.sampled_from(["medication", "contact"]) if predicate is None else st.just(predicate)
    return st.builds(
        lambda i, s, p, o, per, c: Fact(fact_id or f"f{i}", s, p, o, per.start, per.end, confidence=c),
        _ids, subj, pred, st.sampled_from(list(objects)), periods(),
        st.floats(0.0, 1.0, allow_nan=False).map(lambda c: round(c, 3)))


@st.composite
def fact_pairs(draw, relation: Allen | None = None, *, same_object: bool = False,
               contradicting: bool | None = None) -> tuple[Allen, Fact, Fact]:
    """Two facts of one slot whose valid periods stand in ``relation`` (any when None).

    ``contradicting=True`` keeps only the 9 relations that share an instant and gives different
    objects (f1 # f2); ``same_object=True`` gives duplicates-or-disjoint same-object pairs.
    """
    if contradicting:
        rel = relation or draw(st.sampled_from([r for r in Allen if r.shares_instant]))
    else:
        rel = relation or draw(st.sampled_from(list(Allen)))
    _, a, b = draw(period_pairs(rel))
    objs = ["penicillin", "amoxicillin"]
    o2 = objs[0] if same_object else objs[1]
    c1, c2 = draw(st.floats(0, 1).map(lambda c: round(c, 3))), draw(st.floats(0, 1).map(lambda c: round(c, 3)))
    f1 = Fact("f1", "alice", "medication", objs[0], a.start, a.end, confidence=c1)
    f2 = Fact("f2", "alice", "medication", o2, b.start, b.end, confidence=c2)
    return rel, f1, f2


def contradicting_pairs(relation: Allen | None = None) -> st.SearchStrategy[tuple[Allen, Fact, Fact]]:
    """``(relation, f1, f2)`` with f1 # f2, over all 9 relations that share an instant."""
    if relation is not None and not Allen(relation).shares_instant:
        raise ConfigError(f"facts in relation {Allen(relation).value!r} share no instant, so they never contradict",
                          fix="use one of the 9 relations other than before, meets, met-by, after")
    return fact_pairs(relation, contradicting=True)


def operators() -> st.SearchStrategy[str]:
    return st.sampled_from(OPERATORS)


def levels(*, callback: bool | None = None, at_least: Level | None = None,
           below: Level | None = None) -> st.SearchStrategy[Level]:
    """The paper's six levels (RC, RC+cb, SI, SI+cb, SR, SR+cb), optionally filtered."""
    pool = [lv for lv in MATRIX_LEVELS if callback is None or lv.callback == callback]
    if at_least is not None:
        pool = [lv for lv in pool if lv.at_least(at_least)]
    if below is not None:
        pool = [lv for lv in pool if not lv.at_least(below)]
    if not pool:
        raise ConfigError("no level satisfies the filters", fix="relax callback=, at_least= or below=")
    return st.sampled_from(pool)


def operator_levels() -> st.SearchStrategy[tuple[str, Level, bool]]:
    """``(operator, level, at_or_above_precondition)``."""
    return st.tuples(operators(), levels()).map(lambda t: (t[0], t[1], t[1].at_least(PRECONDITION[t[0]])))


# -- judge fixtures -------------------------------------------------------------------------

@dataclass(frozen=True)
class JudgeFixture:
    """A judge written down as data: per pair and per presentation order, P(position A wins).

    ``table[(a, b)]`` is the probability at temperature 1 that the record shown first wins when
    ``a`` is shown first. ``bias`` is the position bias used to build it (P(A) - P(B) for a
    pair the judge is indifferent about), ``temperature`` the decoding temperature. Make a
    runnable judge with :meth:`judge` (a :class:`toki.judges.FixtureJudge`).
    """

    table: Mapping[tuple[str, str], float]
    temperature: float = 1.0
    bias: float = 0.0
    name: str = "fixture"
    stats: dict = field(default_factory=dict, compare=False)

    def judge(self, seed: int = 0, temperature: float | None = None):
        from toki.judges.fixture import FixtureJudge

        return FixtureJudge(dict(self.table), seed=seed, model=self.name,
                            temperature=self.temperature if temperature is None else temperature)

    def pairs(self) -> list[tuple[str, str]]:
        return sorted({tuple(sorted(k)) for k in self.table})

    def cells(self) -> list[float]:
        return list(self.table.values())


def _clip(p: float) -> float:
    return min(1.0, max(0.0, p))


@st.composite
def judge_fixtures(draw, *, pairs: int | None = None, ids: Sequence[tuple[str, str]] | None = None,
                   temperatures: Sequence[float] = (1.0, 0.0, 0.2, 0.7, 1.5)) -> JudgeFixture:
    """Random judges: per pair a preference for one record, a position bias, a temperature.

    For each pair (a, b) the judge prefers ``a`` with probability ``q``; showing a record
    first adds the bias ``beta``: P(A | a first) = clip(q + beta), P(A | b first) =
    clip(1 - q + beta). Shrinks toward a deterministic (q in {0, 1}), unbiased judge at
    temperature 1.
    """
    if ids is None:
        n = pairs if pairs is not None else draw(st.integers(1, 6))
        ids = [(f"f{2 * i:03d}", f"f{2 * i + 1:03d}") for i in range(n)]
    beta = draw(st.sampled_from([0.0, 0.05, -0.05, 0.1, -0.1, 0.2, -0.2, 0.35, -0.35]))
    temp = draw(st.sampled_from(list(temperatures)))
    table = {}
    for a, b in ids:
        q = draw(st.one_of(st.sampled_from([1.0, 0.0]), st.floats(0.0, 1.0).map(lambda v: round(v, 4))))
        table[(a, b)] = round(_clip(q + beta), 6)
        table[(b, a)] = round(_clip(1.0 - q + beta), 6)
    return JudgeFixture(table, temperature=temp, bias=beta)


def fixture_stats(table: Mapping[tuple[str, str], float]) -> dict:
    """What docs/tables/index.md reports about a judge, computed from its table (no sampling)."""
    cells = list(table.values())
    wob = [p for p in cells if 0.05 < p < 0.95]
    flips = favour_a = 0
    seen = set()
    for (a, b), p in table.items():
        key = tuple(sorted((a, b)))
        if key in seen or (b, a) not in table:
            continue
        seen.add(key)
        q = table[(b, a)]
        win_ab = a if temper(p, 0.0) == 1.0 else b   # greedy winner with a shown first
        win_ba = b if temper(q, 0.0) == 1.0 else a
        if win_ab != win_ba:
            flips += 1
            favour_a += win_ab == a  # both orders pick whoever is in position A
    return {
        "cells": len(cells), "pairs": len(seen), "wobbling": len(wob),
        "disagreement_t1_predicted": round(sum(disagreement(p) for p in cells) / max(1, len(cells)), 4),
        "wobbling_consistency": {t: round(sum(consistency(p, t) for p in wob) / len(wob), 4) if wob else None
                                 for t in (2, 10, 24)},
        "order_flips_t0": flips, "order_flips_favour_a": favour_a, "order_flips_favour_b": flips - favour_a,
    }


def local_judge_preset(seed: int = 42) -> JudgeFixture:
    """The fixture calibrated to the local-judge study of docs/tables/index.md (36 pairs, 72 cells).

    Built by :func:`toki.judges.study.local_judge_study` (structure by construction: 19
    wobbling cells, 13 of 36 order flips at temperature 0; wobbling probabilities fitted to
    C(2), C(10), C(24); the rest scaled to the published mean 2p(1-p) = 0.0921). ``stats``
    holds what the table gives back, to compare with :data:`toki.judges.study.PUBLISHED`.
    """
    from toki.judges.study import local_judge_study

    study = local_judge_study(seed)
    table = study.table
    return JudgeFixture(table, temperature=1.0, bias=0.0, name=f"local-4b-fixture-s{seed}",
                        stats=fixture_stats(table))


def sampled_disagreement(fixture: JudgeFixture, *, seed: int = 0, rounds: int = 200) -> float:
    """Consecutive disagreement measured by sampling the judge (not from the formula)."""
    from toki.model import Fact as _F

    judge = fixture.judge(seed=seed)
    disagree = total = 0
    for (a, b) in fixture.table:
        pair = (_F(a, "s", "p", "x", T0), _F(b, "s", "p", "y", T0))
        prev = None
        for _ in range(rounds):
            v = judge.vote(pair).index
            if prev is not None:
                disagree += v != prev
                total += 1
            prev = v
    return disagree / total if total else math.nan


__all__ = ["JudgeFixture", "T0", "context_switches", "contradicting_pairs", "fact_pairs", "facts",
           "fixture_stats", "interleavings", "judge_fixtures", "levels", "local_judge_preset",
           "operator_levels", "operators", "period_pairs", "periods", "sampled_disagreement"]
