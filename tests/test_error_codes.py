"""Every database error carries its codes under their right names: ``sqlstate`` (the SQL
standard's five characters, where the database has one) and ``errno`` (the vendor's number).
On MariaDB a deadlock is errno 1213 and SQLSTATE 40001; the JSON of ``toki run`` said
``"sqlstate": "1213"``. Each backend is tested with a real error from its real driver."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from _databases import mysql_dsn, sqlite_dsn  # noqa: F401 - fixtures

from toki.backends.base import ErrorKind
from toki.cli import main
from toki.errors import DatabaseError

P4 = str(Path(__file__).resolve().parent.parent / "schedules" / "classic" / "p4.toml")


def _run_json(*argv) -> dict:
    out = io.StringIO()
    code = main(["run", *argv, "--json", "-"], out=out, err=io.StringIO())
    assert code == 0, out.getvalue()
    return json.loads(out.getvalue())


@pytest.mark.mysql
def test_mariadb_deadlock_is_sqlstate_40001_errno_1213_in_the_run_json(mysql_dsn):  # noqa: F811
    doc = _run_json(P4, "--level", "serializable", "--dsn", mysql_dsn)
    (step,) = [s for s in doc["steps"] if s["status"] == "error"]
    assert (step["sqlstate"], step["errno"], step["code"]) == ("40001", 1213, "1213")
    assert doc["expect"]["ok"]  # the schedule's expectation still names the database's own code
    out = io.StringIO()
    main(["run", P4, "--level", "serializable", "--dsn", mysql_dsn], out=out, err=io.StringIO())
    assert "SQLSTATE 40001 (errno 1213)" in out.getvalue()


@pytest.mark.mysql
def test_mariadb_duplicate_key_is_sqlstate_23000_errno_1062(mysql_dsn):  # noqa: F811
    from toki.backends.mysql import MysqlBackend

    b = MysqlBackend(mysql_dsn)
    conn = b.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("create temporary table toki_codes (id int primary key)")
            cur.execute("insert into toki_codes values (1)")
            with pytest.raises(Exception) as e:
                cur.execute("insert into toki_codes values (1)")
    finally:
        conn.close()
    c = b.classify(e.value)
    assert (c.kind, c.sqlstate, c.errno, c.code) == (ErrorKind.UNIQUE, "23000", 1062, "1062")


def test_sqlite_has_no_sqlstate_its_errno_is_the_extended_result_code(sqlite_dsn):  # noqa: F811
    doc = _run_json(P4, "--level", "serializable", "--dsn", sqlite_dsn)
    (step,) = [s for s in doc["steps"] if s["status"] == "error"]
    assert (step["sqlstate"], step["errno"], step["code"]) == (None, 5, "SQLITE_BUSY")
    from toki.backends.sqlite import classify

    conn = sqlite3.connect(":memory:")
    conn.execute("create table t (id int primary key)")
    conn.execute("insert into t values (1)")
    with pytest.raises(sqlite3.IntegrityError) as e:
        conn.execute("insert into t values (1)")
    c = classify(e.value)
    assert (c.kind, c.sqlstate, c.errno, c.code) == (ErrorKind.UNIQUE, None, 1555, "SQLITE_CONSTRAINT_PRIMARYKEY")


def test_duckdb_has_neither_and_names_the_class(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    from toki.backends.duckdb import classify

    conn = duckdb.connect(str(tmp_path / "x.duckdb"))
    conn.execute("create table t (id int primary key)")
    conn.execute("insert into t values (1)")
    with pytest.raises(duckdb.ConstraintException) as e:
        conn.execute("insert into t values (1)")
    c = classify(e.value)
    assert (c.sqlstate, c.errno, c.code) == (None, None, "ConstraintException")


@pytest.mark.db
def test_postgresql_sqlstate_is_the_code_and_there_is_no_errno(toki_server):
    import psycopg

    from toki.backends.postgres import classify

    with psycopg.connect(toki_server.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero) as e:
            conn.execute("select 1/0")
    c = classify(e.value)
    assert (c.sqlstate, c.errno, c.code) == ("22012", None, "22012")


def test_a_database_error_keeps_both():
    e = DatabaseError("deadlock", sqlstate="40001", errno=1213)
    assert (e.sqlstate, e.errno) == ("40001", 1213)
    assert DatabaseError("x", sqlstate="40P01").errno is None
