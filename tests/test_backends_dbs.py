"""The databases beyond PostgreSQL, for real: SQLite and DuckDB always (embedded, a fresh file per
test), MariaDB/MySQL when it answers (marker ``mysql``; see tests/_databases.py).

What is claimed: each backend classifies its database's own errors by code, detects blocking
without sleeping, refuses a level it lacks by naming the ones it has, and the Hermitage
catalogue meets every per-database expectation it carries."""

from __future__ import annotations

import io
import json
import sqlite3
import threading
import time

import pytest
from _databases import duckdb_dsn, mysql_dsn, sqlite_dsn  # noqa: F401 - fixtures

from toki.backends import ErrorKind, UnsupportedLevel, for_dsn
from toki.backends.dsn import scheme_of
from toki.cli import main
from toki.db.server import resolve
from toki.errors import ConfigError, ScheduleError
from toki.levels import Isolation
from toki.sched import Runner, load, parse_toml, to_toml

CLASSIC = "schedules/classic"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


# -- DSNs and the seam ---------------------------------------------------------------------------

def test_schemes_and_paths():
    assert scheme_of("mariadb://root@h/db") == "mysql" and scheme_of("postgres://x") == "postgresql"
    assert for_dsn("sqlite:///rel/x.db").path == "rel/x.db"
    assert for_dsn("sqlite:////abs/x.db?journal=wal&begin=immediate").path == "/abs/x.db"
    assert for_dsn("duckdb:////abs/x.duckdb").path == "/abs/x.duckdb"
    assert for_dsn("mysql://u:p%40ss@h:3307/db").params == {
        "host": "h", "port": 3307, "user": "u", "password": "p@ss", "database": "db",
        "snapshot_isolation": None, "lock_wait_timeout": 10}


@pytest.mark.parametrize("dsn, words", [
    ("sqlite:///x.db?jornal=wal", "unknown option"),
    ("sqlite:///x.db?journal=fast", "journal mode"),
    ("sqlite:///x.db?begin=later", "begin mode"),
    ("duckdb:///:memory:", "own database"),
    ("mysql://root@127.0.0.1:3306/", "no database"),
    ("mysql://root@127.0.0.1/test?isolation=si", "unknown option"),
    ("oracle://x/y", "unknown database scheme"),
])
def test_bad_dsn_names_the_problem_and_the_fix(dsn, words):
    with pytest.raises(ConfigError) as e:
        for_dsn(dsn)
    assert words in str(e.value) and e.value.fix


@pytest.mark.parametrize("dsn, offered", [("sqlite:///x.db", ["serializable"]),
                                           ("duckdb:///x.duckdb", ["repeatable-read"])])
def test_a_missing_level_is_an_error_naming_the_levels(dsn, offered):
    b = for_dsn(dsn)
    assert [lv.cli_name for lv in b.levels()] == offered
    with pytest.raises(UnsupportedLevel) as e:
        b.begin_sql(Isolation.RC)
    assert "read-committed" in str(e.value) and offered[0] in str(e.value)


# -- SQLite ----------------------------------------------------------------------------------------

def test_sqlite_busy_is_blocked_and_busy_snapshot_aborts(tmp_path):
    for journal in ("delete", "wal"):
        b = for_dsn(f"sqlite:///{tmp_path}/{journal}.db?journal={journal}")
        a, c = b.connect(), b.connect()
        a.execute("create table t (id int primary key, v int)")
        a.execute("insert into t values (1, 1)")
        a.execute("begin")
        a.execute("update t set v = 2")
        c.execute("begin")
        c.execute("select * from t").fetchall()
        with pytest.raises(sqlite3.OperationalError) as e:
            c.execute("update t set v = 3")
        assert b.classify(e.value).kind is ErrorKind.BUSY and b.classify(e.value).blocked
        if journal == "wal":
            a.execute("commit")  # c's snapshot now predates a commit: it can never write
            with pytest.raises(sqlite3.OperationalError) as e:
                c.execute("update t set v = 3")
            got = b.classify(e.value)
            assert got.kind is ErrorKind.BUSY_SNAPSHOT and got.code == "SQLITE_BUSY_SNAPSHOT" and got.aborts
        a.close()
        c.close()


