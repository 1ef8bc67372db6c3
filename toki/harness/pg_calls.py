"""psycopg 3 (and so psycopg_pool and SQLAlchemy's psycopg dialect), intercepted at the driver:
while the hook is installed, ``execute``/``executemany`` of cursors and connections, ``commit``
and ``rollback``, and every other round trip to the server (``Connection.wait``, through which
``transaction()`` blocks, COPY, ``stream`` and pipelines go), sync and async, are steps for
agents and refused on other threads during a run (:func:`~toki.harness.controller.controlled`);
whoever opened the connection.

A granted statement that does not return at once is checked with an observer the harness opens
from the connection's own parameters (``pg_isolation_test_session_is_blocked``); the controller
skips a blocked agent until its statement returns.
"""

from __future__ import annotations

import contextlib

from toki.harness import connect_watch, effects
from toki.harness.controller import controlled, controlled_async
from toki.harness.observers import DbSession, pg_where
from toki.harness.sql_dependence import pg_after, pg_ending, pg_round_trip, pg_statement
from toki.harness.sqlite_calls import database_footprint, describe_sql, sql_kind, statement_footprint, with_params
from toki.harness.steps import Footprint, StepKind

_KINDS = {"read": StepKind.PG_READ, "txn": StepKind.PG_TXN, "write": StepKind.PG_WRITE,
          "commit": StepKind.PG_COMMIT, "rollback": StepKind.PG_ROLLBACK}
_DATABASE = database_footprint("pg")
_ROUND_TRIP = "round trip (transaction block, COPY, stream or pipeline)"


def _text(conn, query) -> str:
    if hasattr(query, "as_string"):
        try:
            return query.as_string(conn)
        except Exception:  # noqa: BLE001 - a description only
            return repr(query)
    return query.decode() if isinstance(query, bytes) else str(query)


def _session(conn) -> DbSession | None:
    try:
        pid = conn.info.backend_pid
    except Exception:  # noqa: BLE001 - closed connection: the call will fail on its own
        return None
    return DbSession("postgresql", pid, pg_where(conn)) if pid else None


def _detail(conn, query, args, kwargs=None, many: bool = False) -> tuple[StepKind, str, Footprint]:
    text = _text(conn, query)
    params = args[0] if args else (kwargs or {}).get("params_seq" if many else "params")
    coarse = statement_footprint("pg", text)
    # finer where the statement, its transaction and the catalog show it (sql_dependence)
    fine = pg_statement(conn, text, params, many, coarse.tables)
    return (_KINDS[sql_kind(text)], with_params(describe_sql(text), args[0] if args else None),
            coarse if fine is None else fine)


def _wrap_execute(orig, many: bool = False):
    def execute(self, query, *args, **kwargs):
        conn = getattr(self, "connection", self)
        kind, detail, touches = _detail(conn, query, args, kwargs, many)
        ok = False
        try:
            result = controlled(kind, detail, lambda: orig(self, query, *args, **kwargs), db=_session(conn),
                                touches=touches)
            ok = True
            return result
        finally:
            pg_after(conn, ok)
    execute.__wrapped__ = orig
    return execute


def _wrap_execute_async(orig, many: bool = False):
    async def execute(self, query, *args, **kwargs):
        conn = getattr(self, "connection", self)
        kind, detail, touches = _detail(conn, query, args, kwargs, many)
        ok = False
        try:
            result = await controlled_async(kind, detail, lambda: orig(self, query, *args, **kwargs),
                                            db=_session(conn), touches=touches)
            ok = True
            return result
        finally:
            pg_after(conn, ok)
    execute.__wrapped__ = orig
    return execute


def _wrap_txn(orig, kind: str):
    def call(self, *args, **kwargs):
        touches = pg_ending(self)
        ok = False
        try:
            result = controlled(_KINDS[kind], kind, lambda: orig(self, *args, **kwargs), db=_session(self),
                                touches=_DATABASE if touches is None else touches)
            ok = True
            return result
        finally:
            pg_after(self, ok)
    call.__wrapped__ = orig
    return call


