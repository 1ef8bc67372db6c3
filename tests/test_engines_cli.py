"""`toki certify --engine/--engine-module/--replay` and `toki engines list`: plug-ins, bad input."""

from __future__ import annotations

import io
import json

import pytest

from toki.cli import main


def _toki(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_engine_module_plugin_is_certified_and_its_fix_holds(tmp_path):
    rc, out, err = _toki("certify", "--engine-module", "tests.toy_engine:counter", "--budget", "30",
                         "--witness", str(tmp_path / "w.json"), "--svg", str(tmp_path / "w.svg"))
    assert rc == 1, out + err
    w = tmp_path / "w.increment.json"  # one file per scenario, named for it, even when there is one
    assert "lost-update" in out and w.exists() and (tmp_path / "w.increment.svg").exists()
    assert f"witness {w} " in out and not (tmp_path / "w.json").exists()
    assert json.loads(w.read_text())["engine_module"] == "tests.toy_engine:counter"
    rc, out, err = _toki("certify", "--replay", str(w), "--times", "20")
    assert rc == 1 and "20 of 20" in out, out + err
    rc, out, err = _toki("certify", "--engine-module", "tests.toy_engine:counter_locked", "--budget", "30")
    assert rc == 0 and "excludes" in out, out + err


def test_an_engine_that_reads_out_nothing_cannot_pass():
    rc, out, err = _toki("certify", "--engine-module", "tests.toy_engine:counter_silent", "--budget", "10")
    assert rc == 1 and "unverifiable" in out, out + err


def test_engines_list_names_real_engines_and_models():
    rc, out, err = _toki("engines", "list", "--json")
    assert rc == 0, err
    doc = {e["name"]: e for e in json.loads(out)}
    assert {"sodamem", "sodamem-fixed", "atommem", "atommem-atomic", "toki"} <= set(doc)
    assert doc["atommem"]["executed"] == "model" and doc["toki"]["executed"] == "real"
    # a row says the system and version it stands for, not only toki's name for it
    assert doc["mem0-v2"]["system"] == "mem0 1.0.x" and doc["mem0-v2"]["executed"] == "model"
    assert doc["sodamem"]["system"].startswith("SodaMem ")


@pytest.mark.parametrize("argv, needle", [
    (["certify", "--engine", "nosuch"], "unknown engine"),
    (["certify", "--engine-module", "tests.toy_engine:counter", "--scenario", "nosuch"], "no scenario"),
    (["certify", "--engine-module", "tests.toy_engine"], "module:factory"),
    (["certify", "--engine-module", "nosuch.module:x"], "cannot import"),
    (["certify", "--engine-module", "tests.toy_engine:counter", "--budget", "0"], "at least 1"),
    (["certify", "--replay", "/nonexistent/w.json"], "does not exist"),
    (["certify", "--engine", "toki", "--dsn", "mysql://root@127.0.0.1:3306/test"], "runs on postgresql"),
    (["certify", "--engine-module", "tests.toy_engine:counter", "--dsn", "sqlite:///x.db"], "own storage"),
])
def test_bad_input_exits_2_naming_the_fix(argv, needle):
    rc, out, err = _toki(*argv)
    assert rc == 2 and needle in err, (rc, out, err)


def test_two_ways_in_at_once_is_a_usage_error(capsys):
    rc, out, err = _toki("certify", "--engine", "sodamem", "--adapter", "x:y")
    assert rc == 2 and "not allowed" in capsys.readouterr().err


def test_a_file_that_is_not_a_witness_is_refused(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"name": "lost-update"}')
    rc, out, err = _toki("certify", "--replay", str(p))
    assert rc == 2 and "not a toki engine witness" in err


@pytest.mark.slow
@pytest.mark.db
def test_tokis_own_write_path_through_the_harness_agrees_with_the_contract_suites():
    """At its precondition ⊕t (RC) and ⊕p (SI, with an incumbent) hold; without the re-read
    guard ⊕t admits two current values, as the contract suites' P4 detector says."""
    from toki.engines.registry import load_engine
    from toki.harness.search import search
    from toki.harness.trial import TrialRunner

    eng = load_engine("toki")
    verdicts = {}
    for sc in ("lww-at-RC", "lww-unguarded-at-RC", "evi-at-SI", "evi-empty-slot-at-SI", "rule-at-SR", "rule-at-SI"):
        with TrialRunner(eng, sc) as tr:
            verdicts[sc] = search(tr, budget=12, seed=0).admits
    assert verdicts == {"lww-at-RC": False, "lww-unguarded-at-RC": True, "evi-at-SI": False,
                        "evi-empty-slot-at-SI": True, "rule-at-SR": False, "rule-at-SI": True}


@pytest.mark.slow
def test_pytest_plugin_gates_an_engine(toki_certify_engine):
    res = toki_certify_engine("tests.toy_engine:counter", "increment", budget=30, expect="admits")
    assert res.admits
    toki_certify_engine("tests.toy_engine:counter_locked", "increment", budget=30)


@pytest.mark.slow
def test_certify_on_a_cluster_gives_the_in_process_verdicts():
    pytest.importorskip("distributed")

    def verdicts(*extra):
        rc, out, err = _toki("certify", "--engine-module", "tests.toy_engine:counter", "--budget", "20", "--json",
                             *extra)
        assert rc == 1, err
        return [{k: v for k, v in d.items() if k != "elapsed_s"} for d in json.loads(out)["verdicts"]]

    assert verdicts("--cluster", "local:2") == verdicts()


def test_a_verdict_cell_told_nothing_is_unverifiable_not_excludes(tmp_path):
    import dataclasses

    from tests import toy_engine
    from toki.experiments.verdicts import cell

    eng = toy_engine.counter_silent()
    eng.scenarios = {k: dataclasses.replace(s, anomalies=("lost-update",)) for k, s in eng.scenarios.items()}
    row = cell(eng, "lost-update", budget=5, trials=2, seed=0, witness_dir=tmp_path)
    assert row["verdict"] == "unverifiable" and "empty" in row["reason"]
