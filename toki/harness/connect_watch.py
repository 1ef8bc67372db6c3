"""Connections opened below Python, seen by the kernel.

A C-extension driver (psycopg2's libpq, a native client) that opens a connection, uses it and
closes it between two granted calls leaves nothing for the audit hook (no Python socket) and
nothing for the descriptor scan (the descriptor is gone before the scan runs). Its ``connect``
system call is still made by an agent's thread, and the kernel can say so.

So the harness starts agents' threads from a thread of its own that carries a seccomp filter
(inherited by every thread an agent starts, and by nothing else in the process): a ``connect``
on one of them is handed to a supervisor thread (``SECCOMP_RET_USER_NOTIF``), which reads the
address from the caller's memory, notes the call when the thread was working for an agent of a
run outside any granted call, and lets the call go on unchanged (``SECCOMP_USER_NOTIF_FLAG_
CONTINUE``): nothing an engine does behaves differently. The supervisor is a process of its own
(:mod:`.connect_supervisor`), since the calling thread may hold the GIL (libpq resolves the user
name with it held, through nscd's socket) and a supervisor thread needing it would never answer;
the two share a table in memory. The controller reads the notes at every grant, at an
agent's next call and at the run's end, and a connection outside a granted call makes the run
:class:`~toki.harness.controller.Unverifiable`, naming the agent, the thread, the address and
where the agent was next seen.

Allowed, by design: name service lookups (DNS on port 53, nscd's and systemd's resolver
sockets, ``/dev/log``), address families other than IPv4, IPv6 and Unix sockets, and the
connects of an intercepted driver (psycopg 3's ``connect``, made inside a marked region; PyMySQL
and other Python sockets are judged by the audit hook before they reach the kernel).

Where the kernel or the platform does not offer it (not Linux 5.5+ on x86-64 or AArch64, a
container that forbids ``seccomp``, ``TOKI_CONNECT_WATCH=off``), :func:`unavailable` says why and
the certificate carries that as a limit: a C driver's short-lived connection would not be seen.
"""

from __future__ import annotations

import ctypes
import os
import platform
import queue
import socket
import struct
import threading
from dataclasses import dataclass

_ARCHES = {  # machine -> (seccomp syscall number, connect syscall number, AUDIT_ARCH_*)
    "x86_64": (317, 42, 0xC000003E),
    "aarch64": (277, 203, 0xC00000B7),
}
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PTRACER = 0x59616D61
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
# Without it the kernel turns on speculation mitigations for filtered threads (SSBD, STIBP), which
# doubled a granted SQLite step here: the filter is no sandbox, so they buy nothing.
_SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1 << 2
_RET_USER_NOTIF, _RET_ALLOW = 0x7FC00000, 0x7FFF0000
# _IOWR('!', 0, struct seccomp_notif) and _IOWR('!', 1, struct seccomp_notif_resp)
_EVENTS = 4096  # a ring: the controller reads it at every grant, long before it wraps
_ADDR = 112  # bytes of a sockaddr kept: sockaddr_un is 110

TABLE = "toki-connect-watch"  # the shared table's name (a memfd)
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_ALLOWED_UNIX = ("/var/run/nscd/socket", "/run/nscd/socket", "/run/systemd/resolve/", "/run/systemd/userdb/",
                 "/var/run/systemd/resolve/", "/dev/log", "/run/systemd/journal/")


@dataclass(frozen=True)
class Connect:
    """One ``connect`` a thread made for an agent of run ``run`` outside any granted call."""

    tid: int
    run: int
    fd: int
    address: str
    allowed: bool


