"""Power loss (``toki faults --kind power-loss``): crash states built from a scenario's recorded
file operations as ALICE does, reopened through the engine's API in a fresh process.

The model is tested on traces written by hand; the recorder on real file calls; the whole on
plug-ins written from the docs (a JSON store saved three ways), on TinyDB from PyPI with its own
storage and a durable one, on AtomMem's model and on an engine whose files are SQLite's."""

from __future__ import annotations

import io
import json
import os

import pytest

from toki.cli import main
from toki.faults.crash_states import BLOCK, CrashState, Image, Op, states_at, synced

J = "tests.plugins.json_store"


def _faults(*argv, tmp_path=None):
    out, err = io.StringIO(), io.StringIO()
    code = main(["faults", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# -- the persistence model ----------------------------------------------------------------------
RENAME_NO_FSYNC = [Op("create", "s.tmp", 7), Op("write", "s.tmp", 7, size=3, old_size=0, blocks=((0, b"new"),)),
                   Op("rename", "s.tmp", 7, dest="s")]
DURABLE = [Op("create", "s.tmp", 7), Op("write", "s.tmp", 7, size=3, old_size=0, blocks=((0, b"new"),)),
           Op("fsync", "s.tmp", 7), Op("rename", "s.tmp", 7, dest="s"), Op("fsync-dir", "")]
BASE = Image(set(), {"s": 1}, {1: b"old"})


def _contents(ops, point):
    return {(cs.image(BASE, ops).names.get("s"), cs.image(BASE, ops).data.get(cs.image(BASE, ops).names.get("s")))
            for cs in states_at(ops, point)}


def test_a_rename_without_fsync_can_persist_before_the_data_it_renamed():
    got = _contents(RENAME_NO_FSYNC, 3)
    assert (1, b"old") in got  # nothing persisted
    assert (7, b"") in got  # the rename persisted, the write not: an empty store
    assert (7, b"new") in got


def test_fsync_of_the_file_then_of_the_directory_makes_the_rename_durable():
    assert synced(DURABLE, 5) == {0, 1, 3}
    assert _contents(DURABLE, 5) == {(7, b"new")}
    assert _contents(DURABLE, 4) == {(1, b"old"), (7, b"new")}  # before the directory fsync: either


def test_a_file_fsync_alone_does_not_make_its_rename_durable():
    ops = DURABLE[:4]
    assert synced(ops, 4) == {1}  # the data only: neither the create nor the rename


def test_a_write_persists_in_part_at_4k_blocks_and_an_append_may_keep_its_size_without_data():
    new = b"a" * BLOCK + b"b" * BLOCK + b"c" * 10
    ops = [Op("write", "s", 1, size=len(new), old_size=3, blocks=((0, new[:BLOCK]), (1, new[BLOCK:2 * BLOCK]),
                                                                   (2, new[2 * BLOCK:])))]
    states = list(states_at(ops, 1))
    parts = [cs for cs in states if cs.partial]
    assert [cs.partial[1] for cs in parts] == [1, 2]
    assert parts[0].image(BASE, ops).data[1] == new[:BLOCK]
    (zeros,) = [cs for cs in states if cs.zeros is not None]
    assert zeros.image(BASE, ops).data[1] == b"old" + b"\0" * (len(new) - 3)
    assert CrashState.from_json(parts[1].to_json()) == parts[1]


def test_one_operation_dropped_while_a_later_one_persists():
    ops = [Op("write", "s", 1, size=3, old_size=3, blocks=((0, b"one"),)), Op("create", "t", 2)]
    reordered = [cs for cs in states_at(ops, 2) if cs.how == "reordered"]
    assert [cs.persist for cs in reordered] == [(1,)]


# -- the recorder, on real file calls -------------------------------------------------------------
def test_the_recorder_sees_every_kind_of_file_operation(tmp_path):
    from toki.faults.fs_trace import Recorder
    from toki.faults.power_loss import _child
    from toki.harness.trial import hooks_installed

    (tmp_path / "old").write_text("x" * 10)

    def run():
        rec = Recorder(tmp_path)
        with hooks_installed(tmp_path), rec.installed():
            os.mkdir(tmp_path / "d")
            with open(tmp_path / "d" / "f.tmp", "w") as f:
                f.write("hello")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp_path / "d" / "f.tmp", tmp_path / "d" / "f")
            fd = os.open(tmp_path / "d", os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            os.truncate(tmp_path / "old", 4)
            with open(tmp_path / "old", "w"):
                pass
            os.unlink(tmp_path / "old")
            raw = os.open(tmp_path / "raw", os.O_CREAT | os.O_WRONLY)  # past the hooks: seen at close
            os.write(raw, b"bytes")
            os.close(raw)
        return [(o.kind, o.path, o.dest) for o in rec.ops]

    kind, got = _child(run)
    assert kind == "ok", got
    assert got == [("mkdir", "d", None), ("create", "d/f.tmp", None), ("write", "d/f.tmp", None),
                   ("fsync", "d/f.tmp", None), ("rename", "d/f.tmp", "d/f"), ("fsync-dir", "d", None),
                   ("truncate", "old", None), ("truncate", "old", None), ("unlink", "old", None),
                   ("create", "raw", None), ("write", "raw", None)]


# -- plug-ins, through the command line -----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode,code,kinds", [("inplace", 1, {"lost", "does-not-open"}),
                                              ("rename", 1, {"lost", "does-not-open"}),
                                              ("durable", 0, set())])
