"""The AtomMem model under the engine harness: real JSON files, real threads, no mocks.

Searches use fixed tapes (random.Random(seed) for seed 0..49), so every test is deterministic.
"""

from __future__ import annotations

import random

import pytest

from toki.engines.atommem_model import (
    ACME,
    BERLIN,
    CAT,
    CLAIMS,
    DOG,
    PARIS,
    ROME,
    VIOLIN,
    AtomMemModel,
    judge_fact,
    atommem,
    atommem_atomic,
    cosine_similarity,
    embed,
    jaccard_similarity,
    wobbling_judge,
)
from toki.harness.controller import ReplayChooser, SerialChooser, TapeChooser
from toki.harness.engine import Engine
from toki.harness.trial import TrialRunner

TRIALS = 50


def tape(seed: int, n: int = 200) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(2) for _ in range(n)]


def first_finding(runner: TrialRunner, prefix: str, trials: int = TRIALS):
    """The first trial (tapes 0..trials-1) with a finding named ``prefix``, or None."""
    for seed in range(trials):
        res = runner.trial(TapeChooser(tape(seed)))
        if any(a.startswith(prefix + ":") for a in res.anomalies):
            return res
    return None


def facts(state) -> list[tuple[str, str]]:
    return [(f[0], f[1]) for f in state["facts"]]


def ran_first(trace) -> str:
    """Who made the first storage call (start-up grants touch nothing)."""
    return next(s.agent for s in trace.steps if s.kind != "start")


def serial_states(engine, scenario: str) -> dict[str, tuple]:
    """First agent -> (state, trace) of the serial runs of the scenario's two agents."""
    out = {}
    with TrialRunner(engine, scenario) as r:
        for order in (r.scenario.agents, r.scenario.agents[::-1]):
            trace, o = r.run(SerialChooser(order), agents=order)
            assert o.errors == {}
            calls = [s.agent for s in trace.steps if s.kind != "start"]
            assert calls == sorted(calls, key=calls.index), "not a serial run"
            assert len(set(calls)) == 2 and calls[0] != calls[-1]
            out[ran_first(trace)] = (o.state, trace)
    assert len(out) == 2
    return out


# -- the model's own arithmetic -----------------------------------------------------------------

def score(a: str, b: str) -> float:
    return 0.7 * cosine_similarity(embed(a), embed(b)) + 0.3 * jaccard_similarity(CLAIMS[a][1], CLAIMS[b][1])


def test_thresholds_separate_duplicates_conflict_candidates_and_unrelated_facts():
    assert cosine_similarity(embed(DOG), embed(DOG)) > 0.95
    for a, b in ((BERLIN, PARIS), (PARIS, ROME), (CAT, DOG)):
        assert cosine_similarity(embed(a), embed(b)) <= 0.95  # not duplicates
        assert score(a, b) > 0.6  # sent to the conflict LLM
    for a, b in ((BERLIN, ACME), (CAT, VIOLIN), (ACME, VIOLIN)):
        assert score(a, b) <= 0.6


def test_engine_protocol():
    for eng in (atommem(), atommem_atomic()):
        assert isinstance(eng, Engine)
        assert eng.executed == "model" and "MINE-USTC/AtomMem@" in eng.version
    assert atommem().name == "atommem" and atommem_atomic().name == "atommem-atomic"


# -- serial orders ------------------------------------------------------------------------------

def test_serial_add_add_takes_consecutive_ids():
    runs = serial_states(atommem(), "add-add")
    assert facts(runs["A"][0]) == [("F1", BERLIN), ("F2", CAT), ("F3", ACME), ("F4", VIOLIN)]
    assert facts(runs["B"][0]) == [("F1", BERLIN), ("F2", CAT), ("F3", VIOLIN), ("F4", ACME)]


def test_serial_contradictions_overwrite_in_place_without_history():
    runs = serial_states(atommem(), "contradict-same-fact")
    assert facts(runs["A"][0]) == [("F1", ROME), ("F2", CAT)]  # Berlin and Paris leave no trace (N3 by design)
    assert facts(runs["B"][0]) == [("F1", PARIS), ("F2", CAT)]
    for s, _ in serial_states(atommem(), "contradict-vs-add").values():
        assert facts(s) == [("F1", PARIS), ("F2", CAT), ("F3", ACME)]


def test_serial_duplicate_is_ignored_and_one_event_groups_dog_and_cat():
    for first, (s, trace) in serial_states(atommem(), "duplicate-add").items():
        assert facts(s) == [("F1", BERLIN), ("F2", CAT), ("F3", DOG)]
        assert [e[:2] for e in s["events"]] == [["E1", ["F2", "F3"]]]
        second = "B" if first == "A" else "A"
        assert trace.results[first]["results"][0]["action"] == "CREATE"
        assert trace.results[second]["results"][0]["action"] == "IGNORE"


