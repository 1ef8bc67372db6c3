"""SQLite through the standard library's sqlite3.

SQLite has no lock queue: a statement that needs a lock another connection holds fails at once
with SQLITE_BUSY when the busy timeout is 0. toki sets it to 0 on every connection it controls
and reads SQLITE_BUSY as "blocked" (the caller re-issues the statement once another session has
advanced), so blocking is detected without sleeping. Every SQLite transaction is serializable;
what differs is when it takes its write lock: ``BEGIN DEFERRED`` (at the first write),
``IMMEDIATE`` (at begin), ``EXCLUSIVE`` (at begin, readers excluded too in rollback-journal mode).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from toki.backends.base import Classified, ErrorKind, check_level
from toki.errors import ConfigError
from toki.levels import Isolation

# Extended result codes (sqlite3.h): primary code in the low byte.
SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_CONSTRAINT = 19
SQLITE_BUSY_SNAPSHOT = 5 | (2 << 8)
SQLITE_CONSTRAINT_PRIMARYKEY = 19 | (6 << 8)
SQLITE_CONSTRAINT_UNIQUE = 19 | (8 << 8)
BEGIN_MODES = ("deferred", "immediate", "exclusive")
JOURNAL_MODES = ("delete", "truncate", "persist", "wal", "memory")


def classify(exc: BaseException) -> Classified:
    code = getattr(exc, "sqlite_errorcode", None)
    name = getattr(exc, "sqlite_errorname", None)
    msg = str(exc)
    # SQLite has no SQLSTATE: its code is the extended result code (errno) and that code's name
    if code is None:
        return Classified(ErrorKind.OTHER, None, msg)
    if code == SQLITE_BUSY_SNAPSHOT:
        return Classified(ErrorKind.BUSY_SNAPSHOT, name, msg, errno=code)
    if code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED):
        return Classified(ErrorKind.BUSY, name, msg, errno=code)
    if code in (SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE):
        return Classified(ErrorKind.UNIQUE, name, msg, errno=code)
    if code & 0xFF == SQLITE_CONSTRAINT:
        return Classified(ErrorKind.CONSTRAINT, name, msg, errno=code)
    return Classified(ErrorKind.OTHER, name, msg, errno=code)


def is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and classify(exc).kind is ErrorKind.BUSY


class SqliteBackend:
    name = "sqlite"

    def __init__(self, path: str | Path, *, begin_mode: str = "deferred", journal: str | None = None):
        if begin_mode not in BEGIN_MODES:
            raise ConfigError(f"unknown SQLite begin mode {begin_mode!r}", fix="use deferred, immediate or exclusive")
        self.path, self.begin_mode, self.journal = str(path), begin_mode, journal

    @classmethod
    def from_dsn(cls, dsn: str) -> "SqliteBackend":
        parts = urlsplit(dsn)
        # SQLAlchemy's convention: sqlite:///rel.db is relative, sqlite:////abs.db absolute.
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if parts.netloc:
            raise ConfigError(f"SQLite DSN {dsn!r} names a host",
                              fix="use sqlite:///relative/path.db or sqlite:////absolute/path.db")
        if not path:
            raise ConfigError(f"SQLite DSN {dsn!r} names no file", fix="use sqlite:///PATH")
        q = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        bad = set(q) - {"begin", "journal"}
        if bad:
            raise ConfigError(f"SQLite DSN {dsn!r}: unknown option(s) {sorted(bad)}",
                              fix="known options: begin=deferred|immediate|exclusive, journal=delete|wal")
        if q.get("journal") and q["journal"].lower() not in JOURNAL_MODES:
            raise ConfigError(f"SQLite DSN {dsn!r}: unknown journal mode {q['journal']!r}",
                              fix="use journal=delete (rollback journal) or journal=wal")
        return cls(path, begin_mode=q.get("begin", "deferred"), journal=q.get("journal"))

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        if self.journal:
            conn.execute(f"pragma journal_mode = {self.journal}")
        return conn

    def expectation_keys(self) -> tuple[str, ...]:
        """``sqlite`` (rollback journal, BEGIN DEFERRED), ``sqlite-wal``, ``sqlite-immediate``, ...:
        where a statement waits, and what fails, depends on the journal and the begin mode."""
        wal = "-wal" if (self.journal or "").lower() == "wal" else ""
        mode = "" if self.begin_mode == "deferred" else f"-{self.begin_mode}"
        return (f"sqlite{wal}{mode}",)

    def levels(self) -> tuple[Isolation, ...]:
        return (Isolation.SR,)

    def begin_sql(self, level: Isolation) -> list[str]:
        check_level(self.name, self.levels(), level)
        return [f"begin {self.begin_mode}"]

    def begin(self, conn, level: Isolation) -> None:
        for sql in self.begin_sql(level):
            conn.execute(sql)

    def is_blocked(self, session, others) -> bool:
        return False  # a SQLite statement never waits: it fails with SQLITE_BUSY instead

    def classify(self, exc: BaseException) -> Classified:
        return classify(exc)

    def reset(self, conn) -> None:
        if conn.in_transaction:
            conn.execute("rollback")

    def describe(self) -> dict:
        return {"name": self.name, "version": sqlite3.sqlite_version, "where": self.path, "begin": self.begin_mode,
                "journal": self.journal or "default (delete: rollback journal)",
                "levels": [lv.cli_name for lv in self.levels()]}
