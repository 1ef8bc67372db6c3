"""The long SodaMem recordings of docs/recording.md ("10^5 ops on the fixed variants") come from
``benchmarks/bench_recorded_engines.py``: its SodaMem and mem0 configurations name engines that
``toki record`` can drive, and its options for long runs (``--store-dir``: the SQLite store on a
tmpfs; ``--duration``: a cap after which what was recorded is checked; the load average and the
rate in each row) do what the page says."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_recorded_engines.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_recorded_engines", _BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_sodamem_and_mem0_configurations_name_recordable_engines():
    from toki.engines.registry import load_engine

    configs = _bench().CONFIGS
    assert configs["sodamem-fixed"][0] == "sodamem-fixed" and configs["sodamem-fixed"][3] is True
    assert configs["sodamem"][0] == "sodamem" and configs["sodamem"][3] is False
    assert configs["mem0"][0] == "mem0" and configs["mem0"][3] is False  # mem0 2.x has no fixed variant
    pytest.importorskip("sodamem")
    for name in ("sodamem", "sodamem-fixed"):
        eng = load_engine(name, None)
        assert callable(eng.record_client) and callable(eng.record_setup)
        assert eng.record_fresh_claims is True  # a re-added place is a new fact: every add gets a fresh claim


@pytest.mark.slow
def test_a_short_sodamem_fixed_run_on_a_store_dir_is_checked_with_its_rate_and_load(tmp_path):
    """One worker, one client, 8 ops, the store under --store-dir (removed afterwards)."""
    pytest.importorskip("sodamem")
    stores, out = tmp_path / "stores", tmp_path / "rows.json"
    rc = _bench().main(["--only", "sodamem-fixed", "--processes", "1", "--clients", "1", "--total", "8",
                        "--slots", "3", "--mix", "add=4,recall=3,history=1", "--store-dir", str(stores),
                        "--duration", "120", "--dir", str(tmp_path / "h"), "--json", str(out)])
    assert rc == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["ops"] == 8 and row["valid"] is True and row["anomalies"] == {}
    assert row["ops_per_s"] > 0 and row["load_avg_1min"]["max"] >= row["load_avg_1min"]["min"] >= 0
    assert row["store_dir"] == str(stores) and row["duration_cap_s"] == 120
    assert list(stores.iterdir()) == []  # the store is removed once recorded


def test_an_add_does_not_claim_the_retraction_of_a_place_stored_after_it(tmp_path):
    """Without the fix's transaction the read-back after an ingest can see a later ingest whose
    place, dated earlier, lost at once to this one: that place's own op retracts it; this op
    must not claim it too (two retractions of one claim, one before its add: a G0 the recorder
    would make). Here serially: p7 (dated later) stored first, then p4 (dated earlier)."""
    pytest.importorskip("sodamem")
    from toki.engines.sodamem_engine import _perform, sodamem

    eng = sodamem()
    mem = eng.open(tmp_path)
    try:
        def ingest(claim, when):
            return _perform(mem, ("ingest-recorded", "s0", f"I live in {claim} as of {when}.", claim))

        assert ingest("s0=p7", "2026-05-02T10:00:00.000000+00:00") == []
        assert ingest("s0=p4", "2026-05-01T10:00:00.000000+00:00") == ["s0=p4"]  # lost at once: its own op
        # p7's read-back, run again now (as a racy add's read-back may run after p4's ingest)
        from toki.engines.sodamem_engine import _superseded_by

        assert _superseded_by(mem, "s0", "s0=p7") == []
        assert ingest("s0=p9", "2026-05-03T10:00:00.000000+00:00") == ["s0=p7"]  # a later-dated add supersedes
    finally:
        eng.close(mem)
