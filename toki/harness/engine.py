"""What an engine is to the harness: the small protocol an engine plug-in implements.

An engine object has

- ``name``, ``version`` and ``executed`` (``"real"`` for the engine's own unmodified code,
  ``"model"`` for a faithful model of an engine that has no package);
- ``scenarios``: a mapping of scenario name to :class:`Scenario`;
- ``open(location)``: a fresh handle on the engine's storage under ``location`` (a directory
  toki creates empty for each run; a database engine may ignore it and use its own DSN);
- ``close(handle)``;
- ``state(handle)``: the engine's state as it answers through its public API, as JSON values
  (lists, dicts, strings, numbers) in a canonical order, with nothing run-specific in it
  (no wall-clock times, no random ids): two runs that leave the same memory give equal states;
- optionally ``prepare(handle, controller)``: hand the engine instrumented locks in place of the
  Python locks it guards its storage with (see :mod:`toki.harness.locks`).

A :class:`Scenario` says what the agents do: ``setup(handle)`` seeds the store before the agents
start (not scheduled), and ``call(handle, agent)`` makes one agent's calls on the engine's
public API (it may return a coroutine: an asyncio engine's agent runs on its own event loop in
its own thread, and its driver's awaitable queries become steps through
``Controller.step_async``). ``detectors`` name what went wrong in a state that no serial order produces. With
``observe=True`` what each call returns (JSON values) is part of the outcome, so a read that
returns what no serial order would show is an anomaly too.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from toki.errors import TokiError


@dataclass(frozen=True)
class Detector:
    """A named check over a final state: returns one message per finding ([] when clean)."""

    anomaly: str  # e.g. "double-supersede", "lost-update", "N3", "id-collision", "duplicate-insert"
    check: Callable[..., list[str]]  # (state, outcome errors[, observed]) -> findings
    observes: bool = False  # check also gets what each agent's call returned (observe=True scenarios)
    # A property of the engine's design rather than of an interleaving (N3: a loser destroyed with
    # no trace happens in serial orders too): checked on every outcome, serial ones included, and
    # reported apart from the anomalies no serial order produces.
    always: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    agents: tuple[str, ...]
    call: Callable[[Any, str], Any]
    setup: Callable[[Any], None] | None = None
    shared: bool = False  # one handle shared by the agent threads, else one handle per agent
    detectors: tuple[Detector, ...] = ()
    anomalies: tuple[str, ...] = ()  # what this scenario is built to expose (for listings)
    observe: bool = False  # what the calls return (JSON values) is part of the outcome: reads are judged too


@runtime_checkable
class Engine(Protocol):
    name: str
    version: str
    executed: str
    scenarios: dict[str, Scenario]

    def open(self, location: Path) -> Any: ...
    def close(self, handle: Any) -> None: ...
    def state(self, handle: Any) -> Any: ...


# The optional members of the plug-in contract: what the harness (and toki's commands) read from
# an engine object beyond the Protocol's required ones, each with the default that applies when
# it is absent and what it is for (docs/engines.md tabulates them). Nothing else is read from a
# plug-in, and nothing is written onto it (tests/test_plugin_contract.py holds both to this).
OPTIONAL: dict[str, tuple[Any, str]] = {
    "executed": ("real", '"real" (the library\'s own code) or "model" (a model of code that cannot be installed)'),
    "system": (None, "what a verdict row stands for (default: the name and version)"),
    "prepare": (None, "prepare(handle, controller): hand the engine instrumented locks in place of ones toki "
                      "cannot reach"),
    "discard": (None, "discard(location): drop what a run left outside its folder (a schema, a pool's connections)"),
    "use_dsn": (None, "use_dsn(dsn): the database server a plug-in runs on"),
    "use_server": (None, "use_server(server): the resolved toki server (engines toki ships)"),
    "dsn_schemes": (None, "the DSN schemes use_dsn accepts (default postgresql and mysql)"),
    "storage_in_location": (True, "False when setup seeds storage outside the run's folder: setup runs every run"),
    "pg_observer": (None, "a PostgreSQL connection of the plug-in's own for seeing lock waits (else the harness "
                          "opens one)"),
    "clean_aborts": ((), "the library's own conflict errors, judged as clean aborts"),
    "abstains": ({}, "anomaly -> why the engine has no scenario for it (verdict tables)"),
    "record_client": (None, "record_client(store): a memory client for toki record"),
    "record_setup": (None, "record_setup(store): made once before toki record's workers start"),
    "record_cleanup": (None, "record_cleanup(store): dropped once after toki record ends"),
    "record_multi_valued": (False, "the engine keeps several claims of a slot current by design"),
    "record_fresh_claims": (False, "the engine keeps a re-added claim as a new fact by design: toki record "
                                   "adds claims no other add uses"),
    "memory_history": (None, "memory_history(scenario, outcome[, returned=...]): a trial's writes, reads and final "
                             "state as memory micro-ops (toki.record.trial_history), or None for a scenario it cannot "
                             "express; a hook that takes the keyword returned is given what each agent's call returned"),
}


def optional(engine, member: str) -> Any:
    """An optional member of a plug-in, or its declared default."""
    return getattr(engine, member, OPTIONAL[member][0])


# Where toki loaded each engine object from (``module:factory``, and whether it is one toki
# ships), kept here rather than written onto the user's object.
_ORIGINS: "weakref.WeakKeyDictionary[Any, tuple[str, bool]]" = weakref.WeakKeyDictionary()
_ORIGINS_BY_ID: dict[int, tuple[Any, tuple[str, bool]]] = {}  # objects that take no weak reference


def note_origin(engine, spec: str, shipped: bool) -> None:
    try:
        _ORIGINS[engine] = (spec, shipped)
    except TypeError:
        _ORIGINS_BY_ID[id(engine)] = (engine, (spec, shipped))


def origin(engine) -> tuple[str, bool] | None:
    """``(module:factory, shipped)`` for an engine toki loaded, else None (built by hand)."""
    try:
        found = _ORIGINS.get(engine)
    except TypeError:
        found = None
    if found is None and id(engine) in _ORIGINS_BY_ID and _ORIGINS_BY_ID[id(engine)][0] is engine:
        found = _ORIGINS_BY_ID[id(engine)][1]
    return found


_FIXES = {
    "open": "open(location) must open or create the engine's storage under location (a folder toki creates "
            "empty for each run), or the database storage the plug-in uses",
    "setup": "the scenario's setup(handle) seeds the store before the agents start, on a fresh store",
    "state": "state(handle) must read the store back through the engine's API as JSON values (lists, dicts, "
             "strings, numbers); it failed on a store that a serial run left",
    "close": "close(handle) must release what open() took",
    "prepare": "prepare(handle, controller) hands the engine instrumented locks; it is optional",
    "discard": "discard(location) drops what a run left outside the folder; it is optional",
    "use_dsn": "use_dsn(dsn) receives the database to run on (--dsn, $TOKI_DSN, else the embedded PostgreSQL); "
               "check that the DSN's server answers",
}


class PluginError(TokiError):
    """A plug-in's own method raised: not a finding about the engine, a plug-in that does not work."""

    def __init__(self, engine, method: str, exc: BaseException):
        self.method = method
        where = getattr(engine, "name", type(engine).__name__)
        super().__init__(f"plug-in {where}: {method}() raised {type(exc).__name__}: {str(exc)[:200]}",
                         fix=_FIXES.get(method, "fix the plug-in"))