class _Watch:
    """The process's filtered starter thread, its supervisor process and their shared table (one
    per process, made on first use)."""

    def __init__(self) -> None:
        import mmap

        import numpy as np

        from toki.harness import connect_supervisor

        self.pid = os.getpid()
        seccomp_nr, connect_nr, arch = _ARCHES[platform.machine()]
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
        parts = connect_supervisor.layout(pid_max, _EVENTS, _ADDR)
        # Shared with the supervisor; sparse, so only the pages of threads that ran are memory.
        self._table_fd = os.memfd_create(TABLE, os.MFD_CLOEXEC)
        os.ftruncate(self._table_fd, parts["total"][1])
        self._map = mmap.mmap(self._table_fd, parts["total"][1])

        def part(name, dtype, shape=None):
            off, size = parts[name]
            a = np.frombuffer(self._map, dtype, count=size // np.dtype(dtype).itemsize, offset=off)
            return a.reshape(shape) if shape else a

        self.count = part("count", np.int64)
        # Indexed by thread id, each entry written only by its thread: the run it works for (0:
        # none), and 1 while it is inside a granted call or an intercepted driver's connect.
        self.owner = part("owner", np.int32)
        self.inside = part("inside", np.uint8)
        self.events = part("events", np.int64, (_EVENTS, 4))  # tid, run, fd, address length
        self.addrs = part("addrs", np.uint8, (_EVENTS, _ADDR))
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._filter_args = (seccomp_nr, connect_nr, arch)
        self._channel_lock = threading.Lock()
        ready: queue.SimpleQueue = queue.SimpleQueue()
        script = connect_supervisor.__file__
        self._starter = threading.Thread(
            target=self._start_threads, args=((seccomp_nr, connect_nr, arch), (script, pid_max), ready),
            name="toki-connect-watch", daemon=True)
        self._starter.start()
        got = ready.get()
        if isinstance(got, BaseException):
            raise got
        self.supervisor = got

    def _start_threads(self, filter_args, supervisor_args, ready) -> None:
        import subprocess
        import sys

        try:
            listener = _install_filter(*filter_args)
            script, pid_max = supervisor_args
            # The channel on which a thread that filters itself later hands its listener over.
            self._channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                # Started from this thread, so that it ends with it (PR_SET_PDEATHSIG): with the process.
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", script, str(listener), str(self._table_fd), str(pid_max),
                     str(_EVENTS), str(_ADDR), str(os.getpid()), str(theirs.fileno())],
                    pass_fds=(listener, self._table_fd, theirs.fileno()),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            finally:
                os.close(listener)  # the supervisor's copy only: if it dies, a connect fails (ENOSYS), never hangs
                theirs.close()
            # Under Yama's ptrace_scope=1 the supervisor may read this process's memory only when allowed.
            ctypes.CDLL(None).prctl(_PR_SET_PTRACER, proc.pid, 0, 0, 0)
            ready.put(proc)
        except BaseException as e:  # noqa: BLE001 - reported to the thread that asked
            ready.put(e)
            return
        while True:
            threads, done = self._requests.get()
            try:
                for t in threads:
                    t.start()
                done.put(None)
            except BaseException as e:  # noqa: BLE001 - reported to the thread that asked
                done.put(e)

    def filter_this_thread(self) -> None:
        """Filter the calling thread (made before the trial, now working for an agent) with a
        listener of its own, handed to the supervisor."""
        listener = _install_filter(*self._filter_args)
        try:
            with self._channel_lock:
                socket.send_fds(self._channel, [b"L"], [listener])
        finally:
            os.close(listener)

    def start(self, threads) -> None:
        if self.supervisor.poll() is not None:
            raise RuntimeError(f"the connect watch's supervisor (pid {self.supervisor.pid}) ended with status "
                               f"{self.supervisor.returncode}; a connect below Python can no longer be seen")
        done: queue.SimpleQueue = queue.SimpleQueue()
        self._requests.put((list(threads), done))
        err = done.get()
        if err is not None:
            raise err

    def read(self, seen: int) -> tuple[int, list[Connect] | None]:
        """The connects noted since ``seen`` (None when more came than the ring holds)."""
        n = int(self.count[0])
        if n - seen > _EVENTS:
            return n, None
        out = []
        for i in range(seen, n):
            slot = i % _EVENTS
            tid, run, fd, length = (int(x) for x in self.events[slot])
            address, allowed = describe(bytes(self.addrs[slot, :length]))
            out.append(Connect(tid, run, fd, address, allowed))
        return n, out


def _install_filter(seccomp_nr: int, connect_nr: int, arch: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    program = [(ld, 0, 0, 4), (jeq, 0, 3, arch),  # another ABI: allow
               (ld, 0, 0, 0), (jeq, 0, 1, connect_nr),
               (ret, 0, 0, _RET_USER_NOTIF), (ret, 0, 0, _RET_ALLOW)]
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in program))
    fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxQ", len(program), ctypes.addressof(code)))
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(ctypes.c_long(seccomp_nr), ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
                      ctypes.c_long(_SECCOMP_FILTER_FLAG_NEW_LISTENER | _SECCOMP_FILTER_FLAG_SPEC_ALLOW), fprog)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER)")
    return fd


