"""Crash states from a trace of file operations, as ALICE (Pillai et al., OSDI 2014) builds them.

Pure: no I/O but :func:`materialize`. A trace is the list of :class:`Op` a scenario made on the
files under its storage folder (recorded by :mod:`toki.faults.fs_trace`), each naming the inode
it acted on, so that a write to a temporary file follows the file when it is renamed over the
store. The durable state at a crash is the folder as the run started (its seed, durable) with a
subset of the operations issued before the crash applied in order, under this persistence model:

- ``fsync`` of a file makes the data operations (writes, truncates) on that inode issued before
  it durable; ``fsync`` of a directory makes the entry operations (create, rename, unlink,
  mkdir, rmdir) in it issued before it durable. Nothing else is ever durable: a rename or a
  create is durable only after its directory is fsynced (POSIX promises no more; ext4 and others
  often give more, and ALICE checks against such weaker promises too).
- Every other operation may be lost, and unsynced operations may persist out of order.

For each crash point (after each operation) the states are: every in-order prefix of the
unsynced operations (all of them dropped, ..., all of them persisted: what a process crash
leaves); each unsynced operation dropped while the later ones persist (reordering); each unsynced
write persisted in part, its first k changed 4 KiB blocks (ALICE's granularity), and an append
whose new size persisted but not its data (zeros). States equal as folders are built once.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

BLOCK = 4096
DATA_OPS = ("write", "truncate")
ENTRY_OPS = ("create", "rename", "unlink", "mkdir", "rmdir")
MAX_PARTS = 4  # partial persistence: at most this many block prefixes of one write (evenly spread)


@dataclass(frozen=True)
class Op:
    """One file operation under the storage folder. ``path`` is relative to the folder."""

    kind: str  # create write truncate fsync fsync-dir rename unlink mkdir rmdir
    path: str
    ino: int | None = None  # the file's identity in the trace (a reused inode number is a new file)
    agent: str | None = None  # whose call made it ("open" before the first call)
    dest: str | None = None  # rename's target
    size: int | None = None  # write/truncate: the file's size after it
    blocks: tuple[tuple[int, bytes], ...] = ()  # write: the 4 KiB blocks it changed, new bytes
    old_size: int | None = None  # write/truncate: the file's size before it

    def label(self) -> str:
        who = f"{self.agent}: " if self.agent else ""
        if self.kind == "rename":
            return f"{who}rename {self.path} -> {self.dest}"
        if self.kind == "write":
            return f"{who}write {self.path} ({len(self.blocks)} block(s), size {self.size})"
        if self.kind == "truncate":
            return f"{who}truncate {self.path} to {self.size}"
        return f"{who}{self.kind} {self.path or '.'}"

    def dirs(self) -> set[str]:
        """The directories whose fsync makes this entry operation durable."""
        out = {posixpath.dirname(self.path)}
        if self.dest is not None:
            out.add(posixpath.dirname(self.dest))
        return out


@dataclass
class Image:
    """A folder as data: directories, names -> inodes, inodes -> bytes."""

    dirs: set[str] = field(default_factory=set)
    names: dict[str, int] = field(default_factory=dict)
    data: dict[int, bytes] = field(default_factory=dict)

    def copy(self) -> "Image":
        return Image(set(self.dirs), dict(self.names), dict(self.data))

    def digest(self) -> str:
        h = hashlib.sha256()
        for d in sorted(self.dirs):
            h.update(b"d\0" + d.encode() + b"\0")
        for name in sorted(self.visible()):
            h.update(b"f\0" + name.encode() + b"\0" + hashlib.sha256(self.data.get(self.names[name], b"")).digest())
        return h.hexdigest()

    def visible(self) -> list[str]:
        """Names whose directory exists in the image (an entry in a directory lost with it is lost)."""
        return [n for n in self.names if posixpath.dirname(n) in ("", *self.dirs)]


def _write(data: bytes, op: Op, upto: int | None = None, zeros: bool = False) -> bytes:
    buf = bytearray(data)
    size = op.size if op.size is not None else len(buf)
    blocks = op.blocks if upto is None else op.blocks[:upto]
    if zeros:
        blocks = ()
    if upto is not None and not zeros and size > len(buf):  # a partial append: the size follows the data
        end = max((i * BLOCK + len(b) for i, b in blocks), default=len(buf))
        size = max(len(buf), min(size, end))
    if size > len(buf):
        buf.extend(b"\0" * (size - len(buf)))
    for i, b in blocks:
        buf[i * BLOCK:i * BLOCK + len(b)] = b
    return bytes(buf[:size])


def apply(img: Image, op: Op, *, upto: int | None = None, zeros: bool = False) -> None:
    """Apply one operation (in part: its first ``upto`` blocks; or its size without its data)."""
    k = op.kind
    if k in DATA_OPS:
        img.data[op.ino] = _write(img.data.get(op.ino, b""), op, upto, zeros)
    elif k == "create":
        img.names[op.path] = op.ino
        img.data.setdefault(op.ino, b"")
    elif k == "rename":
        # The rename moves the inode it moved when recorded, whether or not its create persisted:
        # a renamed file whose data never reached the disk is there, empty.
        if img.names.get(op.path) == op.ino:
            del img.names[op.path]
        img.names[op.dest] = op.ino
        img.data.setdefault(op.ino, b"")
    elif k == "unlink":
        if img.names.get(op.path) == op.ino:
            del img.names[op.path]
    elif k == "mkdir":
        img.dirs.add(op.path)
    elif k == "rmdir":
        img.dirs.discard(op.path)


def synced(ops: list[Op], point: int) -> set[int]:
    """Indexes of the operations before ``point`` that an fsync before ``point`` made durable."""
    out: set[int] = set()
    for i in range(point):
        o = ops[i]
        later = ops[i + 1:point]
        if o.kind in DATA_OPS:
            if any(x.kind == "fsync" and x.ino == o.ino for x in later):
                out.add(i)
        elif o.kind in ENTRY_OPS:
            done = {x.path for x in later if x.kind == "fsync-dir"}
            if o.dirs() <= done:
                out.add(i)
    return out


@dataclass(frozen=True)
class CrashState:
    """Which operations of the trace persisted at a crash after ``point`` operations."""

    point: int
    persist: tuple[int, ...]
    partial: tuple[int, int] | None = None  # (op index, blocks persisted)
    zeros: int | None = None  # op index whose new size persisted without its data
    how: str = "prefix"  # prefix, reordered, partial, size-only

    def to_json(self) -> dict:
        return {"point": self.point, "persist": list(self.persist), "partial": list(self.partial or []) or None,
                "zeros": self.zeros, "how": self.how}

    @classmethod
    def from_json(cls, d: dict) -> "CrashState":
        p = d.get("partial")
        return cls(int(d["point"]), tuple(int(i) for i in d["persist"]), tuple(p) if p else None,
                   d.get("zeros"), str(d.get("how", "prefix")))

    def image(self, base: Image, ops: list[Op]) -> Image:
        img = base.copy()
        for i in sorted({*self.persist, *([self.partial[0]] if self.partial else []),
                         *([self.zeros] if self.zeros is not None else [])}):
            if self.partial and i == self.partial[0]:
                apply(img, ops[i], upto=self.partial[1])
            elif i == self.zeros:
                apply(img, ops[i], zeros=True)
            else:
                apply(img, ops[i])
        return img

    def trace(self, ops: list[Op]) -> list[str]:
        """The operations that decide this state: from the first one not durable at the crash to
        the crash, each marked persisted (+), dropped (-) or persisted in part (~)."""
        durable = synced(ops, self.point)
        effect = [i for i in range(self.point) if ops[i].kind not in ("fsync", "fsync-dir")]
        loose = [i for i in effect if i not in durable]
        start = loose[0] if loose else self.point
        lines = []
        for i in range(start, self.point):
            o = ops[i]
            if o.kind in ("fsync", "fsync-dir"):
                mark = "|"
            elif self.partial and i == self.partial[0]:
                mark = f"~ first {self.partial[1]} of {len(o.blocks)} blocks"
            elif i == self.zeros:
                mark = "~ size only, data lost (zeros)"
            elif i in self.persist:
                mark = "+"
            else:
                mark = "- lost"
            lines.append(f"#{i} {o.label()}  [{mark}]")
        lines.append(f"crash after #{self.point - 1}" if self.point else "crash before the first operation")
        return lines


def states_at(ops: list[Op], point: int) -> Iterator[CrashState]:
    """The crash states after the first ``point`` operations (some may be equal as folders)."""
    durable = synced(ops, point)
    loose = [i for i in range(point) if ops[i].kind not in ("fsync", "fsync-dir") and i not in durable]
    base = tuple(sorted(durable))
    for n in range(len(loose) + 1):  # in-order prefixes, from all lost to all persisted
        yield CrashState(point, tuple(sorted((*base, *loose[:n]))), how="prefix")
    for u in loose[:-1]:  # one lost while the later ones persist
        yield CrashState(point, tuple(sorted((*base, *(i for i in loose if i != u)))), how="reordered")
    for n, u in enumerate(loose):
        o = ops[u]
        before = tuple(sorted((*base, *loose[:n])))
        if o.kind == "write" and len(o.blocks) > 1:
            ks = range(1, len(o.blocks))
            if len(ks) > MAX_PARTS:
                ks = sorted({ks[round(i * (len(ks) - 1) / (MAX_PARTS - 1))] for i in range(MAX_PARTS)})
            for k in ks:
                yield CrashState(point, before, partial=(u, k), how="partial")
        if o.kind == "write" and o.size is not None and o.old_size is not None and o.size > o.old_size:
            yield CrashState(point, before, zeros=u, how="size-only")


def materialize(img: Image, root: Path) -> None:
    """Write an image into the empty folder ``root``."""
    for d in sorted(img.dirs, key=lambda s: s.count("/")):
        if d:
            (root / d).mkdir(parents=True, exist_ok=True)
    for name in img.visible():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "wb") as f:
            f.write(img.data.get(img.names[name], b""))


def diff_blocks(old: bytes, new: bytes) -> tuple[tuple[int, bytes], ...]:
    """The 4 KiB blocks of ``new`` that differ from ``old``."""
    out = []
    for i in range((len(new) + BLOCK - 1) // BLOCK):
        a, b = old[i * BLOCK:(i + 1) * BLOCK], new[i * BLOCK:(i + 1) * BLOCK]
        if a != b:
            out.append((i, b))
    return tuple(out)


__all__ = ["BLOCK", "CrashState", "Image", "Op", "apply", "diff_blocks", "materialize", "states_at", "synced"]
