"""The models of Letta, MIRIX and mem0 1.0.x, and the judge-free comparator, under the engine harness.

Real SQLite files, real threads, judge decisions from toki.judges fixtures; no mocks. Every search
and tape is seeded, so every test is deterministic.
"""

from __future__ import annotations

import random

import pytest

from toki.harness.controller import ReplayChooser, SerialChooser, TapeChooser
from toki.harness.engine import Engine
from toki.engines.models.comparator import ComparatorModel, comparator
from toki.engines.models.letta import (
    BERLIN,
    CAT,
    ROME,
    VIOLIN,
    BlockVersionConflict,
    LettaModel,
    letta,
    letta_judge,
)
from toki.engines.models.mem0_v2 import (
    BOTH,
    DOG,
    GREEN,
    LOVE,
    TEA,
    Mem0V2Model,
    mem0_judge,
    mem0_v2,
)
from toki.engines.models.mirix import MirixModel, mirix, mirix_judge
from toki.engines.registry import ENGINES, load_engine
from toki.harness.search import search
from toki.harness.trial import TrialRunner, clean_abort
from toki.harness.witness import Witness
from toki.experiments import reported_races

BUDGET = 30


def mem0_greedy() -> Mem0V2Model:
    """mem0 whose "rejudge" scenario asks the deterministic judge: re-asking is then a race, not N1."""
    return Mem0V2Model(rejudge_judge=mem0_judge())


def tape(seed: int, n: int = 200) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(2) for _ in range(n)]


def first_finding(runner: TrialRunner, prefix: str, says: str = "", trials: int = BUDGET):
    """The first of ``trials`` seeded tapes whose run has a finding ``prefix: ...says...``."""
    for seed in range(trials):
        res = runner.trial(TapeChooser(tape(seed)))
        if any(a.startswith(prefix + ":") and says in a for a in res.anomalies):
            return res
    return None


def serial(engine, scenario: str, order: tuple[str, ...]):
    with TrialRunner(engine, scenario) as r:
        trace, out = r.run(SerialChooser(order), agents=order)
        return trace, out, r.by_design(out)


def replays_identically(runner: TrialRunner, res, times: int = 5) -> None:
    for _ in range(times):
        again = runner.trial(ReplayChooser(res.trace.grants))
        assert again.outcome.key == res.outcome.key
        assert again.anomalies == res.anomalies


# -- protocol and registry --------------------------------------------------------------------------

@pytest.mark.parametrize("name,cls,upstream", [("letta", LettaModel, "letta-ai/letta"),
                                               ("mirix", MirixModel, "Mirix-AI/MIRIX"),
                                               ("mem0-v2", Mem0V2Model, "mem0ai/mem0"),
                                               ("comparator", ComparatorModel, "WorldDB")])
def test_registered_models(name, cls, upstream):
    assert ENGINES[name].factory.startswith("toki.engines.models.")
    eng = load_engine(name)
    assert isinstance(eng, cls) and isinstance(eng, Engine)
    assert eng.name == name and eng.executed == "model" and upstream in eng.version
    assert eng.scenarios and all(s.description for s in eng.scenarios.values())


# -- serial orders ------------------------------------------------------------------------------------

def test_letta_serial_writers_both_append():
    for order, text in ((("A", "B"), f"{BERLIN}\n{CAT}\n{VIOLIN}"), (("B", "A"), f"{BERLIN}\n{VIOLIN}\n{CAT}")):
        _, out, _ = serial(letta(), "two-writers-one-block", order)
        assert out.errors == {} and out.state == {"blocks": [["human", text]]}


def test_letta_serial_reader_sees_one_value_per_call():
    for order, seen in ((("A", "S"), BERLIN), (("S", "A"), ROME)):
        trace, out, design = serial(letta(), "shared-block-stale-read", order)
        assert [s["reply"] for s in trace.results["A"]["steps"]] == [seen, seen]
        assert out.state == {"blocks": [["human", ROME]]} and design == []
    _, out, design = serial(letta(), "remember-overwrites", ("S",))
    assert out.state == {"blocks": [["human", ROME]]}
    assert [d.split(":")[0] for d in design] == ["N3"]  # the replaced line leaves no trace, serially