def test_a_json_store_saved_three_ways(tmp_path, mode, code, kinds):
    w = tmp_path / "w"
    got, out, err = _faults("--engine-module", f"{J}:{mode}", "--kind", "power-loss", "--witness-dir", str(w),
                            "--json", str(tmp_path / "r.json"))
    assert got == code, out + err
    doc = json.loads((tmp_path / "r.json").read_text())
    (sysdoc,) = doc["systems"]
    assert sysdoc["engine_module"] == f"{J}:{mode}" and doc["provenance"]["options"]["engine_module"]
    case = sysdoc["power_loss"]["two-puts"]
    assert case["explored"] >= 10 and case["constructed"] > case["explored"]
    files = sorted(w.glob("*.json")) if w.exists() else []
    assert {f.name.split(".")[3] for f in files} == kinds
    for f in files:  # every finding replays, and shows again
        rc, rout, rerr = _faults("--replay", str(f))
        assert rc == 1 and "reproduced" in rout, rout + rerr
        assert "crash after" in rout
    if mode == "rename":  # the rename on disk, the data it renamed not: the store is empty
        d = json.loads(next(f for f in files if "does-not-open" in f.name).read_text())
        assert any("rename store.json.tmp -> store.json  [+]" in line for line in d["detail"]["trace"])
        assert any("write store.json.tmp" in line and "[- lost]" in line for line in d["detail"]["trace"])


@pytest.mark.slow
def test_tinydb_from_pypi_leaves_a_stale_tail_and_a_durable_storage_fixes_it(tmp_path):
    pytest.importorskip("tinydb")
    w = tmp_path / "w"
    code, out, err = _faults("--engine-module", "tests.plugins.tinydb_store:default", "--kind", "power-loss",
                             "--witness-dir", str(w))
    assert code == 1, out + err
    assert "does not open: JSONDecodeError: Extra data" in out
    (f,) = w.glob("tinydb.*.json")
    rc, rout, _ = _faults("--replay", str(f))
    assert rc == 1 and "Extra data" in rout
    code, out, err = _faults("--engine-module", "tests.plugins.tinydb_store:durable", "--kind", "power-loss")
    assert code == 0, out + err


@pytest.mark.slow
def test_atommem_in_place_saves_leave_an_empty_facts_file(tmp_path):
    code, out, err = _faults("--system", "atommem", "--case", "rejudge", "--kind", "power-loss",
                             "--json", str(tmp_path / "a.json"))
    assert code == 1, out + err
    case = json.loads((tmp_path / "a.json").read_text())["systems"][0]["power_loss"]["rejudge"]
    assert case["unopenable"] >= 1 and "truncate facts_toki.json to 0  [+]" in "\n".join(
        case["minimal"]["does not open"]["trace"])


@pytest.mark.slow
def test_atommem_atomic_loses_its_facts_file_without_fsync_and_the_durable_save_survives(tmp_path):
    code, out, err = _faults("--system", "atommem-atomic", "--case", "rejudge", "--kind", "power-loss",
                             "--json", str(tmp_path / "a.json"))
    assert code == 1, out + err
    case = json.loads((tmp_path / "a.json").read_text())["systems"][0]["power_loss"]["rejudge"]
    assert case["lost"] >= 1 and case["survived"] >= 1
    code, out, err = _faults("--engine-module", "tests.plugins.atommem_durable:engine", "--case", "rejudge",
                             "--kind", "power-loss", "--json", str(tmp_path / "d.json"))
    assert code == 0, out + err
    case = json.loads((tmp_path / "d.json").read_text())["systems"][0]["power_loss"]["rejudge"]
    assert case["lost"] == case["unopenable"] == 0 and case["explored"] >= 5


def test_sqlite_files_are_not_verified_and_their_settings_are_reported():
    pytest.importorskip("sqlitedict")
    code, out, err = _faults("--engine-module", "tests.plugins.sqlitedict_counter:racy", "--kind", "power-loss")
    assert code == 1, out + err
    assert "not verified: SQLite's own files are written by its C library" in out
    assert "journal_mode=" in out and "synchronous=" in out


