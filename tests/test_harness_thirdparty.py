"""Acceptance test of "a harness sound for any engine": plug-ins for third-party libraries that no
one in toki wrote (tests/plugins/), each written from docs/engines.md as a new user would, each with
a racy use of the library and a fixed one.

For every plug-in: the racy use is found (verdict ``admits``, exit 1) with a witness that
``toki certify --replay`` reproduces (exit 1), and the fixed use is certified (``excludes``, exit 0),
within a budget of 30 interleavings. sqlitedict and aiosqlite run every SQLite statement on a
thread of their own: for their racy use the harness may instead refuse with ``unverifiable`` and a
one-line reason naming that thread, but it must never say ``excludes``. A broken plug-in (its
``state()`` or ``open()`` raises, its factory raises, its module does not import) is bad input:
exit 2 and one line naming what failed, never a traceback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests._cli import toki as _toki

BUDGET = 30
STEP_LIMIT = "5"  # seconds one storage call may take; a trial of these plug-ins takes milliseconds


def _certify(spec: str, scenario: str, *extra: str) -> tuple[int, dict]:
    """``toki certify --engine-module SPEC --scenario SCENARIO --json -``: exit status and the verdict row."""
    rc, out, err = _toki("certify", "--engine-module", spec, "--scenario", scenario, "--budget", str(BUDGET),
                         "--step-limit", STEP_LIMIT, "--json", "-", *extra)
    assert rc in (0, 1), f"{spec} {scenario}: exit {rc}\n{out}{err}"
    (v,) = json.loads(out)["verdicts"]
    return rc, v


def _reason(v: dict) -> str:
    return str(v.get("reason") or "; ".join(v.get("anomalies") or []))


def _found_and_replayed(spec: str, scenario: str, tmp_path, *extra: str, state=None, version=None,
                        may_refuse: bool = False) -> dict:
    """The racy use: admits a lost update, and its witness replays with exit 1 (or, where the
    library runs its statements on a thread of its own and ``may_refuse``, unverifiable naming it)."""
    w = tmp_path / "w.json"
    rc, v = _certify(spec, scenario, "--witness", str(w), *extra)
    assert v["verdict"] != "excludes", f"{spec} {scenario}: a lost update every real run shows is excluded: {v}"
    if may_refuse and v["verdict"] == "unverifiable":
        reason = _reason(v)
        assert rc == 1, (rc, v)
        assert reason and "\n" not in reason and "thread" in reason.lower(), \
            f"no one-line reason naming the thread: {v}"
        return v
    assert rc == 1 and v["verdict"] == "admits", (rc, v)
    assert any(a.startswith("lost-update") for a in v["anomalies"]), v["anomalies"]
    assert v["replayed"] is True, v
    assert v.get("witness"), v
    w = Path(v["witness"])  # the CLI names the file per scenario (w.SCENARIO.json)
    assert w.exists() and w.parent == tmp_path, v["witness"]
    doc = json.loads(w.read_text())
    assert doc["engine_module"] == spec and doc["executed"] == "real"
    if version is not None:
        assert doc["version"] == version
    if state is not None:
        assert doc["state"] == state, doc["state"]
    rc, out, err = _toki("certify", "--replay", str(w), "--times", "5", "--step-limit", STEP_LIMIT, *extra)
    assert rc == 1 and "reproduced the recorded outcome 5 of 5" in out, (rc, out, err)
    return v


def _certified(spec: str, scenario: str, *extra: str) -> dict:
    rc, v = _certify(spec, scenario, *extra)
    assert rc == 0 and v["verdict"] == "excludes", (rc, v)
    assert v["trials"] >= 1
    return v


# -- (a) TinyDB: JSONStorage keeps the file it opened at construction ------------------------------

def test_tinydb_lost_update_is_found_and_replays(tmp_path):
    import tinydb

    _found_and_replayed("tests.plugins.tinydb_counter:racy", "increment", tmp_path,
                        state=[{"id": 1, "n": 1}], version=tinydb.__version__)


def test_tinydb_shared_with_a_lock_is_certified():
    _certified("tests.plugins.tinydb_counter:locked", "increment")


# -- (b) sqlitedict: every statement on sqlitedict's own worker thread ----------------------------

@pytest.mark.slow
def test_sqlitedict_lost_update_is_found_or_refused_never_excluded(tmp_path):
    import sqlitedict

    _found_and_replayed("tests.plugins.sqlitedict_counter:racy", "increment", tmp_path,
                        state={"n": 1}, version=sqlitedict.__version__, may_refuse=True)


@pytest.mark.slow
def test_sqlitedict_shared_with_a_lock_is_certified():
    _certified("tests.plugins.sqlitedict_counter:locked", "increment")


# -- (c) a SQLAlchemy 2 ORM app on PostgreSQL -----------------------------------------------------

@pytest.mark.slow
@pytest.mark.db
def test_sqlalchemy_session_lost_update_at_read_committed_is_found_and_replays(tmp_path, toki_server):
    import sqlalchemy

    _found_and_replayed("tests.plugins.sqlalchemy_accounts:racy", "credit", tmp_path, "--dsn", toki_server.dsn,
                        state=[{"id": 1, "balance": 110}], version=sqlalchemy.__version__)


@pytest.mark.slow
@pytest.mark.db
def test_sqlalchemy_with_for_update_is_certified():
    """The second session's SELECT ... FOR UPDATE waits on the row lock: the harness must see the wait."""
    _certified("tests.plugins.sqlalchemy_accounts:for_update", "credit")


