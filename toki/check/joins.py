"""The joins inference is built of: (key, value) pairs packed into one code, lookups through
sorted codes or direct tables, micro-ops grouped by (transaction, key), the longest read of each
key and the readers of each version. List-append (:mod:`toki.check.list_append`) and
rw-register (:mod:`toki.check.rw_register`) read their histories through these; none of them
decides an anomaly.

Four of them have compiled twins (:mod:`toki.check.accel.compiled.joins`), chosen by
:func:`toki.check.accel.twin` from ``accel.MIN_SIZE["joins"]`` micro-ops or reads: the
numpy form is the function of the same name with a leading underscore.
"""

from __future__ import annotations

import numpy as np

from toki.check import accel
from toki.check.accel.ranges import gather
from toki.check.codes import APPEND, R


class Codes:
    """Packs (key, value) pairs into one int64 so joins are sorts and searches.

    Keys are ranked when they are sparse (a slice of a partitioned history holds every eighth
    key), so that the codes stay dense enough for direct tables (:func:`lookup`). Every key
    packed must be among the ``keys`` given."""

    def __init__(self, keys: np.ndarray, vals: np.ndarray):
        self.kmin = int(keys.min()) if len(keys) else 0
        kmax = int(keys.max()) if len(keys) else 0
        self.krank = self.kof = None
        span = kmax - self.kmin + 1
        if len(keys) and 64 < span <= 1 << 26:
            seen = np.zeros(span, bool)
            seen[keys - self.kmin] = True
            kof = np.flatnonzero(seen)
            if span > 2 * len(kof):
                self.kof = kof + self.kmin
                self.krank = np.cumsum(seen) - 1
                span = len(kof)
        self.vmin = int(vals.min()) if len(vals) else 0
        vmax = int(vals.max()) if len(vals) else 0
        self.vr = vmax - self.vmin + 1
        if span * self.vr >= 2 ** 62:
            # sparse values: rank them first
            self.uniq = np.unique(vals)
            self.vmin, self.vr = 0, len(self.uniq) + 1
        else:
            self.uniq = None

    def _v(self, v):
        return (np.searchsorted(self.uniq, v) if self.uniq is not None else v - self.vmin)

    def _k(self, k):
        k = np.asarray(k, np.int64) - self.kmin
        return k if self.krank is None else self.krank[k]

    def pair(self, k, v):
        return self._k(k) * self.vr + self._v(np.asarray(v, np.int64))

    def init(self, k):
        return -(np.asarray(k, np.int64) - self.kmin) - 1

    def key_of(self, c):
        """The key of codes from :meth:`pair` or :meth:`init`."""
        c = np.asarray(c, np.int64)
        packed = c // self.vr
        if self.kof is not None:
            packed = self.kof[np.where(c < 0, 0, packed)] - self.kmin
        return np.where(c < 0, -c - 1, packed) + self.kmin


def lookup(sorted_codes: np.ndarray, payload: np.ndarray):
    """codes -> payload of the equal sorted code, or -1. A direct table when the codes are distinct
    and :func:`~toki.check.accel.dense` (a gather instead of a binary search)."""
    n = len(sorted_codes)
    if n and accel.dense(int(sorted_codes[-1]) - int(sorted_codes[0]), n) and \
            (sorted_codes[1:] != sorted_codes[:-1]).all():
        return table_lookup(sorted_codes, payload, int(sorted_codes[0]), int(sorted_codes[-1]))

    def search(codes):
        if n == 0:
            return np.full(len(codes), -1, np.int64)
        p = np.minimum(np.searchsorted(sorted_codes, codes), n - 1)
        return np.where(sorted_codes[p] == codes, payload[p], -1)
    return search


def table_lookup(codes: np.ndarray, payload: np.ndarray, lo: int, hi: int):
    """codes -> payload through a direct table over [lo, hi] (distinct codes), or -1."""
    size = hi - lo + 1
    tab = np.full(size, -1, np.int64)
    tab[codes - lo] = payload

    def find(q):
        at = q - lo
        inr = (at >= 0) & (at < size)
        return np.where(inr, tab[np.where(inr, at, 0)], -1)
    return find


