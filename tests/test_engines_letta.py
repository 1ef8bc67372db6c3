"""Letta 0.16.8 real (toki.engines.letta_engine): where the `letta` extra is not installed the engines
say so and name the extra; where it is (an environment of its own), its unmodified services run
under the harness: the model's findings on the real code, and the witnesses replay."""

from __future__ import annotations

import importlib.util

import pytest

from toki.engines.registry import ENGINES, available, load_engine
from toki.errors import ConfigError


def _letta_installed() -> bool:
    if importlib.util.find_spec("letta") is None:
        return False
    from importlib.metadata import version

    return version("letta").startswith("0.16.")


needs_letta = pytest.mark.skipif(not _letta_installed(), reason="the letta extra (letta 0.16.x) is not installed here")


@pytest.mark.parametrize("name", ["letta-sqlite", "letta-postgres"])
def test_registry_says_real_and_names_its_extra(name):
    info = ENGINES[name]
    assert info.executed == "real" and info.extra == "letta"
    assert "toki[letta]" in info.install and "environment of its own" in info.install
    assert ENGINES["letta"].executed == "model"  # the model stays, under its old name


@pytest.mark.skipif(_letta_installed(), reason="letta is installed here")
def test_without_the_extra_the_engine_refuses_and_names_the_extra():
    assert not available(ENGINES["letta-sqlite"])
    with pytest.raises(ConfigError) as e:
        load_engine("letta-sqlite")
    assert "toki[letta]" in e.value.fix


def test_engines_list_shows_the_executed_kind_of_every_engine():
    import json

    from tests._cli import toki

    rc, out, _ = toki("engines", "list", "--json")
    assert rc == 0
    doc = {e["name"]: e for e in json.loads(out)}
    assert doc["letta-sqlite"]["executed"] == doc["letta-postgres"]["executed"] == doc["mem0-v1"]["executed"] == "real"
    assert doc["letta"]["executed"] == "model"
    assert all(e["executed"] in ("real", "model", "blocked") for e in doc.values())


@needs_letta
@pytest.mark.slow
def test_serial_writers_both_append_on_sqlite():
    from toki.harness.controller import SerialChooser
    from toki.harness.trial import TrialRunner

    eng = load_engine("letta-sqlite")
    assert eng.executed == "real" and eng.version.startswith("0.16.")
    with TrialRunner(eng, "two-writers-one-block") as r:
        _, out = r.run(SerialChooser(("A", "B")))
    (label, value), = out.state["blocks"]
    assert label == "human" and "Alice has a cat." in value and "Alice plays the violin." in value


@needs_letta
@pytest.mark.slow
@pytest.mark.parametrize("scenario,anomaly", [("two-writers-one-block", "lost-update"),
                                              ("patch-two-blocks", "N2")])
def test_real_letta_admits_and_the_witness_replays(scenario, anomaly, tmp_path):
    from toki.harness.controller import ReplayChooser
    from toki.harness.search import search
    from toki.harness.trial import TrialRunner
    from toki.harness.witness import Witness

    eng = load_engine("letta-sqlite")
    with TrialRunner(eng, scenario) as r:
        res = search(r, budget=12, seed=0, shrink=False, want=lambda t: any(a.anomaly == anomaly for a in t.anomalies))
        assert res.found is not None, f"{anomaly} not found in {res.tried} interleavings"
        w = Witness.from_trial(eng, scenario, res.found, seed=0, budget=12)
        path = w.save(tmp_path / "w.json")
        again = r.trial(ReplayChooser(Witness.load(path).grants))
    assert any(a.anomaly == anomaly for a in again.anomalies)
