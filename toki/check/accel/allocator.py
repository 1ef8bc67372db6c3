"""Process-wide allocator tuning for large histories (used by the CLI and the benchmark only).

Checking a large history allocates many short-lived numpy arrays of tens of megabytes. glibc
serves each from a fresh mmap and returns it on free, so every array is paid again in page
faults (measured here: about 45 ms per 18 MB array on first touch, 4 ms when reused). Raising
glibc's mmap and trim thresholds keeps freed memory in the heap for reuse. The library itself
never calls this: it changes the whole process.

It also turns off numpy's transparent-huge-page advice (numpy calls ``madvise(MADV_HUGEPAGE)`` on
every array of 4 MB or more). With the freed memory kept in glibc's heap, that advice makes the
kernel compact memory to build huge pages as the heap grows: measured here (THP "madvise" mode,
a 2-core VM), a 400 MB array cost 1.1 s to fill with the advice and 0.16 s without, and the
10^6-transaction check went from 12.2-13.4 s to 9.5-10.2 s.
"""

from __future__ import annotations

import ctypes
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def fast_malloc(threshold: int = 1 << 30) -> bool:
    """Ask glibc to keep up to ``threshold`` bytes of freed memory for reuse, and numpy not to ask
    for huge pages. True if the glibc part applied."""
    if not sys.platform.startswith("linux"):
        return False
    _no_hugepage_advice()
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, threshold))
    except (OSError, AttributeError):
        return False


def _no_hugepage_advice() -> None:
    import numpy as np

    for mod in ("_core", "core"):  # numpy 2.x, 1.x
        setter = getattr(getattr(getattr(np, mod, None), "multiarray", None), "_set_madvise_hugepage", None)
        if setter is not None:
            setter(False)
            return


def trim() -> None:
    """Give freed memory back to the system now (glibc's malloc_trim): between the phases and
    slices of a large check, the freed arrays of one would otherwise stay resident, in holes no
    later allocation fits exactly, and add to the peak. A no-op elsewhere."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL("libc.so.6") if sys.platform.startswith("linux") else False
        except OSError:
            _libc = False
    if _libc:
        _libc.malloc_trim(0)


_libc = None

