"""PCT schedules: the bound it states, and that it finds and clears what random search does."""

from __future__ import annotations

import io
import json
import random

import pytest

from toki.cli import main
from toki.engines.registry import load_engine
from toki.harness.pct import PCTChooser, bound, pct_search
from toki.harness.trial import TrialRunner
from toki.errors import ConfigError


def test_the_bound_is_pcts_one_over_n_k_to_the_d_minus_one():
    assert bound(2, 10, 1) == 0.5
    assert bound(2, 10, 2) == pytest.approx(1 / 20)
    assert bound(3, 10, 3) == pytest.approx(1 / 300)


def test_a_pct_schedule_runs_the_highest_priority_agent_and_lowers_it_at_a_change_point():
    c = PCTChooser(["A", "B"], steps=4, depth=2, rng=random.Random(1))
    first = max(c.priority, key=c.priority.get)
    k = next(iter(c.changes))
    picks = [c.choose(["A", "B"], first) for _ in range(4)]
    assert picks[:k - 1] == [first] * (k - 1)
    assert picks[k - 1] != first  # lowered below every initial priority at its change point


def test_pct_finds_the_lost_update_and_clears_the_fix_with_its_bound_stated():
    racy = load_engine(None, "tests.toy_engine:counter")
    with TrialRunner(racy, "increment") as runner:
        res = pct_search(runner, depth=2, runs=60, seed=0)
        assert res.found is not None and "lost-update" in res.found.anomalies[0]
    fixed = load_engine(None, "tests.toy_engine:counter_locked")
    with TrialRunner(fixed, "increment") as runner:
        res = pct_search(runner, depth=2, runs=30, seed=0)
        assert res.found is None and res.runs == 30
        assert res.miss == pytest.approx((1 - bound(2, res.steps, 2)) ** 30)
        assert "all 30 runs miss it with probability <=" in res.guarantee()


def test_a_depth_below_one_is_refused():
    with TrialRunner(load_engine(None, "tests.toy_engine:counter"), "increment") as runner:
        with pytest.raises(ConfigError, match="depth must be at least 1"):
            pct_search(runner, depth=0, runs=1)


