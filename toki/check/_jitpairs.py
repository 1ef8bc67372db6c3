"""The loop of :func:`toki.check.history._transactions`, compiled by numba (importing this module
imports numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

INVOKE = 3


@njit(cache=True)
def pair(pcode, ty, nproc):
    """Client ops in history order (``pcode``: dense process codes, ``ty``: op types): whether each
    op is a transaction (a completion, or an invocation that never completes) and the client-op
    position of its invocation (-1: none). ok is False at the first invocation while its process
    has one outstanding: several outstanding operations are paired elsewhere."""
    n = len(ty)
    pending = np.full(nproc, -1, np.int64)
    is_tx = np.zeros(n, np.bool_)
    inv = np.full(n, -1, np.int64)
    for i in range(n):
        p = pcode[i]
        if ty[i] == INVOKE:
            if pending[p] >= 0:
                return is_tx, inv, False
            pending[p] = i
        else:
            is_tx[i] = True
            inv[i] = pending[p]
            pending[p] = -1
    for p in range(nproc):
        j = pending[p]
        if j >= 0:
            is_tx[j] = True
            inv[j] = j
    return is_tx, inv, True


def warm() -> None:
    pair(np.zeros(2, np.int64), np.array([3, 0], np.int8), 1)
