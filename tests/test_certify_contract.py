"""`toki certify --engine/--replay` as a contract a CI gate and a person can rely on.

Verdicts and exit status (unverifiable 1, by-design 0 unless --fail-on-design, broken plug-ins 2 in
one line), replays that exit 1 whenever a run shows an anomaly (every witness shipped under docs/
among them), what a person reads (the grant order as runs, the switches, a picture whose labels fit
and whose highlighted calls are the anomaly's), file names per scenario, JUnit without "None", and
the docs naming every scenario the CLI runs.

The plug-ins below are loaded by the CLI as ``tests.test_certify_contract:NAME``.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import re
from pathlib import Path

import pytest

from tests import toy_engine
from toki.cli import main
from toki.harness import Detector
from toki.harness.controller import StepRecord

ROOT = Path(__file__).resolve().parents[1]
SPEC = "tests.test_certify_contract:"


# -- plug-ins ----------------------------------------------------------------------------------

_reads = itertools.count()


class Drifting(toy_engine.Counter):
    """Its read-out changes every time it is read: a serial order gives two outcomes in two runs."""

    name = "toy-drifting"

    def state(self, conn):
        return super().state(conn) + [next(_reads)]


class Diary(toy_engine.Counter):
    """Serializable increments, and a property of the design that every serial order shows."""

    name = "toy-diary"

    def __init__(self):
        super().__init__(locked=True)
        sc = self.scenarios["increment"]
        keeps_no_history = Detector("no-history", lambda st, err: ["the counter keeps no history of its values"]
                                    if st else [], always=True)
        self.scenarios = {"increment": dataclasses.replace(sc, detectors=sc.detectors + (keeps_no_history,))}


class TwoScenarios(toy_engine.Counter):
    name = "toy-two"

    def __init__(self):
        super().__init__()
        sc = self.scenarios["increment"]
        self.scenarios = {"increment": sc, "increment-again": dataclasses.replace(sc, name="increment-again")}


class StateRaises(toy_engine.Counter):
    name = "toy-state-raises"

    def state(self, conn):
        return [r[0] for r in conn.execute("select n from countr")]


class OpenRaises(toy_engine.Counter):
    name = "toy-open-raises"

    def open(self, location):
        (Path(location) / "settings.json").read_text()  # never written: FileNotFoundError


class Lacking:
    name, version = "toy-lacking", "1.0"
    scenarios: dict = {}


def drifting():
    return Drifting()


def diary():
    return Diary()


def two():
    return TwoScenarios()


def state_raises():
    return StateRaises()


def open_raises():
    return OpenRaises()


def lacking():
    return Lacking()


def factory_raises():
    raise ValueError("missing configuration: set COUNTER_HOME")


def _toki(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- 1. unverifiable is a verdict; broken plug-ins are bad input --------------------------------

def test_an_unverifiable_run_is_a_verdict_in_the_table_json_and_junit(tmp_path):
    junit = tmp_path / "j.xml"
    rc, out, err = _toki("certify", "--engine-module", SPEC + "drifting", "--budget", "5", "--junit", str(junit))
    assert rc == 1 and not err, (out, err)
    assert re.search(r"increment\s*│\s*unverifiable", out) and "increment: unverifiable: " in out, out
    rc, out, err = _toki("certify", "--engine-module", SPEC + "drifting", "--budget", "5", "--json", "-")
    assert rc == 1, err
    (v,) = json.loads(out)["verdicts"]
    assert v["verdict"] == "unverifiable" and "two different outcomes" in v["reason"] and "\n" not in v["reason"]
    assert v["anomalies"] == [f"unverifiable: {v['reason']}"] and v["witness"] is None
    case = junit.read_text()
    assert '<failure type="unverifiable"' in case and "two different outcomes" in case


@pytest.mark.parametrize("factory, names", [
    ("state_raises", r"\bstate\(\)"),
    ("open_raises", r"\bopen\(\)"),
])
def test_a_plugin_method_that_raises_is_bad_input_in_one_line(factory, names):
    rc, out, err = _toki("certify", "--engine-module", SPEC + factory, "--budget", "5")
    line = _one_line(err)
    assert rc == 2 and re.search(names, line) and "toy-" in line, (rc, out, err)
    assert "outputs need a writable folder" not in line


def test_an_os_error_is_blamed_on_an_output_only_when_it_is_on_a_path_given(tmp_path, monkeypatch):
    from toki.cli import certify_engine

    def plugin_fails(args, out):
        raise FileNotFoundError(2, "No such file or directory", "/srv/engine-home/settings.json")

    monkeypatch.setattr(certify_engine, "run_engine", plugin_fails)
    rc, out, err = _toki("certify", "--engine-module", SPEC + "two", "--json", str(tmp_path / "v.json"))
    line = _one_line(err)
    assert rc == 2 and "settings.json" in line and "outputs need a writable folder" not in line, line
    monkeypatch.undo()
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc, out, err = _toki("certify", "--engine-module", SPEC + "two", "--budget", "2", "--json",
                         str(blocker / "v.json"))
    line = _one_line(err)
    assert rc == 2 and str(blocker) in line and "outputs need a writable folder" in line, line


def _write_module(tmp_path, monkeypatch, name: str, text: str) -> str:
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.mark.parametrize("source, names, fix", [
    ("import toki_no_such_memory_library\n", "toki_no_such_memory_library", "install"),
    ("import os\nHOME = os.environ['TOKI_NO_SUCH_VARIABLE']\n", "KeyError", "importing it succeeds"),
])
def test_a_plugin_module_that_does_not_import_is_named_in_one_line(tmp_path, monkeypatch, source, names, fix):
    mod = _write_module(tmp_path, monkeypatch, f"toki_test_plugin_{len(source)}", source)
    rc, out, err = _toki("certify", "--engine-module", f"{mod}:engine", "--budget", "5")
    line = _one_line(err)
    assert rc == 2 and mod in line and names in line and fix in line, line


@pytest.mark.parametrize("factory, needle", [
    ("factory_raises", "COUNTER_HOME"),
    ("lacking", "lacks open, close, state"),
])
def test_a_factory_that_raises_or_a_plugin_lacking_members_is_named_in_one_line(factory, needle):
    rc, out, err = _toki("certify", "--engine-module", SPEC + factory, "--budget", "5")
    line = _one_line(err)
    assert rc == 2 and factory in line and needle in line and "(" in line, line  # the fix in parentheses


# -- 2. replay is a contract -------------------------------------------------------------------

SHIPPED = sorted((ROOT / "docs").rglob("*.witness.json"))


def _slow_replay(name: str) -> bool:
    """A witness whose replay costs seconds (SodaMem's long runs, mem0 and Graphiti on PostgreSQL,
    TOKI's write path on it) replays in the slow tier; one TOKI witness stays in the fast one."""
    return (name.startswith(("sodamem", "mem0", "graphiti"))
            or (name.startswith("toki-") and name != "toki-lww-unguarded-at-RC.witness.json"))


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name, marks=pytest.mark.slow if _slow_replay(p.name) else ())
                                  for p in SHIPPED])
