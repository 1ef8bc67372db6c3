"""Waiting for a forked fault child: both fault runners fork a process that kills itself at the
point under test, and wait for it with a bound (a hung engine or write path must not hang toki)."""

from __future__ import annotations

import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import Any

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


def in_child(fn: Callable[[], Any], limit_s: float, before: Callable[[], None] | None = None) -> tuple[str, Any]:
    """``fn()`` in a forked process, its picklable answer back: ``("ok", value)``, ``("error",
    text)``, ``("signal", name)`` or ``("timeout", text)`` (killed after ``limit_s``). ``before``
    runs first in the child (letting go of what the parent holds). The fresh process is where a
    crash state is reopened: an engine that crashes or hangs there is a finding, not toki's end."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            if before is not None:
                before()
            out = ("ok", fn())
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out = ("error", f"{type(e).__name__}: {' '.join(str(e).split())[:200]}")
        try:
            data = pickle.dumps(out)
        except Exception as e:  # noqa: BLE001
            data = pickle.dumps(("error", f"unpicklable answer: {e}"))
        view = memoryview(data)
        while view:
            view = view[os.write(w, view):]
        os._exit(0)
    os.close(w)
    chunks, deadline = [], time.monotonic() + limit_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return ("timeout", f"did not finish within {limit_s:g} s")
            ready, _, _ = select.select([r], [], [], min(left, 1.0))
            if ready:
                b = os.read(r, 1 << 20)
                if not b:
                    break
                chunks.append(b)
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ("signal", signal.Signals(os.WTERMSIG(status)).name)
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001
        return ("error", "the child process answered garbage")
