"""psycopg 3 (and therefore psycopg_pool, which hands out psycopg connections), intercepted at
the driver: while the hook is installed, ``Cursor.execute``/``executemany``, ``Connection.execute``,
``commit`` and ``rollback`` are steps for agent threads and unchanged for every other thread.

A granted statement that does not return at once is checked with the PostgreSQL observer
(``pg_isolation_test_session_is_blocked``); the controller skips a blocked agent until its
statement returns.
"""

from __future__ import annotations

import contextlib

from toki.harness.controller import current_agent
from toki.harness.sqlite_calls import describe_sql, sql_kind

_PATCHED: list[tuple[type, str, object]] = []


def _text(conn, query) -> str:
    if hasattr(query, "as_string"):
        try:
            return query.as_string(conn)
        except Exception:  # noqa: BLE001 - a description only
            return repr(query)
    return query.decode() if isinstance(query, bytes) else str(query)


def _pid(conn) -> int | None:
    try:
        return conn.info.backend_pid
    except Exception:  # noqa: BLE001 - closed connection: the call will fail on its own
        return None


def _wrap_execute(orig, prefix: str = "pg-"):
    def execute(self, query, *args, **kwargs):
        me = current_agent()
        if me is None:
            return orig(self, query, *args, **kwargs)
        conn = getattr(self, "connection", self)
        text = _text(conn, query)
        return me[0].step(prefix + sql_kind(text), describe_sql(text),
                          lambda: orig(self, query, *args, **kwargs), pg_pid=_pid(conn))
    execute.__wrapped__ = orig
    return execute


def _wrap_txn(orig, kind: str):
    def call(self, *args, **kwargs):
        me = current_agent()
        if me is None:
            return orig(self, *args, **kwargs)
        return me[0].step("pg-" + kind, kind, lambda: orig(self, *args, **kwargs), pg_pid=_pid(self))
    call.__wrapped__ = orig
    return call


@contextlib.contextmanager
def installed():
    try:
        import psycopg
    except ImportError:  # nothing to intercept
        yield
        return
    patches = [(psycopg.Cursor, "execute", _wrap_execute), (psycopg.Cursor, "executemany", _wrap_execute),
               (psycopg.Connection, "execute", _wrap_execute)]
    saved = []
    for cls, name, wrapper in patches:
        orig = cls.__dict__[name]
        saved.append((cls, name, orig))
        setattr(cls, name, wrapper(orig))
    for name in ("commit", "rollback"):
        orig = psycopg.Connection.__dict__[name]
        saved.append((psycopg.Connection, name, orig))
        setattr(psycopg.Connection, name, _wrap_txn(orig, name))
    try:
        yield
    finally:
        for cls, name, orig in reversed(saved):
            setattr(cls, name, orig)
