"""Two checkers, one truth: a harness trial written as a memory history (toki.record.trial_history)
is checked by ``toki check --workload memory``, and its answer agrees with the harness's own
detectors on the same run: on every serial run (both find nothing, or both a design property)
and on interleaved runs (both name the anomaly): SodaMem's shipped witness, and for TOKI's write
path, mem0, LangMem, Graphiti and the Zep model (no shipped witness) seeded random
interleavings that include each scenario's race. Where a detector reads state the history does not carry, the table in
docs/memory-histories.md ("A harness trial as a memory history") says why, and CARRIED below
leaves it out; where the checker finds what no detector looks for, CHECKER_ONLY names it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests._cli import toki as _toki
from toki.harness.controller import ReplayChooser, TapeChooser
from toki.harness.trial import TrialRunner
from toki.harness.witness import Witness
from toki.record.trial_history import trial_history, write_history

DOCS = Path(__file__).resolve().parent.parent / "docs"

# engine -> detector anomaly -> the checker's names for it (detectors the history can carry); a
# scenario's own entry ("engine:scenario") overrides its engine's. A detector marked ``always`` (a
# design property, found in serial runs too) is compared only when the checker's counterpart is
# an invariant it reports in serial histories too (N3).
CARRIED: dict[str, dict[str, tuple[str, ...]]] = {
    "sodamem": {"double-supersede": ("double-supersede",)},
    # TOKI's write path: several current values of the slot (A5B below a precondition) and two
    # active policies for one pair (P3) are a current read holding two claims; the same claim
    # current twice is a duplicate insert; a committed write's token in no row is its claim
    # missing from the final history read (N3; P4 is never found in these runs); two
    # adjudications choosing differently is N1.
    "toki": {"A5B": ("double-supersede",), "double-supersede": ("double-supersede",),
             "P3": ("double-supersede",), "duplicate-insert": ("duplicate-insert",), "P4": ("N3",),
             "lost-update": ("N3",), "N3": ("N3",), "N1": ("N1",)},
    # mem0: two UPDATEs from one old value are two calls that read the same text and replaced it
    # (lost-update, its G-single-item cycle); an UPDATE after the DELETE of the value it read is
    # the same cycle between the update and the delete; two copies of a text are a duplicate
    # insert. both-current (always) is mem0's design: the user's memories are a multi-valued
    # slot, where two current claims are no anomaly.
    "mem0": {"duplicate-insert": ("duplicate-insert",), "lost-update": ("G-single-item", "lost-update"),
             "stale-history": ("G-single-item", "lost-update")},
    # the entity store's lost link: the final read holds B's memory but not B's link, which no
    # serial order explains (G-single-item through the read's two slots: N2)
    "mem0:reported-linked-ids-p4": {"lost-update": ("G-single-item", "N2")},
    # LangMem: each call's read is the memory its model was shown (the judge's vote, the list it
    # patched), so two calls that replaced one stale value are also a lost update (G2-item): the
    # checker names what the detector names and that. A recall between the put of the new
    # memory and the delete of the old one (N2 to the detector, which reads what R was told)
    # is, in the history, a read holding two residences that no serial order explains
    # (G-single-item, double-supersede). rejudged (always) is N1 in the checker too: two
    # decisions on one read set, two answers.
    "langmem": {"lost-update": ("G2-item", "lost-update"), "double-supersede": ("G2-item", "double-supersede",
                                                                               "lost-update"),
                "duplicate-insert": ("duplicate-insert", "lost-update"), "N1": ("N1",),
                "N2": ("G-single-item", "double-supersede")},
    # Graphiti: two current facts of a slot are a read holding two claims; an entity or edge
    # stored twice a duplicate insert; a summary line lost (Alice's summary is appended to, its
    # lines in append order: a history read) is an acknowledged append missing (N3) from a read
    # that holds the call's fact (G-single-item through two slots: N2); a citation lost from an
    # edge's episodes list (which the state sorts: a current read) is that read holding the
    # call's episode and not its citation (G-single-item, N2). Not carried: the end date of an
    # invalidated edge (lost_invalidation), valid-time order (older_survives), group ids.
    "graphiti": {"double-supersede": ("double-supersede",), "duplicate-insert": ("duplicate-insert",),
                 "lost-update:lost_summary": ("N3", "G-single-item", "N2"),
                 "lost-update:lost_provenance": ("G-single-item", "N2"),
                 "N3:provenance_erased": ("G-single-item", "N2"), "lost-update:lost_invalidation": (),
                 "stale-current": (), "N1": ("N1",), "N2": ("G-single-item", "double-supersede")},
}
CARRIED["zep"] = CARRIED["graphiti"]  # the Zep CE model runs Graphiti's code: the same state, the same hook
# Names the checker may add to the detectors' on a run where they found something (never alone):
# engine -> names (see CARRIED's comments).
ALSO: dict[str, set[str]] = {
    # Graphiti: a lost summary line whose fact the other call invalidated puts the two calls'
    # writes in both orders (the summary's, the edges'): a write cycle no detector reads
    "graphiti": {"G0"}, "zep": {"G0"},
}
# Where the checker finds what no detector of the scenario looks for (a finding, reported in
# docs/memory-histories.md): engine:scenario -> what the checker names on those runs.
CHECKER_ONLY: dict[str, set[str]] = {
    # two PatchDocs of the one Berlin memory, each from Berlin: the later put overwrites the
    # other's value unseen. The detector asks only whether two residences are current (never:
    # one key), and the final state equals a serial order's, so the harness passes the run.
    "langmem:double-patch": {"G2-item", "lost-update"},
}


def _carried(engine, scenario) -> dict[str, tuple[str, ...]]:
    return {**CARRIED[engine.name], **CARRIED.get(f"{engine.name}:{scenario.name}", {})}


def _tapes(n: int) -> list[TapeChooser]:
    """Seeded random interleavings (switching rates 1 to 3): deterministic, so each test sees the
    same runs; among them are the races the racy scenarios have."""
    out = []
    for seed in range(n):
        rnd = random.Random(seed)
        out.append(TapeChooser([rnd.randrange(16) for _ in range(300)], rate=1 + seed % 3))
    return out


def _factory(d) -> str:
    """The detector's maker (``lost_summary`` for one of Graphiti's three lost-update detectors)."""
    return getattr(d.check, "__qualname__", "").split(".")[0]


def _detected(scenario, outcome) -> set[tuple[str, str]]:
    """(anomaly, the detector's maker) of every detector that fired."""
    found = set()
    for d in scenario.detectors:
        msgs = d.check(outcome.state, outcome.errors, outcome.observed or {}) if d.observes \
            else d.check(outcome.state, outcome.errors)
        if list(msgs or []):
            found.add((d.anomaly, _factory(d)))
    return found


def _names(carried: dict, fired) -> set[str]:
    """The checker's names for the fired detectors: a maker's own entry ("lost-update:lost_summary"),
    else the anomaly's; an empty entry is a detector the history cannot carry."""
    out = set()
    for a, f in fired:
        out |= set(carried.get(f"{a}:{f}", carried.get(a, ())))
    return out


def _checked(tmp_path: Path, name: str, ops: list[dict]) -> dict:
    """The memory checker's answer through the command line, as a user runs it."""
    path = write_history(ops, tmp_path / f"{name}.jsonl")
    rc, out, err = _toki("check", str(path), "--workload", "memory", "--json", "-")
    assert rc in (0, 1), (rc, out, err)
    return json.loads(out)


def _agree(engine, scenario, trace, outcome, tmp_path, name) -> tuple[set, set]:
    ops = trial_history(engine, scenario, trace, outcome)
    assert ops is not None, f"{engine.name} has no memory history for {scenario.name}"
    res = _checked(tmp_path, name, ops)
    carried = _carried(engine, scenario)
    by_detectors = _names(carried, _detected(scenario, outcome))
    by_checker = set(res["anomaly_types"])
    if res["valid"] == "unknown" and scenario.name.startswith("n1-"):
        # one adjudication completed (the other agent's write of the same fact was refused): the
        # checker has no two decisions to compare and says unknown, never valid on nothing
        assert by_checker == {"empty-transaction-graph"}, res
        assert sum(1 for op in ops if op.get("type") == "ok") == 1, ops
        return by_detectors, set()
    assert res["valid"] is (not by_checker), res  # never "unknown": the history holds the run's calls
    return by_detectors, by_checker


def _agree_and_find(engine, scenario: str, tmp_path, tapes: int, races: dict, every=None) -> None:
    """:func:`_agree_on_runs`, and the scenario's known race among what was found (``every``: the
    engine's scenarios, all of which the test lists)."""
    if every is not None:
        assert set(every) == set(engine.scenarios)
    found = _agree_on_runs(engine, scenario, tmp_path, tapes=tapes)
    if scenario in races:
        assert any(races[scenario] in f for f in found.values()), found


def _agree_on_runs(engine, scenario_name: str, tmp_path, tapes: int) -> dict:
    """Every serial run (both find nothing) and ``tapes`` seeded interleavings (both find the
    same): what each found, per run."""
    sc = engine.scenarios[scenario_name]
    found = {}
    with TrialRunner(engine, sc) as runner:
        runner.serial_outcomes()
        assert runner.serial_runs, "the serial orders of the agents ran"
        for order, trace, out in runner.serial_runs:
            det, chk = _agree(engine, sc, trace, out, tmp_path, "serial-" + "-".join(order))
            assert det == chk, (order, det, chk)
            always = {(d.anomaly, _factory(d)) for d in sc.detectors if getattr(d, "always", False)}
            assert not (chk - _names(_carried(engine, sc), always)), (order, chk)
        only = CHECKER_ONLY.get(f"{engine.name}:{scenario_name}", set())
        also = ALSO.get(engine.name, set())
        for i, chooser in enumerate(_tapes(tapes)):
            trace, out = runner.run(chooser)
            det, chk = _agree(engine, sc, trace, out, tmp_path, f"tape-{i}")
            assert det == chk or (only and chk == det | only) or (det and det <= chk and chk - det <= also), \
                (i, det, chk, out.state)
            found[i] = chk
    return found


@pytest.mark.parametrize("scenario", ["double-supersede"])
def test_sodamem_serial_runs_and_its_witness_agree(tmp_path, scenario):
    pytest.importorskip("sodamem")
    from toki.engines.registry import load_engine

    eng = load_engine("sodamem")
    sc = eng.scenarios[scenario]
    with TrialRunner(eng, sc) as runner:
        runner.serial_outcomes()
        assert runner.serial_runs, "the serial orders of both agents ran"
        for order, trace, out in runner.serial_runs:
            det, chk = _agree(eng, sc, trace, out, tmp_path, "-".join(order))
            assert det == chk == set(), (order, det, chk)
        w = Witness.load(DOCS / "engines" / "sodamem-double-supersede.witness.json")
        assert w.scenario == scenario
        trace, out = runner.run(ReplayChooser(w.grants))
        det, chk = _agree(eng, sc, trace, out, tmp_path, "witness")
        assert det == chk == {"double-supersede"}, (det, chk)


def test_a_scenario_without_a_memory_view_has_no_history():
    """Fail closed: no history, never an empty one that would check as valid."""
    pytest.importorskip("sodamem")
    from toki.engines.registry import load_engine

    eng = load_engine("sodamem")
    sc = eng.scenarios["predicate-drift"]

    class Out:
        state, completed, errors, failed = {"facts": []}, ("A",), {}, {}

    assert trial_history(eng, sc, None, Out()) is None


# TOKI's write path: every scenario but N2's (the state keeps the final partition and cache, not
# what each transaction read). The racy ones must show their race in the seeded interleavings.
TOKI_RACES = {"lww-unguarded-at-RC": "double-supersede", "evi-empty-slot-at-SI": "double-supersede",
              "evi-empty-slot-at-RC": "double-supersede", "rule-at-SI": "double-supersede", "n3-base": "N3"}
TOKI_SCENARIOS = ["lww-at-RC", "lww-unguarded-at-RC", "evi-at-SI", "evi-at-RC", "evi-empty-slot-at-SI",
                  "evi-empty-slot-slot-locked-at-SI", "evi-empty-slot-at-RC", "evi-empty-slot-at-SR", "n3-audit-row",
                  "n3-base", "n1-keyed-log", "duplicate-lww-at-RC", "duplicate-evi-at-SI", "rule-at-SR", "rule-at-SI"]


@pytest.mark.parametrize("scenario", TOKI_SCENARIOS)
def test_toki_write_path_serial_runs_and_interleavings_agree(tmp_path, scenario):
    from toki.engines.registry import load_engine

    _agree_and_find(load_engine("toki"), scenario, tmp_path, 6, TOKI_RACES)


def test_toki_n2_has_no_history():
    from toki.engines.registry import load_engine

    eng = load_engine("toki")

    class Out:
        state, completed, errors, failed = {"rows": [], "partition": [], "cache": []}, ("Q", "R"), {}, {}

    assert eng.memory_history("n2-at-SI", Out()) is None
    assert set(TOKI_SCENARIOS) | {"n2-at-SR", "n2-at-SI"} == set(eng.scenarios)


# mem0 2.2.1: every scenario. The racy ones show their race in the seeded interleavings.
MEM0_RACES = {"add-same-fact": "duplicate-insert", "add-same-fact-shared": "duplicate-insert",
              "reported-duplicate-add": "duplicate-insert", "update-update": "lost-update",
              "update-vs-delete": "lost-update", "reported-linked-ids-p4": "N2"}
MEM0_SCENARIOS = ["add-same-fact", "add-same-fact-shared", "add-contradicting", "update-update", "update-vs-delete",
                  "update-overwrites", "reported-duplicate-add", "reported-add-only-both-current",
                  "reported-linked-ids-p4", "reported-love-hate-empty-store"]


@pytest.mark.parametrize("scenario", MEM0_SCENARIOS)
def test_mem0_serial_runs_and_interleavings_agree(tmp_path, scenario):
    pytest.importorskip("mem0")
    from toki.engines.registry import load_engine

    eng = load_engine("mem0")
    assert set(MEM0_SCENARIOS) == set(eng.scenarios)
    try:
        found = _agree_on_runs(eng, scenario, tmp_path, tapes=8)
    finally:
        eng.shutdown()
    if scenario in MEM0_RACES:
        assert any(MEM0_RACES[scenario] in f for f in found.values()), found


# LangMem on SQLite (the harness's default store): every scenario.
LANGMEM_RACES = {"blind-put": "lost-update", "double-remember": "double-supersede", "double-patch": "lost-update",
                 "duplicate-remember": "duplicate-insert", "rejudge": "N1"}
LANGMEM_SCENARIOS = ["blind-put", "consolidation-vs-add", "ingestion-order", "double-remember", "double-patch",
                     "duplicate-remember", "replace-overwrites", "recall-during-replace", "rejudge"]


@pytest.mark.parametrize("scenario", LANGMEM_SCENARIOS)
def test_langmem_serial_runs_and_interleavings_agree(tmp_path, scenario):
    pytest.importorskip("langmem")
    from toki.engines.registry import load_engine

    _agree_and_find(load_engine("langmem"), scenario, tmp_path, 8, LANGMEM_RACES, every=LANGMEM_SCENARIOS)


def test_langmem_recall_between_put_and_delete_agrees(tmp_path):
    """The N2 window is a few steps wide: the bounded search (one preemption) finds it; both name it."""
    pytest.importorskip("langmem")
    from toki.engines.registry import load_engine
    from toki.harness.explore import explore

    eng = load_engine("langmem")
    with TrialRunner(eng, "recall-during-replace") as tr:
        res = explore(tr, bound=1, max_runs=60, want=lambda r: any(a.anomaly == "N2" for a in r.anomalies))
        assert res.found is not None
        trace, out = tr.run(ReplayChooser(res.found.trace.grants))
        det, chk = _agree(eng, tr.scenario, trace, out, tmp_path, "n2")
    assert det == chk == {"G-single-item", "double-supersede"}, (det, chk)


# Graphiti 0.31.2 on Kuzu (and the Zep CE model, the same code with a Graphiti per server
# worker): every scenario. A run takes about 0.6 s, so the interleavings are slow tests.
GRAPHITI_RACES = {"contradicting-episodes": "N3", "restated-fact": "N2", "new-entity-twice": "duplicate-insert",
                  "out-of-order-episodes": "double-supersede", "rejudge": "duplicate-insert"}
GRAPHITI_SCENARIOS = ["contradicting-episodes", "read-during-invalidation", "restated-fact", "new-entity-twice",
                      "out-of-order-episodes", "groups-share-driver", "wide-invalidation", "rejudge"]


@pytest.mark.slow
@pytest.mark.parametrize("engine_name", ["graphiti", "zep"])
@pytest.mark.parametrize("scenario", GRAPHITI_SCENARIOS)
def test_graphiti_serial_runs_and_interleavings_agree(tmp_path, scenario, engine_name):
    pytest.importorskip("graphiti_core")
    from toki.engines.registry import load_engine

    _agree_and_find(load_engine(engine_name), scenario, tmp_path, 4, GRAPHITI_RACES, every=GRAPHITI_SCENARIOS)


def test_graphiti_duplicate_entity_agrees(tmp_path):
    """The fast one: a serial run and one interleaving of new-entity-twice (Bob created twice)."""
    pytest.importorskip("graphiti_core")
    from toki.engines.registry import load_engine
    from toki.harness.controller import SerialChooser

    eng = load_engine("graphiti")
    sc = eng.scenarios["new-entity-twice"]
    with TrialRunner(eng, sc) as runner:
        trace, out = runner.run(SerialChooser(("A", "B")))
        assert _agree(eng, sc, trace, out, tmp_path, "serial") == (set(), set())
        trace, out = runner.run(_tapes(1)[0])
        assert _agree(eng, sc, trace, out, tmp_path, "tape") == ({"duplicate-insert"}, {"duplicate-insert"})


@pytest.mark.slow
def test_graphiti_read_between_the_two_edge_saves_agrees(tmp_path):
    """add_episode saves the new edge, then the invalidated old one: a read between them is told
    two residences. The one-preemption search finds it; both name it."""
    pytest.importorskip("graphiti_core")
    from toki.engines.registry import load_engine
    from toki.harness.explore import explore

    eng = load_engine("graphiti")
    with TrialRunner(eng, "read-during-invalidation") as tr:
        res = explore(tr, bound=1, max_runs=80, want=lambda r: any(a.anomaly == "N2" for a in r.anomalies))
        assert res.found is not None
        trace, out = tr.run(ReplayChooser(res.found.trace.grants))
        det, chk = _agree(eng, tr.scenario, trace, out, tmp_path, "n2")
    assert det == chk == {"G-single-item", "double-supersede"}, (det, chk, out.observed)
