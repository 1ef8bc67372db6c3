"""File writes of file-backed engines, intercepted at the standard library.

While the hook is installed, every file opened under the storage folder (``builtins.open`` and
``io.open``, so ``pathlib`` too), on any thread, in ``open()``, ``setup`` or a call, is a
controlled file object: an engine that opens its file once and keeps the handle has each read,
flush and truncate scheduled like one that reopens it per call. ``os.replace``, ``os.rename``
and ``os.truncate`` under the folder, and every ``os.fsync`` of an agent, are steps too. On a
thread that is neither an agent nor working for one, a call on a file under the folder during a
run is refused (:func:`~toki.harness.controller.controlled`). Opening for
writing is a step of its own because ``"w"`` truncates at once: another agent can read the
empty file before the writer writes. A file object's ``read``, ``write`` with ``flush``/``close``
(when buffered bytes reach the operating system) and ``truncate`` are steps too; a ``write``
that only fills Python's buffer is not, because no other agent can see it.
Only paths under the trial's storage location are intercepted.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
from pathlib import Path

from toki.harness.controller import controlled, current_agent
from toki.harness.steps import StepKind, file_footprint

real_open = builtins.open  # the standard library's open, for the harness's own reads while the hook is installed
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Calls on a raw descriptor of a file under the folder: each reaches the OS at once.
_RAW_FD = {"write": StepKind.FILE_WRITE, "pwrite": StepKind.FILE_WRITE, "writev": StepKind.FILE_WRITE,
           "ftruncate": StepKind.FILE_WRITE, "fchmod": StepKind.FILE_WRITE, "read": StepKind.FILE_READ,
           "pread": StepKind.FILE_READ}
_RAW = ("open", "remove", "unlink", *_RAW_FD)


def fd_path(fd) -> str | None:
    """The path a descriptor names, steady from run to run: a file opened unnamed (``O_TMPFILE``)
    or deleted since shows as ``(unnamed file)`` in its folder, not with its inode number."""
    if not isinstance(fd, int) or fd < 0:
        return None
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    if path.endswith(" (deleted)"):
        path = os.path.join(os.path.dirname(path), "(unnamed file)")
    return path


def _flag_names(flags: int) -> str:
    names = [n for n in ("O_RDWR", "O_WRONLY", "O_CREAT", "O_TRUNC", "O_APPEND", "O_EXCL") if flags & getattr(os, n)]
    return "|".join(names) or "O_RDONLY"


class ControlledFile:
    def __init__(self, f, label: str, writing: bool):
        self._f, self._label, self._writing = f, label, writing
        self._dirty = False

    def _step(self, kind: StepKind, detail: str, fn):
        return controlled(kind, detail, fn, touches=file_footprint(kind, self._label))

    def read(self, *a):
        return self._step(StepKind.FILE_READ, f"read {self._label}", lambda: self._f.read(*a))

    def readline(self, *a):
        return self._step(StepKind.FILE_READ, f"readline {self._label}", lambda: self._f.readline(*a))

    def readlines(self, *a):
        return self._step(StepKind.FILE_READ, f"readlines {self._label}", lambda: self._f.readlines(*a))

    def __iter__(self):
        return iter(self.readlines())

    def write(self, data):
        self._dirty = True
        return self._f.write(data)

    def writelines(self, lines):
        self._dirty = True
        return self._f.writelines(lines)

    def flush(self):
        if not self._dirty:
            return self._f.flush()
        self._dirty = False
        return self._step(StepKind.FILE_WRITE, f"write {self._label}", self._f.flush)

    def seek(self, *a):
        # A seek with written bytes in Python's buffer writes them out first: that write is a step.
        if not self._dirty:
            return self._f.seek(*a)
        self._dirty = False
        return self._step(StepKind.FILE_WRITE, f"write {self._label}", lambda: self._f.seek(*a))

    def fileno(self):
        # Whoever asks for the descriptor is about to use it past Python's buffer (os.fsync,
        # fcntl, a C library): buffered bytes reach the OS first, as a step.
        if self._dirty:
            self.flush()
        return self._f.fileno()

    def truncate(self, *a):
        return self._step(StepKind.FILE_WRITE, f"truncate {self._label}", lambda: self._f.truncate(*a))

    def close(self):
        if self._f.closed:
            return None
        if self._dirty:
            self._dirty = False
            return self._step(StepKind.FILE_WRITE, f"write+close {self._label}", self._f.close)
        return self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getattr__(self, name):
        return getattr(self._f, name)


class FileHook:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()

    def _mine(self, path) -> str | None:
        try:
            p = Path(os.fsdecode(path)).resolve()
        except (TypeError, ValueError):
            return None
        try:
            return str(p.relative_to(self.root))
        except ValueError:
            return None

    def open(self, file, mode="r", *args, **kwargs):
        label = self._mine(file) if not isinstance(file, int) else None
        if label is None:
            return real_open(file, mode, *args, **kwargs)
        writing = any(c in mode for c in "wax+")
        kind = StepKind.FILE_OPEN_W if "w" in mode else (StepKind.FILE_OPEN_A if writing else StepKind.FILE_OPEN)
        f = controlled(kind, f"open({label!r}, {mode!r})", lambda: real_open(file, mode, *args, **kwargs),
                       touches=file_footprint(kind, label))
        return ControlledFile(f, label, writing)

    def _os(self, name: str, orig, kind: StepKind):
        def call(*args, **kwargs):
            labels = [self._mine(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
            if not any(labels):
                return orig(*args, **kwargs)
            return controlled(kind, f"{name}({', '.join(repr(x) for x in labels if x)})",
                              lambda: orig(*args, **kwargs), touches=file_footprint(kind, *labels))
        return call

    def _fd_label(self, fd) -> str | None:
        path = fd_path(fd)
        return None if path is None else self._mine(path)

    def _os_open(self, orig):
        # A descriptor opened for writing truncates or creates at once, and what os.write/os.read
        # do on it reaches the OS with no Python buffer in between: each is a step (below).
        def os_open(path, flags, *args, **kwargs):
            label = self._mine(path) if isinstance(path, (str, bytes, os.PathLike)) and current_agent() else None
            if label is None or not flags & _WRITE_FLAGS:
                return orig(path, flags, *args, **kwargs)
            kind = StepKind.FILE_OPEN_W if flags & os.O_TRUNC else StepKind.FILE_OPEN_A
            return controlled(kind, f"open({label!r}, {_flag_names(flags)!r})", lambda: orig(path, flags, *args, **kwargs),
                              touches=file_footprint(kind, label))
        return os_open

    def _on_fd(self, name: str, orig, kind: StepKind):
        def call(fd, *args, **kwargs):
            label = self._fd_label(fd) if current_agent() else None
            if label is None:
                return orig(fd, *args, **kwargs)
            verb = "read" if kind == StepKind.FILE_READ else name
            return controlled(kind, f"{verb} {label}", lambda: orig(fd, *args, **kwargs),
                              touches=file_footprint(kind, label))
        return call

    def _fsync(self, orig):
        def fsync(fd):
            me = current_agent()
            if me is None:
                return orig(fd)
            # a descriptor, not a file: it may be any file's
            return me[0].step(StepKind.FILE_FSYNC, f"fsync({fd})", lambda: orig(fd),
                              touches=file_footprint(StepKind.FILE_FSYNC))
        return fsync

    @contextlib.contextmanager
    def installed(self):
        saved = {"open": builtins.open, "io_open": io.open, "replace": os.replace, "rename": os.rename,
                 "truncate": os.truncate, "fsync": os.fsync}
        raw = {name: getattr(os, name) for name in _RAW}
        os.fsync = self._fsync(saved["fsync"])
        builtins.open = io.open = self.open
        os.replace = self._os("replace", saved["replace"], StepKind.FILE_RENAME)
        os.rename = self._os("rename", saved["rename"], StepKind.FILE_RENAME)
        os.truncate = self._os("truncate", saved["truncate"], StepKind.FILE_WRITE)
        os.open = self._os_open(raw["open"])
        for name in ("remove", "unlink"):
            setattr(os, name, self._os(name, raw[name], StepKind.FILE_RENAME))
        for name, kind in _RAW_FD.items():
            setattr(os, name, self._on_fd(name, raw[name], kind))
        try:
            yield
        finally:
            for name, fn in raw.items():
                setattr(os, name, fn)
            builtins.open, io.open = saved["open"], saved["io_open"]
            os.replace, os.rename, os.truncate = saved["replace"], saved["rename"], saved["truncate"]
            os.fsync = saved["fsync"]
