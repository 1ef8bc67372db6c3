"""The step loop both runners share (PostgreSQL's in :mod:`toki.sched.runner`, the other
databases' in :mod:`toki.sched.backend_runner`): each step goes to its session in schedule order,
a step for a session still blocked is deferred (or refused, with ``on_blocked = "error"``), and
after the last step the blocked ones are drained until they finish or the step limit passes.

A runner's execution mixes in :class:`StepLoop` and provides ``s`` (the schedule), ``sessions``
(each with ``pending`` and ``deferred``), ``mode``, ``r.step_limit_s``, ``clock``, ``_issue(idx)``
and ``_settle(wait_any=False) -> bool`` (whether anything finished).
"""

from __future__ import annotations

import time

from toki.errors import ScheduleError, StepTimeout


class StepLoop:
    def go(self) -> None:
        for idx, step in enumerate(self.s.steps):
            self.clock = idx
            sess = self.sessions[step.session]
            if sess.pending is not None or sess.deferred:
                if self.mode == "error" and not step.await_steps and sess.pending is not None:
                    blocked_idx = sess.pending[0]
                    raise ScheduleError(
                        f"{self.s.source}: step {idx} ({step.describe()}) was sent to session {step.session}, "
                        f"which is still blocked in step {blocked_idx} ({self.s.steps[blocked_idx].describe()})",
                        fix="reorder the steps so a blocked session is unblocked first, or set on_blocked = \"defer\"")
                sess.deferred.append(idx)
                continue
            self._issue(idx)
            self._settle()
        # Drain: the rest can only finish through commits already sent, aborts or deadlocks.
        deadline = time.monotonic() + self.r.step_limit_s
        while any(s.pending or s.deferred for s in self.sessions.values()):
            if self._settle(wait_any=True):
                deadline = time.monotonic() + self.r.step_limit_s
                continue
            if time.monotonic() > deadline:
                stuck = [s.pending[0] for s in self.sessions.values() if s.pending]
                raise StepTimeout(
                    f"{self.s.source}: step(s) {stuck} ({'; '.join(self.s.steps[i].describe() for i in stuck)}) "
                    f"still blocked after the last step and {self.r.step_limit_s:g}s",
                    fix="the schedule never releases the lock these steps wait for: add the commit or rollback "
                        "that ends the blocking transaction")

