"""Recording memory histories where the engine runs: ``toki.record.History`` (threads and
processes appending to one file) and ``toki record`` (worker processes driving an engine on one
store, a kill nemesis, Dask workers).

The claims: every line is one op in Jepsen's shape, indices are unique and in file order whoever
wrote them, every invoke is completed exactly once unless its process died; an op that raised
ends ``info`` (or ``fail`` when declared); bad input is one line, exit 2; under real concurrency
the racy plug-in and mem0 show their races in what is recorded, and the fixed plug-in does not.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path

import pytest

from tests._cli import toki as _toki
from toki.errors import ConfigError
from toki.record import History


def _ops(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _well_formed(ops: list[dict], *, killed: bool = False) -> None:
    idx = [o["index"] for o in ops]
    assert idx == sorted(idx) and len(set(idx)) == len(idx), "indices unique and in file order"
    open_: dict = {}
    for o in ops:
        if o["type"] == "header":
            continue
        assert o["f"] == "txn" and isinstance(o["time"], int) and isinstance(o["value"], list), o
        if o["type"] == "invoke":
            assert o["process"] not in open_, f"process {o['process']} invoked twice without completing"
            open_[o["process"]] = o
        else:
            assert open_.pop(o["process"], None) is not None, f"completion without invoke: {o}"
    if not killed:
        assert not open_, f"invokes never completed: {list(open_.values())[:3]}"


def _writer(path: str, process: int, n: int) -> None:
    h = History(path)
    for i in range(n):
        op = h.invoke(process, [["add", "s", f"s={process}.{i}"], ["current", "s", None]])
        op.read(1, [f"s={process}.{i}"])
        op.ok()
    h.close()


def test_threads_and_processes_append_whole_ops_with_unique_ordered_indices(tmp_path):
    path = tmp_path / "h.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), 100 + k, 50)) for k in range(2)]
    for p in procs:
        p.start()
    threads = [threading.Thread(target=_writer, args=(str(path), k, 50)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads + procs:
        t.join()
    ops = _ops(path)
    assert len(ops) == 2 * 5 * 50
    _well_formed(ops)
    done = [o for o in ops if o["type"] == "ok"]
    assert all(o["value"][1][2] == [o["value"][0][2]] for o in done), "a read's value is what was filled in"


def test_a_block_ends_ok_info_or_fail(tmp_path):
    class Conflict(Exception):
        pass

    h = History(tmp_path / "h.jsonl")
    with h.txn(1, [["history", "s", None]]) as t:
        t.read(0, ["s=a"])
    with pytest.raises(RuntimeError):
        with h.txn(2, [["add", "s", "s=b"]]):
            raise RuntimeError("connection lost after the write was sent")
    with pytest.raises(Conflict):
        with h.txn(3, [["add", "s", "s=c"]], fail_on=(Conflict,)):
            raise Conflict
    h.close()
    ops = _ops(tmp_path / "h.jsonl")
    _well_formed(ops)
    assert [(o["process"], o["type"]) for o in ops if o["type"] != "invoke"] == [(1, "ok"), (2, "info"), (3, "fail")]
    assert ops[1]["value"] == [["history", "s", ["s=a"]]]


@pytest.mark.parametrize("value", [["add", "s"], [["add", "s"]], [["put", "s", "c"]], [["decide", "q", ["a"]]]])
def test_a_malformed_op_is_refused_before_anything_is_written(tmp_path, value):
    h = History(tmp_path / "h.jsonl")
    with pytest.raises(ConfigError):
        h.invoke(1, value)
    assert not (tmp_path / "h.jsonl").exists() or not (tmp_path / "h.jsonl").read_text()


def test_an_op_completes_once(tmp_path):
    op = History(tmp_path / "h.jsonl").invoke(1, [["add", "s", "s=a"]])
    op.ok()
    with pytest.raises(ConfigError, match="already completed"):
        op.info()


# -- toki record -----------------------------------------------------------------------------------

def _checked(path: Path) -> dict:
    """``toki check PATH --workload memory``'s result."""
    rc, out, err = _toki("check", str(path), "--workload", "memory", "--json", "-")
    assert rc in (0, 1), (rc, out, err)
    return json.loads(out)


def _two_current(ops: list[dict]) -> int:
    return sum(1 for o in ops if o["type"] == "ok" for m in o["value"] if m[0] == "current" and len(m[2]) > 1)


