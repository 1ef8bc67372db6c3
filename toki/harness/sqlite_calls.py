"""sqlite3, intercepted at the driver: every connection opened while the hook is installed (on any
thread: in ``open()``, ``setup`` or by a thread the library starts) is a
:class:`ControlledConnection` (``sqlite3.connect(..., factory=...)``), so the engine keeps a real
``sqlite3.Connection`` and its own code runs unchanged. Its calls are steps for agents (and for a
worker thread working for one, :mod:`.threads`) and refused on any other thread during a run.

Connections get a busy timeout of 0 (and no same-thread check: handles are opened on the
caller's thread, and the controller lets one agent run at a time): a statement that needs a lock another connection holds
fails at once with SQLITE_BUSY, which the controller reads as "blocked" and re-issues once
another agent has moved (a deterministic busy handler), instead of SQLite sleeping and retrying.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3

from toki.backends.sqlite import is_busy
from toki.harness.controller import controlled
from toki.harness.steps import Footprint, StepKind

_original_connect = sqlite3.connect


def describe_sql(sql: str, limit: int = 120) -> str:
    text = " ".join(str(sql)[: 3 * limit].split())  # engines send kilobyte statements: cut first
    return text if len(text) <= limit else text[: limit - 1] + "…"


def sql_kind(sql: str) -> str:
    head = str(sql).lstrip().split(None, 1)[0].lower() if str(sql).strip() else ""
    if head in ("select", "with", "pragma", "explain"):
        return "read"
    if head in ("begin", "commit", "end", "rollback", "savepoint", "release"):
        return "txn"
    return "write"


# A SELECT that locks rows, moves a sequence or writes through a CTE is no plain read.
_NOT_A_READ = re.compile(r"\b(insert|update|delete|replace|merge|nextval|setval|pg_advisory\w*|"
                         r"for\s+(no\s+key\s+)?update|for\s+(key\s+)?share|lock\s+in\s+share\s+mode)\b", re.I)
_NAMED_TABLE = re.compile(r"\b(?:from|into|update|join|table)\s+((?:[A-Za-z_][\w$]*|\"[^\"]+\"|`[^`]+`)"
                          r"(?:\.(?:[A-Za-z_][\w$]*|\"[^\"]+\"|`[^`]+`))?)", re.I)


def database_footprint(family: str) -> Footprint:
    """A call that may change anything in the database of a driver family (``"sql"`` for sqlite3,
    ``"pg"``, ``"my"``): a commit, a rollback, a script, a connection created or closed."""
    return Footprint.writing((family,))


@functools.lru_cache(maxsize=8192)  # every run of a search issues the same statements again
def statement_footprint(family: str, sql: str) -> Footprint:
    """What a statement touches: the database of its driver family, read by a plain read and
    written by anything else, with the tables its text names as a hint (see :mod:`.steps`).

    Only a plain read (SELECT, WITH or EXPLAIN that locks no row, moves no sequence and writes
    through no CTE) only reads; a statement longer than its description (120 characters) counts
    as a write, as the part past it is not classified (a finer rule is issue 34's). Table names
    are not enough to commute two statements: SQLite locks the whole file, and foreign keys and
    triggers touch tables the text does not name."""
    text = describe_sql(sql)
    head = text.split(None, 1)[0].lower() if text else ""
    plain = (sql_kind(sql) == "read" and head in ("select", "with", "explain") and not text.endswith("…")
             and not _NOT_A_READ.search(text))
    tables = frozenset(m.lower().replace('"', "").replace("`", "") for m in _NAMED_TABLE.findall(str(sql)[:4096])
                       ) - {"set"}  # "ON CONFLICT ... DO UPDATE SET" names no table
    return Footprint.reading((family,), tables=tables) if plain else Footprint.writing((family,), tables=tables)


def _short(v) -> str:
    if isinstance(v, str):
        return repr(v) if len(v) <= 24 else repr(v[:20]) + "…"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return f"<{len(v)} bytes>"
    if v is None or isinstance(v, (int, float, bool)):
        return repr(v)
    return f"<{type(v).__name__}>"


def with_params(text: str, params, limit: int = 60) -> str:
    """A statement's description with its bound values, so that two writes can be told apart.
    Each value is cut before it is shown: engines bind kilobytes (embeddings, JSON) per row."""
    if not params:
        return text
    values = list(params.values() if isinstance(params, dict) else params)
    shown, size = [], 0
    for v in values:
        if size > limit:
            shown.append("…")
            break
        shown.append(_short(v))
        size += len(shown[-1]) + 2
    return f"{text} ← ({', '.join(shown)}{',' if len(shown) == 1 else ''})"


def _step(kind, sql, fn, params=None, touches: Footprint | None = None):
    return controlled(kind(sql) if callable(kind) else kind, with_params(describe_sql(sql), params), fn, busy=is_busy,
                      touches=statement_footprint("sql", str(sql)) if touches is None else touches)


# -- what a statement touches on its connection's database ---------------------------------------
#
# A connection's statements touch the database file it opened, ("sql", <its real path>), split in
# two: ("sql", path, "lock"), the file's write lock (RESERVED; in WAL mode the write lock of the
# log), and ("sql", path, "data"), its contents. A connection holding the write lock (after BEGIN
# IMMEDIATE or EXCLUSIVE, or after a write in its transaction) keeps it until its transaction
# ends, so what it reads and writes meanwhile changes no lock: only the data. So another
# connection's BEGIN IMMEDIATE, which only that lock decides (busy or not), commutes with them,
# and a search need not try it between every two of them. Everything else is taken whole: a
# write outside such a transaction takes and gives back the lock, a commit, a rollback, a
# script or a close may change both. Another file is another resource; a connection that
# attached a database, or has no file, touches every SQLite database (("sql",)).

_WRITE_LOCK = re.compile(r"^\s*begin\s+(immediate|exclusive)\b", re.I)
_DML = frozenset(("insert", "update", "delete", "replace"))


def _head(sql) -> str:
    text = str(sql).lstrip()
    return text.split(None, 1)[0].lower() if text else ""


def _database(conn) -> tuple[str, ...]:
    path = getattr(conn, "toki_db", None)
    return ("sql",) if path is None or getattr(conn, "toki_attached", False) else ("sql", path)


def connection_footprint(conn, sql, many: bool = False) -> Footprint:
    """What ``sql`` touches run on ``conn`` now (see the notes above); ``many``: executemany."""
    plain = statement_footprint("sql", str(sql))
    base = _database(conn)
    holds = len(base) > 1 and conn.in_transaction and getattr(conn, "toki_reserved", False)
    if not many and not plain.writes:
        return Footprint.reading(base + ("data",) if holds else base, tables=plain.tables)
    head = _head(sql)
    if head in ("commit", "end") or (head == "rollback" and " to " not in str(sql).lower()):
        return ending_footprint(conn)
    if holds and head in _DML:
        return Footprint.writing(base + ("data",), tables=plain.tables)
    if not many and len(base) > 1 and _WRITE_LOCK.match(str(sql)):
        return Footprint.writing(base + ("lock",), tables=plain.tables)
    return Footprint.writing(base, tables=plain.tables)


def ending_footprint(conn) -> Footprint:
    """A commit, rollback or close: one that ends a transaction holding the write lock writes the
    data and gives the lock back. Giving a lock back is no access of it: the next BEGIN IMMEDIATE
    could not have gone before it (it would have been answered busy), so the two are no race to
    reverse, and the acquisitions race with each other instead (as DPOR treats a mutex).
    Any other ends what it may: the whole file."""
    base = _database(conn)
    if len(base) > 1 and conn.in_transaction and getattr(conn, "toki_reserved", False):
        return Footprint(writes=frozenset({base + ("data",)}), releases=frozenset({base + ("lock",)}))
    return Footprint.writing(base)


def _ran(conn, sql, was_in: bool) -> None:
    """After ``sql`` succeeded on ``conn``: does it hold the write lock now? (Only a yes that
    is sure counts: a no makes more steps dependent, never fewer.)"""
    head = _head(sql)
    if head == "attach":
        conn.toki_attached = True
    if not conn.in_transaction:
        conn.toki_reserved = False
    elif head in _DML or _WRITE_LOCK.match(str(sql)):
        conn.toki_reserved = True
    elif not was_in:
        conn.toki_reserved = False


def _statement(conn, kind, sql, fn, params=None, many: bool = False):
    was_in = conn.in_transaction
    out = _step(kind, sql, fn, params, touches=connection_footprint(conn, sql, many))
    _ran(conn, sql, was_in)
    return out


def _ended(conn, fn):
    try:
        return fn()
    finally:
        conn.toki_reserved = False


_KINDS = {"read": StepKind.SQL_READ, "txn": StepKind.SQL_TXN, "write": StepKind.SQL_WRITE}
_DATABASE = database_footprint("sql")


def _kind(sql) -> StepKind:
    return _KINDS[sql_kind(sql)]


class ControlledCursor(sqlite3.Cursor):
    def execute(self, sql, parameters=(), /):
        return _statement(self.connection, _kind, sql,
                          lambda: super(ControlledCursor, self).execute(sql, parameters), parameters)

    def executemany(self, sql, seq_of_parameters, /):
        rows = list(seq_of_parameters)
        return _statement(self.connection, StepKind.SQL_WRITE, f"{sql} ×{len(rows)}",
                          lambda: super(ControlledCursor, self).executemany(sql, rows), many=True)

    def executescript(self, script, /):
        return _ended(self.connection, lambda: _step(
            StepKind.SQL_SCRIPT, script, lambda: super(ControlledCursor, self).executescript(script),
            touches=Footprint.writing(_database(self.connection))))


class ControlledConnection(sqlite3.Connection):
    def cursor(self, factory=ControlledCursor):
        return super().cursor(factory)

    def execute(self, sql, parameters=(), /):
        return _statement(self, _kind, sql, lambda: super(ControlledConnection, self).execute(sql, parameters),
                          parameters)

    def executemany(self, sql, seq_of_parameters, /):
        rows = list(seq_of_parameters)
        return _statement(self, StepKind.SQL_WRITE, f"{sql} ×{len(rows)}",
                          lambda: super(ControlledConnection, self).executemany(sql, rows), many=True)

    def executescript(self, script, /):
        return _ended(self, lambda: _step(
            StepKind.SQL_SCRIPT, script, lambda: super(ControlledConnection, self).executescript(script),
            touches=Footprint.writing(_database(self))))

    def commit(self):
        hold = getattr(self, "hold_commits", 0)
        if hold:
            return None  # a wrapper holds one transaction open across the engine's own commits
        return _ended(self, lambda: _step(StepKind.SQL_COMMIT, "commit", super(ControlledConnection, self).commit,
                                          touches=ending_footprint(self)))

    def rollback(self):
        return _ended(self, lambda: _step(StepKind.SQL_TXN, "rollback", super(ControlledConnection, self).rollback,
                                          touches=ending_footprint(self)))

    def close(self):
        # Closing rolls back an open transaction (its locks go), and closing the last connection
        # of a WAL database checkpoints it into the main file: effects another agent's connection
        # can see, so such a close is a step like a commit. Any other close changes nothing.
        path = getattr(self, "toki_path", None)
        if self.in_transaction or (path and os.path.exists(path + "-wal")):
            return _step(StepKind.SQL_CLOSE, "close", super().close, touches=ending_footprint(self))
        return super().close()

    def __exit__(self, exc_type, exc, tb):
        # sqlite3's own __exit__ commits in C, past the commit() above: do it here, as a step
        if exc_type is None:
            self.commit()
        else:
            self.rollback()
        return False


def controlled_connect(database, *args, **kwargs):
    """``sqlite3.connect`` as installed by the hook: a controlled connection, busy timeout 0."""
    factory = kwargs.pop("factory", None)
    if factory is not None and factory is not sqlite3.Connection and not issubclass(factory, ControlledConnection):
        factory = type("Controlled" + factory.__name__, (ControlledConnection, factory), {})
    kwargs["factory"] = factory or ControlledConnection
    # Handles are opened on the caller's thread and used on the agent's; the controller lets one
    # agent run at a time, so sqlite3's same-thread check has nothing left to protect.
    kwargs["check_same_thread"] = False
    if args:  # positional timeout is the first optional argument
        args = (0,) + tuple(args[1:])
    else:
        kwargs["timeout"] = 0
    # Opening a file that does not exist creates it: a step of its own, as an open() for writing
    # is, so a file that appears is never an effect between steps. Opening one that exists reads
    # nothing yet (SQLite reads at the first statement): no step.
    name = os.fsdecode(database) if isinstance(database, (str, bytes, os.PathLike)) else str(database)
    fresh = name != ":memory:" and not name.startswith("file:") and not os.path.exists(name)
    conn = (controlled(StepKind.SQL_OPEN, f"connect {os.path.basename(name) or name}",
                       lambda: _original_connect(database, *args, **kwargs), touches=_DATABASE) if fresh
            else _original_connect(database, *args, **kwargs))
    if isinstance(conn, ControlledConnection):
        conn.toki_path = os.path.abspath(name) if name != ":memory:" else None
        # the file, however it was named (a search gives it a name stable across runs: explore)
        conn.toki_db = os.path.realpath(name) if conn.toki_path is not None and not name.startswith("file:") else None
    return conn