def position_lookup(codes: np.ndarray):
    """codes -> position in ``codes`` (distinct), or -1: :func:`lookup`, but where the codes are
    dense its table is filled directly, without sorting them first."""
    n = len(codes)
    if n:
        lo, hi = int(codes.min()), int(codes.max())
        if accel.dense(hi - lo, n):
            return table_lookup(codes, np.arange(n), lo, hi)
    o = np.argsort(codes)
    return lookup(codes[o], o)


class Groups:
    """The micro-ops in (txn, key) group order (:func:`group_order`), and what the per-group
    checks (future-read, internal, lost-update) read off it, per position ``i`` of that order:
    ``gid`` (its group), ``gstart`` (its group's first position), ``prevr`` (the last read before
    ``i``, in any group, or -1), ``prevmax`` (the longest known read before ``i`` in its group, or
    -1); and per group, ``fr`` (its first read) and ``lw`` (its last append), or -1. Each was a
    segmented scan in numpy (a cumulative max or a masked search over every micro-op, 0.7 s a
    slice of 4 million at 10^7 transactions); compiled, they are one pass (:func:`_scan_groups`)."""

    def __init__(self, h, mop_rlen: np.ndarray):
        self.go, self.newg = go, newg = group_order(h.m_txn, h.m_key)
        scan = accel.twin("joins", _scan_groups, len(go))
        self.gid, self.gstart, self.prevr, self.prevmax, self.fr, self.lw = scan(
            np.ascontiguousarray(go, np.int64), np.ascontiguousarray(newg), np.ascontiguousarray(h.m_f, np.int8),
            np.ascontiguousarray(mop_rlen, np.int64))


def _scan_groups(go, newg, m_f, mop_rlen) -> tuple:
    """(gid, gstart, prevr, prevmax, fr, lw) of :class:`Groups`, as segmented scans in numpy."""
    M = len(go)
    f = m_f[go]
    rlen = mop_rlen[go]
    ar = np.arange(M)
    gid = np.cumsum(newg) - 1
    gstart = np.maximum.accumulate(np.where(newg, ar, 0)) if M else np.zeros(0, np.int64)
    is_r = f == R
    prevr = np.full(M, -1, np.int64)
    if M:
        prevr[1:] = np.maximum.accumulate(np.where(is_r, ar, -1))[:-1]
    # running max of known read lengths within the group (offset trick for a segmented max)
    big = int(rlen.max(initial=0)) + 2
    val = np.where(is_r & (rlen >= 0), rlen, -1) + gid * big
    prevmax = np.full(M, -1, np.int64)
    if M:
        prevmax[1:] = (np.maximum.accumulate(val) - gid * big)[:-1]
        prevmax[newg] = -1
    G = int(gid[-1]) + 1 if M else 0
    fr = np.full(G, -1, np.int64)
    rp = np.flatnonzero(is_r)
    if len(rp):
        firsts = rp[np.r_[True, gid[rp][1:] != gid[rp][:-1]]]
        fr[gid[firsts]] = firsts
    lw = np.full(G, -1, np.int64)
    ap = np.flatnonzero(f == APPEND)
    if len(ap):
        lasts = ap[np.r_[gid[ap][1:] != gid[ap][:-1], True]]
        lw[gid[lasts]] = lasts
    return gid, gstart, prevr, prevmax, fr, lw


def longest_reads(rk: np.ndarray, rlen: np.ndarray, pr: np.ndarray) -> np.ndarray:
    """Per key of the reads ``pr`` (ascending, at least one), in key order: the longest read, the
    last of equals. A sort of every read by (key, length, position) in numpy; compiled, over keys
    at most 16 apart on average, one pass through a table of keys."""
    kp = rk[pr]
    kmin = int(kp.min())
    span = int(kp.max()) - kmin + 1
    longest = accel.twin("joins", _longest_per_key, len(pr), span=span - 1, per=16)
    return longest(np.ascontiguousarray(rk, np.int64), np.ascontiguousarray(rlen, np.int64),
                   np.ascontiguousarray(pr, np.int64), kmin, span)


