"""List-append inference (Elle's ``elle.list-append``), vectorised.

Every append is unique per key, so each read of a list reveals the order of the appends before
it. Per key, the longest read (over ok and info transactions) gives the version order; every
other read must be a prefix of it (else ``incompatible-order``). From that order:

- ww: T2 appended the element right after T1's element (an append never read comes after the
  last element read);
- wr: T2 read a list whose last element T1 appended;
- rw: T1 read the list ending at the element right before T2's append (or read the empty
  list when T2's element is first).

Non-cycle anomalies: G1a (an ok read holds an element appended by a failed transaction), G1b
(an ok read ends in an element its writer later appended past), internal (a read inconsistent
with the transaction's own earlier reads and appends), future-read (a read shows an element the
transaction appends later), duplicate-elements, incompatible-order, dirty-update (a committed
append right after a failed one in the version order), lost-update (two committed transactions
read the same version of a key and both appended to it).
"""

from __future__ import annotations

import numpy as np

from toki.check.graph import NONE, RW, WR, WW, EdgeSet
from toki.check.history import APPEND, FAIL, INFO, OK, History, R
from toki.check.runs import gather, ranges
from toki.errors import HistoryError

INIT = NONE
_BLOCK = 1 << 20  # elements per block of the prefix comparison


class Codes:
    """Packs (key, value) pairs into one int64 so joins are sorts and searches.

    Keys are ranked when they are sparse (a slice of a partitioned history holds every eighth
    key), so that the codes stay dense enough for direct tables (:func:`_finder`). Every key
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


def _finder(sorted_codes: np.ndarray, payload: np.ndarray):
    """codes -> payload of the equal sorted code, or -1. A direct table when the codes are distinct
    and span at most about 8 per code (a gather instead of a binary search)."""
    n = len(sorted_codes)
    if n and int(sorted_codes[-1]) - int(sorted_codes[0]) < 8 * n + 4096 and \
            (sorted_codes[1:] != sorted_codes[:-1]).all():
        return _table(sorted_codes, payload, int(sorted_codes[0]), int(sorted_codes[-1]))

    def search(codes):
        if n == 0:
            return np.full(len(codes), -1, np.int64)
        p = np.minimum(np.searchsorted(sorted_codes, codes), n - 1)
        return np.where(sorted_codes[p] == codes, payload[p], -1)
    return search


def _table(codes: np.ndarray, payload: np.ndarray, lo: int, hi: int):
    """codes -> payload through a direct table over [lo, hi] (distinct codes), or -1."""
    size = hi - lo + 1
    tab = np.full(size, -1, np.int64)
    tab[codes - lo] = payload

    def find(q):
        at = q - lo
        inr = (at >= 0) & (at < size)
        return np.where(inr, tab[np.where(inr, at, 0)], -1)
    return find


#: from this many micro-ops (reads, for the longest reads and the readers of each version) the
#: loops of toki.check._jitappend are compiled; numpy below it (importing numba costs 0.5 s)
GROUPS_JIT_MIN = 1 << 20


class Groups:
    """The micro-ops in (txn, key) group order (:func:`group_order`), and what the per-group
    checks (future-read, internal, lost-update) read off it, per position ``i`` of that order:
    ``gid`` (its group), ``gstart`` (its group's first position), ``prevr`` (the last read before
    ``i``, in any group, or -1), ``prevmax`` (the longest known read before ``i`` in its group, or
    -1); and per group, ``fr`` (its first read) and ``lw`` (its last append), or -1. Each was a
    segmented scan in numpy (a cumulative max or a masked search over every micro-op, 0.7 s a
    slice of 4 million at 10^7 transactions); from :data:`GROUPS_JIT_MIN` micro-ops they are one
    compiled pass."""

    def __init__(self, h: History, mop_rlen: np.ndarray):
        from toki.check import jit

        self.go, self.newg = go, newg = group_order(h.m_txn, h.m_key)
        M = len(go)
        k = jit.kernels("_jitappend") if M >= GROUPS_JIT_MIN else None
        if k is not None:
            self.gid, self.gstart, self.prevr, self.prevmax, self.fr, self.lw = k.scan(
                np.ascontiguousarray(go, np.int64), np.ascontiguousarray(newg), np.ascontiguousarray(h.m_f, np.int8),
                np.ascontiguousarray(mop_rlen, np.int64))
            return
        f = h.m_f[go]
        rlen = mop_rlen[go]
        ar = np.arange(M)
        self.gid = gid = np.cumsum(newg) - 1
        self.gstart = np.maximum.accumulate(np.where(newg, ar, 0)) if M else np.zeros(0, np.int64)
        is_r = f == R
        self.prevr = np.full(M, -1, np.int64)
        if M:
            self.prevr[1:] = np.maximum.accumulate(np.where(is_r, ar, -1))[:-1]
        # running max of known read lengths within the group (offset trick for a segmented max)
        big = int(rlen.max(initial=0)) + 2
        val = np.where(is_r & (rlen >= 0), rlen, -1) + gid * big
        self.prevmax = np.full(M, -1, np.int64)
        if M:
            self.prevmax[1:] = (np.maximum.accumulate(val) - gid * big)[:-1]
            self.prevmax[newg] = -1
        G = int(gid[-1]) + 1 if M else 0
        self.fr = np.full(G, -1, np.int64)
        rp = np.flatnonzero(is_r)
        if len(rp):
            firsts = rp[np.r_[True, gid[rp][1:] != gid[rp][:-1]]]
            self.fr[gid[firsts]] = firsts
        self.lw = np.full(G, -1, np.int64)
        ap = np.flatnonzero(f == APPEND)
        if len(ap):
            lasts = ap[np.r_[gid[ap][1:] != gid[ap][:-1], True]]
            self.lw[gid[lasts]] = lasts


def _index_of(codes: np.ndarray):
    """codes -> position in ``codes`` (distinct), or -1: :func:`_finder`, but where the codes span
    at most about 8 per code its table is filled directly, without sorting them first."""
    n = len(codes)
    if n:
        lo, hi = int(codes.min()), int(codes.max())
        if hi - lo < 8 * n + 4096:
            return _table(codes, np.arange(n), lo, hi)
    o = np.argsort(codes)
    return _finder(codes[o], o)


def _single_appends(akey: np.ndarray, lk: np.ndarray, ai: np.ndarray) -> np.ndarray:
    """The appends ``ai`` (keys ``akey``) to keys appended exactly once and not among ``lk`` (the
    keys read non-empty): such a key's order is its one value. Counted through a table of keys
    where they are dense, else by sorting."""
    if len(akey) == 0:
        return ai[:0]
    kmin, kmax = int(akey.min()), int(akey.max())
    if kmax - kmin < 8 * len(akey) + 4096:
        cnt = np.bincount(akey - kmin, minlength=kmax - kmin + 1)
        inr = lk[(lk >= kmin) & (lk <= kmax)]
        cnt[inr - kmin] = 0
        return ai[cnt[akey - kmin] == 1]
    uk, cnt = np.unique(akey, return_counts=True)
    single = uk[cnt == 1]
    single = single[~np.isin(single, lk)]
    return ai[np.isin(akey, single)]


def _longest_reads(rk: np.ndarray, rlen: np.ndarray, pr: np.ndarray) -> np.ndarray:
    """Per key of the reads ``pr`` (ascending), in key order: the longest read, the last of
    equals. A sort of every read by (key, length, position) in numpy; from
    :data:`GROUPS_JIT_MIN` reads over keys at most 16 apart on average, one compiled pass through
    a table of keys."""
    from toki.check import jit

    kp = rk[pr]
    kmin = int(kp.min())
    span = int(kp.max()) - kmin + 1
    k = jit.kernels("_jitappend") if len(pr) >= GROUPS_JIT_MIN and span <= 16 * len(pr) + 4096 else None
    if k is not None:
        return k.longest(np.ascontiguousarray(rk, np.int64), np.ascontiguousarray(rlen, np.int64),
                         np.ascontiguousarray(pr, np.int64), kmin, span)
    o = np.lexsort((pr, rlen[pr], kp))
    last = np.r_[kp[o][1:] != kp[o][:-1], True]
    return pr[o[last]]


def readers_of(rv: np.ndarray, rtx: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each version code ``want[j]``, every reader of it: ``rtx[i]`` for ``rv[i] == want[j]``
    in ``i`` order. Returned as (j repeated once per reader, the readers), j ascending. In numpy a
    stable sort of the reads by version and a search per ``want``; from :data:`GROUPS_JIT_MIN`
    reads with codes at most 8 apart on average, a compiled counting sort through a table of
    codes (0.6 s -> 0.1 s a slice at 10^7 transactions)."""
    from toki.check import jit

    n = len(rv)
    if n:
        lo, hi = int(rv.min()), int(rv.max())
        k = jit.kernels("_jitappend") if n >= GROUPS_JIT_MIN and hi - lo < 8 * n + 4096 else None
        if k is not None:
            return k.readers(np.ascontiguousarray(rv, np.int64), np.ascontiguousarray(rtx),
                             np.ascontiguousarray(want, np.int64), lo, hi - lo + 1)
    ro = np.argsort(rv, kind="stable")
    rvs = rv[ro]
    rtx = rtx[ro]
    vst = np.flatnonzero(np.r_[True, rvs[1:] != rvs[:-1]]) if n else np.zeros(0, np.int64)
    if len(vst):                                  # the readers of each distinct version: a run of rvs
        vp = _finder(rvs[vst], np.arange(len(vst)))(want)
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
    from toki.check import jit

    M = len(m_txn)
    if M == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    k = jit.kernels("_jitappend") if M >= GROUPS_JIT_MIN else None
    if k is not None:  # micro-ops come in transaction order: each transaction's few sorted by key
        o, newg, ascends = k.group_order(np.ascontiguousarray(m_txn, np.int64), np.ascontiguousarray(m_key, np.int64))
        if ascends:
            return o, newg
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
    return o, newg


