"""Faults in the engines of the harness: the agent process SIGKILLed at a storage call, a file
write torn half-way; the engine reopened from disk and read back through its own API."""

from __future__ import annotations

import io
import json

import pytest

from toki.cli import main
from toki.engines.registry import ENGINES, available, load_engine
from toki.faults.engines import EngineFaults


def _engine(name):
    if not available(ENGINES[name]):
        pytest.skip(f"{name} is not installed")
    return load_engine(name)


@pytest.mark.slow
def test_atommem_loses_its_file_when_killed_between_truncate_and_write():
    with EngineFaults(_engine("atommem"), "add-add") as ef:
        grants, labels, _ = ef.reference()
        first_write = ef.points("torn")[0]  # the grant that writes (and closes) facts_toki.json
        assert "write+close facts_toki.json" in labels[first_write]
        killed = ef.run("kill", first_write)  # open(..., 'w') has truncated it; nothing written yet
        assert not killed.survived
        assert any("unreadable after the crash: facts file(s) empty or not valid JSON" in f for f in killed.findings)
        assert killed.retried.startswith("failed")  # every later load fails: the engine cannot go on
        torn = ef.run("torn", first_write)
        assert not torn.survived and any("unreadable" in f for f in torn.findings)
        assert ef.run("kill", 0).survived  # before anything: nothing lost, the retry does it all


@pytest.mark.slow
def test_atommem_atomic_survives_every_kill_and_torn_write():
    with EngineFaults(_engine("atommem-atomic"), "contradict-same-fact") as ef:
        results = [ef.run(k, p) for k in ("kill", "torn") for p in ef.points(k)]
        assert len(results) > 20
        bad = [(r.kind, r.point, r.statement, r.findings) for r in results if not r.survived]
        assert not bad, bad


def _points_between_commits(ef, agent="A"):
    grants, labels, _ = ef.reference()
    commits = [i for i, lab in enumerate(labels) if lab.startswith(f"{agent}: sql-commit")]
    return commits


@pytest.mark.slow
def test_sodamem_ingest_is_several_autocommitted_steps_and_a_kill_between_them_half_writes():
    with EngineFaults(_engine("sodamem"), "double-supersede") as ef:
        grants, labels, _ = ef.reference()
        commits = _points_between_commits(ef)
        assert len(commits) >= 3  # one ingest commits several times
        # After the commit that closes Berlin, before the one that inserts Rome: the slot has no
        # current value ("a closed incumbent with no winner").
        close = next(i for i, lab in enumerate(labels) if lab.startswith("A: sql-write INSERT INTO fact_events"))
        r = ef.run("kill", next(c for c in commits if c > close) + 1)
        assert not r.survived
        assert any(f.startswith("half-done: a closed incumbent with no winner: berlin superseded, no current lives_in")
                   for f in r.findings), r.findings
        assert r.retried == "ok"
        later = ef.run("kill", commits[-4] + 1)  # the fact is in, some of its edges are not
        assert later.survived or any(f.startswith("half-done") for f in later.findings)


