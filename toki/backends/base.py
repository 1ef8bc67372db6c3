"""What every backend offers, and the error vocabulary they share.

A backend classifies a driver exception into an :class:`ErrorKind` by the database's own code
(SQLSTATE, a vendor error number, SQLite's extended result code), never by message text. The
kinds are what the layers above act on: ``BUSY`` means "blocked, re-issue later" (SQLite has no
lock queue), ``SERIALIZATION``/``DEADLOCK`` mean "this transaction was chosen to abort".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from toki.errors import ConfigError
from toki.levels import Isolation


class ErrorKind(enum.Enum):
    SERIALIZATION = "serialization"  # 40001, MySQL 1020 (record changed), DuckDB write conflict
    DEADLOCK = "deadlock"  # 40P01, MySQL 1213
    LOCK_TIMEOUT = "lock-timeout"  # 55P03, MySQL 1205
    BUSY = "busy"  # SQLite SQLITE_BUSY: the lock is taken, nothing queued; re-issue later
    BUSY_SNAPSHOT = "busy-snapshot"  # SQLite WAL: a read transaction cannot become a writer
    UNIQUE = "unique"  # 23505, MySQL 1062, SQLite CONSTRAINT_PRIMARYKEY/UNIQUE
    CONSTRAINT = "constraint"  # other integrity violations
    FAILED_TXN = "failed-transaction"  # 25P02: earlier error, transaction must roll back
    CONNECTION = "connection"  # the session is gone
    OTHER = "other"


@dataclass(frozen=True)
class Classified:
    kind: ErrorKind
    code: str | None  # the database's own code: SQLSTATE, vendor number, SQLite result name
    message: str = ""
    # Named apart, so that neither is mistaken for the other: the SQL standard's five-character
    # SQLSTATE (PostgreSQL's only code; MySQL sends one beside its error number; SQLite and DuckDB
    # have none) and the vendor's error number (MySQL's 1213; SQLite's extended result code).
    sqlstate: str | None = None
    errno: int | None = None

    @property
    def blocked(self) -> bool:
        """The statement did not run because another session holds what it needs."""
        return self.kind is ErrorKind.BUSY

    @property
    def aborts(self) -> bool:
        return self.kind in (ErrorKind.SERIALIZATION, ErrorKind.DEADLOCK, ErrorKind.BUSY_SNAPSHOT)


class UnsupportedLevel(ConfigError):
    """A database asked for a level it does not have: never silently substituted."""


@runtime_checkable
class Backend(Protocol):
    name: str

    def connect(self) -> Any: ...
    def levels(self) -> tuple[Isolation, ...]: ...
    def begin(self, conn: Any, level: Isolation) -> None: ...
    def is_blocked(self, session: Any, others: list[Any]) -> bool: ...
    def classify(self, exc: BaseException) -> Classified: ...
    def reset(self, conn: Any) -> None: ...
    def describe(self) -> dict: ...


def check_level(backend_name: str, offered: tuple[Isolation, ...], level: Isolation) -> None:
    if level not in offered:
        raise UnsupportedLevel(
            f"{backend_name} has no {level.cli_name} level",
            fix="use one of " + ", ".join(i.cli_name for i in offered))