def test_mem0_serial_updates_merge_and_keep_a_history_chain():
    _, out, design = serial(mem0_v2(), "concurrent-update", ("A", "B"))
    assert [m[1] for m in out.state["memories"]] == [BOTH]
    ((_, rows),) = out.state["history"]
    assert rows == [["ADD", None, TEA], ["UPDATE", TEA, GREEN], ["UPDATE", GREEN, BOTH]]
    assert design == []
    _, out, design = serial(mem0_v2(), "update-overwrites", ("U",))
    assert [m[1] for m in out.state["memories"]] == [GREEN]
    assert len(design) == 1 and design[0].startswith("N3:") and repr(TEA) in design[0]
    _, out, _ = serial(mem0_v2(), "duplicate-add", ("B", "A"))
    assert [m[1] for m in out.state["memories"]].count(DOG) == 1


def test_mem0_love_then_hate_is_a_judge_failure_not_a_race():
    trace, out, design = serial(mem0_v2(), "love-then-hate", ("U",))
    assert out.state["memories"] == []
    assert trace.results["U"]["results"] == [[{"id": out.state["history"][0][0], "memory": LOVE, "event": "DELETE"}]]
    assert any(d.startswith("judge-failure:") for d in design) and any(d.startswith("N3:") for d in design)
    with TrialRunner(mem0_v2(), "love-then-hate") as r:
        assert not search(r, budget=BUDGET, seed=0).admits  # one agent: nothing to interleave


def test_mirix_serial_update_replaces_the_item_and_leaves_no_history():
    for order in (("A", "B"), ("B", "A")):
        _, out, design = serial(mirix(), "concurrent-update", order)
        assert len(out.state["semantic"]) == 1 and design == []
    _, out, design = serial(mirix(), "update-hard-deletes", ("W",))
    assert out.state["semantic"] == [["Alice residence", "Alice lives in Paris."]]
    assert [d.split(":")[0] for d in design] == ["N3"]


def test_comparator_serial_orders_keep_the_loser_and_order_by_valid_time():
    for order in (("A", "B"), ("B", "A")):
        _, out, design = serial(comparator(), "ingestion-order", order)
        cur = [f[2] for f in out.state["facts"] if f[5] and f[4] == "9999-12-31"]
        assert cur == ["Rome"] and design == []
        _, out, design = serial(comparator(), "concurrent-update", order)
        assert any(f[2] == "Berlin" and f[5] for f in out.state["facts"]) and design == []


# -- races the search finds ---------------------------------------------------------------------------

ADMITS = [(letta, s) for s in ("two-writers-one-block", "shared-block-stale-read", "stale-write-back",
                               "consolidation-overwrites")] + \
         [(mem0_v2, s) for s in ("concurrent-update", "delete-vs-update", "duplicate-add", "ingestion-order")] + \
         [(mirix, s) for s in ("concurrent-update", "duplicate-insert", "reader-mid-update")]


FAST_ADMITS = {"mirix-concurrent-update"}  # mem0 2.x's duplicate add is in FAST_RACES


@pytest.mark.parametrize("factory,scenario", [
    pytest.param(f, s, id=f"{f.__name__}-{s}", marks=() if f"{f.__name__}-{s}" in FAST_ADMITS else pytest.mark.slow)
    for f, s in ADMITS])
def test_search_finds_a_race_and_its_witness_replays(factory, scenario, tmp_path):
    eng = factory()
    with TrialRunner(eng, scenario) as r:
        res = search(r, budget=BUDGET, seed=0)
        assert res.admits, f"no anomaly in {BUDGET} trials of {eng.name}/{scenario}"
        assert not any(a.anomaly == "non-serializable" for a in res.found.anomalies), res.found.anomalies
        w = Witness.from_trial(eng, scenario, res.found, seed=0, budget=BUDGET)
        w = Witness.load(w.save(tmp_path / "w.json"))
        for _ in range(5):
            again = r.trial(ReplayChooser(w.grants))
            assert again.anomalies == w.anomalies
            assert Witness.from_trial(eng, scenario, again, seed=0, budget=BUDGET).outcome == w.outcome


