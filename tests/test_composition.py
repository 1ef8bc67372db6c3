"""The composition grid: pipelines, joined guards, stages that admit exactly below their
operator's precondition on PostgreSQL, the injected noise, the command's document and its bad input."""

from __future__ import annotations

import io
import json

import pytest

from toki.cli import main
from toki.errors import ConfigError
from toki.levels import MATRIX_LEVELS, PRECONDITION, pipeline_guard
from toki.matrix import composition as cm


def test_the_grid_has_1364_pipelines_and_the_published_split():
    pipes = cm.pipelines()
    assert len(pipes) == 1364 and len(set(pipes)) == 1364
    at = sum(1 for p in pipes for lv in MATRIX_LEVELS if lv.at_least(pipeline_guard(p)))
    assert (at, len(pipes) * 6 - at) == (2219, 5965)


def test_joined_guard():
    assert pipeline_guard(["lww", "evi"]).name == "SI"
    assert pipeline_guard(["evi", "await"]).name == "SI+cb"
    assert pipeline_guard(["await", "lww", "rule"]).name == "SR+cb"
    assert pipeline_guard(["lww"]) == PRECONDITION["lww"]
    with pytest.raises(ConfigError, match="lww, evi, await or rule"):
        pipeline_guard(["lww", "max"])
    with pytest.raises(ConfigError):
        pipeline_guard([])


def test_sampling_is_seeded_and_in_plan_order():
    a = cm.plan(pipelines_n=25, seed=3)
    assert a == cm.plan(pipelines_n=25, seed=3) and a != cm.plan(pipelines_n=25, seed=4)
    every = cm.pipelines()
    assert [every.index(p) for p in a] == sorted(every.index(p) for p in a)
    with pytest.raises(ConfigError, match="--pipelines"):
        cm.plan(pipelines_n=0, seed=1)


def test_noise_expectation_compounds_per_stage():
    one = cm.noise_expectation([("lww",)], 0.1)["at_or_above_rate"]
    five = cm.noise_expectation([("lww",) * 5], 0.1)["at_or_above_rate"]
    assert one == pytest.approx(0.1) and five == pytest.approx(1 - 0.9 ** 5, abs=1e-4)


@pytest.fixture(scope="module")
def bench():
    from toki.matrix.cells import close_worker_benches, worker_bench

    yield worker_bench(None, 10.0, "composition")
    close_worker_benches()  # a lane holds up to a dozen connections: give them back


@pytest.mark.db
@pytest.mark.parametrize("op", cm.OPERATORS)
def test_each_stage_admits_exactly_below_its_precondition(bench, op):
    for lv in MATRIX_LEVELS:
        cell = cm.run_cell(bench, (op,), lv, 2, 5, 0.0)
        want = 0.0 if lv.at_least(PRECONDITION[op]) else 1.0
        assert cell["rate"] == want, cell


@pytest.mark.db
def test_a_pipeline_admits_below_its_joined_guard_only(bench):
    pipe = ("lww", "evi", "await")  # guard SI+cb
    rates = {lv.name: cm.run_cell(bench, pipe, lv, 2, 9, 0.0)["rate"] for lv in MATRIX_LEVELS}
    assert rates == {"RC": 1.0, "RC+cb": 1.0, "SI": 1.0, "SI+cb": 0.0, "SR": 1.0, "SR+cb": 0.0}


@pytest.mark.slow
@pytest.mark.db
def test_noise_is_executed_seeded_and_only_adds(bench):
    pipe = ("rule", "evi", "lww", "await")
    lv = MATRIX_LEVELS[5]  # SR+cb: at the guard, so without noise nothing is admitted
    quiet = cm.run_cell(bench, pipe, lv, 6, 2, 0.0)
    noisy = cm.run_cell(bench, pipe, lv, 6, 2, 0.5)
    assert quiet["rate"] == 0.0 and quiet["noisy_stages"] == 0
    assert noisy["noisy_stages"] > 0 and noisy["rate"] > 0.0
    assert noisy["admitted_by_isolation"] == quiet["admitted"] == 0
    assert cm.run_cell(bench, pipe, lv, 6, 2, 0.5) == noisy  # same seed, same cell
    below = cm.run_cell(bench, pipe, MATRIX_LEVELS[2], 4, 2, 0.5)  # SI: below SR+cb
    assert below["rate"] == below["admitted_by_isolation"] / 4 == 1.0
    # the stage data do not depend on the noise: the schedule without its judge steps is the same
    s0, _ = cm.build(pipe, lv, 2, 0, 0.0)
    s1, stages = cm.build(pipe, lv, 2, 0, 0.99)
    assert all(st.noise_key for st in stages)
    assert [x.name for x in s0.steps] == [x.name for x in s1.steps if x.session != "J"]


@pytest.mark.slow
@pytest.mark.db
def test_composition_command_document(tmp_path):
    path = tmp_path / "c.json"
    out = io.StringIO()
    rc = main(["matrix", "--composition", "--pipelines", "3", "--trials", "2", "--workers", "1", "--quiet",
               "--json", str(path)], out=out, err=io.StringIO())
    assert rc == 0, out.getvalue()
    doc = json.loads(path.read_text())
    c = doc["composition"]
    assert set(c) >= {"cells", "at_or_above", "below", "noise", "trials"}
    assert len(c["cells"]) == 18 and c["trials"] == 2 and c["noise"] == 0.0
    assert set(c["at_or_above"]) >= {"cells", "rate"} and c["at_or_above"]["cells"] + c["below"]["cells"] == 18
    assert c["at_or_above"]["rate"] == 0.0 and c["below"]["rate"] == 1.0
    assert c["published"]["at_or_above"]["rate"] == 0.0904
    assert doc["provenance"]["seed"] == 42 and doc["provenance"]["cluster"]["workers"] == 1
    assert "published 0.0904" in out.getvalue()


@pytest.mark.parametrize("argv, words", [
    (["--composition", "--noise", "1.5"], "--noise"),
    (["--composition", "--noise", "nan"], "--noise"),
    (["--composition", "--pipelines", "0"], "--pipelines"),
    (["--composition", "--pipelines", "2000"], "--pipelines"),
    (["--composition", "--trials", "0"], "--trials"),
    (["--composition", "--only", "P4"], "--only"),
    (["--noise", "0.02"], "--composition"),
    (["--pipelines", "5"], "--composition"),
])
def test_bad_input_exits_2_naming_the_fix(argv, words):
    err = io.StringIO()
    assert main(["matrix", "--quiet", *argv], out=io.StringIO(), err=err) == 2
    assert words in err.getvalue()


def test_composition_refuses_a_database_other_than_postgresql(tmp_path):
    err = io.StringIO()
    rc = main(["matrix", "--composition", "--dsn", f"sqlite:///{tmp_path}/x.db", "--pipelines", "1", "--quiet"],
              out=io.StringIO(), err=err)
    assert rc == 2 and "PostgreSQL" in err.getvalue()
