"""The compiled twins of :mod:`toki.check.accel.ranges` (importing this module imports numba): ``positions``
and ``gather``, under the names and signatures of its numpy forms ``_positions`` and ``_gather``."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def positions(starts, lens, total):
    out = np.empty(total, np.int64)
    k = 0
    for i in range(len(starts)):
        s = starts[i]
        for j in range(lens[i]):
            out[k] = s + j
            k += 1
    return out


@njit(cache=True)
def gather(a, starts, lens, total):
    out = np.empty(total, a.dtype)
    k = 0
    for i in range(len(starts)):
        s = starts[i]
        n = lens[i]
        out[k:k + n] = a[s:s + n]
        k += n
    return out


def warm() -> None:
    """Compile (or load from the cache) before any fork, for the dtypes the checker gathers."""
    s, n = np.zeros(1, np.int64), np.ones(1, np.int64)
    positions(s, n, 1)
    for t in (np.int8, np.int16, np.int32, np.int64, np.bool_):
        gather(np.zeros(2, t), s, n, 1)
