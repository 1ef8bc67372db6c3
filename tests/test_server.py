"""Server resolution, run schemas, garbage collection, and surviving a killed run (docs/design.md#decisions)."""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psycopg
import pytest

from toki.db import server as srv
from toki.errors import ConfigError, DatabaseUnavailable

pytestmark = pytest.mark.db


def test_dsn_argument_wins_over_the_environment(toki_server, monkeypatch):
    monkeypatch.setenv("TOKI_DSN", "postgresql://postgres@127.0.0.1:1/nowhere")
    s = srv.resolve(toki_server.dsn)
    assert s.how == "--dsn" and s.dsn == toki_server.dsn
    assert s.describe()["version"] == toki_server.version


def test_toki_dsn_is_used_when_no_dsn_is_given(toki_server, monkeypatch):
    monkeypatch.setenv("TOKI_DSN", toki_server.dsn)
    s = srv.resolve()
    assert s.how == "TOKI_DSN" and s.dsn == toki_server.dsn
    assert set(s.describe()) == {"name", "version", "where", "how", "levels"}


def test_unreachable_dsn_fails_fast_with_a_fix():
    with pytest.raises(DatabaseUnavailable, match="cannot connect") as e:
        srv.resolve("postgresql://postgres@127.0.0.1:1/postgres")
    assert "unset --dsn" in str(e.value)  # how fast: benchmarks/bench_bounds.py (unreachable)


@pytest.mark.parametrize("dsn", ["not a dsn", "postgresql://[bad", "foo=bar"])
def test_malformed_dsn_is_a_config_error(dsn):
    with pytest.raises(ConfigError, match="malformed DSN") as e:
        srv.resolve(dsn)
    assert "\n" not in str(e.value)


def test_docker_without_an_engine_fails_within_seconds(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKI_DSN", "docker")
    for host in (None, f"unix://{tmp_path}/docker.sock", "tcp://127.0.0.1:1"):
        if host:
            monkeypatch.setenv("DOCKER_HOST", host)
        with pytest.raises(DatabaseUnavailable) as e:  # how fast: benchmarks/bench_bounds.py
            srv.resolve()
        msg = str(e.value)
        assert "TOKI_DSN=docker needs a running Docker engine" in msg and "unset TOKI_DSN" in msg
        assert "\n" not in msg


def test_docker_engine_without_testcontainers_says_what_to_install(monkeypatch, tmp_path):
    """An engine that answers /_ping (a tiny HTTP responder on a socket) but no testcontainers."""
    path = tmp_path / "d.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    stop = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nOK")

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
        assert srv.docker_engine_error() is None
        monkeypatch.setitem(sys.modules, "testcontainers", None)  # as if not installed
        monkeypatch.setitem(sys.modules, "testcontainers.postgres", None)
        monkeypatch.setenv("TOKI_DSN", "docker")
        with pytest.raises(DatabaseUnavailable, match=r"testcontainers.*pip install 'toki\[docker\]'"):
            srv.resolve()
    finally:
        stop.set()
        th.join(2)
        listener.close()


def test_connect_sets_schema_and_deadlock_timeout(toki_server):
    with srv.run_schema(toki_server, "conn") as schema:
        with toki_server.connect(schema=schema, deadlock_timeout_ms=50) as c:
            assert c.execute("show search_path").fetchone()[0] == schema
            assert c.execute("show deadlock_timeout").fetchone()[0] == "50ms"
            assert c.execute("show synchronous_commit").fetchone()[0] == "off"
    with pytest.raises(ConfigError):
        toki_server.connect(schema="Robert'); drop table students;--")


def _schemas(server):
    with psycopg.connect(server.dsn, autocommit=True) as c:
        return {r[0] for r in c.execute("select nspname from pg_namespace where nspname like 'toki_run_%'")}


def test_run_schema_is_created_and_dropped(toki_server):
    with srv.run_schema(toki_server, "Odd Label!") as schema:
        assert schema.startswith("toki_run_odd_label_") and schema in _schemas(toki_server)
        tag = json.loads(psycopg.connect(toki_server.dsn, autocommit=True).execute(
            "select obj_description(oid, 'pg_namespace') from pg_namespace where nspname = %s",
            (schema,)).fetchone()[0])
        assert tag["pid"] == os.getpid() and tag["host"] == socket.gethostname()
    assert schema not in _schemas(toki_server)


