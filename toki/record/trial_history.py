"""A harness trial as a memory history: the same run, written in the format ``toki check --workload
memory`` reads (docs: memory histories), so that the harness's detectors and the history checker
can be asked about one run.

What a trial has, and where each part of the history comes from:

- the order of the calls: :class:`~toki.harness.controller.RunTrace`'s steps. An agent's op is
  invoked at its first granted step and completes after its last one, so two calls whose steps
  interleave overlap in the history, and a serial run's calls follow one another;
- how each call ended: the :class:`~toki.harness.trial.Outcome` (``completed``: ``ok``; a clean
  abort, which no serial order distinguishes from not running: ``fail``; any other failure:
  ``info``, it may have written);
- what each call wrote and read, and what the store holds afterwards: only the engine knows how
  its state names beliefs. An engine that can be compared offers
  ``memory_history(scenario, outcome)`` returning ``{"setup": [micro-ops], "agents": {agent:
  [micro-ops]}, "final": [micro-ops], "multi_valued": [slots]}`` (or None for a scenario it cannot
  express): the seed as one ``ok`` op before every agent, each agent's micro-ops, and a read of the
  store after the last call (what ``state()`` read, as ``current``/``history`` reads). A hook that
  also takes a keyword ``returned`` is given what each agent's call returned (the run's
  ``RunTrace.results``: the agents whose call raised are absent), for an engine whose state does
  not say which call wrote what but whose calls do (mem0's ``add`` returns the memories it
  inserted).

An engine (or scenario) without the hook has no history: :func:`trial_history` returns None and
the caller says so; it never writes an empty history that would check as valid.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from toki.harness.engine import optional


def _span(trace, agent: str) -> tuple[float, float]:
    """Where the agent's op starts and ends in the grant order (its first step, after its last)."""
    seqs = [s.seq for s in trace.steps if s.agent == agent]
    ends = [s.completed if s.completed is not None else s.seq for s in trace.steps if s.agent == agent]
    if not seqs:  # it failed before its first storage call
        return -1.0, -0.5
    return float(min(seqs)), max(ends) + 0.5


def _unread(mops: list) -> list:
    """An op that did not end ok carries no read evidence: its reads are unknown (null)."""
    out = []
    for m in mops:
        m = list(m)
        if m[0] in ("current", "history"):
            m[2] = None
        elif m[0] == "decide":
            m[2:] = [None, None]
        out.append(m)
    return out


def ending(agent: str, outcome) -> str:
    """ok (it returned), fail (a clean abort: it did not happen) or info (it failed half-way: it may have)."""
    if agent in outcome.completed:
        return "ok"
    if agent in (outcome.failed or {}):
        return "info"
    return "fail" if agent in (outcome.errors or {}) else "info"


def trial_history(engine, scenario, trace, outcome) -> list[dict] | None:
    """The trial as memory-history ops (a header first when a slot is multi-valued); None when the
    engine has no ``memory_history`` for this scenario."""
    hook = optional(engine, "memory_history")
    if not callable(hook):
        return None
    try:
        takes_returned = "returned" in inspect.signature(hook).parameters
    except (TypeError, ValueError):
        takes_returned = False
    if takes_returned:
        spec = hook(scenario.name, outcome, returned=dict(getattr(trace, "results", None) or {}))
    else:
        spec = hook(scenario.name, outcome)
    if spec is None:
        return None
    ops: list[dict] = []
    if spec.get("multi_valued"):
        ops.append({"type": "header", "multi_valued": sorted(spec["multi_valued"]), "engine": engine.name,
                    "scenario": scenario.name})
    events: list[tuple[float, int, dict]] = []
    procs = {a: i + 1 for i, a in enumerate(scenario.agents)}
    for agent, mops in spec.get("agents", {}).items():
        start, end = _span(trace, agent)
        typ = ending(agent, outcome)
        value = [list(m) for m in mops]
        events.append((start, 0, {"process": procs[agent], "type": "invoke", "f": "txn", "value": _unread(value)}))
        events.append((end, 1, {"process": procs[agent], "type": typ, "f": "txn",
                                "value": value if typ == "ok" else _unread(value)}))
    events.sort(key=lambda e: (e[0], e[1]))
    body = [e[2] for e in events]
    if spec.get("setup"):
        body = [{"process": 0, "type": "invoke", "f": "txn", "value": _unread(spec["setup"])},
                {"process": 0, "type": "ok", "f": "txn", "value": [list(m) for m in spec["setup"]]}] + body
    if spec.get("final"):
        reader = len(scenario.agents) + 1
        body += [{"process": reader, "type": "invoke", "f": "txn", "value": _unread(spec["final"])},
                 {"process": reader, "type": "ok", "f": "txn", "value": [list(m) for m in spec["final"]]}]
    for i, op in enumerate(body):
        ops.append({"index": i, **op})
    return ops


def write_history(ops: list[dict], path: str | Path) -> Path:
    """JSON lines, as ``toki record`` writes them."""
    path = Path(path)
    path.write_text("".join(json.dumps(op, separators=(",", ":"), default=str) + "\n" for op in ops))
    return path


def check_trial(engine, scenario, trace, outcome, **kw) -> dict[str, Any] | None:
    """``toki check --workload memory``'s answer on the trial's history (None: no history)."""
    from toki.check.memory import check

    ops = trial_history(engine, scenario, trace, outcome)
    return None if ops is None else check(ops, **kw)
