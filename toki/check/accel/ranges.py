"""Runs of consecutive positions, the checker's most repeated gather.

Inference lays out variable-length groups (a read's elements, a version's readers, the ops
invoked in a window) as runs ``[s, s + l)`` and gathers through them. In numpy that is four
passes over the output (a repeat, an arange, a subtraction, an addition), and at 10^7
transactions the outputs hold 10^7-10^8 positions. Above :data:`JIT_MIN` positions these are one
compiled loop (numba, :mod:`toki.check._jitruns`); below it, or without numba, numpy.
"""

from __future__ import annotations

import numpy as np

from toki.check import jit

#: outputs smaller than this stay in numpy (importing numba costs about half a second)
JIT_MIN = 1 << 22


def ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + l) for each (s, l), as int64."""
    total = int(lens.sum()) if len(lens) else 0
    k = jit.kernels("_jitruns") if total >= JIT_MIN else None
    if k is not None:
        return k.ranges(np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lens, np.int64), total)
    ends = np.cumsum(lens)
    return np.repeat(starts - ends + lens, lens) + np.arange(total)


def gather(a: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of a[s:s + l] for each (s, l): ``a[ranges(starts, lens)]`` without the
    positions in between."""
    total = int(lens.sum()) if len(lens) else 0
    k = jit.kernels("_jitruns") if total >= JIT_MIN and a.dtype.kind in "iub" else None
    if k is not None:
        return k.gather(np.ascontiguousarray(a), np.ascontiguousarray(starts, np.int64),
                        np.ascontiguousarray(lens, np.int64), total)
    return a[ranges(starts, lens)]
