"""mem0 (PyPI mem0ai 2.x), real and unmodified, under the engine harness: its own Memory on the
embedded PostgreSQL (pgvector) and a SQLite history, with a scripted LLM and a hash embedder
(needs the `engines` extra)."""

from __future__ import annotations

import importlib.util
import io
import json

import pytest

# Not importorskip: importing mem0 before toki does would import it with telemetry on.
if importlib.util.find_spec("mem0") is None or importlib.util.find_spec("psycopg_pool") is None:
    pytest.skip("needs mem0ai and psycopg-pool (the engines extra)", allow_module_level=True)

from toki.cli import main
from toki.harness.controller import ReplayChooser, SerialChooser
from toki.engines.registry import load_engine
from toki.harness.search import context_switches, search
from toki.harness.trial import TrialRunner
from toki.harness.witness import Witness, digest
from toki.errors import ConfigError, DatabaseUnavailable

pytestmark = pytest.mark.db

BUDGET = 40
BERLIN, ROME, PARIS = "User lives in Berlin", "User lives in Rome", "User lives in Paris"


@pytest.fixture(scope="module")
def engine(toki_server):
    # mem0 stores vectors with pgvector: the embedded server ships it; a TOKI_DSN server may not
    # (CI's second run on PostgreSQL 15 has none), and then there is nothing to run mem0 on.
    with toki_server.connect() as c:
        if c.execute("select 1 from pg_available_extensions where name = 'vector'").fetchone() is None:
            pytest.skip(f"the PostgreSQL at {toki_server.where} has no pgvector (mem0 needs it; the embedded "
                        "server ships it: unset TOKI_DSN)")
    eng = load_engine("mem0")
    yield eng
    eng.shutdown()


def texts(state) -> list[str]:
    return sorted(text for _, text in state["memories"])


def events(state, label=BERLIN) -> list[list]:
    return next(evs for lab, evs in state["history"] if lab == label)


def test_engine_reports_the_installed_package(engine):
    from importlib.metadata import version

    assert engine.name == "mem0" and engine.executed == "real" and engine.version == version("mem0ai")
    assert engine.version.startswith("2.")


def test_serial_adds_of_one_fact_keep_one_memory(engine):
    """mem0's MD5 check: the second add's search returns the first memory, so it inserts nothing."""
    with TrialRunner(engine, "add-same-fact") as tr:
        for order in (("A", "B"), ("B", "A")):
            trace, out = tr.run(SerialChooser(order))
            assert texts(out.state) == ["User loves sushi"] and not out.errors, order
            assert trace.results[order[0]] == ["User loves sushi"] and trace.results[order[1]] == []


def test_serial_updates_chain_their_history(engine):
    with TrialRunner(engine, "update-update") as tr:
        _, ab = tr.run(SerialChooser(("A", "B")))
        _, ba = tr.run(SerialChooser(("B", "A")))
    assert texts(ab.state) == [PARIS] and texts(ba.state) == [ROME]
    assert ["UPDATE", ROME, PARIS, False] in events(ab.state) and ["UPDATE", BERLIN, ROME, False] in events(ab.state)
    assert ["UPDATE", PARIS, ROME, False] in events(ba.state)


def test_serial_update_and_delete(engine):
    with TrialRunner(engine, "update-vs-delete") as tr:
        _, ab = tr.run(SerialChooser(("A", "B")))
        _, ba = tr.run(SerialChooser(("B", "A")))
    assert texts(ab.state) == [] and ["DELETE", ROME, None, True] in events(ab.state) and not ab.errors
    # delete first: the update finds nothing and says so
    assert texts(ba.state) == [] and ba.errors == {"A": "ValueError"}
    assert [e[0] for e in events(ba.state)] == ["ADD", "DELETE"]


@pytest.mark.slow
def test_contradicting_adds_stay_current_by_design_not_by_race(engine):
    """ADD-only: both facts are current in every serial order (a design property), and no
    interleaving produces anything a serial order does not."""
    with TrialRunner(engine, "add-contradicting") as tr:
        for order in (("A", "B"), ("B", "A")):
            _, out = tr.run(SerialChooser(order))
            assert texts(out.state) == [BERLIN, ROME]
            found = tr.by_design(out)
            assert len(found) == 1 and found[0].startswith("both-current:")
        res = search(tr, budget=20, seed=0)
    assert not res.admits and res.tried == 20


@pytest.mark.slow
def test_love_hate_report_does_not_apply_to_2x(engine):
    """The 1.0.x report (the judge deleted and added nothing) cannot happen on 2.x: both stay."""
    with TrialRunner(engine, "reported-love-hate-empty-store") as tr:
        _, out = tr.run(SerialChooser(("A", "B")))
        assert texts(out.state) == ["User hates Chinese food", "User loves Chinese food"]
        assert tr.by_design(out) == []
        assert not search(tr, budget=12, seed=0).admits


