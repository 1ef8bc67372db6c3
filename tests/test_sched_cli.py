"""``toki run`` in-process: PostgreSQL's own isolation specs, directories, JSON, exit codes,
and the schedules/ catalogue at read committed, repeatable read and serializable."""

from __future__ import annotations

import io
import json
from importlib.resources import as_file, files
from pathlib import Path

import pytest

from toki.cli import main
from toki.sched import Runner, load

SPECS = Path(__file__).parent / "data" / "specs"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(["run", *argv], out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def _bad(tmp_path, text: str, name: str = "bad.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# -- bad input: exit 2 without touching the database ------------------------------------------

def test_malformed_toml_exits_2_with_one_line(tmp_path):
    p = _bad(tmp_path, 'name = "x"\nsteps = [ { sql = "begin" } ]\n')
    rc, out, err = run(str(p), "--level", "rc")
    assert rc == 2 and str(p) in err and "step 0 has no session" in err


def test_malformed_spec_exits_2(tmp_path):
    p = _bad(tmp_path, "session s1\nstep a { SELECT 1; }\npermutation a b\n", "bad.spec")
    rc, _, err = run(str(p))
    assert rc == 2 and "bad.spec" in err and "unknown step 'b'" in err


def test_bad_level_and_missing_path_exit_2(tmp_path):
    assert run(str(SPECS / "deadlock-simple.spec"), "--level", "snapshot-ish")[0] == 2
    rc, _, err = run(str(tmp_path / "missing.toml"), "--level", "rc")
    assert rc == 2 and "no such file" in err


def test_bad_file_in_a_directory_fails_the_whole_directory_before_running(tmp_path):
    _bad(tmp_path, 'name = "x"\nsteps = []\n', "a.toml")
    rc, _, err = run(str(tmp_path), "--level", "rc")
    assert rc == 2 and "a.toml" in err


# -- running ---------------------------------------------------------------------------------

@pytest.mark.db
def test_spec_json_has_permutations_with_step_names():
    rc, out, _ = run(str(SPECS / "read-write-unique.spec"), "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["spec"] == "read-write-unique" and len(doc["permutations"]) == 2
    first, second = doc["permutations"]
    assert first["permutation"] == ["r1", "r2", "w1", "w2", "c1", "c2"]
    assert [s["name"] for s in first["steps"]] == first["permutation"]
    w2 = first["steps"][3]
    assert w2["blocked"] and w2["completed_at"] == 4 and w2["sqlstate"] == "40001"
    assert second["steps"][4]["sqlstate"] == "23505" and not second["steps"][4]["blocked"]
    for key in ("schedule", "level", "backend", "steps", "sessions", "final", "expect"):
        assert key in first


@pytest.mark.db
def test_deadlock_simple_spec_matches_postgres_expected_output():
    rc, out, _ = run(str(SPECS / "deadlock-simple.spec"), "--json")
    (perm,) = json.loads(out)["permutations"]
    by = {s["name"]: s for s in perm["steps"]}
    # PostgreSQL's expected/deadlock-simple.out: s1ae waits, s2ae fails with a deadlock, s1ae completes
    assert by["s1ae"]["blocked"] and by["s1ae"]["status"] == "ok" and by["s1ae"]["completed_at"] == 3
    assert by["s2ae"]["sqlstate"] == "40P01"
    assert perm["sessions"] == {"s1": "committed", "s2": "aborted"}


@pytest.mark.db
def test_soft_deadlock_spec_with_star_marker():
    rc, out, _ = run(str(SPECS / "deadlock-soft-2.spec"), "--json")
    (perm,) = json.loads(out)["permutations"]
    by = {s["name"]: s for s in perm["steps"]}
    # expected/deadlock-soft-2.out: s2b, s3a, s4a and s1b wait; s1b jumps the queue; no errors
    assert [n for n, s in by.items() if s["blocked"]] == ["s2b", "s3a", "s4a", "s1b"]
    assert (by["s1b"]["completed_at"], by["s2b"]["completed_at"], by["s3a"]["completed_at"],
            by["s4a"]["completed_at"]) == (5, 6, 7, 8)
    assert all(s["status"] == "ok" for s in perm["steps"])


@pytest.mark.db
@pytest.mark.parametrize("spec, sessions", [
    pytest.param("classroom-scheduling", (("rx1", "wy1", "c1"), ("ry2", "wx2", "c2")), marks=pytest.mark.slow),
    ("simple-write-skew", (("rwx1", "c1"), ("rwx2", "c2")))])
def test_specs_without_permutations_any_overlap_is_a_serialization_failure(spec, sessions):
    rc, out, _ = run(str(SPECS / f"{spec}.spec"), "--json")
    perms = json.loads(out)["permutations"]
    a, b = sessions
    serial = {a + b, b + a}
    assert len(perms) == len({tuple(p["permutation"]) for p in perms})
    for p in perms:
        states = [s["sqlstate"] for s in p["steps"] if s["sqlstate"]]
        if tuple(p["permutation"]) in serial:
            assert states == [], p["permutation"]
        else:  # "Any overlap between the transactions must cause a serialization failure."
            assert states == ["40001"], (p["permutation"], states)
            assert sorted(p["sessions"].values()) == ["aborted", "committed"]


@pytest.mark.db
def test_directory_run_prints_a_line_per_file_and_exit_1_on_a_failed_expectation(tmp_path):
    src = files("toki.schedules") / "classic" / "p4.toml"
    (tmp_path / "p4.toml").write_text(src.read_text())
    rc, out, _ = run(str(tmp_path), "--level", "rc")
    assert rc == 0 and "p4.toml" in out and "pass" in out
    (tmp_path / "p4-wrong.toml").write_text(src.read_text().replace(
        "final = [[[1, 11], [2, 20]]]\nsessions = { T1 = \"committed\", T2 = \"committed\" }",
        "final = [[[1, 12], [2, 20]]]\nsessions = { T1 = \"committed\", T2 = \"committed\" }", 1))
    rc, out, _ = run(str(tmp_path), "--level", "rc")
    assert rc == 1 and "FAIL" in out and "final: expected" in out
    rc, out, _ = run(str(tmp_path), "--level", "rc", "--json")
    docs = json.loads(out)
    # files run in sorted order: p4-wrong.toml, then p4.toml
    assert rc == 1 and [d["expect"]["ok"] for d in docs] == [False, True]
    rc, out, _ = run(str(tmp_path / "p4-wrong.toml"), "--level", "rr", "--json")
    assert rc == 0 and json.loads(out)["expect"]["ok"] is True


@pytest.mark.db
def test_file_without_level_runs_every_level_it_expects():
    with as_file(files("toki.schedules") / "classic" / "g2-item.toml") as p:
        rc, out, _ = run(str(p), "--json")
    docs = json.loads(out)
    assert rc == 0 and [d["level"] for d in docs] == ["read-committed", "repeatable-read", "serializable"]
    assert all(d["expect"]["checked"] and d["expect"]["ok"] for d in docs)


# -- the catalogue ----------------------------------------------------------------------------

def _catalogue() -> list:
    root = files("toki.schedules")
    found = []
    for folder in ("classic", "witnesses"):
        for entry in sorted((root / folder).iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".toml"):
                found.append(entry)
    return found


def test_catalogue_is_shipped_as_package_data_and_every_file_states_its_claim():
    entries = _catalogue()
    names = {e.name for e in entries}
    for case in ("g0", "g1a", "g1b", "g1c", "otv", "pmp", "pmp-write", "p4", "g-single",
                 "g-single-dependencies", "g-single-write-1", "g-single-write-2", "g2-item", "g2"):
        assert f"{case}.toml" in names
    for w in ("p2", "p3-reread", "p3-predicate-write", "p4", "a5a", "a5b", "n1", "n2", "n3"):
        assert f"{w}.toml" in names
    for e in entries:
        text = e.read_text()
        assert text.startswith("# Claim"), e.name
        s = load_text(text, e.name)
        assert set(s.expect) == {"read-committed", "repeatable-read", "serializable"}, e.name


def load_text(text: str, name: str):
    from toki.sched import parse_toml

    return parse_toml(text, source=name)


@pytest.mark.db
@pytest.mark.parametrize("level", ["read-committed", pytest.param("repeatable-read", marks=pytest.mark.slow),
                                   pytest.param("serializable", marks=pytest.mark.slow)])
def test_catalogue_expectations_hold(toki_server, level):
    runner = Runner(toki_server, step_limit_s=10)
    failures = []
    with runner.lane("catalogue") as lane:
        for entry in _catalogue():
            with as_file(entry) as path:
                sched = load(path)
            r = runner.run(sched, level, lane=lane, reset=True)
            assert r.expect["checked"], entry.name
            if not r.expect["ok"]:
                failures.append((entry.name, r.expect["diff"]))
    assert failures == []
