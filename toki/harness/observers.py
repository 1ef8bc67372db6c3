"""Seeing a database session wait on another agent's lock, from a connection of the harness's own.

A granted statement that has not returned after a couple of milliseconds is either slow or
waiting for a lock another agent's open transaction holds. The controller asks an observer, as
PostgreSQL's isolation tester does, instead of sleeping: PostgreSQL answers
``pg_isolation_test_session_is_blocked``; MariaDB/MySQL report lock waits in
``SHOW ENGINE INNODB STATUS`` (the schedule runner's detection, :mod:`toki.backends.mysql`).

The observer is opened from the connection parameters of the first session the agents use, so a
plug-in needs no configuration: the harness connects where the engine connects.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DbSession:
    """A database session an agent's statement runs on: which server kind, its id there, and how
    to reach that server (for the observer)."""

    kind: str  # "postgresql" | "mysql"
    id: int
    where: Any  # connection parameters, opaque to the controller


class PgObserver:
    def __init__(self, conn, *, owned: bool = True):
        self.conn, self.owned = conn, owned

    @classmethod
    def open(cls, where) -> "PgObserver":
        import psycopg

        dsn, password = where
        kw = {"password": password} if password else {}
        return cls(psycopg.connect(dsn, autocommit=True, connect_timeout=10, **kw))

    def blocked(self, session: int, others: list[int]) -> bool:
        from toki.backends.postgres import blocked_pids

        return blocked_pids(self.conn, session, others)

    def close(self) -> None:
        if self.owned:
            with contextlib.suppress(Exception):
                self.conn.close()


class MysqlObserver:
    def __init__(self, conn):
        self.conn = conn

    @classmethod
    def open(cls, where) -> "MysqlObserver":
        import pymysql

        return cls(pymysql.connect(**where, autocommit=True, connect_timeout=10))

    def blocked(self, session: int, others: list[int]) -> bool:
        from toki.backends.mysql import waiting_threads

        return session in waiting_threads(self.conn)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


OPENERS = {"postgresql": PgObserver.open, "mysql": MysqlObserver.open}


def pg_where(conn) -> tuple[str, str | None] | None:
    """How to reach the server a psycopg connection is on (libpq's parameters, password apart)."""
    try:
        info = conn.info
        return info.dsn, info.password
    except Exception:  # noqa: BLE001 - a closed connection: its statement fails on its own
        return None


def mysql_where(conn) -> dict | None:
    try:
        where = {"host": conn.host, "port": conn.port, "user": conn.user, "password": conn.password or ""}
        if getattr(conn, "unix_socket", None):
            where["unix_socket"] = conn.unix_socket
        return where
    except Exception:  # noqa: BLE001
        return None
