"""A seeded fixture calibrated to the published local-judge study (docs/tables/index.md).

The paper asked a local 4B judge about 36 contradiction pairs (8 clear updates, 12 ambiguous,
10 evidence-tied, 6 rule conflicts), each in both orders (72 cells), and read the token
probabilities directly. The model and its prompts are not available, so this module builds a
stand-in: 36 pairs of :class:`toki.model.Fact` and a probability table for
:class:`toki.judges.fixture.FixtureJudge`, chosen so that the fixture has the study's published
structure. What is an *input* (calibrated) and what is *measured* elsewhere matters:

inputs, by construction
    19 of 72 cells wobble (0.05 < p < 0.95): 13 evidence-tied, 4 ambiguous, 1 clear, 1 rule;
    at temperature 0, 13 of 36 pairs change winner with order alone, 6 favouring position A and
    7 position B; the newer record wins 15/16 clear-update cells, 10/20 evidence-tied, 3/12 rule.
    41 of the 72 cells (17/30 of them, the calibration study's deterministic share) have p
    exactly 0 or 1.
fitted (least squares, deterministic)
    the 19 wobbling cells' probabilities are Beta quantiles on (0.5, 0.95) fitted to the published
    C(2) = 0.685, C(10) = 0.180, C(24) = 0.045; the 12 remaining cells' distance from 0/1 is
    scaled so that the mean 2p(1-p) over the 72 cells is the published prediction 0.0921.
measured (by the experiments, by sampling the judge)
    observed disagreement, C(t) curves, calibration deviation and R², temperature sweeps, and
    the effect of canonicalisation on order flips.

The seed decides which pair gets which pattern and probability, and the fact ids (random hex,
so canonical order by id is unrelated to age or position).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from toki.judges.base import consistency, disagreement, temper
from toki.judges.fixture import FixtureJudge
from toki.model import Fact

CATEGORIES = {"clear": 8, "ambiguous": 12, "evidence-tied": 10, "rule": 6}

PUBLISHED = {
    "pairs": 36,
    "cells": 72,
    "wobbling": 19,
    "wobbling_by_category": {"evidence-tied": 13, "ambiguous": 4},
    "disagreement_t1_observed": 0.0797,
    "disagreement_t1_predicted": 0.0921,
    "wobbling_consistency": {2: 0.685, 10: 0.180, 24: 0.045},
    "order_flips_t0": 13,
    "order_flips_favour_a": 6,
    "order_flips_favour_b": 7,
    "newer_won_t0": {"clear": [15, 16], "evidence-tied": [10, 20], "rule": [3, 12]},
    # the calibration study: 17 of its 30 cells deterministic; read as a share of all cells
    "deterministic_share": 17 / 30,
}

WOBBLE_LOW, WOBBLE_HIGH = 0.05, 0.95


def wobbles(p: float) -> bool:
    return WOBBLE_LOW < p < WOBBLE_HIGH


@dataclass(frozen=True, slots=True)
class Pair:
    index: int
    category: str
    older: Fact
    newer: Fact
    pattern: str  # at temperature 0: newer | older (same winner in both orders) | pos-a | pos-b (flips)


@dataclass(frozen=True, slots=True)
class Cell:
    pair: Pair
    order: str  # "older-first" or "newer-first"
    p_a: float  # P(position A wins) at temperature 1

    @property
    def shown(self) -> tuple[Fact, Fact]:
        p = self.pair
        return (p.older, p.newer) if self.order == "older-first" else (p.newer, p.older)

    @property
    def key(self) -> tuple[str, str]:
        a, b = self.shown
        return (a.fact_id, b.fact_id)

    @property
    def wobbles(self) -> bool:
        return wobbles(self.p_a)

    def p_newer(self, temperature: float = 1.0) -> float:
        p = temper(self.p_a, temperature)
        return 1.0 - p if self.order == "older-first" else p


@dataclass(frozen=True)
class Study:
    seed: int
    pairs: tuple[Pair, ...]
    cells: tuple[Cell, ...]
    fit: dict

    @property
    def table(self) -> dict[tuple[str, str], float]:
        return {c.key: c.p_a for c in self.cells}

    def judge(self, *, seed: int = 0, temperature: float = 1.0) -> FixtureJudge:
        return FixtureJudge(self.table, seed=seed, temperature=temperature, model=f"local-4b-fixture-s{self.seed}")

    def wobbling(self) -> list[Cell]:
        return [c for c in self.cells if c.wobbles]

    def summary(self) -> dict:
        """The fixture's structural statistics (the inputs above), computed back from the table."""
        wob = self.wobbling()
        by_cat: dict[str, int] = {}
        for c in wob:
            by_cat[c.pair.category] = by_cat.get(c.pair.category, 0) + 1
        newer: dict[str, list[int]] = {}
        for c in self.cells:
            w = newer.setdefault(c.pair.category, [0, 0])
            w[0] += c.p_newer(0.0) == 1.0
            w[1] += 1
        return {
            "pairs": len(self.pairs), "cells": len(self.cells), "wobbling": len(wob),
            "wobbling_by_category": by_cat,
            "disagreement_t1_predicted": sum(disagreement(c.p_a) for c in self.cells) / len(self.cells),
            "wobbling_consistency": {t: sum(consistency(c.p_a, t) for c in wob) / len(wob) for t in (2, 10, 24)},
            "newer_won_t0": newer,
        }