def test_serial_profile_batch_clears_flags_of_what_it_profiled():
    runs = serial_states(atommem(), "profile-batch-vs-add")
    s = runs["P"][0]
    assert [p[1:] for p in s["profiles"]] == [["Alice", f"Alice: {BERLIN}", ["F1"]]]
    assert [(f[0], f[5]) for f in s["facts"]] == [("F1", False), ("F2", False), ("F3", True)]
    s = runs["W"][0]
    assert [p[3] for p in s["profiles"]] == [["F1"], ["F3"]]
    assert not any(f[5] for f in s["facts"])


# -- races the search finds in the model ---------------------------------------------------------

RACES = [
    ("add-add", "lost-update"),
    ("add-add", "id-collision"),
    ("contradict-same-fact", "torn-write"),
    ("contradict-vs-add", "lost-update"),
    ("duplicate-add", "duplicate-insert"),
    ("add-search-vs-add", "torn-read"),
    ("profile-batch-vs-add", "lost-update"),
]


@pytest.mark.parametrize("scenario,anomaly", RACES)
def test_search_finds_race(scenario, anomaly):
    with TrialRunner(atommem(), scenario) as r:
        res = first_finding(r, anomaly)
        assert res is not None, f"no {anomaly} in {TRIALS} trials of {scenario}"
        assert not res.serializable


def test_lost_update_names_the_lost_fact_and_replays_deterministically():
    with TrialRunner(atommem(), "add-add") as r:
        res = first_finding(r, "lost-update")
        assert res is not None
        assert any(ACME in a or VIOLIN in a for a in res.anomalies)
        for _ in range(20):
            again = r.trial(ReplayChooser(res.trace.grants))
            assert again.outcome.key == res.outcome.key
            assert again.anomalies == res.anomalies


def test_torn_write_replays_deterministically():
    with TrialRunner(atommem(), "contradict-same-fact") as r:
        res = first_finding(r, "torn-write")
        assert res is not None and res.outcome.state.get("corrupt") == ["facts"]
        for _ in range(20):
            assert r.trial(ReplayChooser(res.trace.grants)).outcome.key == res.outcome.key


@pytest.mark.slow
def test_a_pure_reader_crashes_on_a_truncated_file():
    """The writer runs up to its truncating open, then the reader reads the empty file."""
    with TrialRunner(atommem(), "search-vs-add") as r:
        crashed = []
        for first in (0, 1):
            for k in range(30):
                res = r.trial(TapeChooser([first] + [0] * k + [1] + [0] * 60))
                if res.outcome.errors.get("R") == "JSONDecodeError":
                    crashed.append(res)
        assert crashed
        kinds = [(s.agent, s.kind) for s in crashed[0].trace.steps]
        assert ("W", "file-open-w") in kinds and kinds.index(("W", "file-open-w")) < kinds.index(("R", "file-read"))


@pytest.mark.slow
def test_concurrent_rejudging_of_one_contradiction_disagrees_N1():
    """Serially the second agent sees a duplicate and asks no LLM; concurrently both ask (no judge log)."""
    make = wobbling_judge(0.5, seed=0)  # p = 0.5: two independent calls disagree half the time
    pair = tuple(judge_fact({"fact": t, "people": ["Alice"], "time": [d]})
                 for t, d in ((BERLIN, "2026-01-05"), (PARIS, "2026-03-01")))
    assert make("A").vote(pair).index != make("B").vote(pair).index  # this seed's two first calls disagree
    eng = AtomMemModel(judge=make)
    with TrialRunner(eng, "rejudge") as r:
        for order in (("A", "B"), ("B", "A")):
            trace, _ = r.run(SerialChooser(order), agents=order)
            assert len([v for a in order for v in trace.results[a]["votes"]]) == 1
        disagreements = 0
        for seed in range(TRIALS):
            res = r.trial(TapeChooser(tape(seed)))
            va = res.trace.results.get("A", {}).get("votes", [])
            vb = res.trace.results.get("B", {}).get("votes", [])
            if va and vb and va[0]["read_set"] == vb[0]["read_set"] and va[0]["conflict"] != vb[0]["conflict"]:
                disagreements += 1
        assert disagreements > 0


# -- the fix ------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("scenario", list(atommem_atomic().scenarios))
def test_fixed_variant_admits_nothing(scenario):
    with TrialRunner(atommem_atomic(), scenario) as r:
        for seed in range(TRIALS):
            res = r.trial(TapeChooser(tape(seed)))
            assert res.serializable, res.anomalies
            assert res.outcome.errors == {}


def test_fixed_variant_locks_and_replaces_instead_of_truncating():
    with TrialRunner(atommem_atomic(), "add-add") as r:
        res = r.trial(TapeChooser(tape(0)))
        details = [(s.kind, s.detail) for s in res.trace.steps]
        assert any(k == "lock" for k, _ in details)
        assert any(k == "file-rename" and "facts_toki.json" in d for k, d in details)
        assert not any(k == "file-open-w" and d.startswith("open('facts_toki.json'") for k, d in details)
        assert {f[0] for f in res.outcome.state["facts"]} == {"F1", "F2", "F3", "F4"}
