"""Two checkers, one truth: a harness trial written as a memory history (toki.record.trial_history)
is checked by ``toki check --workload memory``, and its answer agrees with the harness's own
detectors on the same run: on every serial run (both find nothing) and on the shipped witness
(both name the anomaly). Where a detector reads state the history does not carry, the table in
docs/memory-histories.md ("A harness trial as a memory history") says why, and CARRIED below
leaves it out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._cli import toki as _toki
from toki.harness.controller import ReplayChooser
from toki.harness.trial import TrialRunner
from toki.harness.witness import Witness
from toki.record.trial_history import trial_history, write_history

DOCS = Path(__file__).resolve().parent.parent / "docs"

# engine -> detector anomaly -> the checker's name for it (detectors the history can carry).
CARRIED = {"sodamem": {"double-supersede": "double-supersede"}}


def _detected(scenario, outcome) -> set[str]:
    found = set()
    for d in scenario.detectors:
        if getattr(d, "always", False):
            continue
        msgs = d.check(outcome.state, outcome.errors, outcome.observed or {}) if d.observes \
            else d.check(outcome.state, outcome.errors)
        if list(msgs or []):
            found.add(d.anomaly)
    return found


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
    carried = CARRIED[engine.name]
    by_detectors = {carried[a] for a in _detected(scenario, outcome) if a in carried}
    by_checker = set(res["anomaly_types"])
    assert res["valid"] is (not by_checker), res  # never "unknown": the history holds the run's calls
    return by_detectors, by_checker


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
