"""Conditions, semaphores and events an engine creates, made visible to the controller.

Like :class:`~toki.harness.locks.InstrumentedLock`, each wait of an agent is a step that is not
eligible until what it waits for holds (a notify, a free permit, a set flag): the controller
runs the other agents meanwhile, and the wait is seen at once, not after a timeout. A wait with a
timeout times out only when no agent can take a step otherwise (time passes when nothing else
can happen), so a timed poll loop cannot spin the scheduler. Threads that are not agents (a
library's worker) use them with ordinary blocking semantics, polling every millisecond.
"""

from __future__ import annotations

import threading
import time

from toki.harness.controller import current_agent, running
from toki.harness.locks import InstrumentedLock, who as _who
from toki.harness.steps import ANYTHING, StepKind, lock_footprint

_POLL_S = 0.001


def _poke() -> None:
    """A non-agent changed what agents wait for: let the controller look again."""
    ctl = running()
    if ctl is not None and current_agent() is None:
        ctl.poke()



class _Until:
    """What a waiting agent's step waits for: ``ready(who)``; a timed wait may also time out."""

    external = True  # a thread outside the agents may satisfy it: not a deadlock among agents

    def __init__(self, name: str, ready, timed: bool, lock: InstrumentedLock | None = None):
        self.name, self._ready, self.timed, self._lock = name, ready, timed, lock

    def available_to(self, who: str) -> bool:
        return self._ready(who) and (self._lock is None or self._lock.available_to(who))

    def times_out(self, who: str) -> bool:
        return self.timed and (self._lock is None or self._lock.available_to(who))


class InstrumentedCondition:
    def __init__(self, name: str, lock: InstrumentedLock | None = None):
        self.name = name
        self._lock = lock if lock is not None else InstrumentedLock(f"lock of {name}", reentrant=True)
        self._waiters: list[str] = []  # FIFO, as threading.Condition wakes them
        self._notified: set[str] = set()

    def acquire(self, *args, **kwargs) -> bool:
        return self._lock.acquire(*args, **kwargs)

    def release(self) -> None:
        self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self._lock.release()

    def _is_owned(self) -> bool:
        return self._lock._is_owned()

    def wait(self, timeout: float | None = None) -> bool:
        who = _who()
        if not self._lock._is_owned():
            raise RuntimeError("cannot wait on un-acquired lock")
        held = self._lock.count
        self._waiters.append(who)  # before the lock goes: a notify in between must find it
        for _ in range(held):
            self._lock.release()
        me = current_agent()
        if me is None:
            deadline = None if timeout is None else time.monotonic() + timeout
            while who not in self._notified and (deadline is None or time.monotonic() < deadline):
                time.sleep(_POLL_S)
            for _ in range(held):
                self._lock.acquire()
        else:
            until = _Until(self.name, lambda w: w in self._notified, timeout is not None, self._lock)

            def reacquire():
                for _ in range(held):
                    self._lock._take()
            # enabled by a notify, which code between steps makes: no footprint shows it
            me[0].step(StepKind.WAIT, f"wait on {self.name}", reacquire, lock=until, touches=ANYTHING)
        notified = who in self._notified
        self._notified.discard(who)
        if who in self._waiters:
            self._waiters.remove(who)
        return notified

    def wait_for(self, predicate, timeout: float | None = None):
        result = predicate()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not result:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if left == 0.0:
                break
            self.wait(left)
            result = predicate()
        return result

    def notify(self, n: int = 1) -> None:
        if not self._lock._is_owned():
            raise RuntimeError("cannot notify on un-acquired lock")
        for w in self._waiters[:n]:
            self._notified.add(w)
        del self._waiters[:n]
        _poke()

    def notify_all(self) -> None:
        self.notify(len(self._waiters))


class InstrumentedSemaphore:
    external = True  # a thread outside the agents may release it

    def __init__(self, name: str, value: int = 1, bounded: bool = False):
        if value < 0:
            raise ValueError("semaphore initial value must be >= 0")
        self.name, self._value, self._bound = name, value, value if bounded else None
        self._mu = threading.Lock()

    def available_to(self, who: str) -> bool:
        return self._value > 0

    def _take(self) -> bool:
        with self._mu:
            self._value -= 1
        return True

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        me = current_agent()
        if me is None:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                with self._mu:
                    if self._value > 0:
                        self._value -= 1
                        return True
                if not blocking or (deadline is not None and time.monotonic() >= deadline):
                    return False
                time.sleep(_POLL_S)
        if not blocking and self._value <= 0:
            return False
        if timeout is None:
            return me[0].step(StepKind.LOCK, f"acquire {self.name}", self._take, lock=self,
                              touches=lock_footprint(self.name))
        until = _Until(self.name, lambda w: self._value > 0, True)
        return me[0].step(StepKind.LOCK, f"acquire {self.name}", lambda: self._value > 0 and self._take(), lock=until,
                          touches=lock_footprint(self.name))

    def release(self, n: int = 1) -> None:
        with self._mu:
            if self._bound is not None and self._value + n > self._bound:
                raise ValueError("Semaphore released too many times")
            self._value += n
        _poke()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


class InstrumentedEvent:
    def __init__(self, name: str):
        self.name, self._flag = name, False

    def is_set(self) -> bool:
        return self._flag

    isSet = is_set

    def set(self) -> None:
        self._flag = True
        _poke()

    def clear(self) -> None:
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        me = current_agent()
        if me is None:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self._flag and (deadline is None or time.monotonic() < deadline):
                time.sleep(_POLL_S)
            return self._flag
        until = _Until(self.name, lambda w: self._flag, timeout is not None)
        me[0].step(StepKind.WAIT, f"wait for {self.name}", lambda: None, lock=until, touches=ANYTHING)  # set by code between steps
        return self._flag
