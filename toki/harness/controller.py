"""Controlled concurrency: agents are threads, every storage call they make is a granted step.

Exactly one agent runs Python code at a time. An agent runs until it reaches its next storage
call (an intercepted sqlite3/psycopg/file call, or the acquisition of an instrumented lock),
announces it, and waits. When every live agent is waiting, the controller asks its chooser which
one goes next and grants that agent's step; the agent performs the call and runs on to its next
one. So the order of storage calls is exactly the sequence of grants, and the same grants give
the same run.

Blocking is detected without sleeping:
- an instrumented lock held by another agent makes the waiting agent ineligible until the
  holder releases it;
- SQLite answers SQLITE_BUSY at once (busy timeout 0): the agent is blocked, and its call is
  re-issued once another agent has made progress; if every agent is blocked, the one the chooser
  names gets the SQLITE_BUSY error, as it would when a real busy timeout ran out;
- a PostgreSQL statement that has not returned is checked with the observer
  (``pg_isolation_test_session_is_blocked``); a blocked agent is skipped until its statement
  returns, and then waits for a grant before running on.
- a MariaDB/MySQL statement likewise, through ``SHOW ENGINE INNODB STATUS``; the observer for
  either is opened from the first session's own connection parameters (:mod:`.observers`);
- an agent that sleeps outside any storage call (on a lock or a queue the harness does not
  control) is recognised from the operating system's view of its thread, and the run is
  :class:`Unverifiable`: nothing it did after that point was scheduled.
Every wait is bounded by ``step_limit_s``: a hung engine is an :class:`EngineHung` error naming
the agent and the call.

Fail closed: a storage call made during a run on a thread that is neither an agent nor working
for one (see :mod:`.threads`) stops the run as :class:`Unverifiable`, naming the thread and the
call, instead of running unscheduled.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import inspect
import itertools
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toki.errors import TokiError
from toki.harness import connect_watch
from toki.harness.decision import Action, AgentState, AgentView, decide
from toki.harness.observers import OPENERS, DbSession, PgObserver
from toki.harness.steps import ANYTHING, NOTHING, Footprint, StepKind, step_kind

STEP_LIMIT_S = 10.0
_PG_POLL_S = 0.002  # how long a granted database statement may run before the observer is asked
_IDLE_PROBE_S = 0.02  # how often an agent running outside a storage call is looked at
# How long an agent may sleep outside any storage call, using no CPU, before the run is judged
# to wait on something the harness does not control. Long enough for a connection pool to open a
# connection; far below the step limit.
_IDLE_LIMIT_S = 0.25


class EngineHung(TokiError):
    """An agent neither finished nor reached its next storage call within the step limit."""


class ReplayDiverged(TokiError):
    """A recorded grant sequence names an agent that cannot take a step at that point."""


class Unverifiable(TokiError):
    """The run did something the harness did not control (a storage call on a thread it does not
    own, a wait it cannot see, storage that changed between steps, serial outcomes that vary).

    A verdict built on such a run could say "excludes" about calls that were never scheduled, so
    the scenario is reported unverifiable with this evidence instead (fail closed)."""


def context_switches(run) -> int:
    """Switches between agents over a run's storage calls (a RunTrace, or a list of steps).

    Starting an agent is not a switch: it runs code that touches no storage."""
    steps = run.steps if hasattr(run, "steps") else run
    agents = [s.agent for s in sorted(steps, key=lambda s: s.seq) if s.kind != StepKind.START]
    return sum(1 for a, b in zip(agents, agents[1:]) if a != b)


# Steps a library takes to clean up (return a connection to its pool, close it).
_CLEANUP = frozenset({StepKind.PG_ROLLBACK, StepKind.SQL_TXN, StepKind.SQL_CLOSE, StepKind.MY_ROLLBACK})


@dataclass
class StepRecord:
    seq: int  # position in the grant sequence
    agent: str
    kind: StepKind | str  # a StepKind; a plug-in's own step may carry a kind of its own (a plain string)
    detail: str  # for people: the call as output shows it (never parsed: what it touches is ``touches``)
    status: str = "ok"  # ok | error | busy (SQLite answered SQLITE_BUSY; re-issued later)
    blocked: bool = False  # waited on a lock or another session before it completed
    completed: int | None = None  # grant seq after which it completed (its own when it never blocked)
    error: str | None = None
    waited_from: int | None = None  # grant count when it started waiting for a lock another agent held
    # What the call touches, given where it was made (:mod:`.steps`); None: not known (a step read
    # back from a witness file, a plug-in's own step made without one), which touches anything.
    touches: Footprint | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("seq", "agent", "kind", "detail", "status", "blocked",
                                              "completed", "error", "waited_from")}

    @classmethod
    def from_json(cls, d: dict) -> "StepRecord":
        rec = cls(**{k: d.get(k) for k in ("seq", "agent", "kind", "detail", "status", "blocked", "completed",
                                           "error", "waited_from")})
        rec.kind = step_kind(rec.kind) if isinstance(rec.kind, str) else rec.kind
        return rec


@dataclass
class RunTrace:
    grants: list[str]
    steps: list[StepRecord]
    results: dict[str, Any]
    errors: dict[str, BaseException]
    elapsed_s: float = 0.0

    def outcome_errors(self) -> dict[str, str]:
        return {a: type(e).__name__ for a, e in sorted(self.errors.items())}


# -- choosers ---------------------------------------------------------------------------------

class Chooser:
    """Which eligible agent takes the next step. ``last`` ran the previous step.

    ``forces_starts``: starting an agent (running it up to its first storage call) is granted
    at once, as no choice. Serial and replayed runs choose starts like any other step, so a
    serial run never starts B while A is inside a call, and a replay follows the recording
    exactly."""

    forces_starts = True
    # A sleeping agent waits for another's progress (a real sleep lets the others run). A serial
    # execution has no other agent to run: there the sleep only passes time.
    sleeps_yield = True

    def choose(self, eligible: Sequence[str], last: str | None) -> str:
        raise NotImplementedError

    def victim(self, blocked: Sequence[str]) -> str:
        """Every agent is blocked on SQLITE_BUSY: who gets the error."""
        return blocked[-1]

    def forced(self, agent: str) -> None:
        """A grant that was no choice (an agent starting up) was made."""


class SerialChooser(Chooser):
    """Runs agents one after another, in ``order``: a serial execution (B starts only once A has
    returned)."""

    forces_starts = False
    sleeps_yield = False

    def __init__(self, order: Sequence[str]):
        self.order = list(order)

    def choose(self, eligible, last):
        if last in eligible:
            return last
        for a in self.order:
            if a in eligible:
                return a
        return eligible[0]


class TapeChooser(Chooser):
    """Decisions from a tape of small integers (what Hypothesis draws and shrinks).

    Without ``rate``, entry k picks among the eligible agents, the one that ran last first (so
    0 means "no context switch"). With ``rate`` r, entries are 0..15 and an entry of at least
    16 - 16/2**r switches to another agent: the run switches with probability 1/2**r at each
    decision, so races that need one agent to run far before another interrupts it are likely
    at high r. Either way entries shrink toward 0, which means "go on": a found anomaly shrinks
    toward the fewest context switches.
    """

    SPAN = 16

    def __init__(self, tape: Sequence[int], rate: int | None = None):
        self.tape, self.pos, self.rate = list(tape), 0, rate
        self.threshold = None if rate is None else self.SPAN - self.SPAN // (2 ** rate)

    def _next(self, n: int) -> int:
        v = self.tape[self.pos] if self.pos < len(self.tape) else 0
        self.pos += 1
        return v % n

    def choose(self, eligible, last):
        if len(eligible) == 1:
            return eligible[0]
        if self.threshold is None:
            cands = ([last] if last in eligible else []) + [a for a in eligible if a != last]
            return cands[self._next(len(cands))]
        v = self._next(self.SPAN)
        others = [a for a in eligible if a != last]
        if last in eligible:
            return last if v < self.threshold else others[(v - self.threshold) % len(others)]
        return others[v % len(others)]

    def victim(self, blocked):
        return blocked[self._next(len(blocked))] if len(blocked) > 1 else blocked[0]


class ReplayChooser(Chooser):
    """Follows a recorded grant sequence exactly."""

    forces_starts = False

    def __init__(self, grants: Sequence[str]):
        self.grants, self.pos = list(grants), 0

    def victim(self, blocked):
        return self.choose(blocked, None)

    def choose(self, eligible, last):
        if self.pos >= len(self.grants):
            raise ReplayDiverged(f"the recorded grant sequence ends after {self.pos} grants but agents "
                                 f"{', '.join(eligible)} still have steps",
                                 fix="the engine or its version changed since the witness was recorded")
        a = self.grants[self.pos]
        self.pos += 1
        if a not in eligible:
            raise ReplayDiverged(f"grant {self.pos - 1} names agent {a!r}, but only {', '.join(eligible)} can step",
                                 fix="the engine or its version changed since the witness was recorded")
        return a


# -- the controller ---------------------------------------------------------------------------

class Sleep:
    """What an agent's ``time.sleep`` waits for: another agent's progress (a poll loop or a
    back-off lets the others run, as a real sleep does), or, when no agent can move otherwise,
    nothing (time passes). A sleep is no storage call: it is not counted as progress."""

    external = False
    timed = True

    def __init__(self, ctl: "Controller", seconds: float):
        self.ctl, self.since, self.name = ctl, ctl._progress, f"sleep({seconds:g})"

    def available_to(self, who: str) -> bool:
        return self.ctl._progress > self.since

    def times_out(self, who: str) -> bool:
        return True


class _Abandoned(BaseException):
    """Raised in an agent thread when the run failed elsewhere: unwind without touching storage."""


class RunAbandoned(Exception):
    """The same, raised in a library's worker thread that was doing an agent's request: an
    ordinary exception, which the library's worker loop reports to its caller and survives."""


