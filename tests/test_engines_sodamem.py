"""SodaMem, real and unmodified, under the engine harness (needs the `engines` extra)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sodamem")

from toki.cli import main  # noqa: E402
from toki.harness.controller import ReplayChooser, SerialChooser  # noqa: E402
from toki.harness.draw import marked_steps  # noqa: E402
from toki.engines.registry import load_engine  # noqa: E402
from toki.harness.search import context_switches, search  # noqa: E402
from toki.harness.trial import TrialRunner  # noqa: E402
from toki.harness.witness import Witness, digest  # noqa: E402

BUDGET = 40


def _active(state, predicate="lives_in"):
    return sorted(f["object"] for f in state["facts"] if f["predicate"] == predicate and f["status"] == "active")


def test_serial_orders_leave_one_current_value_whatever_the_order():
    """SodaMem's own promise (ingest-order independence): either order leaves Paris alone."""
    with TrialRunner(load_engine("sodamem"), "double-supersede") as tr:
        for order in (("A", "B"), ("B", "A")):
            _, out = tr.run(SerialChooser(order))
            assert _active(out.state) == ["paris"], order


@pytest.mark.slow
def test_search_finds_the_double_supersede_shrinks_and_replays_20_of_20(tmp_path):
    eng = load_engine("sodamem")
    with TrialRunner(eng, "double-supersede") as tr:
        res = search(tr, budget=BUDGET, seed=0)
        assert res.admits and res.tried <= BUDGET
        found = res.found
        assert _active(found.outcome.state) == ["paris", "rome"]
        assert any(a.anomaly == "double-supersede" for a in found.anomalies)
        assert context_switches(found.trace) == 2
        w = Witness.load(Witness.from_trial(eng, "double-supersede", found, seed=0, budget=BUDGET)
                         .save(tmp_path / "w.json"))
        outcomes = [tr.trial(ReplayChooser(w.grants)) for _ in range(20)]
    assert all(digest(o.outcome.key) == w.outcome and not o.serializable for o in outcomes)
    marks = [s for s in w.steps if s.seq in marked_steps(w.steps)]
    assert {s.agent for s in marks} == {"A", "B"} and all("fact_events" in s.detail for s in marks)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["double-supersede", "patch-supersede", "delete-vs-supersede"])
def test_the_fixed_wrapper_holds_where_sodamem_does_not(scenario):
    with TrialRunner(load_engine("sodamem"), scenario) as tr:
        assert search(tr, budget=BUDGET, seed=1, shrink=False).admits
    with TrialRunner(load_engine("sodamem-fixed"), scenario) as tr:
        res = search(tr, budget=BUDGET, seed=1)
    assert not res.admits and res.tried == BUDGET


def test_patch_supersede_loses_one_writers_update():
    with TrialRunner(load_engine("sodamem"), "patch-supersede") as tr:
        res = search(tr, budget=BUDGET, seed=2, shrink=False)
    assert res.admits and any(a.anomaly == "lost-update" for a in res.found.anomalies)


@pytest.mark.slow
def test_preferences_without_an_update_cue_stay_current_in_every_order():
    with TrialRunner(load_engine("sodamem"), "preference-no-cue") as tr:
        res = search(tr, budget=15, seed=0)
    assert not res.admits


@pytest.mark.slow
def test_cli_certify_engine_witness_replay_and_picture(tmp_path):
    w, png, junit = tmp_path / "w.json", tmp_path / "w.png", tmp_path / "j.xml"
    import io
    out = io.StringIO()
    rc = main(["certify", "--engine", "sodamem", "--scenario", "double-supersede", "--budget", str(BUDGET),
               "--witness", str(w), "--png", str(png), "--junit", str(junit)], out=out)
    assert rc == 1, out.getvalue()
    w, png = tmp_path / "w.double-supersede.json", tmp_path / "w.double-supersede.png"  # named per scenario
    assert "admits" in out.getvalue() and png.stat().st_size > 10000 and "<failure" in junit.read_text()
    doc = json.loads(w.read_text())
    assert doc["engine"] == "sodamem" and doc["executed"] == "real" and doc["version"] == "0.1.1"
    assert doc["provenance"]["seed"] == 0 and doc["grants"]
    out = io.StringIO()
    assert main(["certify", "--replay", str(w), "--times", "3"], out=out) == 1
    assert "reproduced the recorded outcome 3 of 3" in out.getvalue()
    out = io.StringIO()
    assert main(["certify", "--engine", "sodamem-fixed", "--scenario", "double-supersede", "--budget", "20",
                 "--json"], out=out) == 0
    v = json.loads(out.getvalue())["verdicts"][0]
    assert v["verdict"] == "excludes" and v["trials"] == 20
