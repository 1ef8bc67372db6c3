"""`toki certify` as a user's CI gate: baselines of accepted findings and time budgets.

A gate with a baseline goes red on a new race planted in a plug-in (``tests.plugins.gate_notes``
release 1.1) and stays green on the race its baseline accepts (release 1.0); a by-design finding
and an accepted race are kept apart in the file and the output; a malformed baseline is one line,
exit 2. ``--time-budget`` ends every search (random, PCT, exhaustive, a shard of a sharded one)
early with ``complete: false``, ``out_of_time: true`` and exit 3 ("not certified"). No wall-clock
time is asserted here: ``benchmarks/bench_gates.py`` measures how close to the budget a run ends.
"""

from __future__ import annotations

import io
import json
import re
import time
import tomllib
from pathlib import Path

import pytest

from toki.cli import main

ROOT = Path(__file__).resolve().parents[1]
GATE = "tests.plugins.gate_notes:"
# Exhaustive to 1 preemption: each of the three scenarios is a handful of interleavings, and the
# verdicts do not depend on a random draw.
SEARCH = ("--exhaustive", "1")


def _toki(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main([str(a) for a in argv], out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[int, str, Path]:
    """Release 1.0's findings, recorded as a baseline (the file as --write-baseline leaves it)."""
    path = tmp_path_factory.mktemp("baseline") / "toki-baseline.toml"
    rc, out, err = _toki("certify", "--engine-module", GATE + "released", *SEARCH, "--write-baseline", path)
    return rc, out + err, path


def _copy(recorded, tmp_path, edit=None) -> Path:
    text = recorded[2].read_text()
    path = tmp_path / "baseline.toml"
    path.write_text(edit(text) if edit else text)
    return path


def _verdicts(out: str) -> dict[str, dict]:
    return {v["scenario"]: v for v in json.loads(out)["verdicts"]}


# -- baselines -------------------------------------------------------------------------------------

def test_write_baseline_records_races_apart_from_by_design_findings_with_provenance(recorded):
    rc, out, path = recorded
    assert rc == 1, out  # the run's own status: release 1.0 admits a lost update (no baseline given)
    assert f"wrote baseline {path}: 1 accepted race(s) (counter), 1 by-design finding(s) (audit)" in out
    text = path.read_text()
    assert text.startswith("# Findings accepted for `toki certify --baseline FILE`")
    doc = tomllib.loads(text)
    assert doc["format"] == 1
    (race,) = doc["race"]
    (design,) = doc["by_design"]
    assert race["scenario"] == "counter" and race["anomalies"] == ["lost-update"]
    assert race["reason"].startswith("TODO") and race["example"].startswith("lost-update: counter is 1")
    assert design["scenario"] == "audit" and design["anomalies"] == ["no-history"] and design["reason"].startswith("TODO")
    prov = doc["provenance"]
    assert prov["engine"] == "gate-notes" and prov["version"] == "1.0" and prov["engine_module"] == GATE + "released"
    assert prov["toki_version"] and prov["created"]
    assert prov["options"]["search"] == "exhaustive" and prov["options"]["bound"] == 1 and prov["options"]["seed"] == 0
    assert prov["options"]["scenarios"] == ["counter", "notes", "audit"]


def test_a_gate_with_a_baseline_stays_green_on_the_accepted_race_and_goes_red_on_a_planted_one(recorded, tmp_path):
    base = recorded[2]
    rc, out, err = _toki("certify", "--engine-module", GATE + "released", *SEARCH, "--baseline", base)
    assert rc == 0, out + err
    assert re.search(r"counter\s*│\s*admits\s*│\s*lost-update.*accepted-race", out), out
    assert re.search(r"audit\s*│\s*by-design\s*│\s*no-history.*accepted-design", out), out
    assert "counter: baseline: accepted race: admits lost-update (reason: TODO" in out
    assert "audit: baseline: accepted by design: no-history" in out
    assert "nothing worse than the baseline accepts" in out
    assert "note: race counter: the reason is still the placeholder" in out

    junit = tmp_path / "j.xml"
    rc, out, err = _toki("certify", "--engine-module", GATE + "planted", *SEARCH, "--baseline", base,
                         "--junit", junit)
    assert rc == 1, out + err
    assert re.search(r"notes\s*│\s*admits\s*│\s*lost-note.*new-race", out), out
    assert ("notes: baseline: NEW race: admits lost-note, which the baseline does not accept (it accepts no race in "
            "this scenario)") in out
    assert "WORSE in notes: fails the gate" in out
    assert "note: the baseline was recorded with gate-notes 1.0; this is 1.1" in out
    xml = junit.read_text()
    assert xml.count("<failure") == 1 and '<failure type="new-race" message="NEW race: admits lost-note' in xml
    assert '<property name="baseline" value="accepted-race" />' in xml

    rc, out, err = _toki("certify", "--engine-module", GATE + "planted", *SEARCH, "--baseline", base, "--json", "-")
    assert rc == 1, err
    doc = json.loads(out)
    v = _verdicts(out)
    assert v["notes"]["baseline"]["status"] == "new-race" and v["notes"]["baseline"]["fails"]
    assert v["counter"]["baseline"] == {"status": "accepted-race", "fails": False, "says": [
        "accepted race: admits lost-update (reason: TODO: say why the team accepts this race (who decided, and the "
        "issue that tracks it))"]}
    assert doc["baseline"]["new-race"] == ["notes"] and doc["baseline"]["accepted-race"] == ["counter"]
    assert doc["baseline"]["accepted-design"] == ["audit"]


def test_an_accepted_by_design_finding_passes_fail_on_design_and_an_unlisted_one_does_not(recorded, tmp_path):
    rc, out, err = _toki("certify", "--engine-module", GATE + "released", *SEARCH, "--baseline", recorded[2],
                         "--fail-on-design")
    assert rc == 0, out + err
    only_races = _copy(recorded, tmp_path, lambda t: t.split("\n[[by_design]]")[0])
    rc, out, err = _toki("certify", "--engine-module", GATE + "released", *SEARCH, "--baseline", only_races)
    assert rc == 0 and "audit: baseline: by design: no-history, not in the baseline (a note" in out, out + err
    rc, out, err = _toki("certify", "--engine-module", GATE + "released", *SEARCH, "--baseline", only_races,
                         "--fail-on-design")
    assert rc == 1 and "audit: baseline: NEW by-design finding: no-history" in out, out + err
    assert "WORSE in audit" in out


def test_a_new_anomaly_kind_in_an_accepted_scenario_fails(recorded, tmp_path):
    other = _copy(recorded, tmp_path, lambda t: t.replace('"lost-update",', '"double-insert",'))
    rc, out, err = _toki("certify", "--engine-module", GATE + "released", *SEARCH, "--baseline", other)
    assert rc == 1, out + err
    assert "counter: baseline: NEW race: admits lost-update, which the baseline does not accept (it accepts " \
           "double-insert here)" in out


def test_an_accepted_race_that_no_longer_shows_is_a_note_not_a_failure(recorded, tmp_path):
    rc, out, err = _toki("certify", "--engine-module", "tests.toy_engine:counter_locked", "--budget", "10",
                         "--baseline", _copy(recorded, tmp_path, lambda t: t.replace('"gate-notes"', '"toy-counter"')
                                             .replace('"counter"', '"increment"')))
    assert rc == 0, out + err
    assert "increment: baseline: fixed, or not found this time: the baseline accepts the race lost-update" in out
    assert "by-design audit: the engine has no such scenario (drop the entry)" in out


def test_rewriting_a_baseline_keeps_the_edited_reasons(recorded, tmp_path):
    base = _copy(recorded, tmp_path, lambda t: t.replace(
        "TODO: say why the team accepts this race (who decided, and the issue that tracks it)",
        "a counter off by one is harmless here (issue 12)"))
    rc, out, err = _toki("certify", "--engine-module", GATE + "released", *SEARCH, "--baseline", base,
                         "--write-baseline", base)
    assert rc == 0, out + err
    doc = tomllib.loads(base.read_text())
    assert doc["race"][0]["reason"] == "a counter off by one is harmless here (issue 12)"
    assert doc["by_design"][0]["reason"].startswith("TODO")
    assert "note: race counter" not in out and "note: by-design audit: the reason is still the placeholder" in out


def test_the_pytest_plugin_gates_on_a_baseline(recorded, toki_certify_engine):
    base = recorded[2]
    toki_certify_engine(GATE + "released", "counter", exhaustive=2, baseline=base)
    toki_certify_engine(GATE + "released", "audit", exhaustive=2, baseline=base, fail_on_design=True)
    with pytest.raises(pytest.fail.Exception, match=r"gate-notes notes: worse than baseline .*NEW race: admits "
                                                   r"lost-note[\s\S]*grants:"):
        toki_certify_engine(GATE + "planted", "notes", exhaustive=2, baseline=base)
    with pytest.raises(pytest.fail.Exception, match="was recorded for engine gate-notes, not toy-counter"):
        toki_certify_engine("tests.toy_engine:counter", "increment", budget=5, baseline=base)
    with pytest.raises(ValueError, match="baseline= gates a test that expects no new race"):
        toki_certify_engine(GATE + "released", "counter", baseline=base, expect="admits")


def test_the_docs_pytest_gate_runs_as_written(recorded, toki_certify_engine):
    """docs/ci.md's pytest gate, with this repository's plug-in for the engine author's."""
    text = (ROOT / "docs" / "ci.md").read_text()
    (code,) = re.findall(r"## The gate in pytest.*?```python\n(.*?)```", text, re.S)
    assert len(code.strip().splitlines()) <= 12, code  # the gate as an engine author writes it
    ns: dict = {}
    exec(compile(code.replace("mypkg.toki_plugin:engine", GATE + "released")
                 .replace('"toki-baseline.toml"', repr(str(recorded[2]))), "docs/ci.md", "exec"), ns)
    scenarios = ns["test_no_new_race"].pytestmark[0].args[1]
    assert scenarios == ["counter", "notes", "audit"]
    for scenario in scenarios:
        ns["test_no_new_race"](toki_certify_engine, scenario)
    planted = code.replace("mypkg.toki_plugin:engine", GATE + "planted").replace(
        '"toki-baseline.toml"', repr(str(recorded[2])))
    exec(compile(planted, "docs/ci.md", "exec"), ns)
    with pytest.raises(pytest.fail.Exception, match="NEW race"):
        ns["test_no_new_race"](toki_certify_engine, "notes")


BAD = {
    "not TOML": ("format = 1\n[provenance\n", "is not valid TOML"),
    "no format": ('[provenance]\nengine = "gate-notes"\n', "format is None, not 1"),
    "no engine": ("format = 1\n[provenance]\n", "[provenance] must name the engine"),
    "no reason": ('format = 1\n[provenance]\nengine = "gate-notes"\n[[race]]\nscenario = "counter"\n'
                  'anomalies = ["lost-update"]\n', "[[race]] entry 1 (counter) has no reason"),
    "no anomalies": ('format = 1\n[provenance]\nengine = "gate-notes"\n[[race]]\nscenario = "counter"\n'
                     'anomalies = []\nreason = "x"\n', "anomalies must be a non-empty list"),
    "no scenario": ('format = 1\n[provenance]\nengine = "gate-notes"\n[[by_design]]\nanomalies = ["a"]\n'
                    'reason = "x"\n', "[[by_design]] entry 1 has no scenario"),
    "twice": ('format = 1\n[provenance]\nengine = "gate-notes"\n' + '[[race]]\nscenario = "counter"\n'
              'anomalies = ["a"]\nreason = "x"\n' * 2, "[[race]] lists scenario counter twice"),
    "unknown table": ('format = 1\n[provenance]\nengine = "gate-notes"\n[[races]]\nscenario = "counter"\n',
                      "unknown table or key races"),
    "other engine": ('format = 1\n[provenance]\nengine = "sodamem"\n', "was recorded for engine sodamem, not "
                     "gate-notes"),
    "binary": (b"\xff\xfe\x00", "is not a text file"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_malformed_baseline_is_one_line_exit_2(tmp_path, case):
    text, needle = BAD[case]
    path = tmp_path / "b.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    rc, out, err = _toki("certify", "--engine-module", GATE + "released", *SEARCH, "--baseline", path)
    line = _one_line(err)
    assert rc == 2 and line.startswith(f"toki: error: baseline {path}") and needle in line, (rc, out, err)
    assert not out


def test_a_missing_baseline_says_how_to_record_one(tmp_path):
    rc, out, err = _toki("certify", "--engine-module", GATE + "released", "--baseline", tmp_path / "none.toml")
    assert rc == 2 and "does not exist" in _one_line(err) and "--write-baseline" in err


@pytest.mark.parametrize("argv", [
    ("--adapter", "tests.unsafe_adapter:unsafe", "--level", "RC", "--baseline", "b.toml"),
    ("--adapter", "tests.unsafe_adapter:unsafe", "--level", "RC", "--time-budget", "5"),
    ("--replay", "w.json", "--write-baseline", "b.toml"),
])
def test_gate_options_are_for_engines_only(argv):
    rc, out, err = _toki("certify", *argv)
    assert rc == 2 and "--engine NAME or --engine-module" in _one_line(err), (rc, out, err)


# -- time budgets ----------------------------------------------------------------------------------

SLOW = GATE + "slow"  # two agents, twelve inserts each: minutes of search at any of these settings


@pytest.mark.parametrize("how", [
    ("--budget", "1000000"),
    ("--pct", "3", "--budget", "1000000"),
    ("--exhaustive", "3"),
], ids=["random", "pct", "exhaustive"])
def test_a_time_budget_ends_every_search_early_not_certified(how, tmp_path):
    junit = tmp_path / "j.xml"
    rc, out, err = _toki("certify", "--engine-module", SLOW, *how, "--time-budget", "2", "--json", "-",
                         "--junit", junit)
    assert rc == 3, (out, err)
    (v,) = json.loads(out)["verdicts"]
    s = v["search"]
    assert v["verdict"] == "out-of-time" and v["reason"].startswith("the --time-budget ran out")
    assert s["complete"] is False and s["out_of_time"] is True and 0 <= s["explored"] < 1000000
    g = s["guarantee"]
    assert "cut short by --time-budget" in g and ("nothing certified" in g or "no guarantee beyond them" in g), g
    xml = junit.read_text()
    assert 'errors="1"' in xml and '<error type="out-of-time" message="not certified: ' in xml
    assert '<property name="search.out_of_time" value="true" />' in xml and "<failure" not in xml


def test_the_text_says_not_certified_and_a_finished_search_under_a_budget_passes():
    rc, out, err = _toki("certify", "--engine-module", SLOW, "--budget", "1000000", "--time-budget", "1")
    assert rc == 3, out + err
    assert re.search(r"slow\s*│\s*out-of-time", out) and "out of time" in out
    assert "not certified: --time-budget 1 s ended the search of slow before it finished (exit 3)" in out
    rc, out, err = _toki("certify", "--engine-module", GATE + "released", "--scenario", "notes", *SEARCH,
                         "--time-budget", "600", "--json", "-")
    (v,) = json.loads(out)["verdicts"]
    assert rc == 0 and v["verdict"] == "excludes", out + err
    assert v["search"]["complete"] is True and v["search"]["out_of_time"] is False


def test_a_race_found_before_the_deadline_is_a_race_and_later_scenarios_are_not_started():
    rc, out, err = _toki("certify", "--engine-module", GATE + "planted", *SEARCH, "--time-budget", "600",
                         "--json", "-")
    assert rc == 1 and all(v["search"]["out_of_time"] is False for v in _verdicts(out).values()), out + err
    from toki.cli.certify_engine import certify_scenario
    from tests.plugins.gate_notes import planted

    v = certify_scenario(planted(), "notes", budget=None, seed=0, step_limit=10, witness=None, png=None, svg=None,
                         mode="exhaustive", bound=2, deadline=time.monotonic() - 1)
    assert v["verdict"] == "out-of-time" and v["trials"] == 0
    assert v["search"]["guarantee"].startswith("not started: the --time-budget ran out before this scenario")


def test_a_baseline_never_accepts_an_unfinished_search(recorded, tmp_path):
    base = _copy(recorded, tmp_path, lambda t: t.replace('"gate-notes"', '"gate-notes-slow"'))
    rc, out, err = _toki("certify", "--engine-module", SLOW, "--budget", "1000000", "--time-budget", "1",
                         "--baseline", base, "--json", "-")
    (v,) = json.loads(out)["verdicts"]
    assert rc == 3 and v["baseline"]["status"] == "out-of-time", out + err
    assert json.loads(out)["baseline"]["out-of-time"] == ["slow"]


def test_a_time_budget_must_be_positive():
    for bad in ("0", "-3", "inf"):
        rc, out, err = _toki("certify", "--engine-module", SLOW, "--time-budget", bad)
        assert rc == 2 and "--time-budget" in _one_line(err), (bad, out, err)


def test_the_pytest_plugin_fails_an_unfinished_search_as_not_certified(toki_certify_engine):
    with pytest.raises(pytest.fail.Exception, match="gate-notes-slow slow: not certified: cut short by --time-budget"):
        toki_certify_engine(SLOW, "slow", budget=1000000, time_budget=1)


def test_a_shard_of_a_sharded_search_stops_at_the_deadline():
    """--workers and --cluster hand each shard the deadline as wall-clock time: a shard reached
    after it runs nothing, one reached before it stops its exploration there."""
    from toki.cli.certify_engine import _exhaustive_shard, _scenario_shard

    spec = {"engine": None, "engine_module": SLOW, "dsn": None, "budget": None, "seed": 0, "step_limit": 10.0,
            "mode": "exhaustive", "bound": 3, "keep_going": False, "witness": None, "png": None, "svg": None,
            "deadline": time.time() - 1}
    part = _exhaustive_shard(("slow", 1, 4, None, None, None), spec)
    assert part == {"shard": [1, 4], "explored": 0, "pruned": 0, "redundant": 0, "level": 0, "complete": False,
                    "grants": None, "out_of_time": True}
    part = _exhaustive_shard(("slow", 0, 4, None, None, None), {**spec, "deadline": time.time() + 1})
    assert part["complete"] is False and part["out_of_time"] is True and part["grants"] is None
    below = _exhaustive_shard(("slow", None, None, None, None, None),  # bounds 0-3 of 4
                              {**spec, "bound": 4, "deadline": time.time() + 1})
    assert below["complete"] is False and below["out_of_time"] is True
    v = _scenario_shard("slow", {**spec, "mode": "random", "bound": None, "budget": 1000000,
                                 "deadline": time.time() + 1})
    assert v["verdict"] == "out-of-time" and v["search"]["out_of_time"] is True


@pytest.mark.slow  # two spawned processes import toki and the plug-in (the shard logic is tested above)
def test_a_sharded_search_in_processes_ends_at_the_deadline():
    rc, out, err = _toki("certify", "--engine-module", SLOW, "--exhaustive", "3", "--workers", "2",
                         "--time-budget", "3", "--json", "-")
    assert rc == 3, out + err
    (v,) = json.loads(out)["verdicts"]
    assert v["verdict"] == "out-of-time" and v["search"]["complete"] is False and v["search"]["out_of_time"] is True


@pytest.mark.slow  # a Dask cluster of two worker processes starts and stops
@pytest.mark.parametrize("how", [("--exhaustive", "3"), ("--budget", "1000000")], ids=["exhaustive", "random"])
def test_a_search_on_a_dask_cluster_ends_at_the_deadline(how, monkeypatch):
    pytest.importorskip("distributed", reason="the cluster extra: pip install 'toki[cluster]'")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the workers import the plug-in from tests/
    rc, out, err = _toki("certify", "--engine-module", SLOW, *how, "--cluster", "local:2", "--time-budget", "4",
                         "--json", "-")
    assert rc == 3, out + err
    (v,) = json.loads(out)["verdicts"]
    assert v["verdict"] == "out-of-time" and v["search"]["complete"] is False and v["search"]["out_of_time"] is True


# -- the searches themselves ---------------------------------------------------------------------

def test_each_search_reports_out_of_time_from_a_past_deadline():
    from tests.plugins.gate_notes import slow
    from toki.harness.explore import explore
    from toki.harness.pct import pct_search
    from toki.harness.search import certify_search, search
    from toki.harness.trial import TrialRunner

    with TrialRunner(slow(), "slow") as runner:
        past = time.monotonic() - 1
        res = search(runner, budget=50, deadline=past)
        assert res.out_of_time and res.tried == 0 and res.found is None
        res = pct_search(runner, depth=2, runs=50, deadline=past)
        assert res.out_of_time and res.runs == 0 and "cut short by --time-budget after 0 of 50" in res.guarantee()
        res = explore(runner, bound=2, deadline=past)
        assert res.out_of_time and not res.complete and res.explored == 0
        for mode, bound in (("random", None), ("pct", 2), ("exhaustive", 2)):
            cert = certify_search(runner, mode=mode, bound=bound, budget=50, deadline=past)
            assert cert.search["out_of_time"] is True and cert.search["complete"] is False, mode
            assert "out_of_time" not in certify_search(runner, mode=mode, bound=bound, budget=1).search


def test_shrinking_cut_short_by_the_deadline_reports_the_anomaly_found(monkeypatch):
    from tests.plugins.gate_notes import planted
    from toki.harness import search as search_mod
    from toki.harness.trial import TrialRunner

    seen = {"hit": False}
    monkeypatch.setattr(search_mod, "_past", lambda deadline: seen["hit"])
    with TrialRunner(planted(), "notes") as runner:
        res = search_mod.search(runner, budget=50, deadline=0.0,
                                on_trial=lambda n, hit: seen.update(hit=seen["hit"] or hit))
    assert res.found is not None and res.out_of_time and res.tried >= 1
    assert any(a.anomaly == "lost-note" for a in res.found.anomalies)