def _longest_per_key(rk, rlen, pr, kmin: int, span: int) -> np.ndarray:
    kp = rk[pr]
    o = np.lexsort((pr, rlen[pr], kp))
    last = np.r_[kp[o][1:] != kp[o][:-1], True]
    return pr[o[last]]


def readers_of(rv: np.ndarray, rtx: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each version code ``want[j]``, every reader of it: ``rtx[i]`` for ``rv[i] == want[j]``
    in ``i`` order. Returned as (j repeated once per reader, the readers), j ascending. In numpy a
    stable sort of the reads by version and a search per ``want``; compiled, over dense codes, a
    counting sort through a table of codes (0.6 s -> 0.1 s a slice at 10^7 transactions)."""
    n = len(rv)
    if not n:
        return _readers_by_version(rv, rtx, want, 0, 0)
    lo, hi = int(rv.min()), int(rv.max())
    readers = accel.twin("joins", _readers_by_version, n, span=hi - lo)
    return readers(np.ascontiguousarray(rv, np.int64), np.ascontiguousarray(rtx), np.ascontiguousarray(want, np.int64),
                   lo, hi - lo + 1)


def _readers_by_version(rv, rtx, want, lo: int, span: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(rv)
    ro = np.argsort(rv, kind="stable")
    rvs = rv[ro]
    rtx = rtx[ro]
    vst = np.flatnonzero(np.r_[True, rvs[1:] != rvs[:-1]]) if n else np.zeros(0, np.int64)
    if len(vst):                                  # the readers of each distinct version: a run of rvs
        vp = lookup(rvs[vst], np.arange(len(vst)))(want)
        found = vp >= 0
        vp[~found] = 0
        lo = vst[vp]
        cnt = np.where(found, np.diff(np.r_[vst, n])[vp], 0)
    else:
        lo = cnt = np.zeros(len(want), np.int64)
    return np.repeat(np.arange(len(want)), cnt), gather(rtx, lo, cnt)


def group_order(m_txn: np.ndarray, m_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mops sorted by (txn, key), keeping their order inside a transaction; group starts.
    (rw-register's external reads and writes are read off the same order.)"""
    M = len(m_txn)
    if M == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    order = accel.twin("joins", _order_by_group, M)
    if order is not _order_by_group:  # micro-ops come in transaction order: each transaction's few sorted by key
        o, newg, ascends = order(np.ascontiguousarray(m_txn, np.int64), np.ascontiguousarray(m_key, np.int64))
        if ascends:
            return o, newg
    o, newg, _ = _order_by_group(m_txn, m_key)
    return o, newg


def _order_by_group(m_txn, m_key) -> tuple[np.ndarray, np.ndarray, bool]:
    """(positions in (txn, key) order, stable; where each group starts; True). The compiled twin
    answers False when ``m_txn`` does not ascend; this one sorts whatever the order."""
    M = len(m_txn)
    kmin = int(m_key.min())
    span = int(m_key.max()) - kmin + 1
    if span * (int(m_txn.max()) - min(int(m_txn.min()), 0) + 1) < 2 ** 62:
        o = np.argsort(m_txn * span + (m_key - kmin), kind="stable")
    else:
        o = np.lexsort((np.arange(M), m_key, m_txn))
    st, sk = m_txn[o], m_key[o]
    newg = np.empty(M, bool)
    newg[0] = True
    newg[1:] = (st[1:] != st[:-1]) | (sk[1:] != sk[:-1])
    return o, newg, True


__all__ = ["Codes", "Groups", "group_order", "longest_reads", "lookup", "position_lookup", "readers_of",
           "table_lookup"]