def test_every_witness_shipped_under_docs_replays_with_exit_1(path):
    from toki.engines.registry import ENGINES, available

    engine = json.loads(path.read_text())["engine"]
    if engine in ENGINES and not available(ENGINES[engine]):
        pytest.skip(f"{engine} is not installed")
    rc, out, err = _toki("certify", "--replay", str(path), "--times", "2")
    assert rc == 1 and "it shows the anomaly 2 of 2 times" in out, (
        f"{path.relative_to(ROOT)} no longer replays; regenerate it with python docs/make_witnesses.py\n{out}{err}")


def test_the_shipped_pictures_highlight_the_anomalys_own_table():
    from toki.harness.draw import highlight
    from toki.harness.witness import Witness

    w = Witness.load(ROOT / "docs/engines/sodamem-double-supersede.witness.json")
    hl = highlight(w.steps, w.anomalies, list(w.failed or ()))
    assert hl.how == "conflict" and hl.objects == ["fact_events"]
    assert {s.agent for s in w.steps if s.seq in hl.seqs} == {"A", "B"}


def _counter_witness(tmp_path) -> Path:
    rc, out, err = _toki("certify", "--engine-module", "tests.toy_engine:counter", "--budget", "30",
                         "--witness", str(tmp_path / "w.json"))
    assert rc == 1, out + err
    return tmp_path / "w.increment.json"


