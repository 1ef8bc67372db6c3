"""Effects outside granted steps, seen from the operating system's side (fail closed per effect).

The interception modules make the calls of the drivers toki knows into steps. An agent that also
reaches storage some other way (a C-extension driver such as psycopg2 or a native key-value
store, a Python socket client such as redis-py, a file outside the run's folder) does so between
two steps, where no interleaving toki explores can split it; a verdict built on such a run would
certify calls nobody scheduled. So toki does not list drivers: it watches what the process does.

- **Python-level**, in every run: an audit hook (:func:`sys.addaudithook`) sees files opened for
  writing, removed, renamed or truncated outside the run's folder, writable memory maps, and
  socket connects and sends; :data:`socket.socket`'s send and receive methods are wrapped during
  a trial. On an agent's thread (or a worker acting for one) outside a granted call, such an
  effect stops the run as :class:`~toki.harness.controller.Unverifiable`, naming the thread, the
  code location and what was done, and the call does not run.
- **C-level**, in the self-checked runs (every serial order, twice, and every replay): a scan of
  the process's descriptors between one step's end and the next grant. A TCP connection that no
  intercepted driver owns and whose byte counters (``TCP_INFO``) moved, a regular file held open
  for writing outside the folder whose size or time changed, a shared writable memory map whose file changed,
  or a Unix-socket connection to a server that no intercepted driver owns (Linux keeps no byte
  counters for those) makes the run unverifiable. A file counts as changed only when this process
  made a write system call in that window (another process may write a file held open here, as
  pytest-xdist's controller writes the output its workers inherit). Every scenario runs its serial orders before
  any search, so an engine that always takes such a path is refused before a verdict is made.

Allowed, by design: the standard streams and logging's handlers, reads of files (configuration,
code, models), unnamed socket pairs (an event loop's wake-up pipe), and everything the harness's
own threads do. The engines documentation lists each path and what happens to it.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import socket
import stat
import struct
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

from toki.harness import connect_watch
from toki.harness import controller as _ctl

# -- who is acting, and where ---------------------------------------------------------------------

def _where() -> str:
    """The first frame outside the standard library and toki: the code that did it."""
    f = sys._getframe(2)
    stdlib = os.path.dirname(os.__file__)
    here = os.path.dirname(os.path.dirname(__file__))
    while f is not None:
        fn = f.f_code.co_filename
        if not (fn.startswith("<") or fn.startswith(here) or (fn.startswith(stdlib) and "-packages" not in fn)):
            return f"{fn}:{f.f_lineno} (in {f.f_code.co_name})"
        f = f.f_back
    return "an unknown place"


def _stop(me, what: str) -> None:
    ctl, agent = me
    err = _ctl.Unverifiable(
        f"agent {agent.name} (thread {threading.current_thread().name!r}) {what} at {_where()}, outside any "
        "storage call the harness grants: no interleaving toki runs can split it, so a verdict would rest on "
        "an effect nobody scheduled",
        fix="reach storage through sqlite3, psycopg 3, PyMySQL or files under the run's folder (the location "
            "open() gets); a driver toki does not intercept (a C extension, a socket client, a native store "
            "writing elsewhere) cannot be certified (see 'What the harness sees' in the engines docs)")
    ctl.stop_with(err)
    raise err


# -- the audit hook (installed once; idle outside trials) ---------------------------------------

_location: Path | None = None  # the run's folder while a trial's hooks are installed
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_ALLOWED_PREFIXES = ("/dev/", "/proc/", "/sys/")
_WATCH_TABLE = f"/memfd:{connect_watch.TABLE}"  # the harness's own, shared with the connect watch's supervisor


def _outside(path) -> str | None:
    """The path when it lies outside the run's folder and is not an allowed kind, else None."""
    if _location is None or isinstance(path, int):
        return None
    try:
        p = os.path.abspath(os.fsdecode(path))
    except (TypeError, ValueError):
        return None
    if p.startswith(_ALLOWED_PREFIXES) or "__pycache__" in p or p.endswith(".pyc"):
        return None
    root = str(_location)
    return None if p == root or p.startswith(root + os.sep) else p