@pytest.mark.slow
@pytest.mark.db
def test_sqlalchemy_at_repeatable_read_is_certified(toki_server):
    """The second commit fails with a serialization failure: a clean abort, judged against the
    serial run of the session that completed."""
    _certified("tests.plugins.sqlalchemy_accounts:repeatable_read", "credit", "--dsn", toki_server.dsn)


# -- (d) asyncio agents: aiosqlite and psycopg's AsyncConnection ---------------------------------

@pytest.mark.slow
def test_aiosqlite_lost_update_is_found_or_refused_never_excluded(tmp_path):
    import aiosqlite

    _found_and_replayed("tests.plugins.async_stores:aiosqlite_racy", "increment", tmp_path,
                        state=[{"id": 1, "n": 1}], version=aiosqlite.__version__, may_refuse=True)


@pytest.mark.slow
def test_aiosqlite_begin_immediate_is_certified():
    _certified("tests.plugins.async_stores:aiosqlite_immediate", "increment")


@pytest.mark.slow
@pytest.mark.db
def test_psycopg_async_lost_update_is_found_and_replays(tmp_path, toki_server):
    import psycopg

    _found_and_replayed("tests.plugins.async_stores:psycopg_racy", "increment", tmp_path, "--dsn", toki_server.dsn,
                        state=[{"id": 1, "n": 1}], version=psycopg.__version__)


@pytest.mark.slow
@pytest.mark.db
def test_psycopg_async_select_for_update_is_certified():
    _certified("tests.plugins.async_stores:psycopg_for_update", "increment")


# -- the same verdicts from pytest, through the plugin's fixture ----------------------------------

@pytest.mark.parametrize("spec, scenario, expect", [
    pytest.param("tests.plugins.tinydb_counter:racy", "increment", "admits", marks=pytest.mark.slow),
    ("tests.plugins.tinydb_counter:locked", "increment", "excludes"),
    pytest.param("tests.plugins.sqlitedict_counter:locked", "increment", "excludes", marks=pytest.mark.slow),
    pytest.param("tests.plugins.async_stores:aiosqlite_immediate", "increment", "excludes", marks=pytest.mark.slow),
    pytest.param("tests.plugins.sqlalchemy_accounts:racy", "credit", "admits", marks=[pytest.mark.db, pytest.mark.slow]),
    pytest.param("tests.plugins.async_stores:psycopg_for_update", "increment", "excludes",
                 marks=[pytest.mark.db, pytest.mark.slow]),
])
def test_pytest_plugin_gives_the_same_verdicts(toki_certify_engine, spec, scenario, expect):
    """The fixture gives the plug-in its DSN as the CLI does (--toki-dsn, $TOKI_DSN, else embedded)."""
    res = toki_certify_engine(spec, scenario, budget=BUDGET, expect=expect)
    assert res.admits == (expect == "admits")


# -- broken plug-ins are bad input, never a traceback ---------------------------------------------

@pytest.mark.parametrize("spec, names", [
    ("tests.plugins.broken:state_raises", r"\bstate\b"),
    ("tests.plugins.broken:open_missing_file", r"\bopen\b"),
    ("tests.plugins.broken:factory_raises", r"\bfactory_raises\b"),
    ("tests.plugins.broken_import:engine", r"tests\.plugins\.broken_import\b"),
    ("tests.plugins.broken_on_import:engine", r"tests\.plugins\.broken_on_import\b"),
])
def test_a_broken_plugin_is_bad_input_named_in_one_line(spec, names):
    rc, out, err = _toki("certify", "--engine-module", spec, "--budget", "5", "--step-limit", STEP_LIMIT)
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert "Traceback" not in out + err, out + err
    assert rc == 2 and len(lines) == 1 and re.search(names, lines[0]), (rc, out, err)