def test_a_replay_that_shows_the_anomaly_exits_1_even_when_the_outcome_differs_and_says_where(tmp_path):
    path = _counter_witness(tmp_path)
    doc = json.loads(path.read_text())
    assert {"errors", "completed", "failed", "observed"} <= set(doc) and doc["completed"] == ["A", "B"]
    doc.update(state=[7], outcome="0" * 16, completed=["A"])
    path.write_text(json.dumps(doc))
    rc, out, err = _toki("certify", "--replay", str(path), "--times", "3")
    assert rc == 1, out + err
    assert "it shows the anomaly 3 of 3 times; reproduced the recorded outcome 0 of 3 times" in out
    assert "state[0]: recorded 7, replayed 1" in out and "completed: 1 items recorded, 2 replayed" in out


@pytest.mark.slow
def test_a_witness_of_an_older_toki_loads_and_says_what_it_does_not_record(tmp_path):
    path = _counter_witness(tmp_path)
    doc = json.loads(path.read_text())
    for k in ("errors", "completed", "failed", "observed"):
        del doc[k]
    doc["outcome"] = "0" * 16
    path.write_text(json.dumps(doc))
    rc, out, err = _toki("certify", "--replay", str(path))
    assert rc == 1 and "completed, failed, observed, which an older toki did not record" in out, out + err


def test_a_replay_the_harness_cannot_verify_fails_closed(tmp_path):
    path = _counter_witness(tmp_path)
    doc = json.loads(path.read_text())
    doc["engine_module"] = SPEC + "drifting"  # the same calls, a read-out that changes every time
    path.write_text(json.dumps(doc))
    rc, out, err = _toki("certify", "--replay", str(path), "--times", "2")
    assert rc == 1 and "unverifiable after 0 of 2 runs: the serial order" in out, out + err


def test_a_replay_exits_0_only_when_no_run_shows_an_anomaly(tmp_path):
    from toki.harness.controller import SerialChooser
    from toki.harness.trial import TrialRunner
    from toki.harness.witness import Witness
    from toki.engines.registry import load_engine

    eng = load_engine(None, "tests.toy_engine:counter")  # the witness names where it was loaded from
    with TrialRunner(eng, "increment") as tr:
        trace, outcome = tr.run(SerialChooser(("A", "B")))
    path = Witness.from_serial(eng, "increment", trace, outcome, [], seed=0, budget=1).save(tmp_path / "s.json")
    rc, out, err = _toki("certify", "--replay", str(path), "--times", "2")
    assert rc == 0 and "it shows the anomaly 0 of 2 times" in out and "no replayed run shows an anomaly" in out


# -- 3. by-design findings are notes -------------------------------------------------------------

def test_a_by_design_finding_exits_0_with_its_note_and_fails_only_on_request(tmp_path):
    junit = tmp_path / "j.xml"
    rc, out, err = _toki("certify", "--engine-module", SPEC + "diary", "--budget", "10", "--junit", str(junit))
    assert rc == 0, out + err
    assert re.search(r"increment\s*│\s*by-design\s*│\s*no-history", out), out
    assert "increment: note: by design (in 2 of 2 serial orders): no-history: the counter keeps no history" in out
    assert "<failure" not in junit.read_text() and "<system-out>by design" in junit.read_text()
    rc, out, err = _toki("certify", "--engine-module", SPEC + "diary", "--budget", "10", "--json", "-")
    (v,) = json.loads(out)["verdicts"]
    assert rc == 0 and v["verdict"] == "by-design" and v["anomalies"] == [] and v["by_design"]
    rc, out, err = _toki("certify", "--engine-module", SPEC + "diary", "--budget", "10", "--fail-on-design",
                         "--junit", str(junit))
    assert rc == 1 and '<failure type="by-design"' in junit.read_text(), out + err