RACES = [
    (letta, "two-writers-one-block", "lost-update", "step start"),
    (letta, "consolidation-overwrites", "lost-update", "rethink"),
    (mem0_v2, "concurrent-update", "lost-update", "lost"),
    (mem0_v2, "delete-vs-update", "lost-update", "destroyed unseen"),
    (mem0_v2, "delete-vs-update", "lost-update", "updated after it was deleted"),
    (mem0_v2, "delete-vs-update", "lost-update", "was never stored"),
    (mem0_v2, "delete-vs-update", "double-current", "both current"),
    (mem0_v2, "delete-vs-update", "non-atomic-history", "history"),
    (mem0_v2, "duplicate-add", "duplicate-insert", "stored 2 times"),
    (mem0_v2, "ingestion-order", "double-current", "both current"),
    (mirix, "concurrent-update", "double-supersede", "two latest versions"),
    (mirix, "concurrent-update", "lost-update", "NoResultFound"),
    (mirix, "duplicate-insert", "duplicate-insert", "stored 2 times"),
    (letta, "shared-block-stale-read", "N2", "not seen until the next step"),
    (letta, "stale-write-back", "lost-update", "never edited it"),
    (mirix, "reader-mid-update", "N2", "between the update's delete and its insert"),
    (mem0_greedy, "rejudge", "rejudged", "went to the update LLM from A, B"),
]


def named(anomaly: str, says: str = ""):
    return lambda r: any(a.startswith(anomaly + ":") and says in a for a in r.anomalies)


# one race per model and per kind of anomaly in the fast tier; every race in the slow one
FAST_RACES = {"letta-two-writers-one-block-lost-update-step", "mem0_v2-duplicate-add-duplicate-insert-stored",
              "mirix-reader-mid-update-N2-between", "mem0_greedy-rejudge-rejudged-went"}


def _race_id(f, s, a, w) -> str:
    return f"{f.__name__}-{s}-{a}-{w.split()[0]}"


@pytest.mark.parametrize("factory,scenario,anomaly,says", [
    pytest.param(*r, id=_race_id(*r), marks=() if _race_id(*r) in FAST_RACES else pytest.mark.slow) for r in RACES])
def test_each_race_is_found_by_search_and_replays(factory, scenario, anomaly, says):
    eng = factory()
    assert anomaly in eng.scenarios[scenario].anomalies or anomaly == "rejudged"  # a race only with a greedy judge
    with TrialRunner(eng, scenario) as r:
        res = search(r, budget=BUDGET, seed=0, want=named(anomaly, says), shrink=False)
        assert res.admits and res.tried <= BUDGET, f"no {anomaly} ({says}) in {BUDGET} trials of {scenario}"
        replays_identically(r, res.found)


def test_letta_version_conflict_is_a_clean_abort_when_flushes_overlap():
    with TrialRunner(letta(), "two-writers-one-block") as r:
        hits = []
        for seed in range(BUDGET):
            trace, out = r.run(TapeChooser(tape(seed)))
            if out.errors:
                hits.append((trace, out))
        assert hits, "no version conflict in the tapes"
        for trace, out in hits:
            (loser, err), = trace.errors.items()
            assert isinstance(err, BlockVersionConflict) and clean_abort(err)
            assert out.failed == {} and loser not in out.completed
            assert out.key in r.serial_outcomes()  # detected, not lost: equal to the winner running alone
            kinds = [(s.agent, s.detail.split()[0]) for s in trace.steps if s.kind.startswith("sql")]
            loser_begin = kinds.index((loser, "BEGIN"))
            version_read = max(i for i in range(loser_begin) if kinds[i] == (loser, "SELECT"))
            winner_commit = next(i for i, (a, d) in enumerate(kinds) if a != loser and d == "COMMIT")
            assert version_read < winner_commit  # the version check read before the winner's flush committed


@pytest.mark.slow
def test_letta_stale_write_back_undoes_a_concurrent_change():
    with TrialRunner(letta(), "stale-write-back") as r:
        res = search(r, budget=BUDGET, seed=0)
        assert res.admits and res.found.outcome.state["blocks"][0] == ["human", BERLIN]
        assert any("never edited it" in a for a in res.found.anomalies)


def n1_findings(engine, scenario: str = "rejudge") -> list[str]:
    """N1 on the serial orders (a design property), else in seeded interleavings."""
    with TrialRunner(engine, scenario) as r:
        r.serial_outcomes()
        found = [d for _, _, out in r.serial_runs for d in r.by_design(out) if d.anomaly == "N1"]
        for seed in range(BUDGET):
            found += [d for d in r.by_design(r.trial(TapeChooser(tape(seed))).outcome) if d.anomaly == "N1"]
        return found


