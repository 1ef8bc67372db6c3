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

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


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