def analyse(h: History) -> dict:
    """Return {"edges": [EdgeSet...], "anomalies": {...}} for a list-append history."""
    ttype = h.t_type
    m_txn, m_f, m_key, m_val, m_nil = h.m_txn, h.m_f, h.m_key, h.m_val, h.m_nil
    M = len(m_txn)
    anomalies: dict[str, list] = {}

    ai = np.flatnonzero(m_f == APPEND)
    ri = np.flatnonzero((m_f == R) & ~m_nil)   # reads with a known list (ok nil = empty)
    rows = m_val[ri]
    rlen = (h.r_off[rows + 1] - h.r_off[rows]).astype(np.int64)
    rstart = h.r_off[rows]
    rk = m_key[ri]
    r_txn = m_txn[ri]
    r_type = ttype[r_txn]
    r_poss = r_type != FAIL
    nonempty = rlen > 0
    elem = h.r_elem                               # elements of every known read, in ri order
    C = Codes(np.concatenate([m_key[ai], rk]), np.concatenate([m_val[ai], elem[rstart[nonempty]]])
              if len(ai) or nonempty.any() else np.zeros(0, np.int64))
    if len(elem) and C.uniq is None:
        lo_, hi_ = int(elem.min()), int(elem.max())
        if lo_ < C.vmin or hi_ >= C.vmin + C.vr:
            C = Codes(np.concatenate([m_key[ai], rk]), np.concatenate([m_val[ai], elem]))

    # --- append index: (key, value) -> append mop; appends must be unique ---
    acode = C.pair(m_key[ai], m_val[ai])
    ao = np.argsort(acode, kind="stable")
    acs = acode[ao]
    dup = np.flatnonzero(acs[1:] == acs[:-1])
    if len(dup):
        m1, m2 = ai[ao[dup[0]]], ai[ao[dup[0] + 1]]
        raise HistoryError(
            f"value {h.value(int(m_val[m1]))!r} is appended to key {h.key(int(m_key[m1]))!r} more than once "
            f"(ops {int(h.t_index[m_txn[m1]])} and {int(h.t_index[m_txn[m2]])})",
            fix="list-append needs every appended value to be unique per key")
    a_sorted_mop = ai[ao]
    writer_mop = _finder(acs, a_sorted_mop)

    def writer_txn(codes, possible_only=False):
        wm = writer_mop(codes)
        wt = np.where(wm >= 0, m_txn[np.maximum(wm, 0)], -1)
        if possible_only:
            wt = np.where((wt >= 0) & (ttype[np.maximum(wt, 0)] != FAIL), wt, -1)
        return wt

    # --- longest possible read per key, and every read compared with it ---
    pr = np.flatnonzero(r_poss & nonempty)
    lk = np.zeros(0, np.int64)
    lr = np.zeros(0, np.int64)
    compat = np.ones(len(ri), bool)
    L_of = np.full(len(ri), -1, np.int64)
    if len(pr):
        lr = _longest_reads(rk, rlen, pr)
        lk = rk[lr]                                  # sorted
        kp = _finder(lk, np.arange(len(lk)))(rk)
        has = kp >= 0
        kp[~has] = 0
        L_of = np.where(has, lr[kp], -1)
        cmp = np.flatnonzero(has & r_poss & nonempty)
        # element-level prefix comparison against the longest read of the same key, in blocks of
        # about a million elements (bounded temporaries stay in cache and cost no fresh memory);
        # the longest reads are first copied together (lel), so that their side of the comparison
        # reads a small array instead of gathering from all the elements
        llen = rlen[lr]
        lstart = np.zeros(len(lr), np.int64)
        np.cumsum(llen[:-1], out=lstart[1:])
        lel = gather(elem, rstart[lr], llen)
        # (every compared read is at most as long as the longest, so element i of a read faces
        # element i of the longest; a read's elements are usually contiguous with the next one's)
        n_el = rlen[cmp]
        ends = np.cumsum(n_el)
        shift = lstart[kp[cmp]] - rstart[cmp]        # from a read's elements to its longest read's
        bad_parts = []
        a = 0
        while a < len(cmp):
            b = max(a + 1, int(np.searchsorted(ends, (ends[a - 1] if a else 0) + _BLOCK, "right")))
            ne = n_el[a:b]
            st = rstart[cmp[a:b]]
            if (st[1:] == st[:-1] + ne[:-1]).all():
                s0 = int(st[0])
                idx = np.arange(s0, s0 + int(ne.sum()))
                mine = elem[s0:s0 + len(idx)]
            else:
                idx = ranges(st, ne)
                mine = elem[idx]
            idx += np.repeat(shift[a:b], ne)
            bad = mine != lel[idx]
            if bad.any():
                bad_parts.append(cmp[a:b][np.searchsorted(np.cumsum(ne), np.flatnonzero(bad), "right")])
            a = b
        if bad_parts:
            bad_reads = np.unique(np.concatenate(bad_parts))
            compat[bad_reads] = False
            cases = {}
            for r in bad_reads.tolist():
                k = int(rk[r])
                if k not in cases:
                    cases[k] = {"key": k, "values": [int(ri[r]), int(ri[L_of[r]])]}
            anomalies["incompatible-order"] = list(cases.values())

    # --- version order per key: distinct elements of the longest read ---
    n_l = rlen[lr]
    l_read = np.repeat(lr, n_l)
    l_pos = ranges(np.zeros(len(n_l), np.int64), n_l)
    order_key = rk[l_read]
    order_val = elem[rstart[l_read] + l_pos]
    order_code = C.pair(order_key, order_val)
    first_dup = {}
    if len(order_code):
        _, first = np.unique(order_code, return_index=True)
        if len(first) < len(order_code):
            keepm = np.zeros(len(order_code), bool)
            keepm[first] = True
            for i in np.flatnonzero(~keepm).tolist():
                r = int(l_read[i])
                first_dup.setdefault(r, int(l_pos[i]))
            order_key, order_val, order_code, l_read = (order_key[keepm], order_val[keepm], order_code[keepm],
                                                        l_read[keepm])
    # keys appended exactly once and never read non-empty: order is [v]
    sm = _single_appends(m_key[ai], lk, ai)
    if len(sm):
        order_key = np.concatenate([order_key, m_key[sm]])
        order_val = np.concatenate([order_val, m_val[sm]])
        order_code = np.concatenate([order_code, C.pair(m_key[sm], m_val[sm])])
        so = np.argsort(order_key, kind="stable")
        order_key, order_val, order_code = order_key[so], order_val[so], order_code[so]
    nO = len(order_key)
    kstart_mask = np.r_[True, order_key[1:] != order_key[:-1]] if nO else np.zeros(0, bool)
    kstarts = np.flatnonzero(kstart_mask)
    opos = np.arange(nO) - np.repeat(kstarts, np.diff(np.r_[kstarts, nO])) if nO else np.zeros(0, np.int64)
    okeys = order_key[kstarts]
    olast = np.r_[kstarts[1:], nO] - 1 if nO else np.zeros(0, np.int64)
    order_index = _index_of(order_code)

    # writer of each element of the order, and first failed writer position per key
    o_wt = writer_txn(order_code)
    o_wtype = np.where(o_wt >= 0, ttype[np.maximum(o_wt, 0)], INFO)

    # --- duplicate-elements: compatible reads longer than the first duplicate of their longest read ---
    dups = []
    if first_dup:
        for i in np.flatnonzero(compat & r_poss & nonempty).tolist():
            L = int(L_of[i])
            if L in first_dup and rlen[i] > first_dup[L]:
                dups.append(i)
    for i in np.flatnonzero(~compat).tolist():
        vals = elem[rstart[i]:rstart[i] + rlen[i]]
        if len(np.unique(vals)) < len(vals):
            dups.append(i)
    if dups:
        cases = []
        for i in sorted(set(dups)):
            vals, counts = np.unique(elem[rstart[i]:rstart[i] + rlen[i]], return_counts=True)
            cases.append({"op": int(r_txn[i]), "mop": int(ri[i]),
                          "duplicates": {int(v): int(c) for v, c in zip(vals, counts) if c > 1}})
        anomalies["duplicate-elements"] = cases

    # --- G1a: ok reads holding elements appended by failed txns ---
    fail_pos = np.full(len(okeys), np.iinfo(np.int64).max)
    fo = np.flatnonzero(o_wtype == FAIL)
    if len(fo):
        kidx = np.searchsorted(okeys, order_key[fo])
        np.minimum.at(fail_pos, kidx, opos[fo])
        kp = np.minimum(np.searchsorted(okeys, rk), max(len(okeys) - 1, 0))
        rfp = np.where(okeys[kp] == rk, fail_pos[kp], np.iinfo(np.int64).max) if len(okeys) else \
            np.full(len(ri), np.iinfo(np.int64).max)
        g1a_reads = np.flatnonzero(compat & (r_type == OK) & (rlen > rfp))
        inc = np.flatnonzero(~compat & (r_type == OK))
        cases = []
        for i in g1a_reads.tolist() + inc.tolist():
            vals = elem[rstart[i]:rstart[i] + rlen[i]]
            wt = writer_txn(C.pair(np.full(len(vals), rk[i]), vals))
            for v, t in zip(vals.tolist(), wt.tolist()):
                if t >= 0 and ttype[t] == FAIL:
                    cases.append({"op": int(r_txn[i]), "mop": int(ri[i]), "writer": int(t), "element": int(v)})
        if cases:
            anomalies["G1a"] = cases

    # --- per (txn, key) groups: future-read, internal, lost-update ---
    a_oi = order_index(acode)   # position of each append in the order
    mop_opos = np.full(M, -1, np.int64)
    if nO:  # (no version order at all: every append failed, or was made twice to a key no read shows)
        mop_opos[ai] = np.where(a_oi >= 0, opos[np.maximum(a_oi, 0)], -1)
    mop_rlen = np.full(M, -1, np.int64)
    mop_rlen[ri] = rlen
    gr = Groups(h, mop_rlen)
    go, newg = gr.go, gr.newg
    fr = _future_reads(h, gr, mop_opos, mop_rlen, ri, compat)
    if fr:
        anomalies["future-read"] = fr

    # --- G1b: last element of an ok read is an intermediate append of another txn ---
    last_code = np.zeros(len(ri), np.int64)
    last_val = np.full(len(ri), INIT, np.int64)
    last_val[nonempty] = elem[rstart[nonempty] + rlen[nonempty] - 1]
    last_code[nonempty] = C.pair(rk[nonempty], last_val[nonempty])
    last_wm = np.where(nonempty, writer_mop(last_code), -1)
    sa = np.flatnonzero(m_f[go] == APPEND)
    inter_mop = np.zeros(M, bool)
    nxt = sa[:-1][(sa[1:] == sa[:-1] + 1) & ~newg[sa[1:]]]  # append followed by another append of the group
    # an append is intermediate if any later append exists in its group
    if len(sa):
        ga = gr.gid[sa]
        later = np.r_[ga[1:] == ga[:-1], False]
        inter_mop[go[sa[later]]] = True
    del nxt
    last_wt = np.where(last_wm >= 0, m_txn[np.maximum(last_wm, 0)], -1)
    g1b = np.flatnonzero((last_wm >= 0) & inter_mop[np.maximum(last_wm, 0)] & (last_wt != r_txn) & (r_type == OK))
    if len(g1b):
        anomalies["G1b"] = [{"op": int(r_txn[i]), "mop": int(ri[i]), "writer": int(last_wt[i]),
                             "element": int(last_val[i])} for i in g1b]

    # --- dependency edges ---
    poss_a = ai[ttype[m_txn[ai]] != FAIL]
    pa_oi = a_oi[ttype[m_txn[ai]] != FAIL]
    known = pa_oi >= 0
    prev_val = np.full(len(poss_a), INIT, np.int64)
    prev_code = C.init(m_key[poss_a])
    hp = np.zeros(len(poss_a), bool)
    hp[known] = opos[pa_oi[known]] > 0
    prev_val[hp] = order_val[pa_oi[hp] - 1]
    prev_code[hp] = order_code[pa_oi[hp] - 1]
    unk = np.flatnonzero(~known)
    if len(unk) and len(okeys):
        kp = np.minimum(np.searchsorted(okeys, m_key[poss_a[unk]]), len(okeys) - 1)
        has = okeys[kp] == m_key[poss_a[unk]]
        li = olast[kp[has]]
        prev_val[unk[has]] = order_val[li]
        prev_code[unk[has]] = order_code[li]
    # ww: writer of the previous element -> appender (o_wt: the writer of each element of the order)
    prev_oi = np.full(len(poss_a), -1, np.int64)
    prev_oi[hp] = pa_oi[hp] - 1
    if len(unk) and len(okeys):
        prev_oi[unk[has]] = li
    pw = o_wt[prev_oi] if nO else np.full(len(poss_a), -1, np.int64)
    pw = np.where((prev_oi >= 0) & (pw >= 0) & (ttype[np.maximum(pw, 0)] != FAIL), pw, -1)
    a_txn = m_txn[poss_a]
    a_key, a_val = m_key[poss_a], m_val[poss_a]     # fact rows of ww and rw: one per possible append
    at = np.flatnonzero((pw >= 0) & (pw != a_txn))  # self-edges left out here, not copied out later
    ww = EdgeSet(WW, pw[at], a_txn[at], a_key, prev_val, a_val, at)
    # wr: writer of a read's last element -> reader
    wt = np.where((last_wt >= 0) & (ttype[np.maximum(last_wt, 0)] != FAIL), last_wt, -1)
    at = np.flatnonzero((wt >= 0) & r_poss & (wt != r_txn))
    wr = EdgeSet(WR, wt[at], r_txn[at], rk, last_val, last_val, at)
    # rw: readers of the previous version -> appender
    vcode = np.where(nonempty, last_code, C.init(rk))
    rsel = np.flatnonzero(r_poss)
    rep, srcs = readers_of(vcode[rsel], r_txn[rsel], prev_code)
    rw = EdgeSet(RW, srcs, a_txn[rep], a_key, prev_val, a_val, rep)

    internal = _internal_cases(h, gr, ri, rows)
    if internal:
        anomalies["internal"] = internal
    du = _dirty_updates(h, order_key, order_val, o_wt, o_wtype)
    if du:
        anomalies["dirty-update"] = du
    lu = _lost_updates(h, gr, ri, vcode)
    if lu:
        anomalies["lost-update"] = lu
    return {"edges": [ww, wr, rw], "anomalies": anomalies, "codes": C}


