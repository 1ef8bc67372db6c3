"""PyMySQL (MariaDB/MySQL), intercepted at the driver: while the hook is installed, a cursor's
``execute``/``executemany`` and a connection's ``query``/``begin``/``commit``/``rollback`` are steps for
agents, refused on other threads during a run, whoever opened the connection. A granted
statement that does not return at once is checked against InnoDB's lock waits from an observer
opened with the connection's own parameters (:mod:`.observers`).
"""

from __future__ import annotations

import contextlib

from toki.harness.controller import controlled
from toki.harness.observers import DbSession, mysql_where
from toki.harness.sql_dependence import my_after, my_statement, my_txn, set_my_query
from toki.harness.sqlite_calls import database_footprint, describe_sql, sql_kind, statement_footprint, with_params
from toki.harness.steps import StepKind

_KINDS = {"read": StepKind.MY_READ, "txn": StepKind.MY_TXN, "write": StepKind.MY_WRITE, "begin": StepKind.MY_BEGIN,
          "commit": StepKind.MY_COMMIT, "rollback": StepKind.MY_ROLLBACK}
_DATABASE = database_footprint("my")


def _session(conn) -> DbSession | None:
    try:
        return DbSession("mysql", conn.thread_id(), mysql_where(conn))
    except Exception:  # noqa: BLE001 - not connected: the call fails on its own
        return None


def _touches(conn, text: str, params, many: bool):
    coarse = statement_footprint("my", text)
    # finer where the statement, its transaction and the catalog show it (sql_dependence)
    fine = my_statement(conn, text, params, many, coarse.tables)
    return coarse if fine is None else fine


def _wrap_execute(orig, many: bool = False):
    def execute(self, query, args=None):
        text = query.decode() if isinstance(query, bytes) else str(query)
        conn = self.connection
        touches = _touches(conn, text, args, many)
        ok = False
        try:
            result = controlled(_KINDS[sql_kind(text)], with_params(describe_sql(text), args),
                                lambda: orig(self, query, args), db=_session(conn), touches=touches)
            ok = True
            return result
        finally:
            my_after(conn, ok)
    execute.__wrapped__ = orig
    return execute


def _wrap_query(orig):
    # What cursors send goes through query(): inside their step; called alone, a step of its own.
    def query(self, sql, *args, **kwargs):
        text = sql.decode(errors="replace") if isinstance(sql, bytes) else str(sql)
        touches = _touches(self, text, None, False)
        ok = False
        try:
            result = controlled(_KINDS[sql_kind(text)], describe_sql(text), lambda: orig(self, sql, *args, **kwargs),
                                db=_session(self), touches=touches)
            ok = True
            return result
        finally:
            my_after(self, ok)
    query.__wrapped__ = orig
    return query


def _wrap_txn(orig, kind: str):
    def call(self, *args, **kwargs):
        touches = my_txn(self, kind)
        ok = False
        try:
            result = controlled(_KINDS[kind], kind, lambda: orig(self, *args, **kwargs), db=_session(self),
                                touches=_DATABASE if touches is None else touches)
            ok = True
            return result
        finally:
            my_after(self, ok)
    call.__wrapped__ = orig
    return call


@contextlib.contextmanager
def installed():
    try:
        import pymysql.connections
        import pymysql.cursors
    except ImportError:
        yield
        return
    saved = []
    for name in ("execute", "executemany"):
        orig = pymysql.cursors.Cursor.__dict__[name]
        saved.append((pymysql.cursors.Cursor, name, orig))
        setattr(pymysql.cursors.Cursor, name, _wrap_execute(orig, many=name == "executemany"))
    for name in ("begin", "commit", "rollback"):
        orig = pymysql.connections.Connection.__dict__[name]
        saved.append((pymysql.connections.Connection, name, orig))
        setattr(pymysql.connections.Connection, name, _wrap_txn(orig, name))
    orig = pymysql.connections.Connection.__dict__["query"]
    saved.append((pymysql.connections.Connection, "query", orig))
    pymysql.connections.Connection.query = _wrap_query(orig)
    set_my_query(orig)  # the probe of a session's transaction asks on the agent's connection, as no step
    try:
        yield
    finally:
        set_my_query(None)
        for cls, name, orig in reversed(saved):
            setattr(cls, name, orig)