def _from_logging() -> bool:
    f = sys._getframe(3)
    for _ in range(12):
        if f is None:
            return False
        if f.f_globals.get("__name__", "").startswith("logging"):
            return True
        f = f.f_back
    return False


def _audit(event: str, args: tuple) -> None:
    if event == "socket.__new__":
        if args:
            note_socket_owner(args[0])
        return
    if _location is None:
        return
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None))[:3]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and mode is None and flags & _WRITE_FLAGS)
        if not writing or path is None:
            return
        p = _outside(path)
        if p is None or _from_logging():
            return
        me = _ctl.acting_outside_call()
        if me is not None:
            _stop(me, f"opened {p} for writing, outside the run's folder")
    elif event in ("os.remove", "os.rename", "os.truncate", "os.rmdir", "os.mkdir", "os.link", "os.symlink"):
        paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
        hits = [p for p in map(_outside, paths) if p]
        if hits:
            me = _ctl.acting_outside_call()
            if me is not None:
                _stop(me, f"called {event}({', '.join(hits)}) outside the run's folder")
    elif event == "mmap.__new__":
        fileno, _length, access = (tuple(args) + (None, None, None))[:3]
        import mmap

        if isinstance(fileno, int) and fileno >= 0 and access in (mmap.ACCESS_WRITE, mmap.ACCESS_DEFAULT):
            me = _ctl.acting_outside_call()
            if me is not None:
                _stop(me, f"mapped descriptor {fileno} ({_fd_path(fileno)}) writable into memory (a write "
                          "through the map is no call the harness can grant)")
    elif event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        sock = args[0] if args else None
        if _external(sock):
            me = _ctl.acting_outside_call()
            if me is not None:
                _stop(me, f"{event.split('.')[1]}() on a socket to {_peer(sock, args)}")


_hooked = False


def _install_audit_hook() -> None:
    global _hooked
    if not _hooked:
        sys.addaudithook(_audit)  # for the life of the process: audit hooks cannot be removed
        _hooked = True


# -- owners of sockets watched elsewhere ---------------------------------------------------------

# Python sockets (noted by the audit hook as they are made) and psycopg 3's libpq handles (noted by
# pg_calls as they connect, or found by a scan): the descriptor scan asks them which socket
# descriptors are accounted for before it walks every object of the process.
_socket_owners: "weakref.WeakSet[Any]" = weakref.WeakSet()


def note_socket_owner(obj) -> None:
    """Remember ``obj`` (a ``socket.socket`` or a psycopg 3 ``PGconn``) as owning the socket it
    holds now or later; forgotten when it is collected."""
    with contextlib.suppress(TypeError):  # an owner without weak references is found by the scan
        _socket_owners.add(obj)


def _owned_fds() -> set[int]:
    fds: set[int] = set()
    # A copy of the references taken in one C call: another thread may note an owner meanwhile.
    for ref in _socket_owners.data.copy():
        o = ref()
        if o is None:
            continue
        with contextlib.suppress(Exception):
            fds.add(o.fileno() if isinstance(o, socket.socket) else o.socket)
    fds.discard(-1)
    return fds


# -- Python sockets (wrapped during a trial) ----------------------------------------------------

def _external(sock) -> bool:
    """A socket that reaches outside the process: not an unnamed Unix pair (an event loop's
    wake-up pipe, a worker's channel)."""
    try:
        if sock.family == socket.AF_UNIX:
            try:
                return bool(sock.getpeername())
            except OSError:
                return False  # not connected yet: its connect is judged on its own
        return sock.family in (socket.AF_INET, socket.AF_INET6)
    except Exception:  # noqa: BLE001 - a closed socket: the call fails on its own
        return False


def _peer(sock, args=()) -> str:
    try:
        return str(sock.getpeername())
    except Exception:  # noqa: BLE001 - not connected: name the address it was given
        return str(args[1]) if len(args) > 1 else "?"


_SOCKET_METHODS = ("send", "sendall", "sendto", "sendmsg", "recv", "recv_into", "recvfrom", "recvfrom_into",
                   "recvmsg", "sendfile")


def _wrap_socket(name: str, orig):
    def call(self, *args, **kwargs):
        if _location is not None and _external(self):
            me = _ctl.acting_outside_call()
            if me is not None:
                _stop(me, f"called socket.{name}() on a connection to {_peer(self)}")
        return orig(self, *args, **kwargs)
    call.__wrapped__ = orig
    call.__name__ = name
    return call


