"""LangMem (PyPI langmem), real and unmodified, under the engine harness: its memory manager on
LangGraph's SqliteStore and PostgresStore (the embedded PostgreSQL, pgvector), with a scripted fake
chat model and a hash embedder (needs the `engines` extra)."""

from __future__ import annotations

import importlib.util
import io

import pytest

if any(importlib.util.find_spec(m) is None for m in ("langmem", "langgraph.store.sqlite", "langgraph.store.postgres")):
    pytest.skip("needs langmem, langgraph-checkpoint-sqlite and -postgres (the engines extra)",
                allow_module_level=True)

from toki.cli import main
from toki.engines.langmem_engine import BERLIN, ROME, decide
from toki.engines.registry import load_engine
from toki.harness.controller import ReplayChooser, SerialChooser
from toki.harness.engine import connect_database
from toki.harness.explore import explore
from toki.harness.search import search
from toki.harness.trial import TrialRunner
from toki.harness.witness import Witness, digest

PETS = "Alice has pets: cat, dog, parrot."


@pytest.fixture(scope="module")
def sqlite_engine():
    return load_engine("langmem")


@pytest.fixture(scope="module")
def pg_engine(toki_server):
    with toki_server.connect() as c:
        if c.execute("select 1 from pg_available_extensions where name = 'vector'").fetchone() is None:
            pytest.skip(f"the PostgreSQL at {toki_server.where} has no pgvector (LangGraph's PostgresStore index "
                        "needs it; the embedded server ships it: unset TOKI_DSN)")
    eng = load_engine("langmem-postgres")
    eng.use_server(toki_server)
    return eng


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.db, pytest.mark.slow])])
def engine(request):
    return request.getfixturevalue("sqlite_engine" if request.param == "sqlite" else "pg_engine")


def test_the_scripted_model_answers_as_langmem_asks():
    """What trustcall shows the model (instances with ids) and what the model answers (tool calls)."""
    shown = '<instance id=m1 schema_type="Memory">\n{\'content\': \'Alice has pets: cat.\'}\n</instance>'
    patch = decide(f"{shown}\n<session_x>\nI also have a dog.\n</session_x>", ["PatchDoc", "Memory"], None, [])
    assert patch == [{"name": "PatchDoc", "args": {"json_doc_id": "m1", "planned_edits": "add dog to the list",
                                                   "patches": [{"op": "replace", "path": "/content",
                                                                "value": "Alice has pets: cat, dog."}]}}]
    assert decide("<session_x>\nI play the violin.\n</session_x>", ["Memory"], None, []) == [
        {"name": "Memory", "args": {"content": "Alice plays the violin."}}]
    again = '<instance id=m2 schema_type="Memory">\n{\'content\': \'Alice plays the violin.\'}\n</instance>'
    assert decide(f"{again}\n<session_x>\nI play the violin.\n</session_x>", ["PatchDoc", "Memory"], None, []) == []


def test_engine_reports_the_installed_packages(sqlite_engine, pg_engine):
    from importlib.metadata import version

    for eng, store in ((sqlite_engine, "langgraph-checkpoint-sqlite"), (pg_engine, "langgraph-checkpoint-postgres")):
        assert eng.executed == "real" and eng.version.startswith(version("langmem") + " on ")
        assert f"{store} {version(store)}" in eng.version
    assert sqlite_engine.system == f"LangMem {version('langmem')} on SQLite"
    assert pg_engine.system == f"LangMem {version('langmem')} on PostgreSQL"


def test_serial_patches_keep_every_pet(engine):
    """Serially the second manager run sees the first's patch and extends it."""
    with TrialRunner(engine, "blind-put") as tr:
        for order in (("A", "B"), ("B", "A")):
            _, out = tr.run(SerialChooser(order))
            later = {"A": "dog", "B": "parrot"}[order[1]]  # the later run appends its pet
            assert out.state == {"memories": [PETS.replace(f", {later}", "").rstrip(".") + f", {later}."]}, order
            assert not out.errors


@pytest.mark.slow
def test_blind_put_loses_a_pet_and_the_witness_replays(engine, tmp_path):
    """The reported race on LangMem itself: both runs search before either puts; the later put wins."""
    with TrialRunner(engine, "blind-put") as tr:
        res = search(tr, budget=30 if engine.backend == "sqlite" else 12, seed=0, shrink=False)
        assert res.admits, res
        found = res.found
        assert any(a.anomaly == "lost-update" for a in found.anomalies), found.anomalies
        assert found.outcome.state["memories"] in (["Alice has pets: cat, dog."], ["Alice has pets: cat, parrot."])
        w = Witness.load(Witness.from_trial(engine, "blind-put", found, seed=0, budget=30).save(tmp_path / "w.json"))
        replays = [tr.trial(ReplayChooser(w.grants)) for _ in range(3)]
    assert all(digest(r.outcome.key) == w.outcome and not r.serializable for r in replays)
    # every storage call was a granted step of an agent: the store's statements, both agents'
    prefix = "sql-" if engine.backend == "sqlite" else "pg-"
    assert {s.agent for s in w.steps if s.kind.startswith(prefix)} == {"A", "B"}
    out = io.StringIO()
    assert main(["certify", "--replay", str(tmp_path / "w.json"), "--times", "1"], out=out) == 1