_SLOTS = {
    "clear": [("user", "lives_in", "Mangwon-dong", "Seongsu-dong"), ("user", "employer", "Naver", "Kakao"),
              ("alice", "phone", "010-1111-2222", "010-3333-4444"), ("bob", "manager", "Mr Park", "Ms Lee"),
              ("team", "standup_time", "09:30", "10:00"), ("user", "car", "Avante", "Ioniq 5"),
              ("carol", "email", "carol@old.example", "carol@new.example"), ("user", "gym", "Anytime", "Spoany")],
    "ambiguous": [("user", "favourite_food", "bibimbap", "tteokbokki"), ("dan", "title", "engineer", "lead"),
                  ("user", "hometown", "Daegu", "Busan"), ("erin", "status", "on leave", "active"),
                  ("project", "deadline", "June 30", "July 15"), ("user", "diet", "vegetarian", "pescatarian"),
                  ("frank", "team", "search", "ads"), ("user", "language", "Python", "Rust"),
                  ("gina", "city", "Incheon", "Suwon"), ("user", "allergy", "peanut", "none"),
                  ("hank", "role", "reviewer", "approver"), ("user", "timezone", "KST", "PST")],
    "evidence-tied": [("alice", "medication", "penicillin", "amoxicillin"), ("ivy", "birthday", "May 3", "May 8"),
                      ("user", "blood_type", "A", "O"), ("jack", "nationality", "Korean", "Canadian"),
                      ("user", "shoe_size", "260", "265"), ("kim", "office", "3F", "5F"),
                      ("user", "bank", "Shinhan", "Woori"), ("lee", "spouse", "Minji", "Sora"),
                      ("user", "school", "SNU", "KAIST"), ("moon", "contact", "Mr Park", "Ms Lee")],
    "rule": [("patient", "dose", "5 mg", "10 mg"), ("account", "owner", "ops", "finance"),
             ("user", "legal_name", "Kim Minsu", "Kim Min-su"), ("order", "address", "HQ", "warehouse"),
             ("doc", "classification", "internal", "public"), ("vendor", "payment_terms", "net 30", "net 60")],
}


def _patterns(rng: random.Random) -> dict[str, list[str]]:
    ambiguous_rest = ["newer"] * 6 + ["older"] * 5
    rng.shuffle(ambiguous_rest)
    pats = {
        "clear": ["newer"] * 7 + ["flip"],  # newer wins 14 + 1 = 15 of 16 cells
        "evidence-tied": ["flip"] * 10,  # each flipping pair gives the newer 1 of 2 cells: 10 of 20
        "rule": ["newer"] + ["older"] * 4 + ["flip"],  # 2 + 0 + 1 = 3 of 12
        "ambiguous": ["flip"] + ambiguous_rest,
    }
    for v in pats.values():
        rng.shuffle(v)
    flips = sum(v.count("flip") for v in pats.values())
    sides = ["pos-a"] * 6 + ["pos-b"] * (flips - 6)
    rng.shuffle(sides)
    it = iter(sides)
    return {k: [next(it) if p == "flip" else p for p in v] for k, v in pats.items()}


@cache
def _wobble_fit(n: int = 19) -> tuple[tuple[float, ...], dict]:
    import numpy as np
    from scipy import optimize, stats

    targets = PUBLISHED["wobbling_consistency"]
    u = (np.arange(n) + 0.5) / n

    def margins(x):
        a, b = np.exp(x)
        return 0.5 + (WOBBLE_HIGH - 0.5) * stats.beta.ppf(u, a, b)

    def residuals(x):
        m = margins(x)
        return [(np.mean(m ** t + (1 - m) ** t) - v) / v for t, v in targets.items()]

    r = optimize.least_squares(residuals, [0.0, 0.0])
    m = np.clip(margins(r.x), 0.5 + 1e-6, WOBBLE_HIGH - 1e-6)
    a, b = (float(v) for v in np.exp(r.x))
    return tuple(float(v) for v in m), {"beta_a": a, "beta_b": b, "relative_residuals": [float(v) for v in r.fun]}


