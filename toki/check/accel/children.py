"""Run a function in a forked child process and take its result back through a pipe.

Why: the scanner (:mod:`toki.check.reading.json_scan`) is numpy calls on slices of a few hundred KB, and
part of each call runs under the GIL. A forked child scans its piece with a GIL of its own and
sends its columns back: numpy arrays travel as raw buffers (pickle protocol 5, out of band), so
the transfer is one copy through the pipe, not a serialisation of every element. Measured on the
10^5 list-append history, interleaved runs: 1.26 s end to end with a child, 1.38 s with two
threads. Neither is near 2x on two cores: the scan is largely bound by memory.

Used only where forking is safe: a POSIX system and no other Python thread running (the child
has one thread; a lock another thread held at the fork would never be released in it). The
child runs the function, writes, and leaves with ``os._exit``: no atexit handlers, no buffered
output flushed twice, no finaliser closing a connection it inherited. If the child dies or
cannot send its result, :meth:`Forked.result` raises :class:`ChildLost` and the caller does the
work itself.
"""

from __future__ import annotations

import os
import pickle
import struct
import threading
import warnings
from typing import Any, Callable


class ChildLost(Exception):
    """The forked child exited without sending a result."""


def available() -> bool:
    return hasattr(os, "fork") and threading.active_count() == 1


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while len(view):
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int, into=None):
    """``n`` bytes from ``fd`` (into a writable buffer when given, else a new bytes object)."""
    if into is None:
        chunks, left = [], n
        while left:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                raise ChildLost("the child closed the pipe early")
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    view = memoryview(into).cast("B")
    got = 0
    while got < n:
        k = os.readv(fd, [view[got:n]])
        if not k:
            raise ChildLost("the child closed the pipe early")
        got += k
    return into


class Forked:
    """``fn(*args)`` running in a forked child; :meth:`result` waits for it."""

    def __init__(self, fn: Callable[..., Any], *args: Any):
        r, w = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12+ warns about fork() when the process has other OS threads (numpy's BLAS
            # pool, for one); the child never calls into them and leaves with os._exit.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's side (coverage does not follow a fork)
            os.close(r)
            code = 0
            try:
                try:
                    payload = ("ok", fn(*args))
                except BaseException as e:  # the parent re-raises it
                    payload = ("error", e)
                bufs: list[pickle.PickleBuffer] = []
                head = pickle.dumps(payload, protocol=5, buffer_callback=bufs.append)
                raws = [b.raw() for b in bufs]
                import resource

                maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                sizes = [len(head)] + [m.nbytes for m in raws]
                _write_all(w, struct.pack(f"<QQ{len(sizes)}Q", maxrss, len(sizes), *sizes))
                _write_all(w, head)
                for m in raws:
                    _write_all(w, m)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        self.pid, self.fd = pid, r  # fd is None once the child is reaped
        self.max_rss_kb: int | None = None  # the child's peak resident set (KB), once received

    def result(self) -> Any:
        import numpy as np

        try:
            maxrss, k = struct.unpack("<QQ", _read_exact(self.fd, 16))
            sizes = struct.unpack(f"<{k}Q", _read_exact(self.fd, 8 * k))
            head = _read_exact(self.fd, sizes[0])
            # np.empty, not bytearray: a buffer is filled by the pipe, zeroing it first is waste
            bufs = [_read_exact(self.fd, s, np.empty(s, np.uint8)) for s in sizes[1:]]
            status, value = pickle.loads(head, buffers=bufs)
        except (OSError, struct.error, pickle.UnpicklingError, EOFError) as e:
            raise ChildLost(str(e)) from None
        finally:
            self._reap()
        self.max_rss_kb = int(maxrss)
        if status == "error":
            raise value
        return value

    def abandon(self) -> None:
        """Stop waiting: kill the child and reap it (the caller raised before taking the result)."""
        import signal

        if self.fd is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._reap()

    def _reap(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            os.waitpid(self.pid, 0)