def _abandon(agent) -> BaseException:
    if threading.current_thread() is agent.thread:
        return _Abandoned()
    return RunAbandoned(f"the harness stopped the run while this thread worked for agent {agent.name}")


class _Agent:
    def __init__(self, name: str, fn: Callable[[], Any], mutex: threading.Lock):
        self.name, self.fn = name, fn
        self.cv = threading.Condition(mutex)
        self.thread: threading.Thread | None = None
        self.state = AgentState.NEW
        self.pending: StepRecord | None = None
        self.want_lock: Any = None  # the instrumented lock its pending step acquires
        self.busy_at: int | None = None  # grant count when SQLite said busy (re-eligible after progress)
        self.patient = False  # its busy call never times out (a blocking file lock): never the victim
        self.granted = False
        self.in_step = False
        self.deliver_busy = False
        self.db: DbSession | None = None  # the database session its granted statement runs on
        self.confirmed_at = -1  # blocked-db: the completed-call count at which the observer last said it waits
        self.handoff_wait = False  # its thread waits while a worker thread does its work (threads.py)
        self.idle_cv = threading.Condition(mutex)  # where that wait ends
        self._task_lock: tuple[Any, asyncio.Lock] | None = None  # (loop, lock) of its asyncio tasks' steps
        self.result: Any = None
        self.error: BaseException | None = None

    def task_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._task_lock is None or self._task_lock[0] is not loop:
            self._task_lock = (loop, asyncio.Lock())
        return self._task_lock[1]


