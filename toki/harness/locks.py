"""Python locks an engine takes around its storage, made visible to the controller.

A ``threading.Lock``/``RLock`` that engine code creates during a trial is an
:class:`InstrumentedLock` (:mod:`.threads`); one created earlier (at import) can be handed in
through the plug-in's ``prepare(handle, controller)``. Acquiring it is a step; an agent whose acquisition would wait for another
agent is not eligible until the holder releases, so waiting on a lock is detected without
sleeping. Re-entrant acquisitions by the holder are not steps: they change nothing another agent
can see.
"""

from __future__ import annotations

import threading

from toki.harness.controller import current_agent, running
from toki.harness.steps import StepKind, lock_footprint


def who() -> str:
    """The calling agent's name, or the thread that is none (locks held by one are foreign)."""
    me = current_agent()
    return me[1].name if me else f"thread:{threading.get_ident()}"


class InstrumentedLock:
    def __init__(self, name: str, *, reentrant: bool = True):
        self.name, self.reentrant = name, reentrant
        self._real = threading.RLock() if reentrant else threading.Lock()
        self.owner: str | None = None
        self.count = 0

    def _who(self) -> str:
        return who()

    def available_to(self, who: str) -> bool:
        return self.owner is None or (self.reentrant and self.owner == who)

    def _take(self) -> bool:
        self._real.acquire()
        self.owner, self.count = self._who(), self.count + 1
        return True

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = current_agent()
        who = self._who()
        if me is not None and (running() is not me[0] or me[0].finished):
            me = None  # a finalizer after the run (a file lock's __del__): nobody grants it any more
        if me is None:
            ok = self._real.acquire(blocking, timeout)
            if ok:
                self.owner, self.count = who, self.count + 1
            return ok
        if self.reentrant and self.owner == who:
            return self._take()
        ctl, _ = me
        if not blocking and not self.available_to(who):
            return False
        return ctl.step(StepKind.LOCK, f"acquire {self.name}", self._take, lock=self, touches=lock_footprint(self.name))

    def release(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.owner = None
        self._real.release()

    def locked(self) -> bool:
        return self.owner is not None

    def _is_owned(self) -> bool:  # what threading.Condition asks of its lock
        return self.owner == self._who()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<InstrumentedLock {self.name} owner={self.owner} count={self.count}>"
