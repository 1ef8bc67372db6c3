"""The compiled twins of :mod:`toki.check.reading.history`'s loops over every op of a large
history (importing this module imports numba): pairing invocations with completions (``pair``),
collecting the transactions (``collect``) and coding processes and keys (``near_codes``), each
under the name and signature of its numpy form there (``_pair``, ``_collect``, ``_near_codes``)."""

from __future__ import annotations

import numpy as np
from numba import njit

from toki.check.codes import INFO, INVOKE


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


@njit(cache=True)
def collect(is_tx, inv, cpos, index, ty, pc):
    """The transactions :func:`pair` marked, as :func:`toki.check.reading.history._collect` returns
    them: op positions, types (an invocation never completed is info), op indices, indices of
    their invocations (-1: none) and process codes; one pass instead of a dozen masked copies."""
    ntx = 0
    for i in range(len(is_tx)):
        if is_tx[i]:
            ntx += 1
    tpos = np.empty(ntx, np.int64)
    ttype = np.empty(ntx, np.int8)
    t_index = np.empty(ntx, np.int64)
    t_invoke = np.empty(ntx, np.int64)
    pcodes = np.empty(ntx, np.int64)
    j = 0
    for i in range(len(is_tx)):
        if is_tx[i]:
            p = cpos[i]
            tpos[j] = p
            ttype[j] = INFO if ty[i] == INVOKE else ty[i]
            t_index[j] = index[p]
            t_invoke[j] = index[cpos[inv[i]]] if inv[i] >= 0 else -1
            pcodes[j] = pc[i]
            j += 1
    return tpos, ttype, t_index, t_invoke, pcodes


@njit(cache=True)
def near_codes(values, lo, near):
    """Dense codes of the values within ``near`` of ``lo`` (the others -1), whether each value
    lo + j is present, and how many values lie beyond: two passes and a table."""
    seen = np.zeros(near, np.bool_)
    nfar = 0
    for v in values:
        off = v - lo
        if off < near:
            seen[off] = True
        else:
            nfar += 1
    table = np.empty(near, np.int64)
    c = 0
    for j in range(near):
        table[j] = c
        if seen[j]:
            c += 1
    codes = np.empty(len(values), np.int64)
    for i in range(len(values)):
        off = values[i] - lo
        codes[i] = table[off] if off < near else -1
    return codes, seen, nfar


def warm() -> None:
    is_tx, inv, _ = pair(np.zeros(2, np.int64), np.array([3, 0], np.int8), 1)
    collect(is_tx, inv, np.arange(2), np.arange(2), np.array([3, 0], np.int8), np.zeros(2, np.int64))
    near_codes(np.arange(3), 0, 4)