def test_sqlite_mutual_busy_rolls_back_the_session_not_committing(sqlite_dsn):
    res = Runner(resolve(sqlite_dsn)).run(load(f"{CLASSIC}/p4.toml"), "serializable")
    assert res.expect["checked"] and res.expect["ok"], res.expect["diff"]
    t2_update = res.steps[5]
    assert t2_update.blocked and t2_update.sqlstate == "SQLITE_BUSY" and "deadlock" in t2_update.error
    assert res.steps[6].blocked and res.steps[6].status == "ok"  # T1's commit waited for T2's read lock
    assert res.sessions == {"T1": "committed", "T2": "aborted"}


def test_sqlite_begin_immediate_serialises_writers(tmp_path):
    res = Runner(resolve(f"sqlite:///{tmp_path}/imm.db?begin=immediate")).run(load(f"{CLASSIC}/p4.toml"), "sr")
    assert res.steps[1].blocked  # T2's BEGIN IMMEDIATE waits for T1's write lock
    assert res.executed != sorted(res.executed)  # T2's later steps waited for its begin
    assert res.final[0]["rows"] == [[1, 11], [2, 20]] and res.sessions == {"T1": "committed", "T2": "committed"}
    assert not res.expect["checked"]  # sqlite-immediate has no tables in the catalogue


# -- DuckDB ------------------------------------------------------------------------------------------

def test_duckdb_write_conflict_is_a_serialization_error(duckdb_dsn):
    import duckdb

    b = for_dsn(duckdb_dsn)
    a, c = b.connect(), b.connect()
    a.execute("create table t (id int primary key, v int)")
    a.execute("insert into t values (1, 1)")
    a.execute("begin transaction")
    c.execute("begin transaction")
    a.execute("update t set v = 2")
    with pytest.raises(duckdb.Error) as e:
        c.execute("update t set v = 3")
    got = b.classify(e.value)
    assert got.kind is ErrorKind.SERIALIZATION and got.code == "TransactionException" and got.aborts


def test_duckdb_delete_loses_a_committed_update(duckdb_dsn):
    """Measured, not assumed: DuckDB deletes a row another transaction updated and committed after
    the deleter's snapshot was taken; PostgreSQL's repeatable read fails the delete (40001)."""
    res = Runner(resolve(duckdb_dsn)).run(load(f"{CLASSIC}/g-single-write-1.toml"), "rr")
    assert res.expect["ok"], res.expect["diff"]
    assert res.sessions == {"T1": "committed", "T2": "committed"} and res.final[0]["rows"] == [[1, 12]]


# -- the catalogue through the CLI ----------------------------------------------------------------

@pytest.mark.parametrize("suffix", ["", "?journal=wal"])
def test_sqlite_catalogue_passes_and_witnesses_say_why_they_skip(sqlite_dsn, suffix):
    rc, out, err = cli("run", "schedules/", "--dsn", sqlite_dsn + suffix)
    assert rc == 0, out + err
    assert out.count("pass") == 20 and "FAIL" not in out  # 15 Hermitage cases, 5 SQL witnesses
    assert "skipped" in out and "write path" in out  # the witnesses written as write-path ops


@pytest.mark.slow
def test_duckdb_catalogue_passes(duckdb_dsn):
    rc, out, err = cli("run", CLASSIC, "--dsn", duckdb_dsn, "--json", "-")
    assert rc == 0, err
    docs = json.loads(out)
    assert len(docs) == 15 and all(d["expect"]["checked"] and d["expect"]["ok"] for d in docs)
    assert {d["backend"]["name"] for d in docs} == {"duckdb"}


