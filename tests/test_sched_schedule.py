"""Schedule files and isolationtester specs without a database: validation messages,
the to_toml round trip, and the spec parser on PostgreSQL's own isolation specs."""

from __future__ import annotations

from math import comb
from pathlib import Path

import pytest

from toki.errors import ScheduleError
from toki.sched import load, parse_spec, parse_toml, to_toml

SPECS = Path(__file__).parent / "data" / "specs"

GOOD = """
name = "tiny"
sessions = ["T1", "T2"]
setup = ["create table t (id int primary key, v int)", "insert into t values (1, 10)"]
steps = [
  { session = "T1", sql = "begin" },
  { session = "T2", sql = "begin" },
  { session = "T1", sql = "update t set v = 11 where id = 1" },
  { session = "T2", sql = "update t set v = 12 where id = 1" },
  { session = "T1", sql = "commit" },
  { session = "T2", sql = "commit" },
]
final = ["select id, v from t"]
[expect.read-committed]
blocked = [3]
errors = {}
rows = { 2 = [] }
final = [[[1, 12]]]
sessions = { T1 = "committed", T2 = "committed" }
[expect.rr]
blocked = [3]
errors = { 3 = "40001" }
"""


def _error(text: str, source: str = "bad.toml") -> str:
    with pytest.raises(ScheduleError) as e:
        parse_toml(text, source=source)
    return str(e.value)


def test_good_schedule_parses_with_every_expectation_field():
    s = parse_toml(GOOD, source="tiny.toml")
    assert s.sessions == ["T1", "T2"] and len(s.steps) == 6
    assert s.expect["read-committed"].blocked == [3]
    assert s.expect["read-committed"].rows == {2: []}
    assert s.expect["rr"].errors == {3: "40001"}


def test_unknown_session_names_file_step_and_fix():
    msg = _error(GOOD.replace('{ session = "T2", sql = "commit" }', '{ session = "T3", sql = "commit" }'))
    assert "bad.toml" in msg and "step 5" in msg and "'T3'" in msg
    assert "declare it in sessions" in msg


def test_missing_session_field():
    msg = _error(GOOD.replace('{ session = "T2", sql = "begin" }', '{ sql = "begin" }'))
    assert "bad.toml" in msg and "step 1" in msg and "has no session" in msg and 'session = "T1"' in msg


def test_missing_sql_and_op():
    msg = _error(GOOD.replace('{ session = "T2", sql = "begin" }', '{ session = "T2" }'))
    assert "bad.toml" in msg and "step 1" in msg and "exactly one of sql or op" in msg


def test_bad_level_in_expectation():
    msg = _error(GOOD.replace("[expect.rr]", "[expect.snapshot-serializable]"))
    assert "bad.toml" in msg and "snapshot-serializable" in msg and "read-committed" in msg


def test_empty_steps():
    msg = _error('name = "x"\nsteps = []\n')
    assert "bad.toml" in msg and "no steps" in msg and "steps = [" in msg


def test_no_steps_key_and_bad_syntax_and_unknown_keys():
    assert "no steps" in _error('name = "x"\n')
    assert "not valid TOML" in _error('name = "x\nsteps = [')
    assert "unknown top-level key" in _error('steeps = []\n' + GOOD)
    assert "unknown key" in _error(GOOD.replace("blocked = [3]\nerrors = { 3", "blockd = [3]\nerrors = { 3"))


def test_expectation_naming_a_step_that_does_not_exist():
    msg = _error(GOOD.replace("blocked = [3]\nerrors = {}", "blocked = [9]\nerrors = {}"))
    assert "step 9" in msg and "0..5" in msg


def test_unknown_op_and_on_blocked():
    msg = _error(GOOD.replace('{ session = "T2", sql = "begin" }', '{ session = "T2", op = "think" }'))
    assert "step 1" in msg and "'think'" in msg and "read_candidates" in msg
    assert "on_blocked" in _error('on_blocked = "wait"\n' + GOOD)


def test_load_rejects_missing_files_and_unknown_suffixes(tmp_path):
    with pytest.raises(ScheduleError, match="no such file"):
        load(tmp_path / "nope.toml")
    p = tmp_path / "x.yaml"
    p.write_text("steps: []")
    with pytest.raises(ScheduleError, match="unknown schedule format"):
        load(p)


