"""PostgreSQL through psycopg 3: errors by SQLSTATE, blocking through an observer connection."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from toki.backends.base import Classified, ErrorKind, check_level
from toki.levels import Isolation

_KINDS = {
    "40001": ErrorKind.SERIALIZATION,
    "40P01": ErrorKind.DEADLOCK,
    "55P03": ErrorKind.LOCK_TIMEOUT,
    "23505": ErrorKind.UNIQUE,
    "25P02": ErrorKind.FAILED_TXN,
}


def classify(exc: BaseException) -> Classified:
    state = getattr(exc, "sqlstate", None)
    if isinstance(exc, psycopg.OperationalError) and state is None:
        return Classified(ErrorKind.CONNECTION, None, str(exc))
    if state is None:
        return Classified(ErrorKind.OTHER, None, str(exc))
    if state in _KINDS:
        kind = _KINDS[state]
    elif state.startswith("23"):
        kind = ErrorKind.CONSTRAINT
    elif state.startswith("08") or state.startswith("57P"):
        kind = ErrorKind.CONNECTION
    else:
        kind = ErrorKind.OTHER
    return Classified(kind, state, str(exc), sqlstate=state)


def blocked_pids(observer: psycopg.Connection, pid: int, interesting: Sequence[int]) -> bool:
    """Is ``pid`` waiting on a lock held by one of ``interesting`` (isolationtester's question)?"""
    row = observer.execute("select pg_catalog.pg_isolation_test_session_is_blocked(%s, %s)",
                           (pid, list(interesting))).fetchone()
    return bool(row and row[0])


class PostgresBackend:
    name = "postgresql"

    def __init__(self, dsn: str):
        self.dsn = dsn
        self._observer: psycopg.Connection | None = None

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)

    def expectation_keys(self) -> tuple[str, ...]:
        return ("postgresql",)

    def levels(self) -> tuple[Isolation, ...]:
        return (Isolation.RU, Isolation.RC, Isolation.SI, Isolation.SR)

    def begin_sql(self, level: Isolation) -> list[str]:
        check_level(self.name, self.levels(), level)
        return [f"begin isolation level {level.sql}"]

    def begin(self, conn, level: Isolation) -> None:
        for sql in self.begin_sql(level):
            conn.execute(sql)

    @property
    def observer(self) -> psycopg.Connection:
        if self._observer is None or self._observer.closed:
            self._observer = psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)
        return self._observer

    def is_blocked(self, session, others) -> bool:
        pid = session if isinstance(session, int) else session.info.backend_pid
        pids = [o if isinstance(o, int) else o.info.backend_pid for o in others]
        return blocked_pids(self.observer, pid, pids)

    def classify(self, exc: BaseException) -> Classified:
        return classify(exc)

    def reset(self, conn) -> None:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.rollback()

    def describe(self) -> dict:
        v = self.observer.info.server_version
        return {"name": self.name, "version": f"{v // 10000}.{v % 10000}",
                "levels": [lv.cli_name for lv in self.levels()]}

    def close(self) -> None:
        if self._observer is not None:
            self._observer.close()
            self._observer = None
