"""Agents that mix one call the harness controls with a path it does not, written from
docs/engines.md as a new user would. Real threads lose the update in every one of them; toki must
never certify them ("excludes", exit 0), whatever it controls besides.

- ``psycopg2_counter``: an audit row in a local SQLite file (controlled), then a read-modify-write
  of a counter through psycopg2 (libpq in C, which toki does not intercept) on the run's PostgreSQL;
- ``redis_counter``: the same audit row, then GET and SET through redis-py (a Python socket);
- ``lmdb_counter``: one controlled log line in the run's folder, then a read-modify-write in an
  LMDB environment (a native writer, memory-mapped) kept outside the run's folder;
- ``psycopg2_transient_counter``: psycopg2 connection opened, used and closed inside each call;
  ``psycopg2_worker_counter``: the same done by a thread the agent starts and joins;
- ``ctypes_connect_counter``: a connect() made straight through libc (no Python socket, no driver)
  to a server the plug-in listens with, between two controlled calls.

And one that toki must not refuse: ``psycopg3_bound_connect_counter``, psycopg 3 (intercepted)
with ``from psycopg import connect`` bound at import, a connection per call, the counter read
``FOR UPDATE``.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

from toki.harness import Detector, Scenario


def _lost(state, errors):
    return [f"counter is {state['n']} after two increments"] if state.get("n") == 1 else []


_LOST = Detector("lost-update", _lost)


def _audit(folder: Path, agent: str) -> None:
    db = sqlite3.connect(folder / "audit.db")
    try:
        db.execute("create table if not exists audit (agent text)")
        db.execute("insert into audit values (?)", (agent,))
        db.commit()
    finally:
        db.close()


class Psycopg2Counter:
    name, version, executed = "psycopg2-counter", "1.0", "real"
    storage_in_location = False  # the counter lives on the server: set it up for every trial

    def __init__(self):
        self.dsn = None
        self.scenarios = {"increment": Scenario("increment", "two agents each audit, then add one to n",
                                                ("A", "B"), self.call, setup=self.setup, detectors=(_LOST,))}

    def use_dsn(self, dsn: str) -> None:
        self.dsn = dsn

    def open(self, location):
        import psycopg2

        return Path(location), psycopg2.connect(self.dsn)

    def close(self, handle) -> None:
        handle[1].close()

    def setup(self, handle) -> None:
        _, conn = handle
        with conn, conn.cursor() as cur:
            cur.execute("drop table if exists toki_p2_counter")
            cur.execute("create table toki_p2_counter (id int primary key, n int)")
            cur.execute("insert into toki_p2_counter values (1, 0)")

    def state(self, handle):
        _, conn = handle
        with conn, conn.cursor() as cur:
            cur.execute("select n from toki_p2_counter where id = 1")
            return {"n": cur.fetchone()[0]}

    def call(self, handle, agent):
        folder, conn = handle
        _audit(folder, agent)
        with conn, conn.cursor() as cur:
            cur.execute("select n from toki_p2_counter where id = 1")
            n = cur.fetchone()[0]
        with conn, conn.cursor() as cur:
            cur.execute("update toki_p2_counter set n = %s where id = 1", (n + 1,))


class RedisCounter:
    name, version, executed = "redis-counter", "1.0", "real"
    storage_in_location = False

    def __init__(self, url: str = "redis://127.0.0.1:6379/0"):
        self.url = url
        self.key = f"toki-test-counter-{os.getpid()}"
        self.scenarios = {"increment": Scenario("increment", "two agents each audit, then GET and SET n",
                                                ("A", "B"), self.call, setup=self.setup, detectors=(_LOST,))}

    def open(self, location):
        import redis

        return Path(location), redis.Redis.from_url(self.url)

    def close(self, handle) -> None:
        handle[1].close()

    def setup(self, handle) -> None:
        handle[1].set(self.key, 0)

    def state(self, handle):
        return {"n": int(handle[1].get(self.key))}

    def call(self, handle, agent):
        folder, r = handle
        _audit(folder, agent)
        n = int(r.get(self.key))
        r.set(self.key, n + 1)


class LmdbCounter:
    """LMDB's environment lives in a folder of its own, outside the run's folder (a store that
    keeps its files under the user's home or a configured path)."""

    name, version, executed = "lmdb-counter", "1.0", "real"
    storage_in_location = False

    def __init__(self):
        self.home = Path(tempfile.mkdtemp(prefix="toki-lmdb-"))
        # One environment per process (LMDB refuses a second open): the agents share the handle.
        self.scenarios = {"increment": Scenario("increment", "two agents each log a line, then add one to n",
                                                ("A", "B"), self.call, setup=self.setup, detectors=(_LOST,),
                                                shared=True)}

    def open(self, location):
        import lmdb

        return Path(location), lmdb.open(str(self.home), map_size=1 << 20, lock=False)

    def close(self, handle) -> None:
        handle[1].close()

    def setup(self, handle) -> None:
        with handle[1].begin(write=True) as txn:
            txn.put(b"n", b"0")

    def state(self, handle):
        with handle[1].begin() as txn:
            return {"n": int(txn.get(b"n"))}

    def call(self, handle, agent):
        folder, env = handle
        with open(folder / "log.txt", "a") as f:
            f.write(f"{agent}\n")
        with env.begin() as txn:
            n = int(txn.get(b"n"))
        with env.begin(write=True) as txn:
            txn.put(b"n", str(n + 1).encode())


class Psycopg2TransientCounter(Psycopg2Counter):
    """As above, but each agent opens its own psycopg2 connection, uses it and closes it between
    two controlled calls: no descriptor is left for a scan to see at the next step."""

    name = "psycopg2-transient-counter"

    def open(self, location):
        return Path(location), None

    def close(self, handle) -> None:
        pass

    def _with_conn(self, handle, method):
        import psycopg2

        conn = psycopg2.connect(self.dsn)
        try:
            return method((handle[0], conn))
        finally:
            conn.close()

    def setup(self, handle) -> None:
        self._with_conn(handle, super().setup)

    def state(self, handle):
        return self._with_conn(handle, super().state)

    def call(self, handle, agent):
        folder, _ = handle
        _audit(folder, agent)
        self._add_one()
        _audit(folder, agent)

    def _add_one(self):
        """The read-modify-write on a psycopg2 connection of its own, closed before it returns."""
        import psycopg2

        conn = psycopg2.connect(self.dsn)
        try:
            with conn, conn.cursor() as cur:
                cur.execute("select n from toki_p2_counter where id = 1")
                n = cur.fetchone()[0]
                cur.execute("update toki_p2_counter set n = %s where id = 1", (n + 1,))
        finally:
            conn.close()


def psycopg2_counter():
    return Psycopg2Counter()


def psycopg2_transient_counter():
    return Psycopg2TransientCounter()


def redis_counter():
    return RedisCounter()


def lmdb_counter():
    return LmdbCounter()


class SeededOnce:
    """Storage split between the run's folder and a server (a dict stands in for it, emptied by
    every open() as a fresh server schema would be): setup seeds both, but toki sets up once and
    copies the folder (storage_in_location left at its default), so in every run the server part
    is missing and every call raises TypeError, serial runs included."""

    name, version, executed = "seeded-once", "1.0", "real"

    def __init__(self):
        self.server: dict = {}
        self.scenarios = {"increment": Scenario("increment", "two agents add one", ("A", "B"), self.call,
                                                setup=self.setup, detectors=(_LOST,))}

    def open(self, location):
        self.server.clear()
        return Path(location)

    def close(self, folder) -> None:
        pass

    def setup(self, folder) -> None:
        (folder / "seeded").write_text("1")
        self.server["n"] = 0

    def state(self, folder):
        return {"n": self.server.get("n")}

    def call(self, folder, agent):
        step = int((folder / "seeded").read_text())
        self.server["n"] = self.server.get("n") + step  # TypeError: the server part was never seeded


def seeded_once():
    return SeededOnce()


class RaisingDetector:
    """A detector written for the states the author expected, which raises on another."""

    name, version, executed = "raising-detector", "1.0", "real"

    def __init__(self):
        def lost(state, errors):
            return [] if state["n"] == 2 else ["lost"]  # KeyError on a state without "n"
        self.scenarios = {"increment": Scenario("increment", "two agents add one", ("A", "B"), self.call,
                                                setup=self.setup, detectors=(Detector("lost-update", lost),))}

    def open(self, location):
        return Path(location) / "n.txt"

    def close(self, p) -> None:
        pass

    def setup(self, p) -> None:
        p.write_text("0")

    def state(self, p):
        return {"count": int(p.read_text())}

    def call(self, p, agent):
        n = int(p.read_text())
        p.write_text(str(n + 1))


def raising_detector():
    return RaisingDetector()


class Psycopg2WorkerCounter(Psycopg2TransientCounter):
    """The transient psycopg2 read-modify-write done by a thread the agent starts and joins (an
    engine's own worker, made in the call)."""

    name = "psycopg2-worker-counter"

    def call(self, handle, agent):
        import threading

        _audit(handle[0], agent)
        t = threading.Thread(target=self._add_one)
        t.start()
        t.join()


def psycopg2_worker_counter():
    return Psycopg2WorkerCounter()


class CtypesConnectCounter:
    """A counter in the run's folder (controlled), and between its read and its write a connect()
    made through libc to a server the plug-in listens with: what a C extension's client does."""

    name, version, executed = "ctypes-connect-counter", "1.0", "real"

    def __init__(self):
        import socket

        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.scenarios = {
            "increment": Scenario("increment", "two agents add one", ("A", "B"), self.call, setup=self.setup,
                                  detectors=(_LOST,)),
            # Race-free in what toki controls (one append each): only the connect is wrong with it.
            "log": Scenario("log", "two agents each append a line and connect", ("A", "B"), self.log,
                            setup=self.setup, detectors=(Detector("lost-line", lambda st, err: [] if st["lines"] == 2
                                                                  else [f"{st['lines']} lines"]),))}

    def open(self, location):
        return Path(location)

    def close(self, folder) -> None:
        pass

    def setup(self, folder) -> None:
        (folder / "n.txt").write_text("0")

    def state(self, folder):
        log = folder / "log.txt"
        return {"n": int((folder / "n.txt").read_text() or -1),
                "lines": len(log.read_text().splitlines()) if log.exists() else 0}

    def log(self, folder, agent):
        with open(folder / "log.txt", "a") as f:
            f.write(f"{agent}\n")
        self._connect()

    def call(self, folder, agent):
        n = int((folder / "n.txt").read_text())
        self._connect()
        (folder / "n.txt").write_text(str(n + 1))

    def _connect(self):
        import ctypes
        import socket
        import struct

        s = socket.socket()
        try:
            addr = struct.pack("!HH4s8x", socket.AF_INET, self.port, socket.inet_aton("127.0.0.1"))
            addr = struct.pack("H", socket.AF_INET) + addr[2:]  # sa_family in host order
            ctypes.CDLL(None).connect(s.fileno(), ctypes.c_char_p(addr), len(addr))
        finally:
            s.close()


def ctypes_connect_counter():
    return CtypesConnectCounter()


class Psycopg3BoundConnectCounter:
    """psycopg 3 with ``connect`` bound at import, one connection per call, the counter read FOR
    UPDATE: correct, and every statement a step; its connects are the intercepted driver's."""

    name, version, executed = "psycopg3-bound-connect-counter", "1.0", "real"
    storage_in_location = False

    def __init__(self):
        self.dsn = None
        self.scenarios = {"increment": Scenario("increment", "two agents each add one to n", ("A", "B"), self.call,
                                                setup=self.setup, detectors=(_LOST,))}

    def use_dsn(self, dsn: str) -> None:
        self.dsn = dsn

    def open(self, location):
        return Path(location)

    def close(self, handle) -> None:
        pass

    def setup(self, handle) -> None:
        with _bound_connect(self.dsn, autocommit=True) as conn:
            conn.execute("create table if not exists toki_p3_counter (id int primary key, n int)")
            conn.execute("insert into toki_p3_counter values (1, 0) on conflict (id) do update set n = 0")

    def state(self, handle):
        with _bound_connect(self.dsn) as conn:
            return {"n": conn.execute("select n from toki_p3_counter where id = 1").fetchone()[0]}

    def call(self, handle, agent):
        with _bound_connect(self.dsn) as conn:
            n = conn.execute("select n from toki_p3_counter where id = 1 for update").fetchone()[0]
            conn.execute("update toki_p3_counter set n = %s where id = 1", (n + 1,))


def psycopg3_bound_connect_counter():
    return Psycopg3BoundConnectCounter()


try:
    from psycopg import connect as _bound_connect  # bound before any hook: the shape under test
except ImportError:  # pragma: no cover - psycopg 3 is a dependency
    _bound_connect = None


class CtypesWorkerCounter(CtypesConnectCounter):
    """The libc connect() made by the engine's own worker thread, started in open() (before any
    agent runs, so not a thread an agent started) and fed through a queue made there: the
    request-queue-worker shape, where the worker does each agent's request as that agent."""

    name = "ctypes-worker-counter"

    def open(self, location):
        import queue
        import threading

        q: queue.Queue = queue.Queue()

        def work():
            while True:
                item = q.get()
                if item is None:
                    return
                item()

        t = threading.Thread(target=work, daemon=True)
        t.start()
        return Path(location), q, t

    def close(self, handle) -> None:
        handle[1].put(None)
        handle[2].join(5)

    def setup(self, handle) -> None:
        super().setup(handle[0] if isinstance(handle, tuple) else handle)

    def state(self, handle):
        return super().state(handle[0] if isinstance(handle, tuple) else handle)

    def log(self, handle, agent):
        folder, q, _ = handle
        q.put(lambda: CtypesConnectCounter.log(self, folder, agent))

    def call(self, handle, agent):
        folder, q, _ = handle
        q.put(lambda: CtypesConnectCounter.call(self, folder, agent))


def ctypes_worker_counter():
    return CtypesWorkerCounter()
