"""The frontrun benchmark's programs cannot rot: benchmarks/bench_frontrun.py's own code runs toki's
``--exhaustive`` side on the racy and the fixed SQLite counter, with two agents and with three, and
on the PostgreSQL write skew (each racy one found with a witness that replays, each fixed one
certified complete), every program is right when run serially, and, where frontrun is installed,
its DPOR side runs through the ``frontrun`` launcher and gives a result. Times are the benchmark's
business; nothing here is timed."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import bench_frontrun  # noqa: E402
from benchmarks.frontrun_programs import PROGRAMS, STORAGE, Case, module  # noqa: E402

ARGS = argparse.Namespace(bound=2, budget=20, replays=3, dsn=None, frontrun_timeout=60.0)


# The agents of each program: its toki scenario's and its frontrun case's must be as many.
AGENT_COUNT = {"sqlite-racy-3": 3, "sqlite-fixed-3": 3, "json-racy-3": 3, "json-fixed-3": 3}


def test_every_program_is_a_plugin_and_a_frontrun_case():
    for name, (mod, variant) in PROGRAMS.items():
        m = importlib.import_module(f"benchmarks.frontrun_programs.{mod}")
        engine = getattr(m, variant)()
        (scenario,) = engine.scenarios.values()
        want = ("A", "B", "C")[:AGENT_COUNT.get(name, 2)]
        assert scenario.agents == want and engine.executed == "real", name
        assert set(engine.scenarios) == {"off-call" if "-skew-" in name else "increment"}, name
        assert callable(m.frontrun_case), name
    assert set(STORAGE) == {p for p in PROGRAMS if not p.startswith("dict-")}
    assert {"sqlite-racy-3", "sqlite-fixed-3", "pg-skew-racy", "pg-skew-fixed"} <= set(PROGRAMS)


def _case(name: str, dsn: str | None) -> Case:
    mod, variant = module(name)
    case = mod.frontrun_case(variant, dsn)
    assert len(case.workers) == AGENT_COUNT.get(name, 2), name
    return case


@pytest.mark.parametrize("name", [p for p in PROGRAMS if not p.startswith("pg-")])
def test_serial_runs_of_every_program_keep_every_increment(name):
    """Run one agent after the other, as frontrun's invariant sees it: racy and fixed alike count
    every agent's increment."""
    case = _case(name, None)
    try:
        state = case.setup()
        assert not case.invariant(state)  # a fresh counter is 0: the invariant can fail
        for worker in case.workers:
            worker(state)
        assert case.invariant(state)
    finally:
        case.cleanup()


def test_the_counters_go_to_frontrun_as_one_function_counted_the_skew_as_two():
    """frontrun gets ``workers=f, count=n`` where every agent runs the same code (as the two-agent
    counters always did), and the skew's two different agents as a list."""
    c = _case("sqlite-racy-3", None)
    try:
        assert c.explore_workers() == {"workers": c.workers[0], "count": 3}
    finally:
        c.cleanup()
    skew = _case("pg-skew-racy", "postgresql://nowhere/none")  # no connection until setup()
    assert skew.explore_workers() == {"workers": list(skew.workers)} and len(skew.workers) == 2


@pytest.mark.db
@pytest.mark.parametrize("name", [p for p in PROGRAMS if p.startswith("pg-")])
def test_serial_runs_of_the_postgresql_programs_keep_their_invariant(name, toki_server):
    """The counters count both increments; the skew leaves one doctor on call in either order
    (each agent sees the other's doctor off and keeps its own on), racy and fixed alike."""
    for order in (slice(None), slice(None, None, -1)):
        case = _case(name, toki_server.dsn)
        try:
            state = case.setup()
            for worker in case.workers[order]:
                worker(state)
            assert case.invariant(state), (name, order)
            if "-skew-" in name:
                from benchmarks.frontrun_programs.pg_skew import on_call

                assert on_call(state) == (["bob"] if order.step is None else ["alice"]), name
        finally:
            case.cleanup()