_local = threading.local()
_run_ids = (i & 0x7FFFFFFF or 1 for i in itertools.count(1))  # a run's id as the connect watch stores it
_running: "Controller | None" = None  # the run in progress in this process, if any
# Set while a granted call runs, in that thread (or asyncio task): a driver call it makes inside
# is part of the same step. Per thread and task, not per agent: a library worker doing the
# agent's request, or a second task of the agent's, is not inside the agent's call.
_in_call: contextvars.ContextVar[bool] = contextvars.ContextVar("toki_in_call", default=False)


def _gc_phase(phase: str, info: dict) -> None:
    # The cyclic collector runs finalizers (a plug-in's weakref.finalize dropping its tables) on
    # whatever thread allocates, possibly inside the controller with its mutex held: their storage
    # calls are cleanup, run plainly, never steps.
    _local.in_gc = phase == "start"


gc.callbacks.append(_gc_phase)


@contextlib.contextmanager
def uncontrolled():
    """Storage calls made in this block are not steps, even on an agent's thread: for cleanup
    that the garbage collector may run at any moment on whatever thread is running (a finalizer
    that drops a finished trial's schema must not wait for a grant in another trial's run)."""
    saved = getattr(_local, "harness", False)
    _local.harness = True
    try:
        with acting_for(None):
            yield
    finally:
        _local.harness = saved


def running() -> "Controller | None":
    return _running


def controlled(kind: StepKind | str, detail: str, fn: Callable[[], Any], *, busy=None, db: DbSession | None = None,
               lock=None, touches: Footprint | None = None) -> Any:
    """Perform a storage call: a granted step on an agent's thread (or a worker working for one),
    refused on any other thread while a run is in progress, plain outside runs. ``touches`` is
    what the call touches (None: not known, so anything)."""
    if getattr(_local, "in_gc", False):
        return fn()
    me = current_agent()
    if me is not None:
        return me[0].step(kind, detail, fn, busy=busy, db=db, lock=lock, touches=touches)
    ctl = _running
    if ctl is not None and not getattr(_local, "harness", False) and not _pool_thread():
        ctl.refuse(kind, detail)
    return fn()


_POOL_PACKAGES = ("psycopg_pool",)  # their workers open and configure connections no agent holds yet


def _plainly(fn: Callable[[], Any]) -> Any:
    """Run a call outside any schedule, the driver calls inside it with it (one call, one step)."""
    token, was = _in_call.set(True), connect_watch.inside(True)
    try:
        return fn()
    finally:
        _in_call.reset(token)
        connect_watch.inside(was)


def _pool_thread() -> bool:
    target = getattr(threading.current_thread(), "_target", None)
    return (getattr(target, "__module__", None) or "").partition(".")[0] in _POOL_PACKAGES


async def controlled_async(kind: StepKind | str, detail: str, fn: Callable[[], Any], *, busy=None,
                           db: DbSession | None = None, touches: Footprint | None = None) -> Any:
    if getattr(_local, "in_gc", False):
        return await fn()
    me = current_agent()
    if me is not None:
        return await me[0].step_async(kind, detail, fn, busy=busy, db=db, touches=touches)
    ctl = _running
    if ctl is not None and not getattr(_local, "harness", False) and not _pool_thread():
        ctl.refuse(kind, detail)
    return await fn()


