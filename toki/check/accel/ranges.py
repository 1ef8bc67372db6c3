"""Index ranges: runs of consecutive positions, the checker's most repeated gather.

Inference lays out variable-length groups (a read's elements, a version's readers, the ops
invoked in a window) as runs ``[s, s + l)`` and gathers through them. In numpy that is four
passes over the output (a repeat, an arange, a subtraction, an addition), and at 10^7
transactions the outputs hold 10^7-10^8 positions. From ``accel.MIN_SIZE["ranges"]`` positions
these are one compiled loop (numba, :mod:`toki.check.accel.compiled.ranges`); below it, or without
numba, numpy.
"""

from __future__ import annotations

import numpy as np

from toki.check import accel


def ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + l) for each (s, l), as int64."""
    total = int(lens.sum()) if len(lens) else 0
    return accel.twin("ranges", _positions, total)(np.ascontiguousarray(starts, np.int64),
                                                   np.ascontiguousarray(lens, np.int64), total)


def gather(a: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of a[s:s + l] for each (s, l): ``a[ranges(starts, lens)]`` without the
    positions in between."""
    total = int(lens.sum()) if len(lens) else 0
    if a.dtype.kind not in "iub":
        return _gather(a, starts, lens, total)
    return accel.twin("ranges", _gather, total)(np.ascontiguousarray(a), np.ascontiguousarray(starts, np.int64),
                                                np.ascontiguousarray(lens, np.int64), total)


def _positions(starts: np.ndarray, lens: np.ndarray, total: int) -> np.ndarray:
    ends = np.cumsum(lens)
    return np.repeat(starts - ends + lens, lens) + np.arange(total)


def _gather(a: np.ndarray, starts: np.ndarray, lens: np.ndarray, total: int) -> np.ndarray:
    return a[_positions(starts, lens, total)]
