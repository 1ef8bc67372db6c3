"""Hardening of toki itself: DSN secrets never printed or recorded; a role that cannot lower
deadlock_timeout gets the same deadlock outcome, deterministically; the write path's faults on
such a role; the private server crashed and restarted (durable and not)."""

from __future__ import annotations

import io
import json
import os

import psycopg
import pytest

from toki.cli import main
from toki.db.server import Server
from toki.errors import ConfigError, redact
from toki.runinfo import provenance

SECRET = "s3cretpw"
PG15 = os.environ.get("TOKI_PG15_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
NOSU = f"postgresql://toki_nosu:{SECRET}@127.0.0.1:5432/toki_nosu"

DEADLOCK = """
name = "deadlock"
description = "two sessions update two rows in opposite orders"
setup = ["create table dl (id int primary key, value int)", "insert into dl values (1, 10), (2, 20)"]
teardown = ["drop table dl"]
steps = [
  { session = "T1", sql = "begin" },
  { session = "T2", sql = "begin" },
  { session = "T1", sql = "update dl set value = 11 where id = 1" },
  { session = "T2", sql = "update dl set value = 21 where id = 2" },
  { session = "T1", sql = "update dl set value = 12 where id = 2" },
  { session = "T2", sql = "update dl set value = 22 where id = 1" },
  { session = "T1", sql = "commit" },
  { session = "T2", sql = "commit" },
]
final = ["select id, value from dl order by id"]
# The longest waiter loses, as PostgreSQL decides whenever the cycle closes within its timeout.
[expect.read-committed]
blocked = [4, 5]
errors = { 4 = "40P01" }
final = [[[1, 22], [2, 21]]]
sessions = { T1 = "aborted", T2 = "committed" }
"""


@pytest.mark.parametrize("text,want", [
    ("postgresql://u:s3cretpw@host:5432/db", "postgresql://u:***@host:5432/db"),
    ("postgresql://u:p@ss@host/db", "postgresql://u:***@host/db"),
    ("host=h password=s3cretpw user=u", "host=h password=*** user=u"),
    ("host=h password='s3c ret' user=u", "host=h password=*** user=u"),
    ("postgresql://h/db?user=u&password=s3cretpw&x=1", "postgresql://h/db?user=u&password=***&x=1"),
    ("mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306/test"),
    ("use mysql://user[:password]@host[:port]/database", "use mysql://user[:password]@host[:port]/database"),
    ("sqlite:////tmp/a.db", "sqlite:////tmp/a.db"),
])
def test_redact(text, want):
    assert redact(text) == want


def test_errors_server_repr_and_provenance_carry_no_secret():
    assert SECRET not in str(ConfigError(f"bad {NOSU}", fix=f"try password={SECRET}"))
    assert SECRET not in repr(Server(dsn=NOSU, how="--dsn", where="127.0.0.1:5432/toki_nosu"))
    prov = provenance(options={"dsn": NOSU, "nested": [{"dsn": f"password={SECRET}"}]})
    assert SECRET not in json.dumps(prov)


@pytest.mark.parametrize("argv", [
    ["db", "info", "--dsn", f"postgresql://u:{SECRET}@[bad"],
    ["db", "info", "--dsn", f"postgresql://u:{SECRET}@host:5432/db?port=x=y"],
    ["db", "info", "--dsn", f"postgresql://u:{SECRET}@127.0.0.1:1/db"],
    ["db", "info", "--dsn", f"host=127.0.0.1 port=1 password={SECRET}"],
    ["db", "info", "--dsn", f"mysql://u:{SECRET}@127.0.0.1:1/db"],
    ["faults", "--system", "toki", "--case", "lww/audit_row", "--dsn", f"postgresql://u:{SECRET}@127.0.0.1:1/db"],
])
def test_cli_never_prints_a_dsn_password(argv, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    result = tmp_path / "r.json"
    code = main([*argv, *(["--json", str(result)] if argv[0] == "faults" else [])], out=out, err=err)
    assert code == 2
    assert SECRET not in out.getvalue() + err.getvalue()
    assert "toki: error:" in err.getvalue() and "Traceback" not in err.getvalue()
    assert not result.exists()


def _pg15_nosu() -> str:
    """A non-superuser role with its own database on the PostgreSQL at 127.0.0.1:5432."""
    try:
        with psycopg.connect(PG15, autocommit=True, connect_timeout=3) as c:
            if not c.execute("select 1 from pg_roles where rolname = 'toki_nosu'").fetchone():
                c.execute(f"create role toki_nosu login password '{SECRET}'")
            if not c.execute("select 1 from pg_database where datname = 'toki_nosu'").fetchone():
                c.execute("create database toki_nosu owner toki_nosu")
        with psycopg.connect(NOSU, autocommit=True, connect_timeout=3) as c:
            assert not c.execute("select rolsuper from pg_roles where rolname = current_user").fetchone()[0]
    except psycopg.Error as e:
        pytest.skip(f"no PostgreSQL at 127.0.0.1:5432 to make a non-superuser on ({str(e).strip()[:80]})")
    return NOSU


def test_non_superuser_deadlocks_are_broken_deterministically(tmp_path):
    dsn = _pg15_nosu()
    f = tmp_path / "deadlock.toml"
    f.write_text(DEADLOCK)
    for _ in range(3):  # the same flags every time: nothing waits for the server's 1 s timer
        out = io.StringIO()
        assert main(["run", str(f), "--level", "rc", "--dsn", dsn, "--json", "-"], out=out) == 0, out.getvalue()
        doc = json.loads(out.getvalue())
        assert doc["expect"]["ok"], doc["expect"]
        assert "pg_blocking_pids" in doc["backend"]["deadlocks"]
        # (the run's time, well below the server's 1 s deadlock_timeout: benchmarks/bench_bounds.py)
        assert SECRET not in out.getvalue()


@pytest.mark.slow
def test_write_path_faults_as_a_non_superuser(tmp_path):
    dsn = _pg15_nosu()
    out = io.StringIO()
    result = tmp_path / "faults.json"
    code = main(["faults", "--system", "toki", "--case", "lww/audit_row", "--kind", "terminate", "--kind",
                 "ack-lost", "--kind", "restart", "--dsn", dsn, "--json", str(result)], out=out)
    assert code == 0, out.getvalue()
    text = result.read_text()
    assert SECRET not in text and SECRET not in out.getvalue()
    (doc,) = json.loads(text)["systems"]
    rows = {r["kind"]: r for r in doc["table"]}
    assert rows["terminate"]["tried"] == rows["terminate"]["survived"] >= 5
    assert rows["ack-lost"]["survived"] == 1
    assert rows["restart"]["tried"] == 0 and "not toki's to restart" in rows["restart"]["first"]


@pytest.mark.slow
def test_private_server_crash_restart_durable_and_async_commit(tmp_path):
    """The write path's own server, crashed (immediate stop) at each point and restarted."""
    out = io.StringIO()
    res = tmp_path / "r.json"
    code = main(["faults", "--system", "toki", "--system", "toki-async-commit", "--case", "lww/audit_row",
                 "--kind", "restart", "--max-points", "3", "--json", str(res)], out=out)
    docs = {d["system"]: d for d in json.loads(res.read_text())["systems"]}
    durable = docs["toki"]["table"][0]
    assert durable["tried"] == durable["survived"] == 3, durable
    # synchronous_commit=off: what was acknowledged within the WAL writer's delay is gone after
    # the crash (the run's schema and the incumbent too: the store cannot even be read).
    lost = docs["toki-async-commit"]["table"][0]
    assert lost["failed"] >= 1 and "lost" in lost["first"]
    assert code == 1


def test_a_fault_child_that_hangs_is_killed_and_named():
    """Both fault runners wait for their forked child with a bound: one that neither reaches its
    point nor dies is killed and reaped, and the error says what hung and what to look at."""
    import signal
    import time

    from toki.faults import FaultTimeout
    from toki.faults.child import killed, wait_child

    def fork(body):
        pid = os.fork()
        if pid == 0:
            try:
                body()
            finally:
                os._exit(0)
        return pid

    hung = fork(lambda: time.sleep(60))
    # the child sleeps 60 s: waited out, it would exit cleanly and nothing be raised
    with pytest.raises(FaultTimeout, match="the agent hung") as e:
        wait_child(hung, 0.2, 0.01, "the agent hung", fix="look at the engine")
    assert e.value.fix == "look at the engine"
    with pytest.raises(ChildProcessError):
        os.waitpid(hung, os.WNOHANG)  # reaped
    assert killed(wait_child(fork(lambda: os.kill(os.getpid(), signal.SIGKILL)), 5, 0.01, "x", fix="y"))
    status = wait_child(fork(lambda: os._exit(3)), 5, 0.01, "x", fix="y")
    assert not killed(status) and os.WEXITSTATUS(status) == 3