@pytest.mark.slow
def test_sodamem_fixed_holds_one_transaction_and_survives_the_same_points():
    with EngineFaults(_engine("sodamem-fixed"), "double-supersede") as ef:
        grants, labels, _ = ef.reference()
        mid = [i for i, lab in enumerate(labels) if lab.startswith("A: sql-write")]
        for p in (mid[0], mid[len(mid) // 2], mid[-1] + 1, len(grants)):
            r = ef.run("kill", p)
            assert r.survived, (p, labels[p] if p < len(labels) else "end", r.findings)


def test_cli_fault_table_witness_and_replay(tmp_path):
    out = io.StringIO()
    code = main(["faults", "--system", "atommem", "--case", "add-add", "--kind", "torn", "--max-points", "2",
                 "--witness-dir", str(tmp_path / "w"), "--json", str(tmp_path / "r.json")], out=out)
    assert code == 1, out.getvalue()
    assert "toki faults --system atommem (model" in out.getvalue()
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["provenance"]["git_commit"] and doc["provenance"]["options"]["max_points"] == 2
    (sysdoc,) = doc["systems"]
    assert sysdoc["table"][0]["tried"] == 2 and sysdoc["table"][0]["failed"] == 2
    (wit,) = sysdoc["witnesses"]
    out = io.StringIO()
    assert main(["faults", "--replay", wit], out=out) == 1
    assert "reproduced" in out.getvalue() and "unreadable" in out.getvalue()


def test_replay_of_a_survived_point_exits_0(tmp_path):
    rec = {"toki_faults": 1, "system": "atommem-atomic", "case": "add-add", "kind": "kill", "point": 3}
    f = tmp_path / "f.json"
    f.write_text(json.dumps(rec))
    out = io.StringIO()
    assert main(["faults", "--replay", str(f)], out=out) == 0
    assert "not reproduced (survived)" in out.getvalue()


@pytest.mark.parametrize("content,problem", [
    ("{", "is not JSON"),
    ("[]", "is not a toki fault file"),
    ('{"toki_faults": 1, "system": "atommem", "case": "add-add", "kind": "kill"}', "field 'point'"),
    ('{"toki_faults": 1, "system": "atommem", "case": "add-add", "kind": "kill", "point": -1}', "negative"),
    ('{"toki_faults": 1, "system": "nosuch", "case": "x", "kind": "kill", "point": 1}', "unknown system"),
    ('{"toki_faults": 1, "system": "atommem", "case": "nosuch", "kind": "kill", "point": 1}', "no case"),
    ('{"toki_faults": 1, "system": "atommem", "case": "add-add", "kind": "kill", "point": 100000}', "no kill fault point"),
    ('{"toki_faults": 1, "system": "atommem", "case": "add-add", "kind": "restart", "point": 1}', "takes no 'restart'"),
])
def test_bad_fault_files_exit_2_naming_the_problem(tmp_path, content, problem):
    f = tmp_path / "bad.json"
    f.write_text(content)
    out, err = io.StringIO(), io.StringIO()
    assert main(["faults", "--replay", str(f), "--json", str(tmp_path / "o.json")], out=out, err=err) == 2
    assert problem in err.getvalue(), err.getvalue()
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("argv,problem", [
    ([], "no system named"),
    (["--system", "nosuch"], "unknown system"),
    (["--system", "atommem", "--max-points", "0"], "--max-points 0"),
    (["--system", "atommem", "--case", "nosuch"], "has no case"),
    (["--system", "atommem", "--replay", "x.json"], "--replay runs the one fault"),
])
def test_bad_options_exit_2(argv, problem):
    err = io.StringIO()
    assert main(["faults", *argv], out=io.StringIO(), err=err) == 2
    assert problem in err.getvalue()


@pytest.mark.db
def test_a_forked_fault_child_lets_go_of_every_connection_of_the_parent(toki_server):
    """In the child, each psycopg connection of the parent, a subclass's too, is pointed at
    /dev/null (found through its class rather than a walk over every object); the parent's own
    connections stay usable."""
    import os
    import stat
    import types

    import psycopg

    from toki.faults.child import in_child
    from toki.faults.engines import forget_parent_connections

    class Mine(psycopg.Connection):
        pass

    plain = psycopg.connect(toki_server.dsn, autocommit=True)
    mine = Mine.connect(toki_server.dsn, autocommit=True)
    try:
        def child():
            return [stat.S_ISCHR(os.fstat(c.pgconn.socket).st_mode) for c in (plain, mine)]

        got = in_child(child, 30, before=lambda: forget_parent_connections(types.SimpleNamespace()))
        assert got == ("ok", [True, True]), got
        assert plain.execute("select 1").fetchone() == (1,) and mine.execute("select 2").fetchone() == (2,)
    finally:
        plain.close()
        mine.close()
