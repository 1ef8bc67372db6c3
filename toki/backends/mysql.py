"""MariaDB and MySQL through PyMySQL: errors by vendor code, blocking from the InnoDB monitor.

Levels RU, RC, RR, SR are set for the next transaction (``SET TRANSACTION ISOLATION LEVEL`` then
``START TRANSACTION``). InnoDB's REPEATABLE READ is *not* snapshot isolation: reads see a
snapshot, but UPDATE/DELETE/SELECT ... FOR UPDATE read the latest committed row, so a lost update
goes through unless MariaDB's ``innodb_snapshot_isolation`` is on (off by default in 10.11, on
from 11.6), in which case the second writer fails with 1020. :meth:`MysqlBackend.describe`
reports the mode the server runs in.

Blocking: ``information_schema.INNODB_TRX`` is a cache InnoDB refreshes at most every 100 ms
while it is read often, so polling it fast reports a lock wait that has already ended. ``SHOW
ENGINE INNODB STATUS`` is built on demand and lists every transaction waiting for a lock
(``LOCK WAIT``) with its connection (``thread id``): the observer asks that.
"""

from __future__ import annotations

import os
import re
import weakref
from urllib.parse import parse_qs, unquote, urlsplit

import pymysql

from toki.backends.base import Classified, ErrorKind, check_level
from toki.errors import ConfigError, DatabaseUnavailable
from toki.levels import Isolation

_KINDS = {
    1213: ErrorKind.DEADLOCK,  # ER_LOCK_DEADLOCK (transaction rolled back)
    1205: ErrorKind.LOCK_TIMEOUT,  # ER_LOCK_WAIT_TIMEOUT (statement rolled back)
    1020: ErrorKind.SERIALIZATION,  # ER_CHECKREAD: record changed since last read (snapshot isolation)
    1062: ErrorKind.UNIQUE,  # ER_DUP_ENTRY
    1586: ErrorKind.UNIQUE,  # ER_DUP_ENTRY_WITH_KEY_NAME
    2006: ErrorKind.CONNECTION,  # CR_SERVER_GONE_ERROR
    2013: ErrorKind.CONNECTION,  # CR_SERVER_LOST
}
# The SQLSTATE MySQL documents for each error number toki classifies (Server Error Message
# Reference), for a driver that does not keep the one the server sent; client errors are HY000.
_SQLSTATES = {1213: "40001", 1205: "HY000", 1020: "HY000", 1062: "23000", 1586: "23000", 2006: "HY000",
              2013: "HY000"}
_TRX = re.compile(r"^---TRANSACTION ", re.M)
_THREAD = re.compile(r"(?:MySQL|MariaDB) thread id (\d+)")
_SQL = {Isolation.RU: "READ UNCOMMITTED", Isolation.RC: "READ COMMITTED", Isolation.SI: "REPEATABLE READ",
        Isolation.SR: "SERIALIZABLE"}


def classify(exc: BaseException) -> Classified:
    args = getattr(exc, "args", ())
    code = args[0] if args and isinstance(args[0], int) else None
    msg = str(args[1]) if len(args) > 1 else str(exc)
    if code is None:
        return Classified(ErrorKind.OTHER, None, msg)
    # PyMySQL keeps the SQLSTATE of the server's error packet (from 1.1.1); else the documented one
    state = getattr(exc, "sqlstate", None) or _SQLSTATES.get(code) or ("HY000" if code >= 2000 else None)
    kind = _KINDS.get(code)
    if kind is None:
        if isinstance(exc, pymysql.err.IntegrityError):
            kind = ErrorKind.CONSTRAINT
        elif code >= 2000:  # client-side errors: the connection is gone
            kind = ErrorKind.CONNECTION
        else:
            kind = ErrorKind.OTHER
    return Classified(kind, str(code), msg, sqlstate=state, errno=code)