def thread_idle(native_id: int | None) -> tuple[bool, int] | None:
    """(sleeping, CPU ticks used) of one of this process's threads, as Linux reports it."""
    if native_id is None:
        return None
    try:
        with open(f"/proc/self/task/{native_id}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields[0] in (b"S", b"D"), int(fields[11]) + int(fields[12])


_UNKNOWN_PLACE = "an unknown place"


def _where_waiting(thread: threading.Thread | None) -> str:
    frame = sys._current_frames().get(thread.ident) if thread is not None else None
    stdlib = threading.__file__.rsplit("/", 1)[0]
    harness = __file__.rsplit("/", 1)[0]
    while frame is not None and (frame.f_code.co_filename.startswith(("<", harness)) or (
            frame.f_code.co_filename.startswith(stdlib) and "-packages" not in frame.f_code.co_filename)):
        frame = frame.f_back  # the stdlib's own wait loop says nothing: name the caller
    if frame is None:
        return _UNKNOWN_PLACE
    return f"{frame.f_code.co_filename}:{frame.f_lineno} (in {frame.f_code.co_name})"


async def _await(awaitable):
    return await awaitable


# -- the thread -> agent binding ----------------------------------------------------------------
# Which agent the calling thread's storage calls are steps of. Read only through current_agent(),
# written only through act_for() (and acting_for(), a block of it): by the agent's own thread
# (Controller._agent_main), by a library's worker while it does an agent's request (threads.py),
# and unbound by uncontrolled().

def current_agent() -> tuple["Controller", _Agent] | None:
    """The controller and agent of the calling thread (None outside a controlled run)."""
    return getattr(_local, "agent", None)


def act_for(ctl: "Controller | None", agent: _Agent | None = None) -> None:
    """Bind the calling thread to ``agent`` of ``ctl`` (its calls are the agent's steps: the
    agent's own thread, or a library's worker doing that agent's request), or unbind it
    (``act_for(None)``). The one place the binding is written."""
    _local.agent = None if ctl is None else (ctl, agent)
    connect_watch.working_for(0 if ctl is None else ctl.run_id)


@contextlib.contextmanager
def acting_for(ctl: "Controller | None", agent: _Agent | None = None):
    """:func:`act_for` for the length of a block; the binding found before comes back after it."""
    saved = current_agent()
    act_for(ctl, agent)
    try:
        yield
    finally:
        if saved is None:
            act_for(None)
        else:
            act_for(*saved)


def acting_outside_call() -> tuple["Controller", _Agent] | None:
    """The (controller, agent) of the calling thread when it runs an agent's code between two
    granted calls of a run in progress (not inside a call, not a finalizer, not the harness's own
    thread); None otherwise. What an effect seen there (a socket send, a file written elsewhere)
    is judged by."""
    if getattr(_local, "in_gc", False) or getattr(_local, "harness", False):
        return None
    me = current_agent()
    if me is None or _running is not me[0] or me[0].finished or _in_call.get():
        return None
    return me


class Controller:
    """Grants agents' storage calls one at a time (see the module docstring).

    The decision of who goes next is taken by whichever thread makes the last live agent stop
    (usually the agent that just reached its next call, under the shared mutex), so continuing
    the same agent costs no thread switch. The caller's thread only starts the run, watches for
    PostgreSQL waits and hung agents, and collects the result.
    """

    def __init__(self, chooser: Chooser, *, step_limit_s: float = STEP_LIMIT_S, pg_observer=None,
                 observers: dict | None = None, fingerprint: Callable[[], Any] | None = None):
        self.chooser, self.step_limit_s = chooser, step_limit_s
        # database kind -> observer; shared with the caller so that later runs reuse what this one opens
        self.observers = observers if observers is not None else {}
        if pg_observer is not None:
            self.observers.setdefault("postgresql", PgObserver(pg_observer, owned=False))
        # Self-check: the storage as seen from outside (files and their sizes and times) must not
        # change between one step's end and the next grant, when no agent holds a granted call.
        self._fingerprint, self._fp = fingerprint, None
        self._mutex = threading.Lock()
        self._cv = threading.Condition(self._mutex)  # the caller's thread waits here; agents on their own
        self._agents: dict[str, _Agent] = {}
        self.grants: list[str] = []
        self.busy_grants: set[int] = set()  # grants whose call was answered busy: it changed nothing
        self.steps: list[StepRecord] = []
        self._last: str | None = None
        self._holder: _Agent | None = None  # the one agent allowed to run Python code
        self._failure: BaseException | None = None
        self._finished = False
        self._settling = False  # a database wait may have ended: the watcher asks before the next decision
        self._progress = 0  # storage calls that completed (ok or failed); SQLITE_BUSY answers do not count
        self.db_sessions: dict[str, set[int]] = {}  # kind -> sessions of every connection the agents used
        # Connects made below Python by this run's threads outside granted calls (connect_watch).
        self.run_id = next(_run_ids)
        self._connects_seen = 0
        self._connects_open: list[connect_watch.Connect] = []  # noted, not yet judged
        bind = getattr(chooser, "bind", None)
        if callable(bind):  # a chooser that looks at what each agent is about to do (exploration)
            bind(self)

    @property
    def finished(self) -> bool:
        """Every agent has returned (a call made now, by a finalizer, is nobody's step)."""
        return self._finished

    def pending_step(self, agent: str) -> StepRecord | None:
        """The call ``agent`` waits to make (None once it finished)."""
        a = self._agents.get(agent)
        return a.pending if a is not None and a.state != AgentState.DONE else None

    def pending_lock(self, agent: str) -> Any:
        """The lock, condition, gate or event ``agent``'s pending call waits for, if any (the
        object itself: engines give several locks one name)."""
        a = self._agents.get(agent)
        return a.want_lock if a is not None and a.state != AgentState.DONE else None

    # -- called from agent threads (through the hooks) ----------------------------------------
    def step(self, kind: StepKind | str, detail: str, fn: Callable[[], Any], *, lock=None,
             busy: Callable[[BaseException], bool] | None = None, db: DbSession | None = None,
             patient: bool = False, touches: Footprint | None = None) -> Any:
        """Wait for the grant, perform ``fn`` (the real call), and record it. ``busy`` says which
        of its errors mean "try again once another agent has moved"; a ``patient`` call (a
        blocking file lock tried without blocking) is re-issued until it succeeds, never given the
        error, as the blocking call it stands for would wait. ``touches`` is what the call touches
        (:class:`~toki.harness.steps.Footprint`; None, not known: anything)."""
        me = current_agent()
        if me is None or me[0] is not self or _in_call.get() or self._finished or getattr(_local, "in_gc", False):
            # not an agent, a driver call made inside a step (one storage call, one step), a call
            # after the run ended (a thread's last cleanup) or a finalizer: nobody would grant it
            return fn()
        _, agent = me
        if self._failure is not None and kind in _CLEANUP:
            # The run is over (it failed elsewhere): a library's cleanup on the way out (a pool's
            # reset on return) runs plainly, not against an unwinding exception it would log.
            return _plainly(fn)
        try:
            rec = self._await_grant(agent, kind, detail, db, lock, touches)
        except (_Abandoned, RunAbandoned):
            if kind in _CLEANUP:
                return _plainly(fn)  # the run failed while this cleanup waited for its grant: likewise
            raise
        while True:
            self._calling(agent, db)
            token, was = _in_call.set(True), connect_watch.inside(True)
            try:
                result = fn()
            except BaseException as e:
                if self._retry(agent, rec, e, busy, patient):
                    continue
                raise
            finally:
                _in_call.reset(token)
                connect_watch.inside(was)
            self._returned(agent, rec)
            return result

    async def step_async(self, kind: StepKind | str, detail: str, fn: Callable[[], Any], *,
                         busy: Callable[[BaseException], bool] | None = None, db: DbSession | None = None,
                         touches: Footprint | None = None) -> Any:
        """:meth:`step` for an awaitable call (an asyncio driver's query): ``fn()`` returns it.

        An agent whose call is a coroutine runs it on an event loop of its own, in its own thread,
        so waiting for the grant blocks only that agent's loop.
        """
        me = current_agent()
        if me is None or me[0] is not self or _in_call.get() or self._finished or getattr(_local, "in_gc", False):
            return await fn()
        _, agent = me
        # Tasks of one agent (asyncio.gather) take their steps one at a time, in the order they ask.
        async with agent.task_lock():
            rec = self._await_grant(agent, kind, detail, db, None, touches)
            while True:
                self._calling(agent, db)
                token, was = _in_call.set(True), connect_watch.inside(True)
                try:
                    result = await fn()
                except BaseException as e:
                    if self._retry(agent, rec, e, busy):
                        continue
                    raise
                finally:
                    _in_call.reset(token)
                    connect_watch.inside(was)
                self._returned(agent, rec)
                return result

    # -- the parts of a step that step and step_async share ------------------------------------
    def _await_grant(self, agent: _Agent, kind: StepKind | str, detail: str, db: DbSession | None, lock,
                     touches: Footprint | None) -> StepRecord:
        rec = StepRecord(-1, agent.name, step_kind(kind), detail, touches=touches)
        with self._mutex:
            self._connects_checked(here=True)
            self._saw(db)
            agent.pending, agent.want_lock = rec, lock
            self._stop_and_wait(agent)
        return rec

    def _calling(self, agent: _Agent, db: DbSession | None) -> None:
        agent.db = db
        agent.in_step = True
        if db is not None:
            with self._mutex:  # wake the watcher: this statement may wait on a lock
                self._cv.notify()

    def _retry(self, agent: _Agent, rec: StepRecord, e: BaseException, busy, patient: bool = False) -> bool:
        """The call raised: True when it was answered busy and is to be re-issued; else the
        failure is recorded (or delivered, as a busy timeout would) and the caller re-raises."""
        agent.in_step = False
        if busy is not None and busy(e):
            return not self._busy(agent, rec, e, patient)
        rec.status, rec.error = "error", f"{type(e).__name__}: {e}"
        self._completed(agent, rec)
        return False

    def _returned(self, agent: _Agent, rec: StepRecord) -> None:
        agent.in_step = False
        rec.status = "ok"
        self._completed(agent, rec)

    def poke(self) -> None:
        """A thread outside the agents set an event, freed a permit or notified: decide again if
        every agent was waiting."""
        with self._mutex:
            if self._holder is None and not self._finished:
                self._decide()

    def agent_idents(self) -> set[int]:
        return {a.thread.ident for a in self._agents.values() if a.thread is not None}

    def _saw(self, db: DbSession | None) -> None:
        if db is not None:
            self.db_sessions.setdefault(db.kind, set()).add(db.id)

    def stop_with(self, err: BaseException) -> None:
        """Stop the run with ``err`` (an effect outside any granted call was seen in some thread);
        the caller raises it in its own thread so that the effect does not happen."""
        with self._mutex:
            self._fail(err)

    def refuse(self, kind: str, detail: str) -> None:
        """A storage call on a thread that is neither an agent nor working for one: the run can no
        longer be judged. Stops it and raises in the calling thread, so the call does not run."""
        t = threading.current_thread()
        err = Unverifiable(
            f"a storage call ({kind}: {detail}) ran on thread {t.name!r}, which is no agent's and was "
            "not working for one, so the harness could not schedule it; a verdict would rest on calls "
            "nobody controlled",
            fix="create the library's handle (and so its worker and the queue it feeds) in the plug-in's "
                "open(): a worker fed through a queue.Queue/SimpleQueue made during the trial does each "
                "agent's request as that agent's steps; a thread that writes on its own schedule cannot "
                "be certified")
        with self._mutex:
            self._fail(err)
        raise err

    # -- work handed to a thread the engine started (threads.py) ------------------------------
    def await_handoff(self, agent: _Agent, gate) -> None:
        """``agent`` handed its work to a worker thread; wait until the worker is idle again. The
        worker's storage calls meanwhile are this agent's steps."""
        with self._mutex:
            agent.handoff_wait = True
            try:
                while gate.owner is agent and self._failure is None:
                    # a worker told to stop ends without asking for more work
                    if gate.worker is not None and not gate.worker.is_alive():
                        gate.owner = None
                        break
                    agent.idle_cv.wait(0.05)
            finally:
                agent.handoff_wait = False
            if self._failure is not None and gate.owner is agent:
                raise _abandon(agent)

    def handoff_done(self, agent: _Agent, gate) -> None:
        with self._mutex:
            if gate.owner is agent:
                gate.owner = None
            agent.idle_cv.notify_all()

    def _busy(self, agent: _Agent, rec: StepRecord, e: BaseException, patient: bool = False) -> bool:
        """The call was answered busy: wait until another agent has progressed. True when every
        agent is blocked and this one is the victim (it gets the error, as a busy timeout would
        give it); False when the call should be re-issued."""
        rec.status, rec.blocked = "busy", True
        with self._mutex:
            self.busy_grants.add(len(self.grants) - 1)  # this agent's grant is the last: it holds the baton
            if rec.waited_from is None:
                rec.waited_from = rec.seq
            agent.busy_at, agent.deliver_busy, agent.patient = self._progress, False, patient
            self._stop_and_wait(agent)
            agent.busy_at, agent.patient = None, False
            if agent.deliver_busy:
                rec.status = "error"
                rec.error = f"{type(e).__name__}: busy, and every agent blocked (the busy timeout ran out)"
                rec.completed = len(self.grants) - 1
            return agent.deliver_busy

    def _stop_and_wait(self, agent: _Agent) -> None:
        """Mutex held. ``agent`` stops at its pending step; decide who runs; wait for our grant."""
        agent.state, agent.granted = AgentState.WAITING, False
        if self._holder is agent:
            self._holder = None
        if self._holder is None:
            self._decide()
        while not agent.granted and self._failure is None:
            agent.cv.wait()
        if self._failure is not None and not agent.granted:
            raise _abandon(agent)

    def _completed(self, agent: _Agent, rec: StepRecord) -> None:
        with self._mutex:
            if rec.kind != StepKind.SLEEP:  # a sleep changes nothing: two pollers must not wake each other
                self._progress += 1
            rec.completed = len(self.grants) - 1
            agent.db = None
            if self._fingerprint is not None:
                try:
                    self._fp = self._fingerprint()
                except Unverifiable as e:  # an uncountable path in use: the run cannot be judged
                    self._fail(e)
                    raise _abandon(agent) from e
            if agent.state == AgentState.BLOCKED_DB:  # a PostgreSQL wait ended: run on only when granted
                rec.blocked = True
                # its thread runs on: what it does until its next call, no footprint shows
                agent.pending = StepRecord(-1, agent.name, StepKind.RESUME, rec.detail, touches=ANYTHING)
                agent.want_lock = None
                self._stop_and_wait(agent)

    # -- decisions (mutex held, nobody holding the baton) --------------------------------------
    def _view(self, a: _Agent) -> AgentView:
        """What the decision reads of ``a`` (:mod:`.decision`)."""
        w, pending = a.want_lock, a.pending
        return AgentView(
            a.name, a.state, starting=pending is not None and pending.kind == StepKind.START,
            detail=pending.detail if pending is not None else None, busy_at=a.busy_at, patient=a.patient,
            confirmed_at=a.confirmed_at, waits=w is not None, free=w is None or w.available_to(a.name),
            sleep=isinstance(w, Sleep), times_out=w is not None and getattr(w, "timed", False) and w.times_out(a.name),
            external=getattr(w, "external", False),
            foreign=w.name if w is not None and str(getattr(w, "owner", "")).startswith("thread:") else None)

    def _decide(self) -> None:
        """Decide (:func:`~toki.harness.decision.decide`, a pure function of the agents' views) and
        carry the decision out."""
        if self._failure is not None or self._holder is not None:
            return
        d = decide([self._view(a) for a in self._agents.values()], self._progress, self._last, self.chooser)
        for name in d.held:  # waits for a lock another agent holds: its step is marked blocked, once
            pending = self._agents[name].pending
            if pending is not None and pending.waited_from is None:
                pending.waited_from, pending.blocked = len(self.grants), True
        if d.action == Action.FINISH:
            self._finished = True
            self._cv.notify()
        elif d.action == Action.SETTLE:
            self._settling = True
            self._cv.notify()
        elif d.action == Action.GRANT:
            a = self._agents[d.agent]
            try:
                if d.deliver_busy:
                    a.deliver_busy = True
                last = self._last
                self._grant(a)
                if d.forced:  # a start is no choice: it does not change who ran last
                    self._last = last
            except BaseException as e:
                self._fail(e)
        elif d.action == Action.UNVERIFIABLE:
            self._fail(Unverifiable(f"agent {d.agent} waits for {d.lock}, held by a thread the harness does not "
                                    "control", fix="create the lock's users during the trial, on agents"))
        elif d.action == Action.HUNG:
            self._fail(EngineHung(f"no agent can take a step (a lock cycle among the engine's own locks): {d.waits}",
                                  fix="the engine deadlocks itself on this schedule; report it as a finding"))
        elif d.action == Action.FAIL:
            self._fail(d.error)

    def _grant(self, a: _Agent) -> None:
        if self._fingerprint is not None and self._fp is not None:
            now = self._fingerprint()
            if now != self._fp:
                # the run's own files first (the likeliest cause), then what lies outside it
                changed = sorted((k for k in set(now) | set(self._fp) if now.get(k) != self._fp.get(k)),
                                 key=lambda k: (k.startswith("/"), k))
                prev = self.steps[-1] if self.steps else None
                ran = prev.agent if prev is not None else None
                where = ""
                if ran is not None and ran in self._agents and self._agents[ran].thread is not None:
                    t = self._agents[ran].thread
                    where = (f"; agent {ran} ran in between and is now at {_where_waiting(t)}" if t.is_alive()
                             else f"; agent {ran} ran in between and returned")
                after = ("before any step" if prev is None else f"after {prev.agent} started" if prev.kind == StepKind.START
                         else f"after step {prev.seq} ({prev.agent}: {prev.detail})")
                raise Unverifiable(
                    f"storage changed while no agent held a granted call: {'; '.join(changed[:4])} changed "
                    f"{after} and before the next grant{where}; something reached it through a path the "
                    "harness does not intercept (a C-extension driver, os.write, mmap, a native store's own "
                    "writer, a thread or process of its own)",
                    fix="write through open()/sqlite3/psycopg 3/PyMySQL on the agent's thread, with files under "
                        "the run's folder (see 'What the harness sees' in the engines docs)")
        rec = a.pending
        if rec.seq < 0:  # a re-issue after SQLITE_BUSY keeps the step's first position
            rec.seq = len(self.grants)
            if rec.kind != StepKind.RESUME:
                self.steps.append(rec)
        self.grants.append(a.name)
        self._last = a.name
        self._holder = a
        a.granted, a.state = True, AgentState.RUNNING
        a.cv.notify()

    def _connects_checked(self, here: bool = False, final: bool = False) -> Unverifiable | None:
        """(Under the mutex.) A connect this run's threads made below Python outside any granted
        call, noted by the kernel, fails the run; ``here``: the calling thread is on its way to its
        next call or its end (so the error is raised in it too when it is an agent's).

        A connect is judged only where its own thread stands outside it (``here``, on that thread)
        or at the run's end (``final``): the kernel notes it before the call returns, and an
        intercepted driver's handle (psycopg 3's ``PGconn``, by which a connect bound before the
        hooks is recognised) exists only once it has; judged from the watch loop in between, a
        correct psycopg 3 connect was refused in a loaded CI run."""
        if connect_watch.noted() != self._connects_seen:
            self._connects_seen, seen = connect_watch.read(self._connects_seen)
            if seen is None:
                err = Unverifiable("more connects below Python were made than the harness can keep apart between two "
                                   "grants, so it cannot say which were this run's",
                                   fix="open connections in open(), not in every call")
                self._fail(err)
                return err
            # Run 0: a thread an agent started that works for nobody, while this run is the one running.
            self._connects_open.extend(c for c in seen if c.run in (self.run_id, 0) and not c.allowed)
        if not self._connects_open:
            return None
        me = threading.get_native_id()
        due, self._connects_open = (self._connects_open, []) if final else (
            [c for c in self._connects_open if here and c.tid == me],
            [c for c in self._connects_open if not (here and c.tid == me)])
        if not due:
            return None
        bad = [c for c in due if not connect_watch.intercepted(c.fd)]
        if not bad:
            return None
        err = self._connect_refused(bad[0], here)
        self._fail(err)
        if here and any(a.thread is threading.current_thread() for a in self._agents.values()):
            raise err  # ends the agent's call; a library's worker is left to find the run over at its next step
        return err

    def _connect_refused(self, c: connect_watch.Connect, here: bool) -> Unverifiable:
        agent = next((a.name for a in self._agents.values() if a.thread is not None and a.thread.native_id == c.tid),
                     None)
        t = next((t for t in threading.enumerate() if t.native_id == c.tid), None)
        thread = repr(t.name) if t is not None else f"id {c.tid}, since ended"
        who = (f"agent {agent} (thread {thread})" if agent else f"a thread working for an agent ({thread})" if c.run
               else f"a thread an agent started ({thread})")
        # Where the agent's thread was next seen (on its way to its next call), else where the
        # thread that connected is now; nothing when neither is in code of the engine's.
        where = _where_waiting(threading.current_thread() if here else t)
        seen_at = "" if where == _UNKNOWN_PLACE else (
            f"; it was next seen at {where}" if here else f"; it was at {where} when this was noticed")
        return Unverifiable(
            f"{who} connected to {c.address} from code below Python (its connect() system call, seen by the "
            "kernel: a C-extension driver or native client the harness does not intercept), outside any "
            "storage call the harness grants" + seen_at
            + ": no interleaving toki runs can split what that connection does, so a verdict would rest "
            "on effects nobody scheduled",
            fix="reach storage through sqlite3, psycopg 3, PyMySQL or files under the run's folder (the "
                "location open() gets); a driver toki does not intercept (psycopg2, a native client) cannot "
                "be certified (see 'What the harness sees' in the engines docs)")

    def _fail(self, e: BaseException) -> None:
        if self._failure is None:
            self._failure = e
        self._cv.notify()
        for a in self._agents.values():
            a.cv.notify()
            a.idle_cv.notify_all()

    # -- the caller's thread -------------------------------------------------------------------
    def run(self, agents: dict[str, Callable[[], Any]]) -> RunTrace:
        global _running
        t0 = time.perf_counter()
        for name, fn in agents.items():
            self._agents[name] = _Agent(name, fn, self._mutex)
        if self._fingerprint is not None:
            self._fp = self._fingerprint()
        was_harness = getattr(_local, "harness", False)
        _local.harness = True  # this thread's own calls (the observer's) are the harness's
        _running = self
        for a in self._agents.values():
            a.thread = threading.Thread(target=self._agent_main, args=(a,), name=f"toki-agent-{a.name}", daemon=True)
        self._connects_seen = connect_watch.noted()
        # Started from the watch's filtered thread: a connect below Python on them (or on any
        # thread they start) is seen by the kernel (connect_watch).
        connect_watch.start([a.thread for a in self._agents.values()])
        if not self._agents:
            self._finished = True
        try:
            self._watch()
            with self._mutex:
                # Every connect still unjudged is judged now; one a thread hangs in (a C client's
                # connect to a server that never answers) makes the run unverifiable, not hung.
                if self._failure is None or isinstance(self._failure, EngineHung):
                    hung, self._failure = self._failure, None
                    if self._connects_checked(final=True) is None:
                        self._failure = hung
        finally:
            _running = None
            _local.harness = was_harness
            with self._mutex:
                if not self._finished and self._failure is None:
                    self._failure = _Abandoned()
                for a in self._agents.values():
                    a.cv.notify()
                    a.idle_cv.notify_all()
        if self._failure is not None and not isinstance(self._failure, _Abandoned):
            raise self._failure
        results = {a.name: a.result for a in self._agents.values() if a.error is None}
        errors = {a.name: a.error for a in self._agents.values() if a.error is not None}
        return RunTrace(self.grants, self.steps, results, errors, time.perf_counter() - t0)

    def _watch(self) -> None:
        """Wait for the end; meanwhile spot database lock waits, agents asleep outside any storage
        call, and agents that hang."""
        progress, since = -1, time.perf_counter()
        idle: tuple[int, int, float] | None = None  # (grant count, CPU ticks, since) of a sleeping holder
        with self._mutex:
            while not self._finished and self._failure is None:
                if self._settling:
                    self._settle()
                    if len(self.grants) != progress:
                        progress, since, idle = len(self.grants), time.perf_counter(), None
                    elif time.perf_counter() - since > self.step_limit_s:
                        who = next((a for a in self._agents.values() if a.state == AgentState.BLOCKED_DB), None)
                        self._failure = EngineHung(
                            f"agent {who.name if who else '?'}'s database wait neither ended nor stayed a wait within "
                            f"{self.step_limit_s:g} s", fix="the engine hangs here; raise the step limit if it is only slow")
                    continue
                if self._connects_checked() is not None:
                    return
                h = self._holder
                in_db = h is not None and h.in_step and h.db is not None
                in_python = h is not None and not h.in_step and not h.handoff_wait
                self._cv.wait(_PG_POLL_S if in_db else _IDLE_PROBE_S if in_python else 0.25)
                if self._finished or self._failure is not None:
                    return
                if len(self.grants) != progress:
                    progress, since, idle = len(self.grants), time.perf_counter(), None
                h = self._holder
                if h is not None and h.in_step and h.db is not None:
                    db = h.db
                    self._mutex.release()
                    try:
                        blocked = self._db_blocked(db)
                    except Exception as e:  # noqa: BLE001 - the run cannot be judged without it
                        self._mutex.acquire()
                        self._fail(e)
                        return
                    self._mutex.acquire()
                    if blocked and self._holder is h and h.in_step and h.db == db:
                        h.state, self._holder, h.confirmed_at = AgentState.BLOCKED_DB, None, self._progress
                        self._decide()
                        continue
                elif h is not None and not h.in_step and not h.handoff_wait and h.thread is not None:
                    seen = thread_idle(h.thread.native_id)
                    if seen is None or not seen[0]:
                        idle = None
                    elif idle is None or idle[0] != progress or idle[1] != seen[1]:
                        idle = (progress, seen[1], time.perf_counter())
                    elif time.perf_counter() - idle[2] > _IDLE_LIMIT_S:
                        self._failure = Unverifiable(
                            f"agent {h.name} waits at {_where_waiting(h.thread)} on something the harness does not "
                            f"control (a lock, queue or event created before the trial, or a thread it does not "
                            f"own), after its call {h.pending.detail if h.pending else '?'}; nothing it does next "
                            "would be scheduled",
                            fix="create the engine's locks, conditions, semaphores, events and queues during open() "
                                "(the harness instruments those made then) or hand an InstrumentedLock in through "
                                "prepare(handle, controller)")
                        return
                if time.perf_counter() - since > self.step_limit_s:
                    who = h or next((a for a in self._agents.values() if a.state == AgentState.BLOCKED_DB), None)
                    what = who.pending.detail if who is not None and who.pending else "?"
                    self._failure = EngineHung(
                        f"agent {who.name if who else '?'} neither finished nor reached its next storage call within "
                        f"{self.step_limit_s:g} s (last call: {what})",
                        fix="the engine hangs here; raise the step limit if it is only slow")
                    return

    def _settle(self) -> None:
        """Mutex held. Ask the observer about every agent waiting in the database since the last
        completed call: still waiting, it stays out of the next decision; no longer waiting, its
        call is about to return, and the decision waits for it (``_completed`` decides again)."""
        at = self._progress
        todo = [(a, a.db) for a in self._agents.values() if a.state == AgentState.BLOCKED_DB and a.confirmed_at != at]
        if not todo:
            self._settling = False
            self._decide()
            return
        self._mutex.release()
        try:
            answers = [(a, db is not None and self._db_blocked(db)) for a, db in todo]
        except Exception as e:  # noqa: BLE001 - the run cannot be judged without it
            self._mutex.acquire()
            self._fail(e)
            return
        self._mutex.acquire()
        if self._progress != at or self._failure is not None:
            return  # a call completed meanwhile: ask again
        waking = False
        for a, blocked in answers:
            if a.state == AgentState.BLOCKED_DB and blocked:
                a.confirmed_at = at
            elif a.state == AgentState.BLOCKED_DB:
                waking = True
        if waking:
            self._cv.wait(_PG_POLL_S)

    def _db_blocked(self, db: DbSession) -> bool:
        obs = self.observers.get(db.kind)
        if obs is None:
            opener = OPENERS.get(db.kind)
            if opener is None or db.where is None:
                return False
            try:
                obs = self.observers[db.kind] = opener(db.where)
            except Exception as e:  # noqa: BLE001 - without an observer a lock wait looks like a hang
                raise Unverifiable(f"cannot open an observer on the {db.kind} server the engine uses ({e})",
                                   fix="let the harness connect with the engine's own connection parameters") from e
        others = sorted(p for p in self.db_sessions.get(db.kind, ()) if p != db.id)
        try:
            return obs.blocked(db.id, others)
        except Exception as e:  # noqa: BLE001 - without the answer a lock wait looks like a hang
            raise Unverifiable(f"the {db.kind} observer cannot tell whether a session waits on a lock "
                               f"({type(e).__name__}: {str(e)[:120]})",
                               fix="give the engine's database user the right to see lock waits (MariaDB: the "
                                   "PROCESS privilege; PostgreSQL: pg_isolation_test_session_is_blocked, 9.6+)") from e

    def _agent_main(self, a: _Agent) -> None:
        act_for(self, a)
        try:
            with self._mutex:
                a.pending = StepRecord(-1, a.name, StepKind.START, a.fn.__name__, touches=NOTHING)
                self._stop_and_wait(a)
                a.pending.completed = a.pending.seq
            result = a.fn()
            if inspect.isawaitable(result):  # a coroutine agent: its own loop, in its own thread
                result = asyncio.run(_await(result))
            with self._mutex:
                self._connects_checked(here=True)
            a.result = result
        except _Abandoned as e:
            a.error = e
        except BaseException as e:  # the engine's own error is an outcome, not a harness failure
            a.error = e
        finally:
            act_for(None)
            with self._mutex:
                self._progress += 1  # an agent that ends releases what it held
                a.state = AgentState.DONE
                if self._holder is a:
                    self._holder = None
                self._decide()
                self._cv.notify()