def _wrap_wait(orig):
    # Every round trip goes through wait(): execute's own is inside its step; what reaches here
    # alone (transaction() blocks' BEGIN/COMMIT, COPY, stream, pipeline syncs) is a step of its own.
    def wait(self, gen, *args, **kwargs):
        pg_round_trip(self)  # (nothing when inside an execute's own step)
        return controlled(StepKind.PG_TXN, _ROUND_TRIP, lambda: orig(self, gen, *args, **kwargs), db=_session(self),
                          touches=_DATABASE)
    wait.__wrapped__ = orig
    return wait


def _wrap_wait_async(orig):
    async def wait(self, gen, *args, **kwargs):
        pg_round_trip(self)
        return await controlled_async(StepKind.PG_TXN, _ROUND_TRIP, lambda: orig(self, gen, *args, **kwargs),
                                      db=_session(self), touches=_DATABASE)
    wait.__wrapped__ = orig
    return wait


def _wrap_txn_async(orig, kind: str):
    async def call(self, *args, **kwargs):
        touches = pg_ending(self)
        ok = False
        try:
            result = await controlled_async(_KINDS[kind], kind, lambda: orig(self, *args, **kwargs), db=_session(self),
                                            touches=_DATABASE if touches is None else touches)
            ok = True
            return result
        finally:
            pg_after(self, ok)
    call.__wrapped__ = orig
    return call


def _wrap_connect(orig):
    # Opening a connection is no storage call (no step), but libpq's connect() is one below
    # Python: marked, so the kernel's watch knows it for the intercepted driver's (connect_watch).
    func = orig.__func__

    def connect(cls, *args, **kwargs):
        was = connect_watch.inside(True)
        try:
            conn = func(cls, *args, **kwargs)
        finally:
            connect_watch.inside(was)
        effects.note_socket_owner(conn.pgconn)  # its socket is a driver's the harness intercepts
        return conn
    connect.__wrapped__ = func
    return classmethod(connect)


def _wrap_connect_async(orig):
    func = orig.__func__

    async def connect(cls, *args, **kwargs):
        was = connect_watch.inside(True)
        try:
            conn = await func(cls, *args, **kwargs)
        finally:
            connect_watch.inside(was)
        effects.note_socket_owner(conn.pgconn)
        return conn
    connect.__wrapped__ = func
    return classmethod(connect)


@contextlib.contextmanager
def installed():
    try:
        import psycopg
    except ImportError:  # nothing to intercept
        yield
        return
    patches = []
    for cur, conn, wrap, txn, wait in ((psycopg.Cursor, psycopg.Connection, _wrap_execute, _wrap_txn, _wrap_wait),
                                       (psycopg.AsyncCursor, psycopg.AsyncConnection, _wrap_execute_async,
                                        _wrap_txn_async, _wrap_wait_async)):
        patches += [(cur, "execute", wrap), (cur, "executemany", lambda orig, wrap=wrap: wrap(orig, many=True)),
                    (conn, "execute", wrap), (conn, "wait", wait)]
        patches += [(conn, name, lambda orig, name=name, txn=txn: txn(orig, name)) for name in ("commit", "rollback")]
    patches += [(psycopg.Connection, "connect", _wrap_connect), (psycopg.AsyncConnection, "connect", _wrap_connect_async)]
    saved = []
    for cls, name, wrapper in patches:
        orig = cls.__dict__[name]
        saved.append((cls, name, orig))
        setattr(cls, name, wrapper(orig))
    # psycopg.connect is Connection.connect as bound at import: the module's name gets the marked one too.
    if psycopg.__dict__.get("connect") is not None:
        saved.append((psycopg, "connect", psycopg.__dict__["connect"]))
        psycopg.connect = psycopg.Connection.connect
    try:
        yield
    finally:
        for cls, name, orig in reversed(saved):
            setattr(cls, name, orig)
