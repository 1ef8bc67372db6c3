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
    tables = frozenset(m.lower().replace('"', "").replace("`", "") for m in _NAMED_TABLE.findall(str(sql)[:4096]))
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


_KINDS = {"read": StepKind.SQL_READ, "txn": StepKind.SQL_TXN, "write": StepKind.SQL_WRITE}
_DATABASE = database_footprint("sql")


def _kind(sql) -> StepKind:
    return _KINDS[sql_kind(sql)]


def _many(sql) -> Footprint:
    """``executemany``: a write, whatever its statement (its tables as the statement names them)."""
    return Footprint.writing(("sql",), tables=statement_footprint("sql", str(sql)).tables)


class ControlledCursor(sqlite3.Cursor):
    def execute(self, sql, parameters=(), /):
        return _step(_kind, sql, lambda: super(ControlledCursor, self).execute(sql, parameters), parameters)

    def executemany(self, sql, seq_of_parameters, /):
        rows = list(seq_of_parameters)
        return _step(StepKind.SQL_WRITE, f"{sql} ×{len(rows)}",
                     lambda: super(ControlledCursor, self).executemany(sql, rows), touches=_many(sql))

    def executescript(self, script, /):
        return _step(StepKind.SQL_SCRIPT, script, lambda: super(ControlledCursor, self).executescript(script),
                     touches=_DATABASE)


class ControlledConnection(sqlite3.Connection):
    def cursor(self, factory=ControlledCursor):
        return super().cursor(factory)

    def execute(self, sql, parameters=(), /):
        return _step(_kind, sql, lambda: super(ControlledConnection, self).execute(sql, parameters), parameters)

    def executemany(self, sql, seq_of_parameters, /):
        rows = list(seq_of_parameters)
        return _step(StepKind.SQL_WRITE, f"{sql} ×{len(rows)}",
                     lambda: super(ControlledConnection, self).executemany(sql, rows), touches=_many(sql))

    def executescript(self, script, /):
        return _step(StepKind.SQL_SCRIPT, script, lambda: super(ControlledConnection, self).executescript(script),
                     touches=_DATABASE)

    def commit(self):
        hold = getattr(self, "hold_commits", 0)
        if hold:
            return None  # a wrapper holds one transaction open across the engine's own commits
        return _step(StepKind.SQL_COMMIT, "commit", super().commit, touches=_DATABASE)

    def rollback(self):
        return _step(StepKind.SQL_TXN, "rollback", super().rollback, touches=_DATABASE)

    def close(self):
        # Closing rolls back an open transaction (its locks go), and closing the last connection
        # of a WAL database checkpoints it into the main file: effects another agent's connection
        # can see, so such a close is a step like a commit. Any other close changes nothing.
        path = getattr(self, "toki_path", None)
        if self.in_transaction or (path and os.path.exists(path + "-wal")):
            return _step(StepKind.SQL_CLOSE, "close", super().close, touches=_DATABASE)
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
    return conn