@pytest.mark.slow
@pytest.mark.parametrize("scenario,anomaly", [
    ("add-same-fact", "duplicate-insert"),
    ("reported-duplicate-add", "duplicate-insert"),
    ("add-same-fact-shared", "duplicate-insert"),
    ("update-vs-delete", "stale-history"),
])
def test_search_finds_the_race_and_its_witness_replays(engine, scenario, anomaly):
    with TrialRunner(engine, scenario) as tr:
        res = search(tr, budget=BUDGET, seed=0, shrink=False)
        assert res.admits and res.tried <= BUDGET
        found = res.found
        assert any(a.startswith(anomaly + ":") for a in found.anomalies), found.anomalies
        replays = [tr.trial(ReplayChooser(found.trace.grants)) for _ in range(5)]
    assert all(r.outcome.key == found.outcome.key and not r.serializable for r in replays)
    if anomaly == "duplicate-insert":
        assert texts(found.outcome.state) == ["User loves sushi", "User loves sushi"]
    else:
        assert texts(found.outcome.state) == [] and ["UPDATE", BERLIN, ROME, False] in events(found.outcome.state)
        assert ["DELETE", BERLIN, None, True] in events(found.outcome.state)


@pytest.mark.slow
def test_lost_update_shrinks_to_a_small_witness_that_replays(engine, tmp_path):
    with TrialRunner(engine, "update-update") as tr:
        res = search(tr, budget=BUDGET, seed=0)
        assert res.admits and res.tried <= BUDGET
        found = res.found
        assert any(a.anomaly == "lost-update" for a in found.anomalies)
        evs = events(found.outcome.state)
        assert ["UPDATE", BERLIN, ROME, False] in evs and ["UPDATE", BERLIN, PARIS, False] in evs
        assert context_switches(found.trace) <= 4
        w = Witness.load(Witness.from_trial(engine, "update-update", found, seed=0, budget=BUDGET)
                         .save(tmp_path / "w.json"))
        replays = [tr.trial(ReplayChooser(w.grants)) for _ in range(5)]
    assert all(digest(r.outcome.key) == w.outcome and not r.serializable for r in replays)
    # the race is between the PostgreSQL read of one update and the other's write
    assert {s.agent for s in w.steps if s.kind.startswith("pg-")} == {"A", "B"}
    out = io.StringIO()
    assert main(["certify", "--replay", str(w.save(tmp_path / "w2.json")), "--times", "2"], out=out) == 1
    assert "reproduced the recorded outcome 2 of 2" in out.getvalue()


@pytest.mark.slow
def test_linked_ids_race_on_the_entity_store(engine):
    """The reported P4: two adds naming one entity each read its linked_memory_ids and write the
    list back; serially the entity links all three memories, interleaved one link is lost."""
    dune = ['User finished "Dune"', 'User is reading "Dune"', 'User loved "Dune"']
    with TrialRunner(engine, "reported-linked-ids-p4") as tr:
        for order in (("A", "B"), ("B", "A")):
            _, out = tr.run(SerialChooser(order))
            assert out.state["entities"] == [["Dune", dune]] and texts(out.state) == sorted(dune)
        res = search(tr, budget=BUDGET, seed=0, shrink=False)
        assert res.admits and res.tried <= BUDGET
        found = res.found
        assert any(a.anomaly == "lost-update" and "'Dune'" in a for a in found.anomalies)
        [(entity, linked)] = found.outcome.state["entities"]
        assert entity == "Dune" and len(linked) == 2 and texts(found.outcome.state) == sorted(dune)
        replays = [tr.trial(ReplayChooser(found.trace.grants)) for _ in range(5)]
    assert all(r.outcome.key == found.outcome.key for r in replays)
    # outside that scenario mem0 runs without entity extraction
    from mem0.utils import spacy_models

    assert spacy_models.get_nlp_full() is None


def test_unreachable_database_is_a_clear_error(tmp_path):
    from toki.engines.mem0_engine import Mem0Engine

    eng = Mem0Engine(dsn="postgresql://toki@127.0.0.1:1/none")
    with pytest.raises(DatabaseUnavailable) as e:
        eng.open(tmp_path)
    assert "127.0.0.1:1" in str(e.value) and e.value.fix


def test_a_message_the_scripted_llm_does_not_know_is_a_config_error():
    from mem0.configs.llms.base import BaseLlmConfig

    from toki.engines.mem0_engine import ScriptedLLM

    llm = ScriptedLLM(BaseLlmConfig())
    ok = llm.generate_response([{"role": "user", "content": "## New Messages\nuser: I love sushi.\n\n## Observation"}])
    assert json.loads(ok) == {"memory": [{"id": "0", "text": "User loves sushi"}]}
    with pytest.raises(ConfigError, match="no extraction for 'I like tea.'"):
        llm.generate_response([{"role": "user", "content": "## New Messages\nuser: I like tea.\n"}])


def test_mem0_imported_with_telemetry_on_is_turned_off(monkeypatch, caplog):
    """mem0 reads MEM0_TELEMETRY once, at import; if something imported it first with telemetry on,
    toki turns mem0's flags off before any Memory is made (every later call stays offline)."""
    from mem0.memory import main as mem0_main
    from mem0.memory import telemetry

    monkeypatch.setattr(telemetry, "MEM0_TELEMETRY", True)
    monkeypatch.setattr(mem0_main, "MEM0_TELEMETRY", True)
    with caplog.at_level("WARNING"):
        load_engine("mem0")
    assert telemetry.MEM0_TELEMETRY is False and mem0_main.MEM0_TELEMETRY is False
    assert "imported with telemetry on" in caplog.text


def test_a_database_other_than_postgresql_is_a_clear_error(tmp_path):
    from toki.engines.mem0_engine import Mem0Engine

    eng = Mem0Engine(dsn=f"sqlite:///{tmp_path}/x.db")
    with pytest.raises(ConfigError, match="needs PostgreSQL") as e:
        eng.open(tmp_path)
    assert "pgvector" in e.value.fix
