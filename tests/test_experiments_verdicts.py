"""The verdict matrix (Table 4): no cell abstains for want of a scenario, rows say what system and
version they stand for, and the cells that used to abstain get a verdict from the harness."""

from __future__ import annotations

import io

import pytest

from toki.engines.registry import ENGINES, available, load_engine
from toki.experiments.verdicts import ANOMALIES, SYSTEMS, cell, row_label
from toki.harness.engine import connect_database


def _engines():
    return [load_engine(n) for n in SYSTEMS if available(ENGINES[n])]


def test_every_cell_has_a_scenario_or_a_design_fact():
    """A cell abstains only where the engine names the design fact that rules the anomaly out."""
    missing = []
    for eng in _engines():
        for a in ANOMALIES:
            tagged = [s for s in eng.scenarios.values() if a in s.anomalies]
            why = getattr(eng, "abstains", {}).get(a)
            if not tagged and not why:
                missing.append((eng.name, a))
            if why:
                assert "no scenario" not in why and "not an engine scenario" not in why, (eng.name, a, why)
    assert missing == []


def test_rows_name_the_system_and_version_they_stand_for():
    names = {e.name: e.system for e in _engines()}
    assert names["mem0-v2"] == "mem0 1.0.x"
    if "mem0" in names:
        from importlib.metadata import version

        assert names["mem0"] == f"mem0 {version('mem0ai')}"
    assert row_label({"system": "mem0 1.0.x", "executed": "model"}) == "mem0 1.0.x (model)"
    assert len(set(names.values())) == len(names)  # no two rows read alike


@pytest.mark.parametrize("system,anomaly,verdict", [
    ("mem0-v2", "double-supersede", "admits"),  # DELETE then ADD of an employer, both from the same read
    ("mem0-v2", "N2", "admits"),  # a search between the DELETE and the ADD
    ("atommem", "double-supersede", "admits"),  # both overwrite F1 judged against Berlin
    ("atommem", "N2", "admits"),  # the profiles drift from a revised fact (in a serial order: by design)
    ("letta", "double-supersede", "admits"),  # both replace Berlin in step-start copies
    ("letta", "duplicate-insert", "excludes"),  # the block is written whole: a line cannot land twice
    pytest.param("sodamem", "duplicate-insert", "admits", marks=pytest.mark.slow),  # both ingests read before either writes
    pytest.param("sodamem", "N1", "excludes", marks=pytest.mark.slow),  # no judge: the order key decides the same way every time
])
def test_cells_that_had_no_scenario_get_a_verdict(system, anomaly, verdict, tmp_path):
    if not available(ENGINES[system]):
        pytest.skip(f"{system} is not installed")
    eng = load_engine(system)
    connect_database(eng, None)
    row = cell(eng, anomaly, budget=8, trials=2, seed=42, witness_dir=tmp_path)
    assert row["verdict"] == verdict, row
    assert row["engine"] == system and row["system"] == eng.system
    assert (row["witness"] is not None) == (verdict == "admits")


@pytest.mark.slow
@pytest.mark.db
def test_toki_n2_is_excluded_at_its_guard_and_admitted_below(tmp_path):
    from toki.harness.search import search
    from toki.harness.trial import TrialRunner

    eng = load_engine("toki")
    connect_database(eng, None)
    assert cell(eng, "N2", budget=6, trials=0, seed=42, witness_dir=tmp_path)["verdict"] == "excludes"
    with TrialRunner(eng, "n2-at-SI") as tr:  # the same programs at SI: the write skew shows
        res = search(tr, budget=20, seed=0, shrink=False)
    assert res.admits and any(a.anomaly == "N2" for a in res.found.anomalies)


def test_the_printed_table_says_where_it_differs_from_the_paper(tmp_path):
    from toki.cli import main

    out = io.StringIO()
    rc = main(["experiment", "verdicts", "--systems", "mem0-v2", "--budget", "4", "--trials", "1",
               "--json", str(tmp_path / "v.json")], out=out)
    text = out.getvalue()
    assert rc == 0, text
    assert "mem0 1.0.x (model)" in text
    assert "differs from the paper: mem0 1.0.x (model) N1: paper abstains, measured admits" in text