def test_cli_refuses_a_level_the_database_lacks(duckdb_dsn, sqlite_dsn):
    rc, _, err = cli("run", f"{CLASSIC}/p4.toml", "--dsn", duckdb_dsn, "--level", "sr")
    assert rc == 2 and "duckdb has no serializable level" in err and "repeatable-read" in err
    rc, _, err = cli("run", f"{CLASSIC}/p4.toml", "--dsn", sqlite_dsn, "--level", "rc")
    assert rc == 2 and "sqlite has no read-committed level" in err and "use one of serializable" in err


def test_cli_refuses_a_write_path_schedule_outside_postgresql(sqlite_dsn):
    rc, _, err = cli("run", "schedules/witnesses/p4.toml", "--dsn", sqlite_dsn)
    assert rc == 2 and "PostgreSQL" in err


def test_db_info_names_database_and_levels(sqlite_dsn, duckdb_dsn):
    rc, out, _ = cli("db", "info", "--dsn", sqlite_dsn + "?journal=wal", "--json")
    d = json.loads(out)
    assert rc == 0 and d["name"] == "sqlite" and d["levels"] == ["serializable"] and d["journal"] == "wal"
    rc, out, _ = cli("db", "info", "--dsn", duckdb_dsn)
    assert rc == 0 and "duckdb" in out and "repeatable-read" in out


def test_db_info_on_a_missing_directory_exits_2(tmp_path):
    rc, _, err = cli("db", "info", "--dsn", f"sqlite:///{tmp_path}/no/such/dir/x.db")
    assert rc == 2 and "cannot open" in err and "four slashes" in err


# -- the schedule format ---------------------------------------------------------------------------

_BASE = 'name = "x"\nsteps = [ { session = "T1", sql = "begin" }, { session = "T1", sql = "commit" } ]\n'


def test_a_step_may_carry_another_databases_sql():
    s = parse_toml('name = "x"\nsteps = [ { session = "T1", sql = "update t set v = 1 returning v", '
                   'mysql = "update t set v = 1" } ]\n')
    step = s.steps[0]
    assert step.sql_for(("mariadb", "mysql")) == "update t set v = 1" and step.sql_for(("sqlite",)) == step.sql
    assert parse_toml(to_toml(s)).steps[0].variants == {"mysql": "update t set v = 1"}


def test_per_database_expectations_parse_and_round_trip():
    s = parse_toml(_BASE + '[expect.rc]\nblocked = []\n[expect.mysql.rr]\nerrors = { 1 = "1213" }\n'
                   '[expect.sqlite-wal.sr]\nblocked = [1]\n')
    assert list(s.expect) == ["rc"] and s.expect_db["mysql"]["rr"].errors == {1: "1213"}
    assert s.expectation(Isolation.SI, ("mariadb", "mysql")).errors == {1: "1213"}
    assert s.expectation(Isolation.RC, ()).blocked == [] and s.expectation(Isolation.RC, ("duckdb",)) is None
    again = parse_toml(to_toml(s))
    assert again.expect_db == s.expect_db and again.expect == s.expect


def test_a_per_database_table_with_a_bad_level_is_refused():
    with pytest.raises(ScheduleError) as e:
        parse_toml(_BASE + "[expect.mysql.snapshot-ish]\nblocked = []\n")
    assert "[expect.mysql.snapshot-ish]" in str(e.value)


# -- MariaDB / MySQL ------------------------------------------------------------------------------

@pytest.mark.mysql
def test_mysql_lock_wait_seen_live_and_gone_at_once(mysql_dsn):
    """The InnoDB monitor, unlike information_schema.INNODB_TRX, is not a 100 ms cache: the wait
    shows while it lasts and is gone right after the holder commits."""
    from toki.backends.mysql import waiting_threads

    b = for_dsn(mysql_dsn)
    a, c = b.connect(), b.connect()
    with a.cursor() as cur:
        cur.execute("drop table if exists toki_probe")
        cur.execute("create table toki_probe (id int primary key, v int) engine=innodb")
        cur.execute("insert into toki_probe values (1, 1)")
        cur.execute("start transaction")
        cur.execute("update toki_probe set v = 2 where id = 1")
    t = threading.Thread(target=lambda: c.cursor().execute("update toki_probe set v = 3 where id = 1"))
    t.start()
    try:
        deadline = time.monotonic() + 5
        while c.thread_id() not in waiting_threads(b.observer):
            assert time.monotonic() < deadline, "the waiting update never showed as a lock wait"
        assert b.is_blocked(c, [a])
        with a.cursor() as cur:
            cur.execute("commit")
        t.join(5)
        assert c.thread_id() not in waiting_threads(b.observer)
    finally:
        with a.cursor() as cur:
            cur.execute("drop table if exists toki_probe")
        a.close()
        c.close()
        b.close()


