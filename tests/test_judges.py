"""Pure judge layer: temperature, the Bernoulli and fixture judges, canonical keys and prompts,
and the calibrated local-judge fixture."""

from __future__ import annotations

import math
from datetime import datetime

import pytest

from toki.errors import InputError, JudgeError
from toki.judges import (
    PUBLISHED,
    FixtureJudge,
    SimulatedJudge,
    canonical_prompt,
    consistency,
    disagreement,
    judge_key,
    local_judge_study,
    temper,
    user_prompt,
)
from toki.model import Fact

A = Fact("fa", "alice", "medication", "penicillin", datetime(2026, 3, 1))
B = Fact("fb", "alice", "medication", "amoxicillin", datetime(2026, 4, 15))


def within(observed: float, p: float, n: int, sigmas: float = 5.0) -> bool:
    return abs(observed - p) <= sigmas * math.sqrt(max(p * (1 - p), 1e-12) / n) + 1e-12


def test_temper_identity_greedy_and_flattening():
    assert temper(0.8, 1.0) == 0.8
    assert temper(0.8, 0.0) == 1.0 and temper(0.2, 0.0) == 0.0
    assert temper(0.5, 0.0) == 1.0  # a greedy tie goes to position A
    assert temper(1.0, 3.0) == 1.0 and temper(0.0, 0.1) == 0.0
    assert 0.8 < temper(0.8, 0.5) < 1.0 and 0.5 < temper(0.8, 1.5) < 0.8
    assert temper(0.8, 1000.0) == pytest.approx(0.5, abs=1e-3)
    # symmetric: P(B) at T is temper(1 - p, T)
    assert temper(0.3, 0.7) == pytest.approx(1 - temper(0.7, 0.7))
    with pytest.raises(InputError):
        temper(1.2, 1.0)
    with pytest.raises(InputError):
        temper(0.5, -1.0)


def test_formulas():
    assert disagreement(0.5) == 0.5 and disagreement(1.0) == 0.0
    assert consistency(0.5, 1) == 1.0 and consistency(0.8, 3) == pytest.approx(0.512 + 0.008)
    # C(3) = 1 - 1.5 (1 - C(2)) for every p: C(t) below 0.5 at t = 3 needs C(2) < 2/3
    for p in (0.1, 0.37, 0.5, 0.93):
        assert consistency(p, 3) == pytest.approx(1 - 1.5 * (1 - consistency(p, 2)))
    with pytest.raises(InputError):
        consistency(0.5, 0)


def test_simulated_judge_is_seeded_and_bernoulli():
    votes = [SimulatedJudge(p=0.7, seed=3).vote((A, B)).index for _ in range(1)]
    j1, j2 = SimulatedJudge(p=0.7, seed=3), SimulatedJudge(p=0.7, seed=3)
    s1 = [j1.vote((A, B)).index for _ in range(2000)]
    s2 = [j2.vote((A, B)).index for _ in range(2000)]
    assert s1 == s2 and votes[0] == s1[0]
    assert within(s1.count(0) / 2000, 0.7, 2000)
    # consecutive calls disagree with probability 2p(1-p)
    flips = sum(a != b for a, b in zip(s1, s1[1:])) / 1999
    assert within(flips, disagreement(0.7), 1999)
    v = SimulatedJudge(p=0.7, seed=1).vote((A, B))
    assert v.probability == pytest.approx(0.7 if v.index == 0 else 0.3)


def test_simulated_judge_temperature():
    greedy = SimulatedJudge(p=0.7, seed=5, temperature=0.0)
    assert {greedy.vote((A, B)).index for _ in range(200)} == {0}
    hot = SimulatedJudge(p=0.7, seed=5, temperature=2.0)
    share = sum(hot.vote((A, B)).index == 0 for _ in range(4000)) / 4000
    assert within(share, temper(0.7, 2.0), 4000) and share < 0.68
    with pytest.raises(InputError):
        SimulatedJudge(p=0.5, temperature=-0.5)
    with pytest.raises(JudgeError):
        SimulatedJudge(fail=True).vote((A, B))