def test_to_toml_round_trip_including_ops_and_expectations():
    s = parse_toml(GOOD, source="tiny.toml")
    again = parse_toml(to_toml(s), source="again.toml")
    for attr in ("name", "setup", "teardown", "final", "on_blocked", "store"):
        assert getattr(again, attr) == getattr(s, attr)
    assert [(x.session, x.sql, x.op, x.args) for x in again.steps] == [(x.session, x.sql, x.op, x.args) for x in s.steps]
    assert again.expect == s.expect


def test_to_toml_round_trip_of_catalogue_witness_with_op_steps():
    from importlib.resources import files

    path = files("toki.schedules") / "witnesses" / "n1.toml"
    s = parse_toml(path.read_text(), source=str(path))
    again = parse_toml(to_toml(s), source="again.toml")
    assert again.judge_log_form == "append" and again.store
    assert [(x.session, x.op, x.args) for x in again.steps] == [(x.session, x.op, x.args) for x in s.steps]
    assert again.expect == s.expect


# -- isolationtester specs ----------------------------------------------------------------

def test_spec_with_quoted_names_and_one_permutation():
    spec = load(SPECS / "deadlock-simple.spec")
    assert spec.name == "deadlock-simple"
    assert [s.name for s in spec.sessions] == ["s1", "s2"]
    assert spec.sessions[0].setup == ["BEGIN;"]
    assert spec.setup == ["CREATE TABLE a1 ();"] and spec.teardown == ["DROP TABLE a1;"]
    (sched,) = spec.schedules()
    assert [st.name for st in sched.steps] == ["s1as", "s2as", "s1ae", "s2ae", "s1c", "s2c"]
    assert sched.on_blocked == "defer" and sched.session_setup == {"s1": ["BEGIN;"], "s2": ["BEGIN;"]}


def test_spec_with_two_permutations():
    spec = load(SPECS / "read-write-unique.spec")
    perms = [[st.name for st in s.steps] for s in spec.schedules()]
    assert perms == [["r1", "r2", "w1", "w2", "c1", "c2"], ["r1", "w1", "c1", "r2", "w2", "c2"]]


def test_spec_without_permutations_runs_every_interleaving():
    spec = load(SPECS / "classroom-scheduling.spec")
    perms = [tuple(st.name for st in s.steps) for s in spec.schedules()]
    assert len(perms) == comb(6, 3) == len(set(perms))
    for p in perms:  # each session's steps keep their order
        assert [x for x in p if x in ("rx1", "wy1", "c1")] == ["rx1", "wy1", "c1"]
        assert [x for x in p if x in ("ry2", "wx2", "c2")] == ["ry2", "wx2", "c2"]
    assert len(load(SPECS / "simple-write-skew.spec").schedules()) == comb(4, 2)


def test_spec_blocking_markers():
    spec = load(SPECS / "deadlock-soft-2.spec")
    (perm,) = spec.permutations
    marked = {p.name: (p.blockers, p.star) for p in perm}
    assert marked["s1b"] == ((), True) and marked["s1a"] == ((), False)
    text = (SPECS / "read-write-unique.spec").read_text().replace(
        'permutation "r1" "r2" "w1" "w2" "c1" "c2"', 'permutation "r1" "r2" "w1" "w2"("c1") "c1" "c2"')
    spec2 = parse_spec(text, source="marked.spec")
    step = spec2.schedules()[0].steps[3]
    assert step.name == "w2" and step.await_steps == ("c1",)


@pytest.mark.parametrize("text, needle", [
    ('session s1\nstep a { SELECT 1; }\npermutation a b\n', "unknown step 'b'"),
    ('session s1\nstep a { SELECT 1; \n', "never closed"),
    ('session s1\n', "has no steps"),
    ('setup { SELECT 1; }\n', "no sessions"),
    ('session s1\nstep a { SELECT 1; }\nsession s2\nstep a { SELECT 2; }\n', "used twice"),
    ('session s1\nstep a { SELECT 1; }\npermutation a(b)\n', "unknown step 'b'"),
    ('session s1\nstep a { SELECT 1; }\nbogus\n', "unexpected 'bogus'"),
])
def test_malformed_specs_name_the_file_and_the_fix(text, needle):
    with pytest.raises(ScheduleError) as e:
        parse_spec(text, source="broken.spec")
    msg = str(e.value)
    assert "broken.spec" in msg and needle in msg
    assert e.value.fix  # every message says how to fix it