@pytest.mark.slow
def test_toki_exhaustive_finds_the_racy_sqlite_counter_and_certifies_the_fixed_one():
    racy = bench_frontrun.run_one("toki-exhaustive", "sqlite-racy", 0, ARGS)
    assert racy["verdict"] == "found", racy
    assert racy["explored"] >= 1 and racy["anomalies"][0].startswith("lost-update"), racy
    assert (racy["replayed"], racy["replays"]) == (ARGS.replays, ARGS.replays), racy
    fixed = bench_frontrun.run_one("toki-exhaustive", "sqlite-fixed", 0, ARGS)
    assert fixed["verdict"] == "cleared" and fixed["complete"] is True, fixed
    assert fixed["explored"] > racy["explored"] and fixed["replays"] == 0, fixed
    rows = [{"tool": "toki-exhaustive", "program": p, "runs": [r]}
            for p, r in (("sqlite-racy", racy), ("sqlite-fixed", fixed))]
    assert bench_frontrun.targets(rows)["decisive"] == {"sqlite-racy": True, "sqlite-fixed": True}


@pytest.mark.slow
def test_toki_exhaustive_finds_the_three_agent_racy_counter_and_certifies_the_fixed_one():
    racy = bench_frontrun.run_one("toki-exhaustive", "sqlite-racy-3", 0, ARGS)
    assert racy["verdict"] == "found" and racy["anomalies"][0].startswith("lost-update"), racy
    assert (racy["replayed"], racy["replays"]) == (ARGS.replays, ARGS.replays), racy
    fixed = bench_frontrun.run_one("toki-exhaustive", "sqlite-fixed-3", 0, ARGS)
    assert fixed["verdict"] == "cleared" and fixed["complete"] is True, fixed
    assert bench_frontrun.expected("sqlite-fixed-3") == "cleared" and bench_frontrun.expected("sqlite-racy-3") == "found"


@pytest.mark.db
@pytest.mark.slow
def test_toki_exhaustive_finds_the_write_skew_at_repeatable_read_and_certifies_serializable(toki_server):
    args = argparse.Namespace(**vars(ARGS) | {"dsn": toki_server.dsn})
    racy = bench_frontrun.run_one("toki-exhaustive", "pg-skew-racy", 0, args)
    assert racy["verdict"] == "found" and racy["anomalies"][0].startswith("write-skew"), racy
    assert (racy["replayed"], racy["replays"]) == (args.replays, args.replays), racy
    fixed = bench_frontrun.run_one("toki-exhaustive", "pg-skew-fixed", 0, args)
    assert fixed["verdict"] == "cleared" and fixed["complete"] is True, fixed


@pytest.mark.parametrize("program", ["dict-racy", pytest.param("dict-fixed", marks=pytest.mark.slow),
                                     pytest.param("dict-lock-misplaced", marks=pytest.mark.slow)])
def test_the_shared_dict_is_unverifiable_for_toki_never_cleared(program):
    """dict-lock-misplaced was once certified complete (its agents' lock steps counted as storage)."""
    r = bench_frontrun.run_one("toki-exhaustive", program, 0, ARGS)
    assert r["verdict"] == "unverifiable" and "storage call" in r["reason"], r


# frontrun's launcher and its DPOR take seconds a run: slow, and skipped where frontrun (the bench
# extra) is not installed
@pytest.mark.slow
@pytest.mark.parametrize("program", ["sqlite-racy", "sqlite-racy-3"])
def test_frontrun_dpor_side_runs_and_reports(program):
    pytest.importorskip("frontrun")
    r = bench_frontrun.run_one("frontrun-dpor", program, 0, ARGS)
    # frontrun's own verdict is what the benchmark measures; here only that the run gave one
    # (a racy program is never cleared) and that its counts were read
    assert r["verdict"] in {"found", "inconclusive"}, r
    assert r["explored"] >= 1 and r["elapsed_s"] >= 0, r
    assert r["agents"] == AGENT_COUNT.get(program, 2) and r["options"]["count"] == r["agents"], r


@pytest.mark.db
@pytest.mark.slow
def test_frontrun_dpor_side_runs_the_write_skew(toki_server):
    pytest.importorskip("frontrun")
    args = argparse.Namespace(**vars(ARGS) | {"dsn": toki_server.dsn})
    r = bench_frontrun.run_one("frontrun-dpor", "pg-skew-racy", 0, args)
    assert r["verdict"] in {"found", "inconclusive"}, r
    assert r["agents"] == 2 and "count" not in r["options"], r


def test_the_markdown_table_keeps_a_row_where_no_run_answered():
    """A cell whose runs all timed out has no time; its row once collapsed to ``| - |``."""
    rows = [{"program": "json-fixed-3", "tool": "frontrun-dpor", "runs": [{"verdict": "error", "wall_s": 900.1}] * 2}]
    line = bench_frontrun.markdown(rows).splitlines()[-1]
    assert line == "| json-fixed-3 | frontrun-dpor | error ×2 | - | - | - |", line
