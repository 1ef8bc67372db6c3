"""File locks (``fcntl.flock``, ``fcntl.lockf``) an engine takes, as steps.

``flock`` locks belong to an open file description: two agents that each open the lock file
exclude each other, in one process as across processes. A blocking ``flock`` of an agent is
tried without blocking, as a step; when another agent holds the lock, the agent is not eligible
until some other agent has made progress, and is then tried again (the SQLite busy rule), so the
holder runs and the wait is seen at once, never as a sleep outside any call. If every agent waits
on a file lock, the engine deadlocks itself: the run ends as a hang naming the waits. A
non-blocking ``flock`` (``LOCK_NB``, as the ``filelock`` package polls) is a step whose answer the
engine gets; with :func:`time.sleep` a point where the others run (:mod:`.threads`), its poll
loop makes progress.

``lockf`` (and ``fcntl``'s ``F_SETLK``) are POSIX record locks, owned by the process: the agents
are threads of one process, so such a lock never excludes one agent from another. Each call is a
step (so it is visible and ordered), and the engines documentation says that an engine relying
on it for exclusion between threads is unprotected, which the search then shows.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os

from toki.harness import controller as _ctl
from toki.harness.file_calls import fd_path
from toki.harness.steps import StepKind, file_footprint

_REAL = {"flock": fcntl.flock, "lockf": fcntl.lockf}
_OPS = ((fcntl.LOCK_UN, "LOCK_UN"), (fcntl.LOCK_EX, "LOCK_EX"), (fcntl.LOCK_SH, "LOCK_SH"))


def _fd(f) -> int:
    return f if isinstance(f, int) else f.fileno()


def _label(fd: int, root: str | None) -> str:
    path = fd_path(fd)
    if path is None:
        return f"descriptor {fd}"
    if root and path.startswith(root + os.sep):
        return path[len(root) + 1:]
    return path


def _op_name(op: int) -> str:
    names = [n for bit, n in _OPS if bit and op & bit] or ["LOCK_UN"]
    if op & fcntl.LOCK_NB:
        names.append("LOCK_NB")
    return "|".join(names)


def _would_block(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


class FileLockHook:
    def __init__(self, root):
        self.root = os.path.realpath(str(root))

    def flock(self, f, operation: int):
        me = _ctl.current_agent()
        if me is None or _ctl.running() is not me[0]:
            return _REAL["flock"](f, operation)
        fd = _fd(f)
        label = _label(fd, self.root)
        detail, touches = f"flock({label!r}, {_op_name(operation)!r})", file_footprint(StepKind.FILE_LOCK, label)
        if operation & fcntl.LOCK_NB or not operation & (fcntl.LOCK_EX | fcntl.LOCK_SH):
            return _ctl.controlled(StepKind.FILE_LOCK, detail, lambda: _REAL["flock"](fd, operation), touches=touches)
        return me[0].step(StepKind.FILE_LOCK, detail, lambda: _REAL["flock"](fd, operation | fcntl.LOCK_NB),
                          busy=_would_block, patient=True, touches=touches)

    def lockf(self, f, cmd: int, *args):
        me = _ctl.current_agent()
        if me is None or _ctl.running() is not me[0]:
            return _REAL["lockf"](f, cmd, *args)
        fd = _fd(f)
        label = _label(fd, self.root)
        return _ctl.controlled(StepKind.FILE_LOCK, f"lockf({label!r}, {_op_name(cmd)!r})",
                               lambda: _REAL["lockf"](fd, cmd, *args), touches=file_footprint(StepKind.FILE_LOCK, label))

    @contextlib.contextmanager
    def installed(self):
        fcntl.flock, fcntl.lockf = self.flock, self.lockf
        try:
            yield
        finally:
            fcntl.flock, fcntl.lockf = _REAL["flock"], _REAL["lockf"]