def test_the_pytest_plugin_agrees_on_by_design_and_unverifiable(toki_certify_engine):
    toki_certify_engine(SPEC + "diary", "increment", budget=10)
    with pytest.raises(pytest.fail.Exception, match="by design"):
        toki_certify_engine(SPEC + "diary", "increment", budget=10, fail_on_design=True)
    with pytest.raises(pytest.fail.Exception, match="by design, which serial orders show too"):
        toki_certify_engine(SPEC + "diary", "increment", budget=10, expect="admits")
    for expect in ("excludes", "admits"):
        with pytest.raises(pytest.fail.Exception, match="unverifiable: the serial order"):
            toki_certify_engine(SPEC + "drifting", "increment", budget=5, expect=expect)
    with pytest.raises(pytest.fail.Exception, match=r"state\(\) raised"):
        toki_certify_engine(SPEC + "state_raises", "increment", budget=5)


def test_sodamem_predicate_drift_is_by_design_and_passes_the_gate():
    pytest.importorskip("sodamem")
    rc, out, err = _toki("certify", "--engine", "sodamem", "--scenario", "predicate-drift", "--budget", "5")
    assert rc == 0 and "by-design" in out and "note: by design" in out and "slot-drift" in out, out + err


# -- 4. the docs and the CLI agree on scenarios ----------------------------------------------------

@pytest.mark.slow
def test_engines_list_shows_every_scenario_the_cli_runs():
    from toki.engines.registry import ENGINES, available, load_engine

    rc, text, err = _toki("engines", "list")
    rc2, js, _ = _toki("engines", "list", "--json")
    assert rc == rc2 == 0, err
    listed = {e["name"]: e for e in json.loads(js)}
    tokens = set(re.findall(r"[\w.-]+", text))
    for name, info in ENGINES.items():
        if not available(info):
            continue
        runs = list(load_engine(name).scenarios)
        assert list(listed[name]["scenarios"]) == runs, name
        assert set(runs) <= tokens, (name, set(runs) - tokens)


