"""Who takes the next step: the controller's decision as a pure function of plain state.

:func:`decide` reads a view of each agent (:class:`AgentView`: its state, what its pending call
waits for, whether SQLite answered it busy), the count of completed calls and the agent that ran
last, and asks the chooser; it answers a :class:`Decision` value and changes nothing else. The
controller (:mod:`.controller`) builds the views under its mutex and carries the decision out:
it grants, marks steps held back by a lock, lets the watcher ask the database observer, or
stops the run. So the rules are tested without threads (``tests/test_harness_decision.py``: a
table of states and the decision each gives).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import NamedTuple


class AgentState(enum.Enum):
    NEW = "new"  # its thread has not reached its first call yet
    WAITING = "waiting"  # stopped at its pending call, for a grant
    RUNNING = "running"  # holds the baton: runs Python code or its granted call
    BLOCKED_DB = "blocked-db"  # its granted statement waits on a lock in the database
    DONE = "done"


class AgentView(NamedTuple):
    """What the decision reads of one agent (a tuple: one is made per agent and decision)."""

    name: str
    state: AgentState
    starting: bool = False  # its pending step starts it (runs it up to its first storage call)
    detail: str | None = None  # its pending call, as output shows it (for a hang's message)
    busy_at: int | None = None  # completed-call count when SQLite answered it busy
    patient: bool = False  # its busy call never times out (a blocking file lock): never the victim
    confirmed_at: int = -1  # blocked in the database: the completed-call count the observer last confirmed
    waits: bool = False  # its pending call waits for something (a lock, condition, gate, sleep)
    free: bool = True  # ... which it could have now
    sleep: bool = False  # ... which is a time.sleep
    times_out: bool = False  # ... whose wait may time out now (a timed wait with its lock free)
    external: bool = False  # ... which a thread outside the agents may satisfy
    foreign: str | None = None  # the name of what it waits for, when a thread no agent owns holds it


class Action(enum.Enum):
    NONE = "none"  # nothing to decide now (an agent is still running, or a wait the database or
    # another thread will end)
    FINISH = "finish"  # every agent returned
    SETTLE = "settle"  # a database wait may have ended: the observer is asked before deciding
    GRANT = "grant"  # ``agent`` takes its step
    UNVERIFIABLE = "unverifiable"  # ``agent`` waits for ``lock``, held by a thread the harness does not control
    HUNG = "hung"  # no agent can take a step: a lock cycle among the engine's own locks
    FAIL = "fail"  # the chooser raised ``error`` (a replay that diverged)


class Decision(NamedTuple):
    """One decision (a tuple: one is made per step)."""

    action: Action
    agent: str | None = None
    forced: bool = False  # GRANT of a start, no choice: the agent that ran last stays the last
    deliver_busy: bool = False  # GRANT to the victim of a SQLite deadlock: it gets SQLITE_BUSY
    lock: str | None = None  # UNVERIFIABLE: what the agent waits for
    waits: str = ""  # HUNG: what each agent waits for
    error: BaseException | None = None  # FAIL
    held: tuple[str, ...] = ()  # agents found waiting for something another holds (their step is marked blocked)


_NONE, _FINISH, _SETTLE = Decision(Action.NONE), Decision(Action.FINISH), Decision(Action.SETTLE)


def eligible(a: AgentView, progress: int, sleeps_yield: bool) -> bool | None:
    """Can ``a`` take its step now? None: no, because what it waits for is held (it is held back)."""
    if a.state is not AgentState.WAITING:
        return False
    if a.busy_at is not None and a.busy_at >= progress:
        return False  # SQLITE_BUSY: no call has completed since (a busy re-issue is no progress)
    if a.waits and not a.free and not (a.sleep and not sleeps_yield):
        return None
    return True


def decide(agents: Sequence[AgentView], progress: int, last: str | None, chooser) -> Decision:
    """The next decision, when nobody holds the baton. ``progress`` counts completed calls,
    ``last`` is the agent that ran the previous step; ``chooser`` (a
    :class:`~toki.harness.controller.Chooser`) is asked, as the only thing consulted that keeps
    state of its own."""
    live = []
    for a in agents:
        if a.state is AgentState.NEW or a.state is AgentState.RUNNING:
            return _NONE  # not everyone has stopped yet (start-up)
        if a.state is not AgentState.DONE:
            live.append(a)
    if not live:
        return _FINISH
    if any(a.state is AgentState.BLOCKED_DB and a.confirmed_at != progress for a in live):
        # A call completed since a database wait was seen: it may have ended the wait. Whether
        # the waiting agent is eligible must not depend on how soon its thread wakes, or the
        # same grants lead to different decisions: the watcher asks the observer first.
        return _SETTLE
    sleeps_yield = chooser.sleeps_yield
    names, held_back, starting = [], [], None
    for a in live:
        ok = eligible(a, progress, sleeps_yield)
        if ok:
            names.append(a.name)
            if starting is None and a.starting:
                starting = a.name
        elif ok is None:
            held_back.append(a.name)
    held = tuple(held_back)
    try:
        if starting is not None and chooser.forces_starts:  # running an agent up to its first storage call is no choice: it touches nothing
            chooser.forced(starting)
            return Decision(Action.GRANT, starting, forced=True, held=held)
        if names:
            return Decision(Action.GRANT, chooser.choose(names, last), held=held)
        waiting = [a for a in live if a.state is AgentState.WAITING]
        sleeping = [a.name for a in waiting if a.sleep]
        if sleeping:  # nothing else can happen: time passes, and a sleep ends first
            return Decision(Action.GRANT, chooser.victim(sleeping), held=held)
        busy = [a.name for a in waiting if a.busy_at is not None and not a.patient]
        if busy:  # a SQLite deadlock: someone's busy timeout runs out
            return Decision(Action.GRANT, chooser.victim(busy), deliver_busy=True, held=held)
        if any(a.state == AgentState.BLOCKED_DB for a in live):
            return Decision(Action.NONE, held=held)  # the database will wake one of them (or break the deadlock)
        timed = [a.name for a in waiting if a.waits and a.times_out]
        if timed:  # nothing else can happen: time passes, and a timed wait runs out
            return Decision(Action.GRANT, chooser.victim(timed), held=held)
        if any(a.external for a in waiting):
            return Decision(Action.NONE, held=held)  # a thread outside the agents may set the event or free the permit
        foreign = [a for a in live if a.foreign is not None]
        if foreign:
            return Decision(Action.UNVERIFIABLE, foreign[0].name, lock=foreign[0].foreign, held=held)
        waits = "; ".join(f"{a.name} waits for {a.detail if a.detail is not None else '?'}" for a in live)
        return Decision(Action.HUNG, waits=waits, held=held)
    except BaseException as e:  # noqa: BLE001 - the chooser's error ends the run (the controller raises it)
        return Decision(Action.FAIL, error=e, held=held)
