"""The compiled twins of :mod:`toki.check.joins` (importing this module imports numba): the
(txn, key) group order, the scan of :class:`~toki.check.joins.Groups`, the longest read of each
key and the readers of each version, each under the name and signature of its numpy form there
(``_order_by_group``, ``_scan_groups``, ``_longest_per_key``, ``_readers_by_version``)."""

from __future__ import annotations

import numpy as np
from numba import njit

from toki.check.codes import APPEND, R


@njit(cache=True)
def order_by_group(m_txn, m_key):
    """Positions in (txn, key) order, stable, where each group starts, and True; False (and
    empty arrays) when ``m_txn`` does not ascend (then the caller sorts)."""
    M = len(m_txn)
    for i in range(1, M):
        if m_txn[i] < m_txn[i - 1]:
            return np.empty(0, np.int64), np.empty(0, np.bool_), False
    o = np.arange(M)
    a = 0
    while a < M:
        b = a + 1
        while b < M and m_txn[b] == m_txn[a]:
            b += 1
        if b - a > 32:  # a long transaction: merge sort, stable
            o[a:b] = a + np.argsort(m_key[a:b], kind="mergesort")
        else:
            for i in range(a + 1, b):  # insertion sort of a few micro-ops, stable
                j = i
                while j > a and m_key[o[j - 1]] > m_key[i]:
                    o[j] = o[j - 1]
                    j -= 1
                o[j] = i
        a = b
    newg = np.empty(M, np.bool_)
    for i in range(M):
        newg[i] = i == 0 or m_txn[o[i]] != m_txn[o[i - 1]] or m_key[o[i]] != m_key[o[i - 1]]
    return o, newg, True


@njit(cache=True)
def scan_groups(go, newg, m_f, mop_rlen):
    M = len(newg)
    G = 0
    for i in range(M):
        G += newg[i]
    gid = np.empty(M, np.int64)
    gstart = np.empty(M, np.int64)
    prevr = np.empty(M, np.int64)
    prevmax = np.empty(M, np.int64)
    fr = np.full(G, -1, np.int64)
    lw = np.full(G, -1, np.int64)
    g, s, lastr, run = -1, 0, -1, -1
    for i in range(M):
        if newg[i]:
            g += 1
            s = i
            run = -1
        gid[i] = g
        gstart[i] = s
        prevr[i] = lastr
        prevmax[i] = run
        f = m_f[go[i]]
        if f == R:
            lastr = i
            if fr[g] < 0:
                fr[g] = i
            rl = mop_rlen[go[i]]
            if rl > run:
                run = rl
        elif f == APPEND:
            lw[g] = i
    return gid, gstart, prevr, prevmax, fr, lw


@njit(cache=True)
def longest_per_key(rk, rlen, pr, kmin, span):
    best = np.full(span, -1, np.int64)
    n = 0
    for j in range(len(pr)):
        r = pr[j]
        k = rk[r] - kmin
        b = best[k]
        if b < 0:
            n += 1
            best[k] = r
        elif rlen[r] >= rlen[b]:  # pr ascends: the later of two as long
            best[k] = r
    lr = np.empty(n, np.int64)
    j = 0
    for k in range(span):
        if best[k] >= 0:
            lr[j] = best[k]
            j += 1
    return lr


@njit(cache=True)
def readers_by_version(rv, rtx, want, lo, span):
    start = np.zeros(span + 1, np.int64)
    for i in range(len(rv)):
        start[rv[i] - lo + 1] += 1
    for c in range(span):
        start[c + 1] += start[c]
    by = np.empty(len(rv), rtx.dtype)  # the readers, stably grouped by version
    fill = start[:-1].copy()
    for i in range(len(rv)):
        c = rv[i] - lo
        by[fill[c]] = rtx[i]
        fill[c] += 1
    total = 0
    for j in range(len(want)):
        c = want[j] - lo
        if 0 <= c < span:
            total += start[c + 1] - start[c]
    rep = np.empty(total, np.int64)
    srcs = np.empty(total, rtx.dtype)
    k = 0
    for j in range(len(want)):
        c = want[j] - lo
        if 0 <= c < span:
            for q in range(start[c], start[c + 1]):
                rep[k] = j
                srcs[k] = by[q]
                k += 1
    return rep, srcs


def warm() -> None:
    """Compile (or load from the cache) before any fork."""
    z = np.zeros(1, np.int64)
    order_by_group(z, z)
    scan_groups(z, np.ones(1, np.bool_), np.zeros(1, np.int8), z)
    longest_per_key(z, z, z, 0, 1)
    readers_by_version(z, z, z, 0, 1)