def _future_reads(h, gr: Groups, mop_opos, mop_rlen, ri, compat) -> list[dict]:
    """An ok txn reads (before appending it) an element it appends later in the same txn."""
    go, newg = gr.go, gr.newg
    M = len(go)
    if M == 0:
        return []
    okm = h.t_type[h.m_txn[go]] == OK
    is_read = (h.m_f[go] == R) & (mop_rlen[go] >= 0)
    is_app = h.m_f[go] == APPEND
    prev_max = gr.prevmax
    cand = np.flatnonzero(is_app & okm & (mop_opos[go] >= 0) & (mop_opos[go] < prev_max))
    cases, seen = [], set()
    for j in cand.tolist():
        t = int(h.m_txn[go[j]])
        if t in seen:
            continue
        seen.add(t)
        # the earliest read of the group that shows the element
        g0 = j
        while not newg[g0]:
            g0 -= 1
        for q in range(g0, j):
            if is_read[q] and mop_rlen[go[q]] > mop_opos[go[j]]:
                cases.append({"op": t, "mop": int(go[q]), "element": int(h.m_val[go[j]])})
                break
    # reads incompatible with the order: compare elements directly
    for i in np.flatnonzero(~compat).tolist():
        mm = int(ri[i])
        t = int(h.m_txn[mm])
        if t in seen or h.t_type[t] != OK:
            continue
        r = int(h.m_val[mm])
        vals = set(h.r_elem[h.r_off[r]:h.r_off[r + 1]].tolist())
        a, b = h.mop_range(t)
        for q in range(mm + 1, b):
            if h.m_f[q] == APPEND and h.m_key[q] == h.m_key[mm] and int(h.m_val[q]) in vals:
                seen.add(t)
                cases.append({"op": t, "mop": mm, "element": int(h.m_val[q])})
                break
    return cases


