"""PostgreSQL at the wire: each session's step runs in a greenlet on the runner's own thread.

psycopg 3 drives every query through ``Connection.wait(gen)``: a generator that says which
socket event it waits for (read, write) and is resumed with what is ready. :class:`GreenConnection`
overrides ``wait``: inside a session's greenlet it hands the wait to the runner (a greenlet switch,
about a microsecond) instead of blocking the thread. The runner then waits on the socket itself
(``select``) and resumes the step when libpq has data, as PostgreSQL's isolationtester does with
``PQsendQuery`` and ``PQconsumeInput``; only a statement that has not completed within its first
wait window costs an observer query. No worker threads, no hand-off, and a step may be any
Python code (the matrix's programs, the write path), since every query it makes is cooperative.

Outside a session's greenlet (the admin and observer connections, the main program) the
connection behaves exactly like psycopg's.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from typing import Any

import greenlet
import psycopg
from psycopg.waiting import READY_R, READY_W, WAIT_R, WAIT_W


class _TaskGreenlet(greenlet.greenlet):
    """A greenlet that runs one step; GreenConnection.wait yields to its parent from inside it."""


class GreenConnection(psycopg.Connection):
    def wait(self, gen, interval: float = 0.1, timeout: float | None = None):
        current = greenlet.getcurrent()
        if not isinstance(current, _TaskGreenlet):
            return super().wait(gen, interval=interval, timeout=timeout)
        fd = self.pgconn.socket
        try:
            state = next(gen)
            while True:
                ready = current.parent.switch((fd, state))
                state = gen.send(ready)
        except StopIteration as stop:
            return stop.value


class Worker:
    """A session's greenlet: it runs the session's steps one after another, for the whole run.

    One greenlet per session, reused (creating one costs more than a round trip to a local server).
    """

    __slots__ = ("_g", "current")

    def __init__(self):
        self.current: Task | None = None
        self._g = _TaskGreenlet(self._loop)

    def _loop(self, task: "Task"):
        while True:
            try:
                task._value = task._fn(*task._args)
            except BaseException as e:  # noqa: BLE001 - handed to result(), like a Future
                task._exc = e
            task._done = True
            task = greenlet.getcurrent().parent.switch(None)

    def start(self, fn: Callable[..., Any], *args: Any) -> "Task":
        if self.current is not None and not self.current._done:
            raise RuntimeError("a session's previous step is still running")
        if self._g.dead:  # the loop ended (a GreenletExit while killed): start a new one
            self._g = _TaskGreenlet(self._loop)
        task = self.current = Task(self, fn, args)
        task._resume(task)
        return task

    def kill(self) -> None:
        if self._g and not self._g.dead and self._g:
            self._g.throw(greenlet.GreenletExit)


class Task:
    """One step of one session, suspended whenever its connection waits on the network.

    ``poll(timeout)`` waits up to ``timeout`` seconds for the socket the step waits on and resumes
    it as often as data arrives; it returns whether the step has finished. ``result()`` returns
    its value or raises its exception, like a Future's.
    """

    __slots__ = ("_worker", "_fn", "_args", "_value", "_exc", "_done", "fd", "state")

    def __init__(self, worker: Worker, fn: Callable[..., Any], args: tuple):
        self._worker, self._fn, self._args = worker, fn, args
        self._value: Any = None
        self._exc: BaseException | None = None
        self._done = False
        self.fd: int = -1
        self.state: int = 0

    def _resume(self, value) -> None:
        req = self._worker._g.switch(value)
        if not self._done and req is not None:
            self.fd, self.state = req

    def done(self) -> bool:
        return self._done

    def result(self):
        if self._exc is not None:
            raise self._exc
        return self._value

    def ready_now(self, timeout: float) -> int:
        """What is ready on the step's socket within ``timeout`` seconds (0: nothing yet)."""
        r, w, x = select.select((self.fd,) if self.state & WAIT_R else (),
                                (self.fd,) if self.state & WAIT_W else (), (self.fd,), max(0.0, timeout))
        return (READY_R if r or x else 0) | (READY_W if w else 0)

    def poll(self, timeout: float = 0.0) -> bool:
        if self._done:
            return True
        deadline = time.monotonic() + timeout
        while True:
            ready = self.ready_now(deadline - time.monotonic())
            if not ready:
                return False
            self._resume(ready)
            if self._done:
                return True


def poll_any(tasks: list[Task], timeout: float) -> bool:
    """Wait up to ``timeout`` for any of ``tasks`` to have data; resume those that do. True if one finished."""
    live = [t for t in tasks if not t.done()]
    if len(live) < len(tasks):
        return True
    if not live:
        return False
    rl = [t.fd for t in live if t.state & WAIT_R]
    wl = [t.fd for t in live if t.state & WAIT_W]
    r, w, _ = select.select(rl, wl, [], max(0.0, timeout))
    finished = False
    for t in live:
        if t.fd in r or t.fd in w:
            finished |= t.poll(0.0)
    return finished