def test_schemas_of_dead_processes_are_collected(toki_server):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    sfx = secrets.token_hex(3)
    tags = {
        f"toki_run_gc_dead_{sfx}": {"host": socket.gethostname(), "pid": dead_pid, "created": time.time()},
        f"toki_run_gc_live_{sfx}": {"host": socket.gethostname(), "pid": os.getpid(), "created": time.time()},
        # the pid is alive, but the process is younger than the schema: pid reuse, so dead
        f"toki_run_gc_reused_{sfx}": {"host": socket.gethostname(), "pid": os.getpid(), "created": 1000.0},
        f"toki_run_gc_other_host_{sfx}": {"host": "elsewhere.invalid", "pid": dead_pid, "created": time.time()},
    }
    with psycopg.connect(toki_server.dsn, autocommit=True) as c:
        for name, tag in tags.items():
            c.execute(f"drop schema if exists {name} cascade")
            c.execute(f"create schema {name}")
            c.execute(f"create table {name}.t (x int)")
            c.execute(f"comment on schema {name} is '{json.dumps(tag)}'")
    try:
        dropped = srv.collect_garbage(toki_server)
        left = _schemas(toki_server)
        assert {f"toki_run_gc_dead_{sfx}", f"toki_run_gc_reused_{sfx}"} <= set(dropped)
        assert f"toki_run_gc_dead_{sfx}" not in left and f"toki_run_gc_reused_{sfx}" not in left
        assert {f"toki_run_gc_live_{sfx}", f"toki_run_gc_other_host_{sfx}"} <= left
    finally:
        with psycopg.connect(toki_server.dsn, autocommit=True) as c:
            for name in tags:
                c.execute(f"drop schema if exists {name} cascade")


# -- a killed previous run, in real subprocesses with their own TOKI_HOME -------------------

CHILD = textwrap.dedent("""
    import sys, time
    from toki.db.server import home, resolve
    from toki.db.store import Store
    from toki.model import Fact
    from datetime import datetime
    server = resolve()
    store = Store.open(server=server, label=sys.argv[1])
    store.write(Fact("rx-1", "alice", "medication", "penicillin", datetime(2026, 3, 1)))
    postmaster = int((home() / "pg18" / "postmaster.pid").read_text().split()[0])
    print(server.how, store.schema, postmaster, len(store.current()), flush=True)
    if sys.argv[2] == "hang":
        time.sleep(600)
""")


def _alive(pid: int) -> bool:
    return srv._process_alive(pid)


def _spawn(env, label, mode):
    return subprocess.Popen([sys.executable, "-c", CHILD, label, mode], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _first_line(proc, timeout=60):
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("line", proc.stdout.readline()))
    th.start()
    th.join(timeout)
    line = out.get("line", "")
    assert line, f"child printed nothing; stderr: {proc.stderr.read() if proc.poll() is not None else '(running)'}"
    how, schema, pid, n = line.split()
    return how, schema, int(pid), int(n)


@pytest.mark.slow
def test_a_killed_run_leaves_nothing_that_breaks_the_next(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("TOKI_DSN",)}
    env["TOKI_HOME"] = str(tmp_path / "home")
    started: list[int] = []
    try:
        # 1. a run is killed with -9: its server is left running, its schema left behind
        a = _spawn(env, "killed", "hang")
        how, schema_a, pm1, n = _first_line(a)
        started.append(pm1)
        assert how == "embedded" and n == 1
        a.kill()
        a.wait(10)
        assert _alive(pm1)
        # 2. the next run reuses that server, drops the dead run's schema, and stops the server at exit
        b = subprocess.run([sys.executable, "-c", CHILD + textwrap.dedent("""
            import psycopg
            with psycopg.connect(server.dsn) as c:
                print(sorted(r[0] for r in c.execute("select nspname from pg_namespace"
                                                     " where nspname like 'toki_run_%'")))
        """), "next", "exit"], env=env, capture_output=True, text=True, timeout=120)
        assert b.returncode == 0, b.stderr
        first, schemas = b.stdout.splitlines()[:2]
        assert first.split()[2] == str(pm1)  # the same server
        assert schema_a not in schemas and "toki_run_next_" in schemas
        deadline = time.monotonic() + 15
        while _alive(pm1) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pm1), "the last live user did not stop the server at exit"
        # 3. the postmaster itself is killed with -9 (a stale postmaster.pid, zombie processes)
        c = _spawn(env, "again", "hang")
        _, _, pm2, _ = _first_line(c)
        started.append(pm2)
        os.kill(pm2, signal.SIGKILL)
        c.kill()
        c.wait(10)
        assert (Path(env["TOKI_HOME"]) / "pg18" / "postmaster.pid").exists()
        d = subprocess.run([sys.executable, "-c", CHILD, "after", "exit"], env=env, capture_output=True,
                           text=True, timeout=120)
        assert d.returncode == 0, d.stderr
        how, _, pm3, n = d.stdout.split()
        started.append(int(pm3))
        assert how == "embedded" and int(pm3) != pm2 and int(n) == 1
    finally:
        for pid in started:  # only the servers this test started
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