def test_files_a_native_library_writes_are_not_verified():
    pytest.importorskip("duckdb")
    code, out, err = _faults("--engine-module", "tests.plugins.duckdb_store:engine", "--kind", "power-loss")
    assert code == 1, out + err
    assert "not verified: the store's files (store.duckdb) are written by native code" in out


def test_a_plugin_whose_state_tells_nothing_is_unverifiable_not_survived():
    code, out, err = _faults("--engine-module", f"{J}:silent", "--kind", "power-loss")
    assert code == 1, out + err
    assert "unverifiable: the engine's read-out is the same before and after every call" in out


def test_a_plugin_without_file_operations_is_not_applicable_and_does_not_pass():
    code, out, err = _faults("--engine-module", "tests.plugins.memory_only:engine", "--kind", "power-loss")
    assert code == 1, out + err
    assert "not applicable: the scenario made no file operation" in out


@pytest.mark.parametrize("argv,problem", [
    (["--engine-module", "tests.plugins.nosuch:engine"], "cannot import engine module"),
    (["--engine-module", "tests.plugins.json_store"], "not of the form module:factory"),
    (["--engine-module", f"{J}:durable", "--case", "nosuch"], "has no case"),
    (["--engine-module", f"{J}:durable", "--replay", "x.json"], "--replay runs the one fault"),
    (["--engine-module", "tests.plugins.broken:open_missing_file", "--kind", "power-loss"], "open() raised"),
    (["--system", "toki", "--kind", "power-loss"], "toki takes no power-loss fault"),  # never an empty pass
])
def test_bad_plugins_and_options_exit_2_in_one_line(argv, problem):
    code, out, err = _faults(*argv)
    assert code == 2, out + err
    assert problem in err and "Traceback" not in err + out
    assert len(err.strip().splitlines()) <= 2


@pytest.mark.slow
def test_a_plugin_gets_the_other_fault_kinds_too_and_their_files_replay(tmp_path):
    w = tmp_path / "w"
    code, out, err = _faults("--engine-module", f"{J}:inplace", "--kind", "kill", "--kind", "torn",
                             "--witness-dir", str(w))
    assert code == 1, out + err  # killed between open("w") and the write: the store is empty
    files = sorted(w.glob("json-store-inplace.two-puts.kill.*.json"))
    assert files and json.loads(files[0].read_text())["engine_module"] == f"{J}:inplace"
    rc, rout, _ = _faults("--replay", str(files[0]))
    assert rc == 1 and "reproduced" in rout
    code, out, err = _faults("--engine-module", f"{J}:durable")  # every kind that applies: all survive
    assert code == 0, out + err
    assert all(k in out for k in ("kill", "torn", "power-loss"))


@pytest.mark.slow
def test_among_the_default_kinds_an_unverifiable_power_loss_is_listed_not_counted():
    pytest.importorskip("sqlitedict")
    code, out, err = _faults("--engine-module", "tests.plugins.sqlitedict_counter:locked", "--max-points", "2")
    assert code == 0, out + err  # the kills survive; power loss is not run, and says why
    assert "not run: not verified: SQLite's own files" in out and "synchronous=OFF" in out


def test_a_fault_file_naming_a_malformed_module_exits_2(tmp_path):
    f = tmp_path / "f.json"
    f.write_text(json.dumps({"toki_faults": 1, "system": "x", "case": "c", "kind": "power-loss", "point": 0,
                             "engine_module": "no-colon"}))
    code, out, err = _faults("--replay", str(f))
    assert code == 2 and "engine_module must be MODULE:FACTORY" in err


def test_each_created_file_is_a_file_of_its_own_even_when_the_inode_number_comes_back(tmp_path):
    """ext4 hands a freed inode number to the next new file: the temporary file of the second save
    must not be taken for the store the first save's rename replaced (a crash state that drops that
    rename would otherwise write the new temporary file's bytes into the old store)."""
    from toki.faults.fs_trace import Recorder
    from toki.faults.power_loss import _child
    from toki.harness.trial import hooks_installed

    (tmp_path / "store").write_text("v0")

    def run():
        rec = Recorder(tmp_path)
        with hooks_installed(tmp_path), rec.installed():
            for v in ("v1", "v2", "v3"):
                with open(tmp_path / "store.tmp", "w") as f:
                    f.write(v)
                os.replace(tmp_path / "store.tmp", tmp_path / "store")
        base_id = rec.base.names["store"]
        return base_id, [(o.kind, o.ino) for o in rec.ops]

    kind, (base_id, ops) = _child(run)
    assert kind == "ok"
    created = [ino for k, ino in ops if k == "create"]
    assert len(created) == 3 and len({*created, base_id}) == 4
    assert [k for k, _ in ops] == ["create", "write", "rename"] * 3