def describe(raw: bytes) -> tuple[str, bool]:
    """A sockaddr as text, and whether connecting there is allowed outside a granted call."""
    if len(raw) < 2:
        return "an unreadable address", False
    family = struct.unpack_from("H", raw)[0]
    if family == _AF_INET and len(raw) >= 8:
        port = struct.unpack_from("!H", raw, 2)[0]
        return f"{'.'.join(map(str, raw[4:8]))}:{port} (TCP/UDP)", port == 53
    if family == _AF_INET6 and len(raw) >= 24:
        import ipaddress

        port = struct.unpack_from("!H", raw, 2)[0]
        return f"[{ipaddress.IPv6Address(raw[8:24])}]:{port} (TCP/UDP)", port == 53
    if family == _AF_UNIX:
        body = raw[2:]
        if body[:1] == b"\0":
            name = body[1:].split(b"\0")[0].decode(errors="replace")
            return f"the abstract Unix socket @{name}", False
        path = body.split(b"\0")[0].decode(errors="replace")
        return f"the Unix socket {path}", any(path == p or (p.endswith("/") and path.startswith(p))
                                              for p in _ALLOWED_UNIX)
    return f"address family {family}", True


_lock = threading.Lock()
_watch: _Watch | None = None
_why_not: str | None = None
_why_not_pid = -1


def _forked() -> None:
    # A forked child shares the parent's table (MAP_SHARED) but has no starter thread: it makes
    # its own watch on first use, and writes nothing into the parent's meanwhile.
    global _watch
    _watch = None


os.register_at_fork(after_in_child=_forked)


def unavailable() -> str | None:
    """Why this process cannot watch connects (None when it can, or has not tried yet)."""
    return _why_not if _why_not_pid == os.getpid() else None


def _get() -> _Watch | None:
    global _watch, _why_not, _why_not_pid
    pid = os.getpid()
    w = _watch
    if w is not None and w.pid == pid:
        return w
    with _lock:
        if _watch is not None and _watch.pid == pid:
            return _watch
        if _why_not_pid == pid:
            return None
        reason = None
        if os.environ.get("TOKI_CONNECT_WATCH", "").lower() in ("0", "off", "no", "false"):
            reason = "TOKI_CONNECT_WATCH=off"
        elif not os.path.exists("/proc/sys/kernel/pid_max") or platform.machine() not in _ARCHES:
            reason = f"needs Linux on x86-64 or AArch64 (this is {platform.system()} on {platform.machine()})"
        if reason is None:
            try:
                _watch = _Watch()
                return _watch
            except Exception as e:  # noqa: BLE001 - the platform says no: a limit, said in the certificate
                reason = f"the kernel refused the seccomp filter ({e})"
        _watch, _why_not, _why_not_pid = None, reason, pid
        return None


def start(threads) -> bool:
    """Start ``threads`` from the filtered thread (plainly when the watch is unavailable); True
    when their connects are watched."""
    w = _get()
    if w is None:
        for t in threads:
            t.start()
        return False
    w.start(threads)
    return True


# -- what the threads say about themselves (cheap: one store each) --------------------------------

def working_for(run: int) -> None:
    """The calling thread works for an agent of ``run`` (0: for nobody)."""
    w = _watch
    if w is not None:
        w.owner[threading.get_native_id()] = run


def inside(flag: bool) -> bool:
    """Mark the calling thread inside (or out of) a granted call; returns the mark it had."""
    w = _watch
    if w is None:
        return False
    tid = threading.get_native_id()
    was = bool(w.inside[tid])
    w.inside[tid] = flag
    return was


def intercepted(fd: int) -> bool:
    """Whether ``fd`` is now the socket of an intercepted driver's connection (psycopg 3's libpq
    handle, every round trip of which is a step): its connect was that driver's, made where no
    mark said so (a ``connect`` bound before the hooks, as ``from psycopg import connect`` does)."""
    import gc
    import sys

    pq = sys.modules.get("psycopg.pq")
    if pq is None or not hasattr(pq, "PGconn"):
        return False
    for o in gc.get_objects():
        if isinstance(o, pq.PGconn):
            try:
                if o.socket == fd:
                    return True
            except Exception:  # noqa: BLE001 - a closed handle has no socket
                continue
    return False


_thread = threading.local()


def watch_this_thread() -> None:
    """Make sure the calling thread's connects are watched: a thread the engine made before the
    trial (in its factory, at import, in ``open()``) that now does an agent's work is filtered
    the first time it does (threads an agent started already are)."""
    w = _watch
    if w is None or getattr(_thread, "filtered", False):
        return
    _thread.filtered = True
    try:
        with open("/proc/thread-self/status") as f:
            if any(line.startswith("Seccomp_filters:") and line.split()[1] != "0" for line in f):
                return  # an agent's, or one an agent started: filtered already
        w.filter_this_thread()
    except OSError:
        pass  # the kernel refused it here: the descriptor scan and the audit hook still hold


def noted() -> int:
    """How many connects have been noted in this process so far."""
    w = _watch
    return int(w.count[0]) if w is not None and w.pid == os.getpid() else 0


def read(seen: int) -> tuple[int, list[Connect] | None]:
    w = _watch
    if w is None or w.pid != os.getpid():
        return seen, []
    return w.read(seen)
