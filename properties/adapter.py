"""The adapter protocol: a memory engine's write path, as the contract suites drive it.

An adapter tells the suites how one agent writes one claim, phase by phase, on a connection
the suites give it (its own connection, in its own transaction)::

    class MyEngine:
        operator = "lww"                      # the contract it declares (lww, evi, await, rule)

        def begin(self, conn, fact, level):   # start the transaction at `level`, return a txn
            conn.execute(f"begin isolation level {level.isolation.sql}")
            return MyTxn(conn, fact)

    class MyTxn:
        def read_candidates(self): ...        # read the slot's open current rows
        def judge(self): ...                  # decide (an LLM call, a policy, a callback)
        def write(self): ...                  # resolve and write; return a WriteOutcome
        def commit(self): self.conn.execute("commit")
        def rollback(self): self.conn.execute("rollback")

The suites speak TOKI's schema: the engine keeps its memory in ``agent_memory`` (docs/design.md#the-papers-data-model,
created in the run's schema, which is the connection's search path), reads ⊕? callbacks from
``callback_log`` and ⊕c policies from ``policy``, and returns from ``write`` a
:class:`toki.db.store.WriteOutcome` (``action``, ``winner_id``, ``loser_id``, ``at``). An engine
with its own tables maps them with an optional ``setup(conn)`` (create them) and
``rows(conn)`` (its memory as :class:`toki.db.store.Row`). Every statement must go through the
connection it was given, and transactions must be begun and ended with SQL (``begin ...``,
``commit``), not ``conn.transaction()``: the suites record the statements of a failing run and
print them as a schedule file that ``toki run`` replays.

TOKI's own write path is an adapter too (:class:`TokiWritePath`); its witnesses use the
schedule format's write-path op steps instead of recorded SQL.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import psycopg

from toki.errors import ConfigError
from toki.levels import Level
from toki.model import Fact
from toki.operators import OPERATORS


@runtime_checkable
class AdapterTxn(Protocol):
    def read_candidates(self) -> Any: ...
    def judge(self) -> Any: ...
    def write(self) -> Any: ...
    def commit(self) -> Any: ...
    def rollback(self) -> Any: ...


@runtime_checkable
class WritePathAdapter(Protocol):
    operator: str

    def begin(self, conn: psycopg.Connection, fact: Fact, level: Level) -> AdapterTxn: ...


class TokiWritePath:
    """TOKI's own write path (docs/design.md#the-write-path, :class:`toki.db.store.WriteTxn`) as an adapter.

    The suites run it through the schedule format's op steps, so its witnesses are plain
    schedule files with ``op = "begin"``, ``"read_candidates"``, ``"judge"``, ... steps.
    """

    native_ops = True

    def __init__(self, operator: str = "lww", *, mode: str = "audit_row", guard: bool = True,
                 slot_lock: bool = False):
        if operator not in OPERATORS:
            raise ConfigError(f"unknown operator {operator!r}", fix=f"use one of {', '.join(OPERATORS)}")
        self.operator, self.mode, self.guard, self.slot_lock = operator, mode, guard, slot_lock
        self.name = f"toki-{operator}" + ("" if guard else "-unguarded") + ("-slot-locked" if slot_lock else "")

    def begin(self, conn, fact: Fact, level: Level):  # used when driven through call steps
        from toki.db.store import SchemaMode, Store, WriteTxn

        store = Store(server=None, schema="", mode=SchemaMode.parse(self.mode), _conn=conn)  # type: ignore[arg-type]
        txn = WriteTxn(store, conn, fact, operator=self.operator, level=level, mode=store.mode,
                       judge=None, guard=self.guard, at=None, slot_lock=self.slot_lock)
        txn.begin()
        return _TokiTxn(txn)


class _TokiTxn:
    def __init__(self, txn):
        self.txn = txn

    def read_candidates(self):
        return self.txn.read_candidates()

    def read_callback(self):
        return self.txn.read_callback()

    def judge(self):
        return self.txn.judge_step()

    def write(self):
        return self.txn.write()

    def commit(self):
        return self.txn.commit()

    def rollback(self):
        return self.txn.rollback()


# -- factories for `toki certify --adapter module:factory` -------------------------------------

def toki_lww(**kw) -> TokiWritePath:
    return TokiWritePath("lww", **kw)


def toki_evi(**kw) -> TokiWritePath:
    return TokiWritePath("evi", **kw)


def toki_evi_slot_locked(**kw) -> TokiWritePath:
    """⊕p with the slot lock: holds at SI, where the plain write path admits the empty-slot phantom."""
    return TokiWritePath("evi", slot_lock=True, **kw)


def toki_await(**kw) -> TokiWritePath:
    return TokiWritePath("await", **kw)


def toki_rule(**kw) -> TokiWritePath:
    return TokiWritePath("rule", **kw)


def load_adapter(spec: str | Callable | object, operator: str | None = None):
    """Resolve ``module:factory`` (or a factory, or an adapter) into an adapter object.

    The factory is called with no arguments, or with ``operator=`` when one is given and the
    factory accepts it. The result must have ``operator`` and ``begin(conn, fact, level)``.
    """
    obj = spec
    if isinstance(spec, str):
        if ":" not in spec:
            raise ConfigError(f"adapter {spec!r} is not of the form module:factory",
                              fix="pass e.g. --adapter toki.properties.adapter:toki_lww")
        mod_name, _, attr = spec.partition(":")
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # like `python -m`: modules of the current directory resolve
        try:
            module = importlib.import_module(mod_name)
        except ImportError as e:
            raise ConfigError(f"cannot import adapter module {mod_name!r}: {e}",
                              fix="check the module path and that it is importable (PYTHONPATH)") from None
        obj = module
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise ConfigError(f"module {mod_name!r} has no attribute {attr!r}",
                                  fix="name a factory function or class defined in that module")
            obj = getattr(obj, part)
    if callable(obj) and not hasattr(obj, "begin"):
        kwargs = {}
        if operator is not None:
            try:
                if "operator" in inspect.signature(obj).parameters:
                    kwargs["operator"] = operator
            except (TypeError, ValueError):
                pass
        obj = obj(**kwargs)
    elif inspect.isclass(obj):
        obj = obj()
    if not hasattr(obj, "begin") or not callable(obj.begin):
        raise ConfigError(f"adapter {spec!r} has no begin(conn, fact, level) method",
                          fix="see toki.properties.adapter for the protocol")
    op = operator or getattr(obj, "operator", None)
    if op not in OPERATORS:
        raise ConfigError(f"adapter {spec!r} declares operator {op!r}",
                          fix=f"set adapter.operator to one of {', '.join(OPERATORS)} or pass --operator")
    if operator is not None and getattr(obj, "operator", operator) != operator:
        obj.operator = operator
    return obj


# -- recording the SQL an adapter sends ----------------------------------------------------------

class _RecordingCursor:
    def __init__(self, cur, parent: "RecordingConnection"):
        self._cur, self._parent = cur, parent

    def execute(self, query, params=None, **kw):
        self._parent.log.append(_render(self._parent._conn, query, params))
        self._cur.execute(query, params, **kw)
        return self

    def __getattr__(self, name):
        return getattr(self._cur, name)

    def __iter__(self):
        return iter(self._cur)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._cur.close()


class RecordingConnection:
    """A psycopg connection that writes down every statement it executes, parameters bound."""

    def __init__(self, conn: psycopg.Connection, log: list[str]):
        self._conn, self.log = conn, log

    def execute(self, query, params=None, **kw):
        self.log.append(_render(self._conn, query, params))
        return self._conn.execute(query, params, **kw)

    def cursor(self, *a, **kw):
        return _RecordingCursor(self._conn.cursor(*a, **kw), self)

    def transaction(self, *a, **kw):
        raise ConfigError("adapters must begin and end transactions with SQL under the contract suites",
                          fix='use conn.execute("begin isolation level ...") and conn.execute("commit")')

    def __getattr__(self, name):
        return getattr(self._conn, name)


def _render(conn: psycopg.Connection, query, params) -> str:
    if params is None:
        return query.as_string(conn) if hasattr(query, "as_string") else str(query)
    return psycopg.ClientCursor(conn).mogrify(query, params)


__all__ = ["AdapterTxn", "RecordingConnection", "TokiWritePath", "WritePathAdapter", "load_adapter",
           "toki_await", "toki_evi", "toki_lww", "toki_rule"]