@contextlib.contextmanager
def installed(location: Path):
    """Watch for effects outside granted calls while a trial runs in ``location``."""
    global _location
    _install_audit_hook()
    saved = []
    for name in _SOCKET_METHODS:
        orig = getattr(socket.socket, name, None)
        if orig is None:
            continue
        saved.append((name, socket.socket.__dict__.get(name)))
        setattr(socket.socket, name, _wrap_socket(name, orig))
    _location = Path(location).resolve()
    try:
        yield
    finally:
        _location = None
        for name, orig in saved:
            if orig is None:
                delattr(socket.socket, name)
            else:
                setattr(socket.socket, name, orig)


# -- the descriptor scan (self-checked runs) ----------------------------------------------------

_TCP_INFO = getattr(socket, "TCP_INFO", 11)
# struct tcp_info (linux/tcp.h): tcpi_bytes_acked at byte 120, tcpi_bytes_received at 128 (4.1+),
# tcpi_bytes_sent at 192 (4.19+).
_OFFSETS = {"acked": 120, "received": 128, "sent": 192}


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"


def _tcp_counters(fd: int) -> tuple[int, ...] | None:
    s = socket.socket(fileno=fd)
    try:
        raw = s.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 256)
    except OSError:
        return None
    finally:
        s.detach()
    out = []
    for off in (_OFFSETS["sent"], _OFFSETS["received"]):
        out.append(struct.unpack_from("Q", raw, off)[0] if len(raw) >= off + 8 else 0)
    return tuple(out)


def _socket_info(fd: int) -> tuple[int, int, str] | None:
    """(family, type, peer) of a socket descriptor (None when it is gone)."""
    try:
        s = socket.socket(fileno=fd)
    except OSError:  # closed since the descriptors were listed (another thread's, or a pool's)
        return None
    try:
        fam, typ = s.family, s.type
        try:
            peer = s.getpeername()
        except OSError:
            peer = ""
        return int(fam), int(typ), str(peer) if peer else ""
    except OSError:
        return None
    finally:
        s.detach()