@pytest.mark.parametrize("argv, says", [
    (["--engine-module", "tests.plugins.json_store:inplace"], "record_client"),
    (["--engine-module", "tests.plugins.recordable:racy", "--mix", "add=x"], "--mix"),
    (["--engine-module", "tests.plugins.recordable:racy", "--mix", "put=1"], "--mix"),
    (["--engine-module", "tests.plugins.recordable:racy", "--processes", "0"], "--processes"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, argv, says):
    rc, out, err = _toki("record", *argv, "--out", str(tmp_path / "h.jsonl"), "--ops", "2")
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and says in lines[0], (rc, out, err)


def test_a_history_is_never_appended_to_a_recording_that_exists(tmp_path):
    out = tmp_path / "h.jsonl"
    out.write_text('{"index": 0}\n')
    rc, o, e = _toki("record", "--engine-module", "tests.plugins.recordable:racy", "--out", str(out), "--ops", "2")
    assert rc == 2 and "already holds a history" in o + e
    assert out.read_text() == '{"index": 0}\n'


def test_a_plugin_recorded_from_two_processes_is_well_formed_with_provenance(tmp_path):
    out = tmp_path / "h.jsonl"
    rc, o, e = _toki("record", "--engine-module", "tests.plugins.recordable:atomic", "--processes", "2",
                     "--clients", "2", "--ops", "25", "--seed", "3", "--out", str(out), "--json", "-")
    assert rc == 0, (o, e)
    summary = json.loads(o)
    ops = _ops(out)
    _well_formed(ops)
    assert summary["ops"] == {"invoke": 100, "ok": 100} and summary["processes"] == 2
    prov = json.loads((tmp_path / "h.jsonl.provenance.json").read_text())
    assert prov["seed"] == 3 and prov["options"]["clients"] == 2 and "git_commit" in prov
    assert {o["process"] for o in ops} == {0, 1, 2, 3}
    assert _two_current(ops) == 0  # BEGIN IMMEDIATE: one current claim per slot, always
    assert _checked(out)["valid"] is True  # and the memory checker finds nothing else either


@pytest.mark.slow
def test_real_processes_show_the_racy_plugins_double_supersede(tmp_path):
    """Real concurrency decides how often: record rounds until two current claims are read (37 of
    800 ops in one round here), at most five."""
    for round_ in range(5):
        out = tmp_path / f"h{round_}.jsonl"
        rc, o, e = _toki("record", "--engine-module", "tests.plugins.recordable:racy", "--processes", "4",
                         "--clients", "2", "--ops", "100", "--seed", str(round_), "--out", str(out))
        assert rc == 0, (o, e)
        ops = _ops(out)
        _well_formed(ops)
        if _two_current(ops):
            assert "double-supersede" in _checked(out)["anomaly_types"]
            return
    pytest.fail("five rounds of 800 ops never read two current claims of one slot")


@pytest.mark.slow
@pytest.mark.db
def test_mem0_recorded_by_four_processes_shows_the_duplicate_insert(tmp_path):
    """Every client adds the one claim of the one slot, so every two adds that overlap race in
    mem0's check-then-insert (with two slots of three claims the race needed several rounds of 240
    ops on a loaded machine, and once five were not enough: here it shows 60-77 times a round)."""
    pytest.importorskip("mem0")
    for round_ in range(5):
        out = tmp_path / f"h{round_}.jsonl"
        rc, o, e = _toki("record", "--engine", "mem0", "--processes", "4", "--clients", "2", "--ops", "30",
                         "--slots", "1", "--claims", "1", "--mix", "add=4,recall=1,history=2", "--seed", str(round_),
                         "--out", str(out))
        assert rc == 0, (o, e)
        ops = _ops(out)
        assert ops[0]["type"] == "header" and ops[0]["multi_valued"] == ["s0"]  # ADD-only by design
        _well_formed(ops)
        if any(len(m[2]) != len(set(m[2])) for op in ops if op["type"] == "ok" for m in op["value"]
               if m[0] == "history"):
            assert "duplicate-insert" in _checked(out)["anomaly_types"]
            return
    pytest.fail("five rounds of 240 mem0 ops never read one claim twice")


@pytest.mark.slow
def test_a_killed_worker_leaves_its_ops_open_and_a_fresh_one_takes_over(tmp_path):
    out = tmp_path / "h.jsonl"
    rc, o, e = _toki("record", "--engine-module", "tests.plugins.recordable:atomic", "--processes", "2",
                     "--clients", "2", "--duration", "9", "--nemesis", "kill", "--out", str(out), "--json", "-")
    assert rc == 0, (o, e)
    summary = json.loads(o)
    ops = _ops(out)
    _well_formed(ops, killed=True)
    assert summary["killed"] >= 1
    assert max(o["process"] for o in ops) >= 4, "the fresh worker's clients have new process ids"


@pytest.mark.slow
def test_workers_on_a_dask_cluster_write_one_history(tmp_path):
    pytest.importorskip("distributed")
    out = tmp_path / "h.jsonl"
    rc, o, e = _toki("record", "--engine-module", "tests.plugins.recordable:atomic", "--processes", "2",
                     "--clients", "2", "--ops", "20", "--cluster", "local:2", "--out", str(out))
    assert rc == 0, (o, e)
    ops = _ops(out)
    _well_formed(ops)
    assert len(ops) == 2 * 2 * 2 * 20


@pytest.mark.slow
def test_sodamem_recorded_by_four_processes_shows_two_current_and_the_fix_never_does(tmp_path):
    """SodaMem's maintainer reads the user's facts, then supersedes and inserts, with no transaction
    around them: under real processes a current read sometimes holds two places (1-3 of 240 ops
    here); the fixed variant (each ingest in one BEGIN IMMEDIATE) never."""
    pytest.importorskip("sodamem")
    out = tmp_path / "fixed.jsonl"
    rc, o, e = _toki("record", "--engine", "sodamem-fixed", "--processes", "4", "--clients", "2", "--ops", "30",
                     "--mix", "add=4,recall=2,history=1", "--out", str(out), "--json", "-")
    assert rc == 0 and json.loads(o)["ops"].get("info", 0) == 0, (o, e)
    ops = _ops(out)
    _well_formed(ops)
    assert _two_current(ops) == 0
    assert all(len(m[2]) == len(set(m[2])) for op in ops if op["type"] == "ok" for m in op["value"]
               if m[0] == "history")
    assert _checked(out)["valid"] is True, _checked(out)["anomaly_types"]
    for round_ in range(6):
        out = tmp_path / f"racy{round_}.jsonl"
        rc, o, e = _toki("record", "--engine", "sodamem", "--processes", "4", "--clients", "2", "--ops", "30",
                         "--mix", "add=4,recall=2,history=1", "--seed", str(round_), "--out", str(out))
        assert rc == 0, (o, e)
        ops = _ops(out)
        _well_formed(ops)
        if _two_current(ops):
            assert "double-supersede" in _checked(out)["anomaly_types"]
            return
    pytest.fail("six rounds of 240 SodaMem ops never read two current places")


@pytest.mark.slow
@pytest.mark.db
def test_tokis_write_path_recorded_by_four_processes_racy_variant_shows_two_current_the_fixed_one_never(tmp_path):
    """lww at RC without the re-read guard: two current claims within the first few ops (after 9-13
    ops in three recordings here); the fixed path (guard and slot lock) valid over the same 800."""
    runs = {}
    for name, who in (("fixed", ["--engine", "toki"]),
                      ("racy", ["--engine-module", "toki.engines.toki_engine:recorded_lww_unguarded"])):
        out = tmp_path / f"{name}.jsonl"
        rc, o, e = _toki("record", *who, "--processes", "4", "--clients", "2", "--ops", "100",
                         "--mix", "add=4,recall=2,history=1", "--out", str(out))
        assert rc == 0, (o, e)
        _well_formed(_ops(out))
        runs[name] = _checked(out)
    assert runs["fixed"]["valid"] is True, runs["fixed"]["anomaly_types"]
    assert "double-supersede" in runs["racy"]["anomaly_types"]


@pytest.mark.slow
@pytest.mark.db
def test_langmem_on_postgres_recorded_by_four_processes_shows_the_double_supersede(tmp_path):
    """LangMem's manager searches, asks its model, then removes and puts, each its own transaction:
    two adds that overlap both remove the old memory and both insert (after 3-9 ops here)."""
    pytest.importorskip("langmem")
    pytest.importorskip("langgraph.store.postgres")
    out = tmp_path / "h.jsonl"
    rc, o, e = _toki("record", "--engine", "langmem-postgres", "--processes", "4", "--clients", "2", "--ops", "30",
                     "--mix", "add=4,recall=2", "--out", str(out))
    assert rc == 0, (o, e)
    _well_formed(_ops(out))
    assert _two_current(_ops(out)) > 0
    assert "double-supersede" in _checked(out)["anomaly_types"]
