"""Waiting for a forked fault child: both fault runners fork a process that kills itself at the
point under test, and wait for it with a bound (a hung engine or write path must not hang toki)."""

from __future__ import annotations

import os
import signal
import time

from toki.faults.proxy import FaultTimeout


def wait_child(pid: int, limit_s: float, poll_s: float, what: str, fix: str) -> int:
    """The wait status of child ``pid``; past ``limit_s`` the child is killed and FaultTimeout
    (``what``, ``fix``) raised. Polls, so that no thread is left waiting on a child that hangs."""
    deadline = time.monotonic() + limit_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise FaultTimeout(what, fix=fix)
        time.sleep(poll_s)


def killed(status: int) -> bool:
    """Whether a wait status says SIGKILL ended the process (the fault point was reached)."""
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