def test_fixture_judge_reads_the_table_per_order():
    j = FixtureJudge({("fa", "fb"): 1.0, ("fb", "fa"): 1.0}, seed=0)
    # position A always wins: the winner flips with the order of presentation
    assert j.vote((A, B)).index == 0 and j.vote((B, A)).index == 0
    assert j.probability((A, B)) == 1.0
    hot = FixtureJudge({("fa", "fb"): 0.25, ("fb", "fa"): 0.9}, seed=2)
    n = 3000
    assert within(sum(hot.vote((A, B)).index == 0 for _ in range(n)) / n, 0.25, n)
    assert within(sum(hot.vote((B, A)).index == 0 for _ in range(n)) / n, 0.9, n)
    cold = FixtureJudge({("fa", "fb"): 0.25}, temperature=0.0)
    assert cold.probability((A, B)) == 0.0


def test_fixture_judge_rejects_gaps_and_bad_tables():
    j = FixtureJudge({("fa", "fb"): 0.5})
    with pytest.raises(JudgeError, match="no probability"):
        j.vote((B, A))
    assert FixtureJudge({}, default=1.0).vote((B, A)).index == 0
    with pytest.raises(InputError):
        FixtureJudge({("fa", "fb"): 1.5})
    with pytest.raises(InputError):
        FixtureJudge({"fa": 0.5})
    # θ names the table: two different tables never share a log key
    assert FixtureJudge({("fa", "fb"): 0.5}).theta() != FixtureJudge({("fa", "fb"): 0.6}).theta()


def test_canonical_keys_and_prompts():
    j = SimulatedJudge(p=0.5, seed=0)
    assert judge_key((A, B), j) == judge_key((B, A), j)
    assert judge_key((A, B), j, canonicalize=False) != judge_key((B, A), j, canonicalize=False)
    assert judge_key((A, B), j).read_set == ("fa", "fb")
    assert judge_key((A, B), j) != judge_key((A, B), SimulatedJudge(p=0.5, seed=0, temperature=0.5))
    assert judge_key((A, B), j) != judge_key((A, B), SimulatedJudge(p=0.5, seed=0, model="other"))
    assert canonical_prompt((A, B)) == canonical_prompt((B, A))
    assert user_prompt((A, B)) != user_prompt((B, A))
    assert "A: alice medication penicillin" in user_prompt((A, B))
    assert "fa" not in user_prompt((A, B))  # ids are keys, not evidence
    with pytest.raises(InputError):
        user_prompt((A,))


def test_calibrated_study_has_the_published_structure():
    s = local_judge_study(42)
    summary = s.summary()
    assert summary["pairs"] == 36 and summary["cells"] == 72 and summary["wobbling"] == PUBLISHED["wobbling"]
    for cat, n in PUBLISHED["wobbling_by_category"].items():
        assert summary["wobbling_by_category"][cat] == n
    for cat, won in PUBLISHED["newer_won_t0"].items():
        assert summary["newer_won_t0"][cat] == won
    assert summary["disagreement_t1_predicted"] == pytest.approx(PUBLISHED["disagreement_t1_predicted"], abs=1e-3)
    for t, c in PUBLISHED["wobbling_consistency"].items():
        assert summary["wobbling_consistency"][t] == pytest.approx(c, rel=0.02)
    # order flips at temperature 0, counted from the judge's own votes
    judge = s.judge(temperature=0.0)
    flips = {"A": 0, "B": 0}
    for pair in s.pairs:
        w1 = (pair.older, pair.newer)[judge.vote((pair.older, pair.newer)).index]
        w2 = (pair.newer, pair.older)[judge.vote((pair.newer, pair.older)).index]
        if w1 != w2:
            flips["A" if w1 is pair.older else "B"] += 1
    assert flips == {"A": PUBLISHED["order_flips_favour_a"], "B": PUBLISHED["order_flips_favour_b"]}
    # deterministic in the seed; another seed permutes
    assert local_judge_study(42).table == s.table
    other = local_judge_study(7)
    assert other.table != s.table and other.summary()["wobbling"] == 19
    ids = [f.fact_id for p in s.pairs for f in (p.older, p.newer)]
    assert len(set(ids)) == 72