@pytest.mark.parametrize("model,greedy", [(LettaModel, letta_judge),
                                          pytest.param(MirixModel, mirix_judge, marks=pytest.mark.slow),
                                          pytest.param(Mem0V2Model, mem0_judge, marks=pytest.mark.slow)])
def test_N1_with_a_temperature_1_fixture_and_not_without(model, greedy):
    found = n1_findings(model())
    assert found and "judged twice with different answers" in found[0]
    assert n1_findings(model(rejudge_judge=greedy())) == []


@pytest.mark.slow
def test_mirix_reader_sees_the_slot_empty_mid_update():
    with TrialRunner(mirix(), "reader-mid-update") as r:
        res = search(r, budget=BUDGET, seed=0)
        assert res.admits and res.found.trace.results["R"]["results"] == [[]]
        steps = [(s.agent, s.detail.split()[0]) for s in res.found.trace.steps if s.kind.startswith("sql")]
        assert steps.index(("W", "DELETE")) < steps.index(("R", "SELECT")) < steps.index(("W", "INSERT"))


# -- the comparator excludes all of it --------------------------------------------------------------

FAST_COMPARATOR = {"concurrent-update", "reader-mid-update"}


@pytest.mark.parametrize("scenario", [pytest.param(s, marks=() if s in FAST_COMPARATOR else pytest.mark.slow)
                                      for s in comparator().scenarios])
def test_comparator_excludes_everything_within_the_budget(scenario):
    with TrialRunner(comparator(), scenario) as r:
        res = search(r, budget=BUDGET, seed=0)
        assert not res.admits, res.found and res.found.anomalies
        for seed in range(10):
            res = r.trial(TapeChooser(tape(seed)))
            assert res.serializable and r.by_design(res.outcome) == []
            assert res.outcome.errors == {}


def test_comparator_writers_really_overlap_and_wait_for_the_lock():
    with TrialRunner(comparator(), "concurrent-update") as r:
        blocked = [s for seed in range(10) for s in r.trial(TapeChooser(tape(seed))).trace.steps if s.blocked]
        assert blocked and all(s.detail == "BEGIN IMMEDIATE" for s in blocked)


def test_the_detectors_can_fail():
    """The same detectors the comparator passes flag the races in the models."""
    with TrialRunner(mem0_v2(), "concurrent-update") as r:
        res = first_finding(r, "lost-update")
        assert res is not None and not res.serializable
    with TrialRunner(mem0_v2(), "update-overwrites") as r:
        _, out = r.run(SerialChooser(("U",)))
        assert r.by_design(out)  # N3 fires on a serial mem0 run; the comparator's stays empty


# -- the reported races on the models (one classification path: the reported-races experiment) -------------------

EXPECTED = {"race": "reproduced (race)", "clean-abort": "reproduced (clean abort)", "design": "reproduced (design)",
            "judge": "judge failure"}
ON_MODELS = [r for r in reported_races.REPORTS if r.engine in ENGINES and ENGINES[r.engine].factory.startswith(
    ("toki.engines.models.", "toki.engines.atommem_model"))]


def test_some_reports_run_on_models():
    assert {r.engine for r in ON_MODELS} >= {"letta", "mirix", "mem0-v2"}


SLOW_REPORTS = {"letta-stale-block", "others-blind-put-mem0-v2", "others-consolidation-letta",
                "others-double-remember-mirix"}


@pytest.mark.parametrize("report", [pytest.param(r, id=r.id, marks=pytest.mark.slow if r.id in SLOW_REPORTS else ())
                                    for r in ON_MODELS])
def test_reported_race_is_classified(report, tmp_path):
    assert report.scenario in load_engine(report.engine).scenarios
    row = reported_races.classify(report, budget=BUDGET, seed=0, witness_dir=tmp_path)
    assert row["executed"] == "model"
    assert row["result"] == EXPECTED[report.kind], row
    if report.kind == "race":  # the witness replays the anomaly
        w = Witness.load(row["witness"])
        with TrialRunner(load_engine(report.engine), report.scenario) as r:
            again = r.trial(ReplayChooser(w.grants))
            assert report.anomaly in [a.split(":", 1)[0] for a in again.anomalies]
