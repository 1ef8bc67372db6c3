"""One strategy protocol, one loop, one result, and the verdict in the library.

- Every strategy answers through the one loop with a ``Searched`` whose ``search`` object names
  its own parameter (no mode string a caller dispatches on).
- ``toki.harness.certify`` decides the verdict, confirms the found run and builds the witness;
  ``toki certify`` only renders it.
- A strategy is one file: its ``OPTION`` reaches ``toki certify`` and the pytest plugin without
  either naming it.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import ClassVar

import pytest

import toki.harness
from toki.cli import main
from toki.engines.registry import load_engine
from toki.harness import (Decision, Exhaustive, Pct, Random, Replay, Searched, SerialChooser, TrialRunner, certify,
                          run)
from toki.harness.strategies import Base, Option


def test_each_strategy_names_its_own_parameter_in_the_search_object():
    racy = load_engine(None, "tests.toy_engine:counter")
    with TrialRunner(racy, "increment") as runner:
        heads = {s.mode: run(runner, s).to_json() for s in (Random(budget=8), Pct(depth=2, runs=8),
                                                            Exhaustive(preemptions=2))}
    assert heads["random"]["bound"] is None
    assert heads["pct"]["bound"] == 2
    assert heads["exhaustive"]["bound"] == 2 and heads["exhaustive"]["complete"] is False  # stopped at the race
    assert all(list(h)[:6] == ["mode", "bound", "explored", "pruned", "complete", "guarantee"] for h in heads.values())


def test_certify_decides_confirms_and_builds_the_witness():
    v = certify(load_engine(None, "tests.toy_engine:counter"), "increment", Exhaustive(preemptions=2))
    assert v.decision is Decision.ADMITS and v.admits and v.fails
    assert v.replayed is True and v.witness is not None and v.witness.context_switches >= 1
    assert any(f.anomaly == "lost-update" for f in v.anomalies)
    row = v.row()
    assert row["verdict"] == "admits" and row["search"]["mode"] == "exhaustive" and row["trials"] == v.tried
    clean = certify(load_engine(None, "tests.toy_engine:counter_locked"), "increment", Exhaustive(preemptions=2))
    assert clean.decision is Decision.EXCLUDES and clean.searched.complete and clean.witness is None


def test_a_replay_reruns_the_grants_through_the_same_loop():
    racy = load_engine(None, "tests.toy_engine:counter")
    v = certify(racy, "increment", Exhaustive(preemptions=2))
    with TrialRunner(racy, "increment") as runner:
        res = run(runner, Replay(v.witness.grants, times=2))
    assert res.explored == 2 and len(res.runs) == 2 and res.found is not None
    assert all(not r.serializable for r in res.runs)


@dataclass(frozen=True)
class SerialOnly(Base):
    """A toy strategy from outside toki: the serial orders again, one run each."""

    runs: int = 1
    mode: ClassVar[str] = "serial-only"

    def search(self, runs) -> Searched:
        runs.serial_outcomes()
        made = 0
        for order in [order for order, _, _ in runs.runner.serial_runs][: self.runs]:
            runs.trial(SerialChooser(order))
            made += 1
        return Searched(self, None, explored=made, guarantee=f"{made} serial order(s) again: nothing interleaved")


def test_a_new_strategy_reaches_the_command_line_and_the_plugin_in_one_file(monkeypatch, toki_certify_engine):
    real = toki.harness.strategy_options()
    toy = Option("serial-only", "N", "the serial orders again", "a toy",
                 lambda n, *, budget, seed: SerialOnly(runs=n))
    monkeypatch.setattr(toki.harness, "strategy_options", lambda: real + [toy])
    out = io.StringIO()
    rc = main(["certify", "--engine-module", "tests.toy_engine:counter", "--serial-only", "2", "--json", "-"], out=out,
              err=io.StringIO())
    (v,) = json.loads(out.getvalue())["verdicts"]
    assert rc == 0 and v["verdict"] == "excludes" and v["search"]["mode"] == "serial-only" and v["trials"] == 2
    err = io.StringIO()
    assert main(["certify", "--engine-module", "tests.toy_engine:counter", "--serial-only", "1", "--pct", "2"],
                out=io.StringIO(), err=err) == 2
    assert "--pct and --serial-only are two ways to search" in err.getvalue()
    verdict = toki_certify_engine("tests.toy_engine:counter", "increment", serial_only=1)
    assert verdict.search["mode"] == "serial-only"
    with pytest.raises(TypeError, match="unexpected keyword argument 'depth'"):
        toki_certify_engine("tests.toy_engine:counter", "increment", depth=2)
