"""DuckDB (embedded, one file): optimistic multi-version concurrency, one level.

DuckDB never makes a statement wait: a write that touches a row another open transaction has
written fails at once (``Conflict on update``), and the first committer wins. Every transaction
reads one snapshot and write skew goes through (measured: two transactions that each zero a
different row of a pair both commit), so its one level is snapshot isolation, offered as
``repeatable-read`` (toki's SI). READ COMMITTED and SERIALIZABLE are not offered: DuckDB has no
setting that selects them, and running them as SI would be a silent substitution.

Errors carry no code, only a class: ``TransactionException`` is a write-write conflict (or a
statement in a transaction a conflict already aborted), ``ConstraintException`` a violated key
or constraint. The class name is the code toki records.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import duckdb

from toki.backends.base import Classified, ErrorKind, check_level
from toki.errors import ConfigError
from toki.levels import Isolation


def classify(exc: BaseException) -> Classified:
    # DuckDB has neither a SQLSTATE nor an error number: the class name is its code
    name = type(exc).__name__
    msg = str(exc).splitlines()[0] if str(exc) else name
    if isinstance(exc, duckdb.TransactionException):
        return Classified(ErrorKind.SERIALIZATION, name, msg)
    if isinstance(exc, duckdb.ConstraintException):
        return Classified(ErrorKind.CONSTRAINT, name, msg)
    if isinstance(exc, duckdb.ConnectionException):
        return Classified(ErrorKind.CONNECTION, name, msg)
    if isinstance(exc, duckdb.Error):
        return Classified(ErrorKind.OTHER, name, msg)
    return Classified(ErrorKind.OTHER, None, msg)


class DuckdbBackend:
    name = "duckdb"

    def __init__(self, path: str | Path):
        self.path = str(path)

    @classmethod
    def from_dsn(cls, dsn: str) -> "DuckdbBackend":
        parts = urlsplit(dsn)
        if parts.netloc:
            raise ConfigError(f"DuckDB DSN {dsn!r} names a host",
                              fix="use duckdb:///relative/path.duckdb or duckdb:////absolute/path.duckdb")
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if not path:
            raise ConfigError(f"DuckDB DSN {dsn!r} names no file", fix="use duckdb:///PATH")
        if path == ":memory:":
            raise ConfigError("duckdb:///:memory: gives every session its own database",
                              fix="name a file: duckdb:///PATH (sessions must share one database)")
        return cls(path)

    def connect(self):
        # Connections to one path in one process share a database instance (DuckDB's instance
        # cache), so each session is its own transaction context on the same data.
        return duckdb.connect(self.path)

    def expectation_keys(self) -> tuple[str, ...]:
        return ("duckdb",)

    def levels(self) -> tuple[Isolation, ...]:
        return (Isolation.SI,)

    def begin_sql(self, level: Isolation) -> list[str]:
        check_level(self.name, self.levels(), level)
        return ["begin transaction"]

    def begin(self, conn, level: Isolation) -> None:
        for sql in self.begin_sql(level):
            conn.execute(sql)

    def is_blocked(self, session, others) -> bool:
        return False  # no statement waits: a conflict is an immediate error

    def classify(self, exc: BaseException) -> Classified:
        return classify(exc)

    def reset(self, conn) -> None:
        try:
            conn.execute("rollback")
        except duckdb.TransactionException:
            pass  # no transaction open

    def describe(self) -> dict:
        return {"name": self.name, "version": duckdb.__version__, "where": self.path,
                "levels": [lv.cli_name for lv in self.levels()],
                "concurrency": "optimistic: a write-write conflict fails at once, first committer wins"}