class DescriptorScan:
    """What the process's descriptors and shared maps show, keyed for a before/after comparison.

    Sockets owned by a driver whose calls are steps (psycopg 3, Python sockets: their use outside
    a call is caught where it happens) are left out; so are the harness's own connections, the
    standard streams and logging's files. Classification is cached by socket inode, so a scan is
    one directory listing and a readlink per descriptor after the first."""

    def __init__(self, root: Path):
        self.root = str(Path(root).resolve())
        self._kind: dict[str, str] = {}  # socket inode -> "known" | "tcp" | "unix-server" | "other"
        self._peers: dict[str, str] = {}
        # What is costly to read (the shared maps: ~1 ms in a process with numba loaded; logging's
        # handlers) is read again only when the descriptors changed (and the maps now and then).
        self._fds_seen: frozenset[str] | None = None
        self._allowed: set[int] = set()
        self._maps_key: frozenset[str] | None = None
        self._maps: set[str] = set()
        self._scans = 0
        self._syscw: int | None = None
        self._files: dict[str, Any] = {}
        self._links: dict[int, tuple[tuple[int, int], str]] = {}  # descriptor -> (what it stood for, its link)

    def _allowed_fds(self) -> set[int]:
        fds = {0, 1, 2}
        import logging

        loggers = [logging.getLogger()] + [v for v in logging.Logger.manager.loggerDict.values()
                                           if isinstance(v, logging.Logger)]
        for lg in loggers:
            for h in lg.handlers:
                with contextlib.suppress(Exception):
                    fds.add(h.stream.fileno())
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                fds.add(stream.fileno())
        return fds | _saved_standard_streams() | _parents_output()

    def _known_sockets(self, wanted: set[int]) -> set[int]:
        """Descriptors of sockets whose use is watched or granted elsewhere: psycopg 3
        connections (every round trip a step) and Python socket objects (wrapped).

        The owners met before (noted at creation, or found by an earlier scan) are asked first;
        only a descriptor none of them owns costs a walk over every object of the process (tens of
        milliseconds in a process that imported an engine's dependencies, paid at each new socket
        when every run opens its own connections)."""
        fds = _owned_fds()
        if wanted <= fds:
            return fds
        # The libpq handle, not the Connection: a pool's connection mid-connect has only that.
        pq = sys.modules.get("psycopg.pq")
        pgconn: tuple = (pq.PGconn,) if pq is not None and hasattr(pq, "PGconn") else ()
        for o in gc.get_objects():
            if isinstance(o, socket.socket):
                with contextlib.suppress(Exception):
                    fds.add(o.fileno())
                    note_socket_owner(o)
            elif pgconn and isinstance(o, pgconn):
                with contextlib.suppress(Exception):
                    fds.add(o.socket)
                    note_socket_owner(o)
        return fds

    def _classify(self, fresh: dict[str, int]) -> None:
        known = self._known_sockets(set(fresh.values()))
        for inode, fd in fresh.items():
            info = _socket_info(fd)
            if fd in known or info is None:
                self._kind[inode] = "known"
                continue
            fam, typ, peer = info
            self._peers[inode] = peer
            if typ != socket.SOCK_STREAM:
                self._kind[inode] = "other"
            elif fam in (socket.AF_INET, socket.AF_INET6):
                self._kind[inode] = "tcp"
            elif fam == socket.AF_UNIX and peer and not peer.startswith("\0"):
                self._kind[inode] = "unix-server"
            else:
                self._kind[inode] = "other"

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        files: dict[str, Any] = {}
        fresh: dict[str, int] = {}
        links: list[tuple[int, str, os.stat_result]] = []
        try:
            names = os.listdir("/proc/self/fd")
        except OSError:
            return out  # not Linux: the Python-level watch still holds
        seen = frozenset(names)
        if seen != self._fds_seen:  # a logging handler may have opened its file since
            self._fds_seen, self._allowed = seen, self._allowed_fds()
        allowed = self._allowed
        for name in names:
            fd = int(name)
            if fd in allowed:
                continue
            # A socket's or pipe's link is read again only when the descriptor stands for another
            # one than at the last scan: fstat is one system call on the descriptor, reading the
            # link a path walk through /proc, and a serial run scans at every step. Their inode
            # numbers come from a counter; a file's can be reused by the next file made, so a
            # file's link is always read (what it names decides whether it is the run's own).
            try:
                st = os.fstat(fd)
            except OSError:
                continue  # closed since the listing
            ident = (st.st_dev, st.st_ino)
            hit = None if stat.S_ISREG(st.st_mode) else self._links.get(fd)
            if hit is not None and hit[0] == ident:
                link = hit[1]
            else:
                link = _fd_path(fd)
                self._links[fd] = (ident, link)
            links.append((fd, link, st))
            if link.startswith("socket:[") and link not in self._kind:
                fresh[link] = fd
        if fresh:
            self._classify(fresh)
        for fd, link, st in links:
            if link.startswith("socket:["):
                kind = self._kind.get(link)
                if kind == "tcp":
                    out[f"TCP connection to {self._peers.get(link) or '?'} that no intercepted driver owns "
                        f"(descriptor {fd}, bytes sent/received)"] = _tcp_counters(fd)
                elif kind == "unix-server":
                    raise _ctl.Unverifiable(
                        f"descriptor {fd} is a connection to {self._peers.get(link)} over a Unix socket that no "
                        "intercepted driver owns (a C-extension client such as psycopg2 or a native store's): "
                        "Linux keeps no counters for such a socket, so what goes over it cannot be checked",
                        fix="use psycopg 3, PyMySQL or sqlite3 for the engine's storage, or connect over TCP so "
                            "that toki can at least see that it was used")
            elif link.startswith("/") and not link.startswith(_ALLOWED_PREFIXES) and not (
                    link == self.root or link.startswith(self.root + os.sep)) and not link.startswith(_WATCH_TABLE):
                # Only a descriptor that can write: one open for reading changes nothing, and a
                # thread of a host process (a Dask worker formatting a traceback) opens sources
                # for reading at any moment.
                if not stat.S_ISREG(st.st_mode):
                    continue
                try:
                    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                        continue
                except OSError:
                    continue
                files[f"{link} (held open for writing outside the run's folder, descriptor {fd})"] = (st.st_size,
                                                                                     st.st_mtime_ns)
        # A file can change without this process writing it: a log that a parent process (pytest-xdist's
        # controller, a shell) writes through a descriptor this process inherited. The kernel counts
        # the process's write system calls (write, pwrite, writev; not send, not ftruncate): when
        # none was made since the last scan, a file held open here changed through someone else.
        syscw = _write_calls() if files else None  # (no file held open outside: nothing to carry over)
        if syscw is not None and syscw == self._syscw:
            files.update((k, self._files[k]) for k in files.keys() & self._files.keys())
        self._syscw, self._files = syscw, files
        out.update(files)
        # A map outlives its descriptor: read the maps again when the descriptors changed, and
        # every 64th scan besides (a C library that opens, maps and closes within one window).
        # Files under the folder are the folder fingerprint's: only descriptors elsewhere count.
        self._scans += 1
        # Sockets, pipes and event descriptors map no file: a run's new connections change nothing here
        # (and reading the maps of a process that loaded an engine's libraries takes milliseconds).
        elsewhere = frozenset(link for _, link, _ in links
                              if not link.startswith((self.root + os.sep, "socket:[", "pipe:[", "anon_inode:")))
        if elsewhere != self._maps_key or self._scans % 64 == 0:
            self._maps_key, self._maps = elsewhere, _shared_maps()
        for path in self._maps:
            if path == self.root or path.startswith(self.root + os.sep) or path.startswith(_ALLOWED_PREFIXES):
                continue
            with contextlib.suppress(OSError):
                st = os.stat(path)
                out[f"{path} (mapped writable into memory)"] = (st.st_size, st.st_mtime_ns)
        return out