class DetectorError(PluginError):
    """A scenario's detector raised on an outcome: a plug-in error naming the detector and the state."""

    def __init__(self, engine, detector, outcome, exc: BaseException):
        TokiError.__init__(
            self,
            f"plug-in {getattr(engine, 'name', type(engine).__name__)}: detector {detector.anomaly!r} raised "
            f"{type(exc).__name__}: {str(exc)[:160]} on state {_short_json(outcome.state)} "
            f"(errors {outcome.errors or '{}'})",
            fix="a detector gets every state a run can leave, including {'unreadable': ...} (the store no longer "
                "opened or read after an interleaving) and states of runs where agents failed: return [] or "
                "findings for each, never raise")
        self.method = "detector"


def _short_json(value, limit: int = 160) -> str:
    import json

    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def plugin_call(engine, method: str, fn, *args):
    """Call one of the plug-in's methods; its exception becomes a :class:`PluginError`."""
    try:
        return fn(*args)
    except TokiError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the plug-in raised, named in one line
        raise PluginError(engine, method, e) from e


def connect_database(engine, dsn: str | None) -> None:
    """Give a plug-in the database it runs on, before any trial: ``use_dsn(dsn)`` receives the
    DSN of ``--dsn``, else ``$TOKI_DSN``, else toki's embedded PostgreSQL (so a database plug-in
    needs no configuration). Engines toki ships take a resolved server through ``use_server``.
    An engine with neither keeps its storage in the run's folder and takes no DSN."""
    from toki.backends.dsn import scheme_of
    from toki.db.server import resolve
    from toki.errors import ConfigError

    use_dsn, use_server = getattr(engine, "use_dsn", None), getattr(engine, "use_server", None)
    if dsn and not callable(use_dsn) and not callable(use_server):
        raise ConfigError(f"engine {engine.name} keeps its memory in its own storage, not at a --dsn",
                          fix="drop --dsn for this engine, or give the plug-in a use_dsn(dsn) method")
    schemes = getattr(engine, "dsn_schemes", ("postgresql",) if callable(use_server) else ("postgresql", "mysql"))
    if dsn and scheme_of(dsn) not in schemes:
        raise ConfigError(f"engine {engine.name} runs on {', '.join(schemes)}, not on {scheme_of(dsn)}",
                          fix=f"pass a {schemes[0]}:// DSN, or none for the embedded PostgreSQL")
    if callable(use_dsn):
        url = dsn or os.environ.get("TOKI_DSN") or resolve(None).dsn
        try:
            use_dsn(url)
        except Exception as e:  # noqa: BLE001 - the plug-in's own error, in one line
            raise PluginError(engine, "use_dsn", e) from e
    elif callable(use_server):
        use_server(resolve(dsn))
