"""The connect watch's supervisor: a process of its own, answering the kernel's seccomp
notifications for the threads of the process that started it (see :mod:`.connect_watch`).

A process, not a thread: the thread making the ``connect`` may hold the GIL (libpq resolves
the user name with it held), so a supervisor that needed that GIL could never answer it. This
file is run by path with ``python -I -S`` and imports nothing of toki's. It answers every
notification with "go on" and, for a thread marked as working for a run outside any granted
call, copies the address into the shared table first.

argv: listener fd, table fd, pid_max, ring size, address width, parent pid, channel fd (on which
the parent hands over the listener of each thread it filters later).
"""

import ctypes
import fcntl
import mmap
import os
import select
import socket
import struct
import sys

_NOTIF_RECV, _NOTIF_SEND = 0xC0502100, 0xC0182101
_CONTINUE = 1
_PR_SET_PDEATHSIG = 1


def layout(pid_max: int, ring: int, width: int) -> dict[str, tuple[int, int]]:
    """Offsets and sizes of the shared table's parts (the watch maps the same)."""
    parts, off = {}, 0
    for name, size in (("count", 8), ("owner", 4 * (pid_max + 1)), ("inside", pid_max + 1),
                       ("events", 8 * 4 * ring), ("addrs", width * ring)):
        off = (off + 63) // 64 * 64
        parts[name] = (off, size)
        off += size
    parts["total"] = (0, off)
    return parts


def main(listener: int, table_fd: int, pid_max: int, ring: int, width: int, parent: int, channel: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)  # gone with the thread that started it
    if os.getppid() != parent:
        return
    parts = layout(pid_max, ring, width)
    table = mmap.mmap(table_fd, parts["total"][1])
    view = memoryview(table)

    def part(name, fmt):
        off, size = parts[name]
        return view[off:off + size].cast(fmt)

    count, owner, inside = part("count", "q"), part("owner", "i"), part("inside", "B")
    events, addrs = part("events", "q"), part("addrs", "B")
    readv = libc.process_vm_readv
    readv.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong)
    readv.restype = ctypes.c_ssize_t
    buf = (ctypes.c_ubyte * width)()
    local = (ctypes.c_uint64 * 2)(ctypes.addressof(buf), 0)
    remote = (ctypes.c_uint64 * 2)(0, 0)
    notif, resp = bytearray(80), bytearray(24)

    def answer(fd: int) -> None:
        notif[:] = bytes(80)
        try:
            fcntl.ioctl(fd, _NOTIF_RECV, notif, True)
        except OSError:
            return  # the caller was interrupted and gave the call up
        nid, tid = struct.unpack_from("QI", notif, 0)
        sock, address, length = struct.unpack_from("QQQ", notif, 32)
        # Every filtered thread is an agent's, one an agent started, or one working for an agent:
        # a thread working for nobody (an engine's own, started in a call) is noted too, as the
        # run's (owner 0), when it is this process's; a child process's connects are its own.
        if 0 < tid <= pid_max and not inside[tid] and (owner[tid] or os.path.exists(f"/proc/{parent}/task/{tid}")):
            n = count[0]
            slot = n % ring
            length = min(length & 0xFFFFFFFF, width)
            ctypes.memset(buf, 0, width)
            local[1], remote[0], remote[1] = length, address, length
            # The caller's own memory, read through the kernel: a bad pointer is an error here
            # (the call itself then fails with EFAULT), never a crash.
            got = readv(tid, local, 1, remote, 1, 0)
            events[4 * slot:4 * slot + 4] = memoryview(struct.pack("4q", tid, owner[tid], sock & 0xFFFFFFFF,
                                                                   max(got, 0))).cast("q")
            addrs[width * slot:width * (slot + 1)] = memoryview(bytes(buf)).cast("B")
            count[0] = n + 1
        struct.pack_into("QqiI", resp, 0, nid, 0, 0, _CONTINUE)
        try:
            fcntl.ioctl(fd, _NOTIF_SEND, resp, True)
        except OSError:
            pass  # the caller is gone

    waiter = select.poll()
    waiter.register(listener, select.POLLIN)
    chan = socket.socket(fileno=channel)
    waiter.register(channel, select.POLLIN)
    while True:
        for fd, ev in waiter.poll():
            if fd == channel:
                try:
                    msg, fds, _flags, _addr = socket.recv_fds(chan, 16, 16)
                except OSError:
                    msg, fds = b"", []
                if not msg:
                    return  # the process is gone
                for new in fds:
                    waiter.register(new, select.POLLIN)
            elif ev & select.POLLIN:
                answer(fd)
            elif ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                waiter.unregister(fd)  # every thread of that filter is gone
                os.close(fd)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:8]))
