"""The frontrun benchmark's programs cannot rot: benchmarks/bench_frontrun.py's own code runs toki's
``--exhaustive`` side on the racy and the fixed SQLite counter (the racy one found with a witness
that replays, the fixed one certified complete), every program is right when run serially, and,
where frontrun is installed, its DPOR side runs through the ``frontrun`` launcher and gives a
result. Times are the benchmark's business; nothing here is timed."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import bench_frontrun  # noqa: E402
from benchmarks.frontrun_programs import AGENTS, PROGRAMS, STORAGE, module  # noqa: E402

ARGS = argparse.Namespace(bound=2, budget=20, replays=3, dsn=None, frontrun_timeout=60.0)


def test_every_program_is_a_plugin_and_a_frontrun_case():
    for name, (mod, variant) in PROGRAMS.items():
        m = importlib.import_module(f"benchmarks.frontrun_programs.{mod}")
        engine = getattr(m, variant)()
        assert set(engine.scenarios) == {"increment"} and engine.executed == "real", name
        assert callable(m.frontrun_case), name
    assert set(STORAGE) == {p for p in PROGRAMS if not p.startswith("dict-")}


@pytest.mark.parametrize("name", [p for p in PROGRAMS if not p.startswith("pg-")])
def test_serial_runs_of_every_program_keep_both_increments(name):
    """Run one agent after the other, as frontrun's invariant sees it: racy and fixed alike give 2."""
    mod, variant = module(name)
    setup, worker, invariant, cleanup = mod.frontrun_case(variant, None)
    try:
        state = setup()
        assert not invariant(state)  # a fresh counter is 0: the invariant can fail
        for _ in AGENTS:
            worker(state)
        assert invariant(state)
    finally:
        cleanup()


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


@pytest.mark.parametrize("program", ["dict-racy", pytest.param("dict-fixed", marks=pytest.mark.slow),
                                     pytest.param("dict-lock-misplaced", marks=pytest.mark.slow)])
def test_the_shared_dict_is_unverifiable_for_toki_never_cleared(program):
    """dict-lock-misplaced was once certified complete (its agents' lock steps counted as storage)."""
    r = bench_frontrun.run_one("toki-exhaustive", program, 0, ARGS)
    assert r["verdict"] == "unverifiable" and "storage call" in r["reason"], r


def test_frontrun_dpor_side_runs_and_reports():
    pytest.importorskip("frontrun")
    r = bench_frontrun.run_one("frontrun-dpor", "sqlite-racy", 0, ARGS)
    # frontrun's own verdict is what the benchmark measures; here only that the run gave one
    # (a racy program is never cleared) and that its counts were read
    assert r["verdict"] in {"found", "inconclusive"}, r
    assert r["explored"] >= 1 and r["elapsed_s"] >= 0, r