@pytest.mark.parametrize("engine", ["sodamem", "atommem"])
def test_docs_engines_md_names_every_scenario_the_cli_runs(engine):
    from toki.engines.registry import ENGINES, available, load_engine

    if not available(ENGINES[engine]):
        pytest.skip(f"{engine} is not installed")
    doc = (ROOT / "docs/engines.md").read_text()
    missing = [s for s in load_engine(engine).scenarios if not re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", doc)]
    assert not missing, f"docs/engines.md does not name {engine}'s scenarios {missing}"


# -- 5. what a person reads ---------------------------------------------------------------------

def test_the_text_shows_the_grant_order_as_runs_and_the_call_at_each_switch(tmp_path):
    rc, out, err = _toki("certify", "--engine-module", "tests.toy_engine:counter", "--budget", "30")
    assert rc == 1, out + err
    runs = re.search(r"increment: minimal witness, \d+ grants, 2 context switches: (A×\d+ B×\d+ A×\d+|"
                     r"B×\d+ A×\d+ B×\d+)\n", out)
    assert runs, out
    switches = re.findall(r"  switch (\d) at #\d+, (\w) → (\w): (.+)\n", out)
    assert [s[0] for s in switches] == ["1", "2"] and all(s[1] != s[2] for s in switches), out
    assert any("update counter set n = ? ← (1,)" in s[3] for s in switches), out


@pytest.mark.slow
def test_witness_and_pictures_are_named_per_scenario_for_one_or_many(tmp_path):
    rc, out, err = _toki("certify", "--engine-module", SPEC + "two", "--budget", "20", "--witness",
                         str(tmp_path / "many" / "w.json"), "--png", str(tmp_path / "many" / "w.png"))
    assert rc == 1, out + err
    for sc in ("increment", "increment-again"):
        assert (tmp_path / "many" / f"w.{sc}.json").exists() and (tmp_path / "many" / f"w.{sc}.png").exists()
        assert f"{sc}: witness {tmp_path / 'many' / f'w.{sc}.json'} (--witness writes one file per scenario" in out
    rc, out, err = _toki("certify", "--engine-module", SPEC + "two", "--scenario", "increment", "--budget", "20",
                         "--witness", str(tmp_path / "one" / "w.json"))
    assert rc == 1 and sorted(p.name for p in (tmp_path / "one").iterdir()) == ["w.increment.json"]


@pytest.mark.slow
def test_junit_never_says_none(tmp_path):
    for spec in ("tests.toy_engine:counter", "tests.toy_engine:counter_locked", SPEC + "diary", SPEC + "drifting"):
        junit = tmp_path / f"{spec.rsplit(':', 1)[1]}.xml"
        rc, out, err = _toki("certify", "--engine-module", spec, "--budget", "10", "--junit", str(junit))
        assert rc in (0, 1), err
        assert "None" not in junit.read_text(), junit.read_text()


def _steps(rows):
    return [StepRecord(i, agent, kind, detail) for i, (agent, kind, detail) in enumerate(rows)]


def test_the_highlighted_calls_are_on_the_table_the_finding_names_not_an_earlier_conflict():
    from toki.harness.draw import highlight

    steps = _steps([
        ("A", "start", "A"), ("B", "start", "B"),
        ("A", "sql-read", "SELECT COUNT(*) FROM trace_log"), ("B", "sql-read", "SELECT COUNT(*) FROM trace_log"),
        ("B", "sql-write", "INSERT INTO trace_log (n) VALUES (?) ← (1,)"),
        ("A", "sql-write", "INSERT INTO trace_log (n) VALUES (?) ← (1,)"),
        ("A", "sql-read", "SELECT n FROM counter"), ("B", "sql-read", "SELECT n FROM counter"),
        ("B", "sql-write", "UPDATE counter SET n = ? ← (1,)"), ("A", "sql-write", "UPDATE counter SET n = ? ← (1,)"),
    ])
    hl = highlight(steps, ["lost-update: counter is 1 after 2 increments"])
    assert hl.how == "conflict" and hl.objects == ["counter"] and hl.seqs == {6, 7, 8, 9}
    assert "counter" in hl.label


def test_the_highlighted_calls_follow_the_findings_values_then_the_strongest_conflict():
    from toki.harness.draw import highlight

    steps = _steps([
        ("A", "sql-write", "INSERT INTO traces (t) VALUES (?) ← ('ingest',)"),
        ("B", "sql-read", "SELECT COUNT(*) FROM traces"),  # reads A's half-done log, acts on nothing
        ("A", "sql-read", "SELECT * FROM facts WHERE status='active'"),
        ("A", "sql-write", "UPDATE facts SET status = ? ← ('superseded', 'berlin')"),
        ("B", "sql-read", "SELECT * FROM facts WHERE status='active'"),
        ("B", "sql-write", "INSERT INTO facts (o, status) VALUES (?, ?) ← ('paris', 'active')"),
        ("A", "sql-write", "INSERT INTO facts (o, status) VALUES (?, ?) ← ('rome', 'active')"),
        ("A", "sql-write", "INSERT INTO traces (t) VALUES (?) ← ('done',)"),
        ("B", "sql-write", "INSERT INTO edges (e) VALUES (?) ← ('x',)"),
        ("A", "sql-write", "INSERT INTO edges (e) VALUES (?) ← ('y',)"),
        ("B", "sql-write", "INSERT INTO edges (e) VALUES (?) ← ('z',)"),
    ])
    lost = _steps([  # as strong a conflict as the one on facts, on a table the findings' values are not in
        ("A", "sql-read", "SELECT * FROM summaries"), ("B", "sql-read", "SELECT * FROM summaries"),
        ("B", "sql-write", "UPDATE summaries SET dirty = ? ← (1,)"),
        ("A", "sql-write", "UPDATE summaries SET dirty = ? ← (1,)")])
    for i, s in enumerate(lost):
        s.seq = 20 + i
    finding = ["double-supersede: slot (alice, lives_in) has 2 current values ['paris', 'rome']"]
    # the strongest conflict wins over a torn read of the trace log, and ties go to the findings' values
    assert highlight(steps, []).objects == ["facts"]
    assert highlight(steps + lost, []).objects == ["facts", "summaries"]
    hl = highlight(steps + lost, finding)
    assert hl.objects == ["facts"] and hl.seqs == {2, 3, 4, 5, 6}, hl


def test_with_no_conflicting_calls_the_switches_are_highlighted_and_said_so():
    from toki.harness.draw import highlight

    steps = _steps([("A", "start", "A"), ("B", "start", "B"), ("A", "sql-write", "INSERT INTO a (x) VALUES (1)"),
                    ("B", "sql-write", "INSERT INTO b (x) VALUES (1)"), ("B", "sql-read", "SELECT x FROM b"),
                    ("A", "sql-read", "SELECT x FROM a")])
    hl = highlight(steps, ["non-serializable: an outcome no serial order produces"])
    assert hl.how == "switches" and hl.seqs == {2, 3, 4, 5} and "context switch" in hl.label


def test_shortened_details_keep_the_bound_values():
    from toki.harness.draw import shorten

    detail = ("INSERT INTO fact_events (fact_id, user_id, kind, status, subject_entity_id, predicate_raw) "
              "VALUES (?,?,?,?,?,?) ← ('fact_5a04', 'alice', 'state', 'superseded')")
    short = shorten(detail, 80)
    assert len(short) <= 80 and short.startswith("INSERT INTO fact_events (") and "VALUES" not in short
    assert short.endswith("← ('fact_5a04', 'alice', 'state', 'superseded')")
    assert shorten("SELECT n FROM counter", 70) == "SELECT n FROM counter"
    assert shorten(detail, 50).startswith("INSERT INTO fact_events (") and "← ('fact_5a04'" in shorten(detail, 50)


@pytest.mark.slow
def test_every_label_of_the_picture_stays_inside_it(tmp_path):
    from toki.harness.draw import draw, figure
    from toki.harness.witness import Witness

    long_sql = "INSERT INTO " + "a_rather_long_table_name_" * 6 + " (x) VALUES (?) ← (" + "'value', " * 12 + ")"
    steps = _steps([("A", "sql-read", "SELECT x FROM t"), ("B", "sql-read", "SELECT x FROM t"),
                    ("B", "sql-write", "UPDATE t SET x = ? ← ('" + "W" * 120 + "',)"),
                    ("A", "sql-write", "UPDATE t SET x = ? ← (2,)"), ("B", "sql-write", long_sql)])
    steps[-1].status, steps[-1].error = "error", "OperationalError: " + "W" * 100  # drawn and keyed too
    w = Witness("toy", None, "1.0 " + "W" * 60, "real", "a-scenario-" + "W" * 150, 0, 1, [s.agent for s in steps],
                ["lost-update: " + "W" * 400], steps, "0" * 16, failed={"B": "JSONDecodeError " + "W" * 80})
    fig = figure(w)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [t for t in fig.texts + [t for ax in fig.axes for t in ax.texts] + list(fig.legends[0].get_texts())
             if t.get_text()]
    assert any("#2" in t.get_text() and "←" in t.get_text() for t in texts)  # the key names each write
    for t in texts:
        box = t.get_window_extent(renderer)
        assert box.x0 >= -1 and box.x1 <= fig.bbox.width + 1, (t.get_text()[:80], box.x0, box.x1, fig.bbox.width)
    assert draw(w, tmp_path / "w.png").stat().st_size > 5000


def test_a_witness_whose_calls_hold_dollar_signs_is_drawn(tmp_path):
    """Graphiti's Cypher names its parameters $uuid, $name: drawn as text, not parsed as mathtext
    (matplotlib raised a ParseException on them)."""
    from toki.harness.draw import draw
    from toki.harness.witness import Witness

    w = Witness.load(ROOT / "docs/engines/graphiti-restated-fact.witness.json")
    assert any("$" in s.detail for s in w.steps)
    assert draw(w, tmp_path / "g.png").stat().st_size > 0