def waiting_threads(observer) -> set[int]:
    """Connection ids of the transactions InnoDB reports waiting for a lock, right now."""
    with observer.cursor() as cur:
        cur.execute("SHOW ENGINE INNODB STATUS")
        status = cur.fetchone()[2]
    start = status.find("LIST OF TRANSACTIONS")
    waiting = set()
    for block in _TRX.split(status[start:])[1:]:
        if "\nLOCK WAIT " in block or block.startswith("LOCK WAIT"):
            m = _THREAD.search(block)
            if m:
                waiting.add(int(m.group(1)))
    return waiting


def parse_dsn(dsn: str) -> dict:
    parts = urlsplit(dsn)
    if not parts.hostname:
        raise ConfigError(f"MySQL DSN {dsn!r} names no host", fix="use mysql://user[:password]@host[:port]/database")
    db = parts.path.lstrip("/")
    if not db:
        raise ConfigError(f"MySQL DSN {dsn!r} names no database", fix="use mysql://root@127.0.0.1:3306/test")
    q = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    bad = set(q) - {"snapshot_isolation", "lock_wait_timeout"}
    if bad:
        raise ConfigError(f"MySQL DSN {dsn!r}: unknown option(s) {sorted(bad)}",
                          fix="known options: snapshot_isolation=on|off, lock_wait_timeout=SECONDS")
    si = q.get("snapshot_isolation")
    if si is not None and si.lower() not in ("on", "off", "1", "0"):
        raise ConfigError(f"snapshot_isolation={si!r} in {dsn!r}", fix="use snapshot_isolation=on or off")
    return {"host": parts.hostname, "port": parts.port or 3306, "user": unquote(parts.username or "root"),
            "password": unquote(parts.password or ""), "database": db,
            "snapshot_isolation": None if si is None else si.lower() in ("on", "1"),
            "lock_wait_timeout": int(q.get("lock_wait_timeout", 10))}


_LIVE: "weakref.WeakSet[MysqlBackend]" = weakref.WeakSet()


def _forget_in_child() -> None:
    # A forked worker (the matrix's process pool) inherits the parent's observer socket; using it
    # from both processes interleaves their packets. The child opens its own instead.
    for b in list(_LIVE):
        b._observer = None


os.register_at_fork(after_in_child=_forget_in_child)