@pytest.mark.slow
def test_every_verdict_says_what_its_search_rests_on(capsys):
    import json

    from toki.cli import main

    for argv, mode, bound in ((["--budget", "20"], "random", None), (["--pct", "2", "--budget", "20"], "pct", 2)):
        rc = main(["certify", "--engine-module", "tests.toy_engine:counter_locked", *argv, "--json", "-"])
        doc = json.loads(capsys.readouterr().out)
        (v,) = doc["verdicts"]
        assert rc == 0 and v["verdict"] == "excludes"
        assert v["search"]["mode"] == mode and v["search"]["bound"] == bound and v["search"]["explored"] == 20
        assert v["search"]["complete"] is False and v["search"]["guarantee"]
    rc = main(["certify", "--engine-module", "tests.toy_engine:counter_locked", "--exhaustive", "2", "--json", "-"])
    (v,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert rc == 0 and v["verdict"] == "excludes" and v["search"]["mode"] == "exhaustive"
    assert v["search"]["complete"] is True and v["search"]["bound"] == 2 and v["search"]["explored"] > 0
    assert "no anomaly in any interleaving with at most 2 preemption(s)" in v["search"]["guarantee"]
    rc = main(["certify", "--engine-module", "tests.toy_engine:counter_locked", "--exhaustive", "2", "--budget", "3",
               "--json", "-"])
    (v,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert v["search"]["complete"] is False and v["search"]["guarantee"].startswith("incomplete")
    rc = main(["certify", "--engine-module", "tests.toy_engine:counter", "--exhaustive", "2", "--json", "-"])
    (v,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert rc == 1 and v["verdict"] == "admits" and v["replayed"] is True
    rc = main(["certify", "--engine-module", "tests.toy_engine:counter", "--pct", "1", "--exhaustive", "1"])
    assert rc == 2 and "two ways to search" in capsys.readouterr().err


@pytest.mark.slow  # about 10 s; the fast tier keeps the mechanism in a smaller test
def test_the_pytest_plugin_takes_the_same_searches(toki_certify_engine):
    cert = toki_certify_engine("tests.toy_engine:counter_locked", "increment", exhaustive=2)
    assert cert.search["complete"] and cert.search["mode"] == "exhaustive"
    cert = toki_certify_engine("tests.toy_engine:counter", "increment", exhaustive=2, expect="admits")
    assert cert.admits
    cert = toki_certify_engine("tests.toy_engine:counter", "increment", pct=2, budget=60, expect="admits")
    assert cert.search["mode"] == "pct"


@pytest.mark.parametrize("how", [["--exhaustive", "2"], ["--pct", "2", "--budget", "10"],
                                 pytest.param(["--exhaustive", "2", "--workers", "2"], marks=pytest.mark.slow)])
def test_a_search_told_nothing_or_not_in_control_never_certifies(capsys, how):
    """An engine whose read-out is empty, or whose storage the harness does not see, is
    unverifiable under every search: a complete exhaustive search over nothing is no certificate."""
    import json

    from toki.cli import main

    for spec in ("tests.toy_engine:counter_silent", "tests.test_harness_paths:Invisible"):
        rc = main(["certify", "--engine-module", spec, *how, "--json", "-"])
        (v,) = json.loads(capsys.readouterr().out)["verdicts"]
        assert rc == 1 and v["verdict"] == "unverifiable", (spec, v)
        assert v["search"]["complete"] is False


@pytest.mark.slow
@pytest.mark.parametrize("reduction", ["dpor", "sleep"])
def test_workers_and_a_cluster_cut_the_same_shards_and_agree_with_one_process(reduction):
    """``--workers 2`` and ``--cluster local:1``/``local:2`` report the same search, and for a complete
    certificate the same counts as the unsharded search in one process: cut into 4 shards with
    sleep sets, one job per scenario with DPOR."""
    pytest.importorskip("distributed")
    docs = {}
    for how in ([], ["--workers", "2"], ["--cluster", "local:1"], ["--cluster", "local:2"]):
        out = io.StringIO()
        rc = main(["certify", "--engine", "atommem-atomic", "--scenario", "add-search-vs-add", "--exhaustive", "2",
                   "--reduction", reduction, "--json", "-", *how], out=out, err=io.StringIO())
        assert rc == 0
        docs[" ".join(how) or "one process"] = json.loads(out.getvalue())["verdicts"][0]["search"]
    one = docs.pop("one process")
    assert one["complete"] and "shards" not in one
    for how, s in docs.items():
        assert s["complete"] and s.get("shards", 1) == (4 if reduction == "sleep" else 1), how
        assert (s["explored"], s["pruned"], s["guarantee"]) == (one["explored"], one["pruned"], one["guarantee"]), how


@pytest.mark.slow  # about 10 s; the fast tier keeps the mechanism in a smaller test
@pytest.mark.parametrize("reduction, runs", [("dpor", 2), ("sleep", 2)])
def test_a_race_below_the_top_bound_is_found_before_any_shard_with_one_process_count(reduction, runs):
    """With workers, a DPOR search is one job per scenario, and a sleep-set search covers the
    bounds below K once, whole, before it cuts bound K into shards: a race at K=1 is found there.
    Either way the search reports what one process reports (no shard searches to its own first
    find)."""
    docs = {}
    for how in ([], ["--workers", "2"]):
        out = io.StringIO()
        rc = main(["certify", "--engine-module", "benchmarks.frontrun_programs.sqlite_counter:racy",
                   "--exhaustive", "2", "--reduction", reduction, "--json", "-", *how], out=out, err=io.StringIO())
        assert rc == 1
        (v,) = json.loads(out.getvalue())["verdicts"]
        assert v["verdict"] == "admits" and v["replayed"]
        docs[" ".join(how) or "one process"] = v["search"]
    one, two = docs["one process"], docs["--workers 2"]
    assert one["explored"] == two["explored"] == runs and "shards" not in two
    assert one["reduction"] == two["reduction"] == reduction
    assert one["guarantee"] == two["guarantee"] == f"an anomaly with at most 1 preemption(s), after {runs} interleavings"


@pytest.mark.parametrize("argv,needle", [
    (["--exhaustive", "2", "--workers", "0"], "--workers 0"),
    (["--workers", "2"], "--exhaustive"),
    (["--exhaustive", "1", "--workers", "2", "--cluster", "local:2"], "--workers and --cluster"),
    (["--reduction", "sleep"], "--exhaustive"),  # a reduction is an exhaustive search's
])
def test_workers_are_checked_where_they_enter(argv, needle):
    err = io.StringIO()
    rc = main(["certify", "--engine-module", "tests.toy_engine:counter", *argv], out=io.StringIO(), err=err)
    assert rc == 2 and needle in err.getvalue()


@pytest.mark.slow
def test_keep_going_covers_the_bound_and_counts_the_anomalous_interleavings_the_same_in_shards():
    docs = []
    for how in ([], ["--workers", "2"]):
        out = io.StringIO()
        rc = main(["certify", "--engine", "atommem", "--scenario", "add-add", "--exhaustive", "2", "--keep-going",
                   "--json", "-", *how], out=out, err=io.StringIO())
        (v,) = json.loads(out.getvalue())["verdicts"]
        assert rc == 1 and v["verdict"] == "admits" and v["replayed"]
        docs.append(v["search"])
    one, sharded = docs
    assert one["complete"] and 0 < one["anomalous"] < one["explored"]
    assert (sharded["explored"], sharded["pruned"], sharded["anomalous"]) == (one["explored"], one["pruned"],
                                                                             one["anomalous"])
    # without --keep-going the search stops at the first anomaly, having run fewer interleavings
    out = io.StringIO()
    main(["certify", "--engine", "atommem", "--scenario", "add-add", "--exhaustive", "2", "--json", "-"], out=out,
         err=io.StringIO())
    first = json.loads(out.getvalue())["verdicts"][0]["search"]
    assert first["explored"] < one["explored"] and "anomalous" not in first and not first["complete"]


def test_keep_going_without_an_exhaustive_search_is_bad_input():
    err = io.StringIO()
    assert main(["certify", "--engine-module", "tests.toy_engine:counter", "--keep-going"], out=io.StringIO(),
                err=err) == 2
    assert "--exhaustive" in err.getvalue()


@pytest.mark.parametrize("budget", [[], ["--budget", "5"]])
def test_a_plugin_that_fails_in_a_worker_process_is_one_line_of_bad_input(budget):
    err = io.StringIO()
    rc = main(["certify", "--engine-module", "tests.plugins.broken:state_raises", "--exhaustive", "1", "--workers", "2",
               *budget], out=io.StringIO(), err=err)
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "state() raised" in lines[0] and "Traceback" not in err.getvalue()