def _internal_cases(h: History, gr: Groups, ri: np.ndarray, rows: np.ndarray) -> list[dict]:
    """Reads that contradict their own transaction's earlier micro-ops on the same key: a read
    after a read (and appends) must be that read plus the appends; a read after appends only must
    end with them. The first such read of each ok transaction (in (txn, key, position) order)."""
    m_txn, m_f = h.m_txn, h.m_f
    o, newg = gr.go, gr.newg
    M = len(m_txn)
    if M == 0:
        return []
    fo = m_f[o]
    is_r = fo == R
    chk = np.flatnonzero(~newg & is_r & (h.t_type[m_txn[o]] == OK))  # reads after another mop of their group
    if len(chk) == 0:
        return []
    gs = gr.gstart[chk]             # group start
    prev = gr.prevr[chk]            # the read before
    full = prev >= gs               # a read before in the group: the expected list is known in full
    anchor = np.where(full, prev, gs - 1)
    k = chk - anchor - 1            # the mops between are appends (list-append has r and append only)
    r_off, elem = h.r_off, h.r_elem

    def span(pos):                  # (start, length) in r_elem of the read at position pos of o
        mm = o[pos]
        nil = h.m_nil[mm]
        if len(ri) == 0:
            z = np.zeros(len(pos), np.int64)
            return z, z
        row = rows[np.minimum(np.searchsorted(ri, mm), len(ri) - 1)]
        return np.where(nil, 0, r_off[row]), np.where(nil, 0, r_off[row + 1] - r_off[row])

    st, ln = span(chk)
    pst, pln = span(np.maximum(prev, 0))
    pln = np.where(full, pln, 0)
    bad = np.where(full, ln != pln + k, ln < k)
    q = np.flatnonzero(~bad & (pln > 0))     # this read starts with the read before
    if len(q):
        diff = gather(elem, st[q], pln[q]) != gather(elem, pst[q], pln[q])
        bad[np.repeat(q, pln[q])[diff]] = True
    q = np.flatnonzero(~bad & (k > 0))       # ... and ends with the appends since
    if len(q):
        vals = h.m_val[gather(o, anchor[q] + 1, k[q])]
        diff = gather(elem, st[q] + ln[q] - k[q], k[q]) != vals
        bad[np.repeat(q, k[q])[diff]] = True
    bi = np.flatnonzero(bad)
    if len(bi) == 0:
        return []
    txn = m_txn[o[chk[bi]]]
    _, first = np.unique(txn, return_index=True)
    cases = []
    for i in bi[np.sort(first)].tolist():
        s = elem[pst[i]:pst[i] + pln[i]].tolist() if full[i] else []
        s += h.m_val[o[anchor[i] + 1:chk[i]]].tolist()
        exp = [h.value(x) for x in s] if full[i] else ["..."] + [h.value(x) for x in s]
        cases.append({"op": int(m_txn[o[chk[i]]]), "mop": int(o[chk[i]]), "expected": exp})
    return cases