class MysqlBackend:
    name = "mysql"
    #: InnoDB looks for a deadlock as a lock wait begins, and a statement that closes a cycle fails
    #: at once (1213); the lock-wait tables may show it waiting for that instant, which a runner
    #: that polls them under load can catch (toki.sched.backend_runner)
    deadlock_at_once = True

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.params = parse_dsn(dsn)
        self._observer = None
        self._info: dict | None = None
        _LIVE.add(self)

    def _raw_connect(self, charset: str = "utf8mb4"):
        p = self.params
        try:
            return pymysql.connect(host=p["host"], port=p["port"], user=p["user"], password=p["password"],
                                   database=p["database"], autocommit=True, connect_timeout=5, charset=charset)
        except pymysql.err.MySQLError as e:
            raise DatabaseUnavailable(
                f"cannot connect to MySQL/MariaDB at {p['host']}:{p['port']}/{p['database']}: {classify(e).message}",
                fix="start the server or fix the DSN (mysql://user[:password]@host[:port]/database)") from None

    def connect(self):
        conn = self._raw_connect()
        with conn.cursor() as cur:
            # A wait the schedule never releases should end as an error well within a step limit.
            cur.execute(f"SET SESSION innodb_lock_wait_timeout = {int(self.params['lock_wait_timeout'])}")
            if self.params["snapshot_isolation"] is not None and self.flavour == "mariadb":
                cur.execute(f"SET SESSION innodb_snapshot_isolation = {int(self.params['snapshot_isolation'])}")
        return conn

    @property
    def observer(self):
        if self._observer is None or not self._observer.open:
            # The monitor's text quotes raw record bytes, which are not UTF-8: latin1 decodes any byte.
            self._observer = self._raw_connect(charset="latin1")
        return self._observer

    def info(self) -> dict:
        if self._info is None:
            with self.observer.cursor() as cur:
                cur.execute("SELECT VERSION()")
                version = cur.fetchone()[0]
                snapshot = None
                try:
                    cur.execute("SELECT @@innodb_snapshot_isolation")
                    snapshot = bool(cur.fetchone()[0])
                except pymysql.err.MySQLError:
                    pass  # MySQL has no such variable: its RR never checks for changed records
            self._info = {"version": version, "flavour": "mariadb" if "mariadb" in version.lower() else "mysql",
                          "server_snapshot_isolation": snapshot}
        return self._info

    @property
    def flavour(self) -> str:
        return self.info()["flavour"]

    @property
    def snapshot_isolation(self) -> bool | None:
        """Whether toki's sessions run with innodb_snapshot_isolation (None: MySQL, no such mode)."""
        if self.params["snapshot_isolation"] is not None and self.flavour == "mariadb":
            return self.params["snapshot_isolation"]
        return self.info()["server_snapshot_isolation"]

    def expectation_keys(self) -> tuple[str, ...]:
        """Which ``[expect.KEY.LEVEL]`` tables of a schedule describe this server, most specific first."""
        if self.snapshot_isolation:
            return ("mariadb-snapshot",)  # a different REPEATABLE READ: the default tables do not apply
        return ("mariadb", "mysql") if self.flavour == "mariadb" else ("mysql",)

    def levels(self) -> tuple[Isolation, ...]:
        return (Isolation.RU, Isolation.RC, Isolation.SI, Isolation.SR)

    def begin_sql(self, level: Isolation) -> list[str]:
        check_level(self.name, self.levels(), level)
        return [f"SET TRANSACTION ISOLATION LEVEL {_SQL[level]}", "START TRANSACTION"]

    def begin(self, conn, level: Isolation) -> None:
        with conn.cursor() as cur:
            for sql in self.begin_sql(level):
                cur.execute(sql)

    def is_blocked(self, session, others) -> bool:
        tid = session if isinstance(session, int) else session.thread_id()
        return tid in waiting_threads(self.observer)

    def classify(self, exc: BaseException) -> Classified:
        return classify(exc)

    def reset(self, conn) -> None:
        with conn.cursor() as cur:
            cur.execute("ROLLBACK")

    def describe(self) -> dict:
        i = self.info()
        p = self.params
        return {"name": i["flavour"], "version": i["version"].split("-")[0], "full_version": i["version"],
                "where": f"{p['host']}:{p['port']}/{p['database']}",
                "innodb_snapshot_isolation": self.snapshot_isolation,
                "levels": [lv.cli_name for lv in self.levels()],
                "repeatable_read": ("snapshot isolation (1020 on a changed record)" if self.snapshot_isolation
                                    else "not snapshot isolation: writes read the latest row (lost updates pass)")}

    def orphaned_run_databases(self) -> list[str]:
        """``toki_run_*`` databases no connection is using: a lane keeps its admin connection in its
        database for its whole life, so one nobody is in was left by a run that was killed."""
        with self.observer.cursor() as cur:
            cur.execute("SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'toki\\_run\\_%%'")
            names = [r[0] for r in cur.fetchall()]
            cur.execute("SELECT DISTINCT db FROM information_schema.processlist WHERE db IS NOT NULL")
            used = {r[0] for r in cur.fetchall()}
        return sorted(n for n in names if n not in used)

    def drop_database(self, name: str) -> None:
        if not re.fullmatch(r"toki_run_[a-z0-9_]+", name):
            raise ConfigError(f"{name!r} is not a toki run database", fix="toki drops only toki_run_* databases")
        with self.observer.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")

    def close(self) -> None:
        if self._observer is not None:
            try:
                self._observer.close()
            except Exception:
                pass
            self._observer = None