def _fact_id(rng: random.Random) -> str:
    return "f" + "".join(rng.choice("0123456789abcdef") for _ in range(10))


@cache
def local_judge_study(seed: int = 42) -> Study:
    """The calibrated 36-pair, 72-cell fixture (deterministic in ``seed``)."""
    rng = random.Random(f"toki-local-judge-study:{seed}")
    patterns = _patterns(rng)
    base = datetime(2025, 1, 6, 9)
    pairs: list[Pair] = []
    for cat, n in CATEGORIES.items():
        for i in range(n):
            s, pred, old_obj, new_obj = _SLOTS[cat][i]
            t_old = base + timedelta(days=rng.randrange(0, 200))
            t_new = t_old + timedelta(days=rng.randrange(1, 200))
            conf_old = round(rng.uniform(0.6, 0.95), 2)
            conf_new = conf_old if cat == "evidence-tied" else round(rng.uniform(0.6, 0.95), 2)
            older = Fact(_fact_id(rng), s, pred, old_obj, t_old, confidence=conf_old)
            newer = Fact(_fact_id(rng), s, pred, new_obj, t_new, confidence=conf_new)
            pairs.append(Pair(len(pairs), cat, older, newer, patterns[cat][i]))

    # Which cells wobble: 13 evidence-tied, 4 ambiguous, 1 clear, 1 rule (the flipping pairs'
    # minority cells where a pair flips and the category needs one).
    et_cells = [(p.index, o) for p in pairs if p.category == "evidence-tied" for o in ("older-first", "newer-first")]
    wob = set(rng.sample(et_cells, 13))
    amb_flip = next(p for p in pairs if p.category == "ambiguous" and p.pattern.startswith("pos"))
    amb_other = [(p.index, o) for p in pairs if p.category == "ambiguous" and p is not amb_flip
                 for o in ("older-first", "newer-first")]
    wob |= {(amb_flip.index, rng.choice(("older-first", "newer-first")))} | set(rng.sample(amb_other, 3))
    for cat in ("clear", "rule"):
        flip = next(p for p in pairs if p.category == cat and p.pattern.startswith("pos"))
        # the cell where the newer record loses: the clear pair's one lost cell, the rule pair's odd one
        lost = "newer-first" if flip.pattern == "pos-b" else "older-first"
        wob.add((flip.index, lost if cat == "clear" else rng.choice(("older-first", "newer-first"))))

    margins, fit = _wobble_fit(len(wob))
    wob_order = sorted(wob)
    rng.shuffle(wob_order)
    margin_of = dict(zip(wob_order, margins))

    # The other cells sit within 0.05 of certainty; their distance eps is scaled so that the mean
    # of 2p(1-p) over all 72 cells equals the published prediction.
    others = [(p.index, o) for p in pairs for o in ("older-first", "newer-first") if (p.index, o) not in wob]
    certain = set(rng.sample(range(len(others)), round(PUBLISHED["deterministic_share"] * 72)))
    raw = [0.0 if i in certain else rng.expovariate(1.0) for i in range(len(others))]
    need = PUBLISHED["disagreement_t1_predicted"] * 72 - sum(disagreement(m) for m in margins)
    lo, hi = 0.0, 1.0
    for _ in range(100):  # bisection on the scale, eps capped below the wobble threshold
        mid = (lo + hi) / 2
        got = sum(disagreement(min(r * mid, WOBBLE_LOW - 1e-3)) for r in raw)
        lo, hi = (mid, hi) if got < need else (lo, mid)
    eps = dict(zip(others, (min(r * lo, WOBBLE_LOW - 1e-3) for r in raw)))
    fit = dict(fit, non_wobbling_eps_scale=lo)

    cells = []
    for p in pairs:
        for order in ("older-first", "newer-first"):
            m = margin_of.get((p.index, order), None)
            m = 1.0 - eps[(p.index, order)] if m is None else m
            if p.pattern == "pos-a":
                a_wins = True
            elif p.pattern == "pos-b":
                a_wins = False
            else:
                newer_in_a = order == "newer-first"
                a_wins = newer_in_a if p.pattern == "newer" else not newer_in_a
            cells.append(Cell(p, order, round(m if a_wins else 1.0 - m, 6)))
    return Study(seed, tuple(pairs), tuple(cells), fit)
