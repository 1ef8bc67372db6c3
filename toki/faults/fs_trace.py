"""Recording the file operations a scenario makes under its storage folder (ALICE's trace).

Installed inside the harness's hooks (:func:`toki.harness.trial.hooks_installed`), in the
process that runs the scenario for the record: every point where the harness's file
interception sees bytes or names change hands to the operating system (a file opened under
the folder, the flush, close and truncate of its file objects, ``os.replace``, ``os.rename``,
``os.truncate``) and the calls the harness leaves alone but a crash does not (``os.unlink``,
``os.remove``, ``os.mkdir``, ``os.rmdir``, ``os.close`` of a descriptor under the folder) is
followed by a look at the folder: what changed since the last look, by inode, becomes the next
operations (create, write, truncate, rename, unlink, mkdir, rmdir). ``os.fsync`` and
``os.fdatasync`` are recorded as the fsync of the file or directory their descriptor names.
Looking at the folder rather than trusting the call catches bytes written through ``os.write``
too (at the next look: their order relative to that look is the only thing lost).

SQLite's files are written by its C library, which none of this sees: they are left out of
the trace (by their header and their ``-journal``/``-wal``/``-shm`` names), and the settings
each SQLite connection the engine opened runs with (``PRAGMA journal_mode``, ``synchronous``)
are recorded instead. So are the files of any other native library (a C++ database's): a file
that changes without a hooked call having named it is native, and left out.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import stat
from pathlib import Path

from toki.faults.crash_states import Image, Op, diff_blocks
from toki.harness import file_calls

_SQLITE_MAGIC = b"SQLite format 3\0"
_SQLITE_SIDE = ("-journal", "-wal", "-shm")


class Recorder:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.ops: list[Op] = []
        self.returns: list[tuple[int, str]] = []  # (number of ops when the call returned, agent)
        self.agent: str | None = "open"
        self.sqlite_files: set[str] = set()
        # Files only native code changed (a C library's own writes, whose fsyncs toki cannot see):
        # left out of the trace like SQLite's. A file is Python's once a hooked call named it.
        self.native_files: set[str] = set()
        self.touched: set[str] = set()
        self.sqlite_settings: dict[str, dict] = {}
        self._conns: list = []
        self._files: dict[str, tuple[int, bytes]] = {}
        self._dirs: set[str] = set()
        # The file system reuses a freed inode number for the next new file (atomic saves free one
        # per save): each created file gets an identity of its own, so that the temporary file of
        # the next save is not taken for the store an earlier, possibly lost, rename replaced.
        self._ids: dict[int, int] = {}
        self._last_id = 0
        files, dirs = self._look()
        self.base = Image(set(dirs), {n: self._id(i) for n, (i, _) in files.items()},
                          {self._id(i): d for i, d in files.values()})

    def _id(self, ino: int, fresh: bool = False) -> int:
        if fresh or ino not in self._ids:
            self._last_id += 1
            self._ids[ino] = self._last_id
        return self._ids[ino]

    # -- the folder, looked at ----------------------------------------------------------------
    def _look(self) -> tuple[dict[str, tuple[int, bytes]], set[str]]:
        files: dict[str, tuple[int, bytes]] = {}
        dirs: set[str] = set()
        for top, subdirs, names in os.walk(self.root):
            rel = os.path.relpath(top, self.root)
            rel = "" if rel == "." else rel
            dirs.update(os.path.join(rel, d) for d in subdirs)
            for n in names:
                p = os.path.join(top, n)
                name = os.path.join(rel, n)
                try:
                    st = os.lstat(p)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    with file_calls.real_open(p, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                if data.startswith(_SQLITE_MAGIC) or name.endswith(_SQLITE_SIDE):
                    self.sqlite_files.add(name)
                    continue
                files[name] = (st.st_ino, data)
        self._files, self._dirs = files, dirs
        return files, dirs

    def look(self) -> None:
        """Record what changed in the folder since the last look."""
        before_files, before_dirs = self._files, self._dirs
        before_ids = {ino: self._ids.get(ino) for _, (ino, _) in before_files.items()}
        files, dirs = self._look()
        by_ino_before = {ino: (name, data) for name, (ino, data) in before_files.items()}
        by_ino_now = {ino: name for name, (ino, _) in files.items()}
        new: list[Op] = []
        for d in sorted(dirs - before_dirs, key=lambda s: s.count("/")):
            if d in self.touched:
                new.append(Op("mkdir", d, agent=self.agent))
        moved: list[Op] = []
        for name, (ino, data) in sorted(files.items()):
            old = by_ino_before.get(ino)
            if (old is None or old[0] != name or old[1] != data) and name not in self.touched and \
                    (old is None or old[0] not in self.touched):
                self.native_files.add(name)
                continue
            if old is None:
                if name in before_files:  # a new file in place of an old one (not through a rename)
                    new.append(Op("unlink", name, before_ids[before_files[name][0]], agent=self.agent))
                new.append(Op("create", name, self._id(ino, fresh=True), agent=self.agent))
                old_data = b""
            else:
                old_data = old[1]
                if old[0] != name:
                    moved.append(Op("rename", old[0], self._id(ino), agent=self.agent, dest=name))
            if data != old_data:
                lid = self._id(ino)
                if len(data) < len(old_data) and old_data[:len(data)] == data:
                    new.append(Op("truncate", name, lid, agent=self.agent, size=len(data), old_size=len(old_data)))
                else:
                    new.append(Op("write", name, lid, agent=self.agent, size=len(data), old_size=len(old_data),
                                  blocks=diff_blocks(old_data, data)))
        new.extend(moved)
        for name, (ino, _) in sorted(before_files.items()):
            if name not in self.touched:
                continue
            if ino not in by_ino_now and (name not in files or files[name][0] != ino):
                renamed_over = any(m.dest == name for m in moved)
                if not renamed_over:
                    new.append(Op("unlink", name, before_ids[ino], agent=self.agent))
        for d in sorted(before_dirs - dirs, key=lambda s: -s.count("/")):
            if d in self.touched:
                new.append(Op("rmdir", d, agent=self.agent))
        self.ops.extend(new)

    def _under(self, path) -> str | None:
        try:
            p = Path(os.fsdecode(path))
            p = (p if p.is_absolute() else Path.cwd() / p).resolve()
            rel = p.relative_to(self.root)
        except (TypeError, ValueError, OSError):
            return None
        return "" if str(rel) == "." else str(rel)

    def touch(self, *paths) -> bool:
        """Note the paths under the folder a hooked call named; whether there was one."""
        hit = False
        for x in paths:
            if isinstance(x, (str, bytes, os.PathLike)):
                rel = self._under(x)
                if rel is not None:
                    self.touched.add(rel)
                    hit = True
        return hit

    def _fd_path(self, fd: int) -> str | None:
        try:
            return self._under(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            return None

    def fsync(self, fd: int) -> None:
        rel = self._fd_path(fd)
        if rel is None:
            return
        self.touched.add(rel)
        try:
            st = os.fstat(fd)
        except OSError:
            return
        if stat.S_ISDIR(st.st_mode):
            self.ops.append(Op("fsync-dir", rel, agent=self.agent))
        elif rel not in self.sqlite_files:
            self.ops.append(Op("fsync", rel, self._ids.get(st.st_ino), agent=self.agent))

    def returned(self, agent: str) -> None:
        self.look()
        self.returns.append((len(self.ops), agent))

    # -- SQLite: what the engine runs it with -------------------------------------------------
    def _sqlite_settings(self, conn) -> None:
        import sqlite3

        try:
            rows = sqlite3.Connection.execute(conn, "pragma database_list").fetchall()
            mode = sqlite3.Connection.execute(conn, "pragma journal_mode").fetchone()[0]
            sync = sqlite3.Connection.execute(conn, "pragma synchronous").fetchone()[0]
        except Exception:  # noqa: BLE001 - a closed or busy connection tells nothing
            return
        for _, schema, path in rows:
            rel = self._under(path) if path else None
            if rel is not None:
                self.sqlite_settings[rel] = {"journal_mode": str(mode).lower(), "synchronous": int(sync)}

    def sqlite_now(self) -> None:
        for c in self._conns:
            self._sqlite_settings(c)

    # -- installation -------------------------------------------------------------------------
    @contextlib.contextmanager
    def installed(self):
        """Wrap the harness's file hooks (and the calls it leaves alone) with looks at the folder.
        For the recording process only: the patches are not undone cleanly for other threads."""
        import sqlite3

        from toki.harness import sqlite_calls

        rec = self
        cf = file_calls.ControlledFile
        saved_cf = {k: cf.__dict__[k] for k in ("flush", "close", "truncate")}
        names = ("replace", "rename", "truncate", "unlink", "remove", "mkdir", "rmdir", "fsync", "fdatasync",
                 "close", "open")
        saved_os = {k: getattr(os, k) for k in names}
        saved_open = builtins.open, io.open
        saved_connect = sqlite3.connect, sqlite3.dbapi2.connect
        cc = sqlite_calls.ControlledConnection
        saved_cc_close = cc.close

        def after(fn):
            def call(*a, **kw):
                try:
                    return fn(*a, **kw)
                finally:
                    rec.look()
            return call

        def path_call(fn):
            def call(*a, **kw):
                mine = rec.touch(*a[:2])
                try:
                    return fn(*a, **kw)
                finally:
                    if mine:
                        rec.look()
            return call

        def opener(fn):
            def call(file, *a, **kw):
                mine = not isinstance(file, int) and rec.touch(file)
                f = fn(file, *a, **kw)
                if mine:
                    rec.look()
                return f
            return call

        def sync(fn):
            def call(fd):
                rec.look()  # bytes written past the hooks (os.write) reach the trace before the sync
                r = fn(fd)
                rec.fsync(fd)
                return r
            return call

        def os_open(path, *a, **kw):
            mine = rec.touch(path)
            fd = saved_os["open"](path, *a, **kw)
            if mine:
                rec.look()
            return fd

        def close_fd(fd):
            rel = rec._fd_path(fd)
            mine = rel is not None
            if mine:
                rec.touched.add(rel)
            r = saved_os["close"](fd)
            if mine:
                rec.look()
            return r

        def connect(*a, **kw):
            c = saved_connect[0](*a, **kw)
            rec._conns.append(c)
            return c

        def cc_close(self):
            rec._sqlite_settings(self)
            return saved_cc_close(self)

        for k in ("flush", "close", "truncate"):
            setattr(cf, k, after(saved_cf[k]))
        for k in ("replace", "rename", "truncate", "unlink", "remove", "mkdir", "rmdir"):
            setattr(os, k, path_call(saved_os[k]))
        os.fsync, os.fdatasync, os.close = sync(saved_os["fsync"]), sync(saved_os["fdatasync"]), close_fd
        os.open = os_open
        builtins.open = io.open = opener(saved_open[0])
        sqlite3.connect = sqlite3.dbapi2.connect = connect
        cc.close = cc_close
        try:
            yield self
        finally:
            for k, v in saved_cf.items():
                setattr(cf, k, v)
            for k, v in saved_os.items():
                setattr(os, k, v)
            builtins.open, io.open = saved_open
            sqlite3.connect, sqlite3.dbapi2.connect = saved_connect
            cc.close = saved_cc_close