def _dirty_updates(h: History, order_key, order_val, wt, wtype) -> list[dict]:
    if len(order_key) == 0:
        return []
    if not (wtype == FAIL).any():
        return []
    cases = []
    keys_with_fail = np.unique(order_key[wtype == FAIL])
    for k in keys_with_fail.tolist():
        idx = np.flatnonzero(order_key == k).tolist()
        t1_type, t1, vs = OK, None, []
        for i in idx:
            t2, ty2 = int(wt[i]), int(wtype[i])
            v = int(order_val[i])
            if ty2 == OK:
                if t1_type == FAIL:
                    cases.append({"key": k, "values": vs + [v], "txns": [t1, t2]})
                t1_type, t1, vs = OK, t2, [v]
            elif ty2 == FAIL:
                if t1_type != FAIL:
                    t1_type, t1, vs = FAIL, t2, [v]
                else:
                    vs = vs + [v]
            else:
                vs = vs + [v]
    return cases


def _lost_updates(h: History, gr: Groups, ri: np.ndarray, vcode: np.ndarray) -> list[dict]:
    """Per ok txn and key: the first read of k, if some append of k follows it."""
    m_txn, m_key = h.m_txn, h.m_key
    o = gr.go
    if len(m_txn) == 0:
        return []
    fr, lw = gr.fr, gr.lw
    good = (fr >= 0) & (lw > fr)
    good[good] &= h.t_type[m_txn[o[fr[good]]]] == OK
    g = np.flatnonzero(good)
    if len(g) == 0:
        return []
    first_read_mop = o[fr[g]]
    # the version each first read saw (an ok nil read is the empty list; an unknown one, none)
    at = np.minimum(np.searchsorted(ri, first_read_mop), max(len(ri) - 1, 0))
    codes = np.where(ri[at] == first_read_mop, vcode[at], np.iinfo(np.int64).min) if len(ri) else \
        np.full(len(g), np.iinfo(np.int64).min, np.int64)
    keys = m_key[first_read_mop]
    txns = m_txn[first_read_mop]
    oo = np.lexsort((txns, codes, keys))
    keys, codes, txns, frm = keys[oo], codes[oo], txns[oo], first_read_mop[oo]
    brk = np.r_[True, (keys[1:] != keys[:-1]) | (codes[1:] != codes[:-1]), True]
    starts = np.flatnonzero(brk[:-1])
    ends = np.r_[starts[1:], len(keys)]
    cases = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        if e - s >= 2:
            cases.append({"key": int(keys[s]), "read_mop": int(frm[s]), "txns": [int(t) for t in txns[s:e]]})
    return cases