_saved_streams: tuple[int, frozenset[int]] | None = None


def _parents_output() -> frozenset[int]:
    """This process's descriptors of the file its parent writes its standard output or error to:
    the output both share (a CI job's log that pytest-xdist's controller writes while this worker
    runs a trial, kept here on a descriptor execnet set aside), not storage."""
    try:
        theirs = set()
        for n in (1, 2):
            st = os.stat(f"/proc/{os.getppid()}/fd/{n}")
            if stat.S_ISREG(st.st_mode):
                theirs.add((st.st_dev, st.st_ino))
        if not theirs:
            return frozenset()
        mine = set()
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                st = os.fstat(int(name))
                if (st.st_dev, st.st_ino) in theirs:
                    mine.add(int(name))
        return frozenset(mine)
    except OSError:  # not Linux, or the parent's descriptors are not ours to read
        return frozenset()


def _saved_standard_streams() -> frozenset[int]:
    """The descriptors where a test runner keeps the process's own standard output and error
    while it captures them (pytest's FDCapture dups fd 1 and 2 aside): the run's own output, like
    fd 1 and 2. Under pytest-xdist they are the controller's output file, which the controller
    writes while this worker runs a trial. Looked up once per process (a walk of the heap)."""
    global _saved_streams
    capture = sys.modules.get("_pytest.capture")
    if capture is None or not hasattr(capture, "FDCaptureBase"):
        return frozenset()
    if _saved_streams is None or _saved_streams[0] != os.getpid():
        saved = set()
        for o in gc.get_objects():
            if isinstance(o, capture.FDCaptureBase) and isinstance(getattr(o, "targetfd_save", None), int):
                saved.add(o.targetfd_save)
        _saved_streams = (os.getpid(), frozenset(saved))
    return _saved_streams[1]


def _write_calls() -> int | None:
    """The process's count of write system calls so far (Linux task I/O accounting), or None."""
    try:
        with open("/proc/self/io", "rb") as f:
            for line in f:
                if line.startswith(b"syscw:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _shared_maps() -> set[str]:
    """Files mapped shared and writable into this process (a store that writes through mmap)."""
    found = set()
    try:
        with open("/proc/self/maps", "rb") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[1][1:2] == b"w" and parts[1][3:4] == b"s":
                    p = parts[5].strip().decode(errors="replace")
                    if p.startswith("/") and not p.endswith("(deleted)"):
                        found.add(p)
    except OSError:
        pass
    return found
