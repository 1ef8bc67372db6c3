"""mem0 1.0.11 real (toki.engines.mem0_v1_engine, the paper's "mem0 v2"): beside mem0 2.x it is
unavailable and names its extra; in its own environment its unmodified Memory runs under the harness
with the model's scenarios, and the cells the model admits are admitted by the real code."""

from __future__ import annotations

import pytest

from toki.engines.registry import ENGINES, available, load_engine
from toki.errors import ConfigError


def _v1() -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mem0ai").startswith("1.0.")
    except PackageNotFoundError:
        return False


needs_v1 = pytest.mark.skipif(not _v1(), reason="mem0ai 1.0.x (the mem0-v1 extra) is not installed here")


def test_registry_says_real_and_names_its_extra():
    info = ENGINES["mem0-v1"]
    assert info.executed == "real" and info.extra == "mem0-v1" and info.release == ("mem0ai", "1.0.")
    assert "toki[mem0-v1]" in info.install
    assert ENGINES["mem0-v2"].executed == "model"


@pytest.mark.skipif(_v1(), reason="mem0 1.0.x is installed here")
def test_beside_mem0_2x_it_is_unavailable_and_names_its_extra():
    assert not available(ENGINES["mem0-v1"])
    with pytest.raises(ConfigError) as e:
        load_engine("mem0-v1")
    assert "mem0ai 1.0.x" in str(e.value) and "toki[mem0-v1]" in e.value.fix


@needs_v1
def test_the_models_scenarios_run_on_the_real_code():
    from toki.engines.models.mem0_v2 import mem0_v2

    eng = load_engine("mem0-v1")
    assert eng.executed == "real" and eng.system.startswith("mem0 1.0.")
    assert set(eng.scenarios) == set(mem0_v2().scenarios)


@needs_v1
@pytest.mark.slow
@pytest.mark.db
def test_serial_refinements_merge_and_love_then_hate_empties_the_store():
    from toki.harness.controller import SerialChooser
    from toki.harness.engine import connect_database
    from toki.harness.trial import TrialRunner

    eng = load_engine("mem0-v1")
    connect_database(eng, None)
    try:
        with TrialRunner(eng, "concurrent-update") as r:
            _, out = r.run(SerialChooser(("A", "B")))
        assert [m[1] for m in out.state["memories"]] == ["Alice likes green tea with milk."]
        with TrialRunner(eng, "love-then-hate") as r:
            _, out = r.run(SerialChooser(("U",)))
            assert out.state["memories"] == []  # the judge failure the users reported, on the real code
            assert any(f.anomaly == "judge-failure" for f in r.by_design(out))
    finally:
        eng.shutdown()


@needs_v1
@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("anomaly", ["lost-update", "double-supersede", "duplicate-insert", "N2"])
def test_real_mem0_1_0_admits_what_the_model_admits_and_the_witness_replays(anomaly, tmp_path):
    from toki.experiments.verdicts import cell
    from toki.harness.controller import ReplayChooser
    from toki.harness.engine import connect_database
    from toki.harness.trial import TrialRunner
    from toki.harness.witness import Witness

    eng = load_engine("mem0-v1")
    connect_database(eng, None)
    try:
        row = cell(eng, anomaly, budget=30, trials=0, seed=42, witness_dir=tmp_path)
        assert row["verdict"] == "admits", row
        w = Witness.load(row["witness"])
        with TrialRunner(eng, w.scenario) as r:
            again = r.trial(ReplayChooser(w.grants))
        assert any(a.anomaly == anomaly for a in again.anomalies)
    finally:
        eng.shutdown()
