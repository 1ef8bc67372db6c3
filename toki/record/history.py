"""Record a memory engine's history where it runs, in Jepsen's shape, for ``toki check --workload memory``.

A user wraps their own client code::

    from toki.record import History

    h = History("memory.jsonl")                      # one file, shared by threads and processes
    op = h.invoke(process=7, value=[["add", "alice/residence", "alice/residence=Rome"],
                                    ["current", "alice/residence", None]])
    ...                                              # the engine's own calls
    op.ok([["add", "alice/residence", "alice/residence=Rome"],
           ["current", "alice/residence", ["alice/residence=Rome"]]])   # or op.fail() / op.info()

or, the same as a block (an exception ends it ``info``: it may have happened; one of
``fail_on`` ends it ``fail``: it did not)::

    with h.txn(process=7, value=[["add", slot, claim]]) as t:
        engine.add(...)
        t.read(0, ...)          # fill in what a read micro-op saw, by position

Each op is one line of JSON (``index``, ``time`` in ns, ``process``, ``type``, ``f``, ``value``),
appended with ``O_APPEND`` under an exclusive ``flock`` of the file, with ``index`` taken from a
counter kept beside it (``FILE.index``) under the same lock: lines are in index order, whichever
thread or process wrote them, and an invoke's index precedes everything that happened after it.
An op whose process died before it completed has only its invoke: the checker reads it as
``info`` (it may have happened), as Jepsen does.

The micro-ops (docs: memory histories): ``["add", slot, claim]``, ``["retract", slot, claim]``,
``["current", slot, [claims]]``, ``["history", slot, [claims]]`` (oldest first),
``["decide", question, [claims considered], chosen]``. A header line (``{"type": "header", ...}``,
written once by :meth:`History.header`) may declare multi-valued slots.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from toki.errors import ConfigError

MICRO_OPS = {"add": 3, "retract": 3, "current": 3, "history": 3, "decide": 4}
_READS = {"current", "history"}


def _check_value(value: Any) -> list:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"a memory op's value must be a list of micro-ops, not {type(value).__name__}",
                          fix='e.g. [["add", "alice/residence", "alice/residence=Rome"]]')
    out = []
    for i, mop in enumerate(value):
        if not isinstance(mop, (list, tuple)) or not mop or mop[0] not in MICRO_OPS or len(mop) != MICRO_OPS[mop[0]]:
            raise ConfigError(f"micro-op {i} ({mop!r}) is not one of add/retract/current/history/decide with its "
                              "arguments", fix='["add", slot, claim], ["retract", slot, claim], ["current", slot, '
                                               '[claims]], ["history", slot, [claims]], ["decide", question, '
                                               '[considered], chosen]')
        out.append(list(mop))
    return out


class History:
    """An append-only history file, safe to share between threads and processes."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._counter = self.path.with_name(self.path.name + ".index")
        self._mutex = threading.Lock()  # flock is per open file: threads of one process also need this
        self._pid = None
        self._fd = self._cfd = -1

    def _fds(self) -> tuple[int, int]:
        if self._pid != os.getpid():  # a forked child opens its own descriptors (and so its own flock)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._cfd = os.open(self._counter, os.O_RDWR | os.O_CREAT, 0o644)
            self._pid = os.getpid()
        return self._fd, self._cfd

    def _append(self, op: dict) -> dict:
        with self._mutex:
            fd, cfd = self._fds()
            fcntl.flock(cfd, fcntl.LOCK_EX)
            try:
                raw = os.pread(cfd, 32, 0)
                index = int(raw) if raw.strip() else 0
                op = {"index": index, "time": time.time_ns(), **op}
                line = (json.dumps(op, separators=(",", ":"), default=str) + "\n").encode()
                # The counter first: a writer killed between the two leaves a gap in the indices,
                # never two ops with one index.
                os.pwrite(cfd, f"{index + 1:<20d}".encode(), 0)
                os.write(fd, line)
            finally:
                fcntl.flock(cfd, fcntl.LOCK_UN)
        return op

    def header(self, *, multi_valued: Iterable[str] = (), **extra) -> None:
        """Declare slots that may hold several current claims (written once, before any op)."""
        self._append({"type": "header", "multi_valued": sorted(multi_valued), **extra})

    def invoke(self, process: Any, value: list) -> "PendingOp":
        value = _check_value(value)
        self._append({"process": process, "type": "invoke", "f": "txn", "value": value})
        return PendingOp(self, process, value)

    def complete(self, process: Any, type_: str, value: list, error: str | None = None) -> dict:
        if type_ not in ("ok", "fail", "info"):
            raise ConfigError(f"an op completes ok, fail or info, not {type_!r}", fix="op.ok(), op.fail() or op.info()")
        op = {"process": process, "type": type_, "f": "txn", "value": _check_value(value)}
        if error is not None:  # Jepsen's :error: why it failed or may have
            op["error"] = error
        return self._append(op)

    @contextlib.contextmanager
    def txn(self, process: Any, value: list, *, fail_on: tuple[type[BaseException], ...] = ()):
        op = self.invoke(process, value)
        try:
            yield op
        except fail_on as e:
            op.fail(error=f"{type(e).__name__}: {e}")
            raise
        except BaseException as e:
            op.info(error=f"{type(e).__name__}: {e}")
            raise
        else:
            op.ok()

    def close(self) -> None:
        with self._mutex:
            for fd in (self._fd, self._cfd):
                if fd >= 0 and self._pid == os.getpid():
                    os.close(fd)
            self._fd = self._cfd = -1
            self._pid = None

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PendingOp:
    """An invoked op, to be completed once: ``ok`` with what the reads saw, ``fail`` or ``info``."""

    def __init__(self, history: History, process: Any, value: list):
        self.history, self.process, self.value = history, process, [list(m) for m in value]
        self.done = False

    def read(self, position: int, seen: list) -> None:
        """What the read micro-op at ``position`` (current/history) saw; or a decide's choice."""
        mop = self.value[position]
        if mop[0] in _READS:
            mop[2] = list(seen)
        elif mop[0] == "decide":
            mop[3] = seen
        else:
            raise ConfigError(f"micro-op {position} is an {mop[0]}, not a read", fix="read() fills current/history/decide")

    def _complete(self, type_: str, value: list | None, error: str | None = None) -> dict:
        if self.done:
            raise ConfigError("this op was already completed", fix="complete each invoked op once")
        self.done = True
        return self.history.complete(self.process, type_, self.value if value is None else value, error)

    def ok(self, value: list | None = None) -> dict:
        return self._complete("ok", value)

    def fail(self, value: list | None = None, *, error: str | None = None) -> dict:
        return self._complete("fail", value, error)

    def info(self, value: list | None = None, *, error: str | None = None) -> dict:
        return self._complete("info", value, error)