@pytest.mark.mysql
def test_mysql_errors_by_code(mysql_dsn):
    import pymysql

    b = for_dsn(mysql_dsn)
    a = b.connect()
    with a.cursor() as cur:
        cur.execute("drop table if exists toki_codes")
        cur.execute("create table toki_codes (id int primary key) engine=innodb")
        cur.execute("insert into toki_codes values (1)")
        with pytest.raises(pymysql.err.MySQLError) as e:
            cur.execute("insert into toki_codes values (1)")
        assert b.classify(e.value).kind is ErrorKind.UNIQUE and b.classify(e.value).code == "1062"
        cur.execute("drop table toki_codes")
    a.close()
    b.close()


@pytest.mark.slow
@pytest.mark.mysql
def test_mysql_catalogue_meets_every_expectation(mysql_dsn):
    rc, out, err = cli("run", CLASSIC, "--dsn", mysql_dsn)
    assert rc == 0, out + err
    assert out.count("pass") == 60 and "FAIL" not in out  # 15 files x RU, RC, RR, SR


@pytest.mark.mysql
def test_mysql_repeatable_read_loses_an_update_unless_snapshot_isolation(mysql_dsn):
    p4 = load(f"{CLASSIC}/p4.toml")
    res = Runner(resolve(mysql_dsn)).run(p4, "repeatable-read")
    assert res.expect["ok"] and res.sessions == {"T1": "committed", "T2": "committed"}
    assert res.final[0]["rows"] == [[1, 11], [2, 20]]  # two increments to 11, one survives
    server = resolve(mysql_dsn + "?snapshot_isolation=on")
    if server.describe()["name"] != "mariadb":
        pytest.skip("innodb_snapshot_isolation is MariaDB's")
    res = Runner(server).run(p4, "repeatable-read")
    assert not res.expect["checked"]  # mariadb-snapshot: a different level, the default tables do not apply
    assert res.steps[5].sqlstate == "1020" and res.sessions["T2"] == "aborted"


@pytest.mark.mysql
def test_mysql_db_info_reports_snapshot_mode(mysql_dsn):
    rc, out, _ = cli("db", "info", "--dsn", mysql_dsn, "--json")
    d = json.loads(out)
    assert rc == 0 and d["levels"] == ["read-uncommitted", "read-committed", "repeatable-read", "serializable"]
    assert "innodb_snapshot_isolation" in d and d["how"] == "--dsn"


def test_mysql_that_does_not_answer_exits_2():
    rc, _, err = cli("db", "info", "--dsn", "mysql://root@127.0.0.1:1/test")
    assert rc == 2 and "cannot connect to MySQL/MariaDB at 127.0.0.1:1/test" in err


@pytest.mark.mysql
def test_mysql_gc_drops_run_databases_nobody_is_in(mysql_dsn):
    from toki.sched.backend_runner import BackendLane

    server = resolve(mysql_dsn)
    with BackendLane(server, label="alive") as lane:
        orphan = for_dsn(mysql_dsn)
        with orphan.observer.cursor() as cur:
            cur.execute("create database toki_run_orphan_gc_test")
        rc, out, _ = cli("db", "gc", "--dsn", mysql_dsn, "--json")
        dropped = json.loads(out)["dropped"]
        assert rc == 0 and "toki_run_orphan_gc_test" in dropped and lane.database not in dropped
        orphan.close()