@pytest.mark.slow
def test_two_remembers_with_deletes_leave_two_latest_versions(sqlite_engine):
    with TrialRunner(sqlite_engine, "double-remember") as tr:
        for order in (("A", "B"), ("B", "A")):
            _, out = tr.run(SerialChooser(order))
            assert len(out.state["memories"]) == 1
        res = search(tr, budget=30, seed=0, shrink=False)
    assert res.admits and any(a.anomaly == "double-supersede" for a in res.found.anomalies)
    assert sorted(res.found.outcome.state["memories"]) == ["Alice lives in Paris.", ROME]


@pytest.mark.slow
def test_with_the_defaults_a_patch_keeps_one_version(sqlite_engine):
    """No deletes: both runs patch the one key, so two latest versions cannot arise."""
    with TrialRunner(sqlite_engine, "double-patch") as tr:
        res = explore(tr, bound=1, max_runs=40,
                      want=lambda r: any(a.anomaly == "double-supersede" for a in r.anomalies))
    assert res.found is None and res.explored > 0


@pytest.mark.slow
def test_duplicate_remember_inserts_twice(sqlite_engine):
    with TrialRunner(sqlite_engine, "duplicate-remember") as tr:
        _, out = tr.run(SerialChooser(("A", "B")))
        assert out.state["memories"] == [BERLIN, "Alice plays the violin."]
        res = search(tr, budget=30, seed=0, shrink=False)
    assert res.admits and res.found.outcome.state["memories"].count("Alice plays the violin.") == 2


@pytest.mark.slow
def test_a_recall_between_the_put_and_the_delete_sees_two_residences(sqlite_engine):
    """N2: LangMem puts the new memory, then deletes the old one, each its own transaction; the window
    is a few steps wide, so the bounded-exhaustive search (one preemption) finds it."""
    with TrialRunner(sqlite_engine, "recall-during-replace") as tr:
        res = explore(tr, bound=1, max_runs=60, want=lambda r: any(a.anomaly == "N2" for a in r.anomalies))
    assert res.found is not None
    assert res.found.outcome.observed["R"] == [BERLIN, ROME]


@pytest.mark.parametrize("scenario,anomaly", [("replace-overwrites", "N3"),
                                              pytest.param("rejudge", "N1", marks=pytest.mark.slow),
                                              ("ingestion-order", "ingestion-order")])
def test_properties_of_the_design_show_in_serial_orders(sqlite_engine, scenario, anomaly):
    with TrialRunner(sqlite_engine, scenario) as tr:
        tr.serial_outcomes()
        found = [f for _, _, out in tr.serial_runs for f in tr.by_design(out)]
    assert any(f.startswith(anomaly + ":") for f in found), found


@pytest.mark.slow
def test_verdict_cells_of_langmem(sqlite_engine, tmp_path):
    from toki.experiments.verdicts import cell

    connect_database(sqlite_engine, None)
    rows = {a: cell(sqlite_engine, a, budget=10, trials=2, seed=42, witness_dir=tmp_path)
            for a in ("N2", "N3", "double-supersede")}
    assert {a: r["verdict"] for a, r in rows.items()} == {"N2": "admits", "N3": "admits", "double-supersede": "admits"}
    assert rows["N3"]["how"].startswith("by design") and rows["N2"]["witness"]
    assert rows["N2"]["system"].startswith("LangMem ") and rows["N2"]["engine"] == "langmem"
    assert rows["N2"]["executed"] == "real" and rows["N2"]["paper"] is None


LANGMEM_REPORTS = {  # report id -> what LangMem's own code does with the claim
    "langmem-blind-put": "reproduced (race)",
    "langmem-blind-put-n3": "reproduced (design)",
    "langmem-double-remember": "reproduced (race)",
    "langmem-double-remember-defaults": "not reproduced",  # one key, patched in place
    "langmem-consolidation": "not reproduced",  # a put per key: a memory added meanwhile survives
    "langmem-ingestion-order": "reproduced (design)",
}


@pytest.mark.parametrize("report_id", [  # the reports that run LangMem's searches are slow
    pytest.param(r, marks=pytest.mark.slow) if r in {"langmem-blind-put", "langmem-double-remember",
                                                     "langmem-double-remember-defaults", "langmem-consolidation"}
    else r for r in sorted(LANGMEM_REPORTS)])
def test_langmem_reports_are_classified_against_langmem(report_id, tmp_path):
    from toki.experiments import reported_races

    report = next(r for r in reported_races.REPORTS if r.id == report_id)
    assert report.engine == "langmem"
    row = reported_races.classify(report, budget=15, seed=0, witness_dir=tmp_path)
    assert row["executed"] == "real" and row["result"] == LANGMEM_REPORTS[report_id], row
