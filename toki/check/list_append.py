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

As in Elle (``elle.list-append/check``), :func:`analyse` is a list of named checks, each a
function of one :class:`AppendIndex` (built once per history): :func:`incompatible_orders`,
:func:`duplicates`, :func:`g1a_cases`, :func:`future_reads`, :func:`g1b_cases`,
:func:`internal_cases`, :func:`dirty_updates`, :func:`lost_updates`, and :func:`edges`. The joins
they are built of (codes, lookups, groups) are in :mod:`toki.check.joins`.
"""

from __future__ import annotations

import numpy as np

from toki.check import accel
from toki.check.accel.ranges import gather, ranges
from toki.check.graph import NONE, RW, WR, WW, EdgeSet
from toki.check.joins import Codes, Groups, longest_reads, lookup, position_lookup, readers_of
from toki.check.reading.history import APPEND, FAIL, INFO, OK, History, R
from toki.errors import HistoryError

INIT = NONE
_BLOCK = 1 << 20  # elements per block of the prefix comparison


def analyse(h: History) -> dict:
    """Return {"edges": [EdgeSet...], "anomalies": {...}, "codes": Codes} for a list-append
    history: its index (:class:`AppendIndex`) once, then each named check on it, in :data:`CHECKS`
    order, and the dependency edges (:func:`edges`)."""
    ix = AppendIndex(h)
    anomalies = {}
    for name, find in CHECKS:
        cases = find(ix)
        if cases:
            anomalies[name] = cases
    return {"edges": edges(ix), "anomalies": anomalies, "codes": ix.codes}


# ------------------------------------------------------------------ the named checks (Elle's)

def incompatible_orders(ix: AppendIndex) -> list[dict]:
    """Reads that are not a prefix of their key's longest read: the first such read of each key,
    with the longest read it contradicts."""
    cases = {}
    for r in ix.bad_reads.tolist():
        k = int(ix.rk[r])
        if k not in cases:
            cases[k] = {"key": k, "values": [int(ix.ri[r]), int(ix.ri[ix.L_of[r]])]}
    return list(cases.values())


def duplicates(ix: AppendIndex) -> list[dict]:
    """duplicate-elements: compatible reads longer than the first duplicate of their longest read,
    and incompatible reads holding an element twice."""
    rlen, rstart, elem = ix.rlen, ix.rstart, ix.elem
    dups = []
    if ix.first_dup:
        for i in np.flatnonzero(ix.compat & ix.r_poss & ix.nonempty).tolist():
            L = int(ix.L_of[i])
            if L in ix.first_dup and rlen[i] > ix.first_dup[L]:
                dups.append(i)
    for i in np.flatnonzero(~ix.compat).tolist():
        vals = elem[rstart[i]:rstart[i] + rlen[i]]
        if len(np.unique(vals)) < len(vals):
            dups.append(i)
    cases = []
    for i in sorted(set(dups)):
        vals, counts = np.unique(elem[rstart[i]:rstart[i] + rlen[i]], return_counts=True)
        cases.append({"op": int(ix.r_txn[i]), "mop": int(ix.ri[i]),
                      "duplicates": {int(v): int(c) for v, c in zip(vals, counts) if c > 1}})
    return cases


def g1a_cases(ix: AppendIndex) -> list[dict]:
    """G1a (aborted read): ok reads holding elements appended by failed transactions."""
    fo = np.flatnonzero(ix.o_wtype == FAIL)
    if not len(fo):
        return []
    okeys, rk = ix.okeys, ix.rk
    fail_pos = np.full(len(okeys), np.iinfo(np.int64).max)
    kidx = np.searchsorted(okeys, ix.order_key[fo])
    np.minimum.at(fail_pos, kidx, ix.opos[fo])
    kp = np.minimum(np.searchsorted(okeys, rk), max(len(okeys) - 1, 0))
    rfp = np.where(okeys[kp] == rk, fail_pos[kp], np.iinfo(np.int64).max) if len(okeys) else \
        np.full(len(ix.ri), np.iinfo(np.int64).max)
    g1a_reads = np.flatnonzero(ix.compat & (ix.r_type == OK) & (ix.rlen > rfp))
    inc = np.flatnonzero(~ix.compat & (ix.r_type == OK))
    ttype = ix.h.t_type
    cases = []
    for i in g1a_reads.tolist() + inc.tolist():
        vals = ix.elem[ix.rstart[i]:ix.rstart[i] + ix.rlen[i]]
        wt = ix.writer_txn(ix.codes.pair(np.full(len(vals), rk[i]), vals))
        for v, t in zip(vals.tolist(), wt.tolist()):
            if t >= 0 and ttype[t] == FAIL:
                cases.append({"op": int(ix.r_txn[i]), "mop": int(ix.ri[i]), "writer": int(t), "element": int(v)})
    return cases


def future_reads(ix: AppendIndex) -> list[dict]:
    """An ok txn reads (before appending it) an element it appends later in the same txn."""
    h, gr, mop_opos, mop_rlen, ri, compat = ix.h, ix.groups, ix.mop_opos, ix.mop_rlen, ix.ri, ix.compat
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


def g1b_cases(ix: AppendIndex) -> list[dict]:
    """G1b (intermediate read): the last element of an ok read is an append of another
    transaction that appended to the key again later."""
    go, M = ix.groups.go, len(ix.h.m_txn)
    sa = np.flatnonzero(ix.h.m_f[go] == APPEND)
    inter_mop = np.zeros(M, bool)   # an append is intermediate if a later append is in its group
    if len(sa):
        ga = ix.groups.gid[sa]
        later = np.r_[ga[1:] == ga[:-1], False]
        inter_mop[go[sa[later]]] = True
    last_wm, last_wt = ix.last_wm, ix.last_wt
    g1b = np.flatnonzero((last_wm >= 0) & inter_mop[np.maximum(last_wm, 0)] & (last_wt != ix.r_txn) &
                         (ix.r_type == OK))
    return [{"op": int(ix.r_txn[i]), "mop": int(ix.ri[i]), "writer": int(last_wt[i]), "element": int(ix.last_val[i])}
            for i in g1b]


def internal_cases(ix: AppendIndex) -> list[dict]:
    """Reads that contradict their own transaction's earlier micro-ops on the same key: a read
    after a read (and appends) must be that read plus the appends; a read after appends only must
    end with them. The first such read of each ok transaction (in (txn, key, position) order)."""
    h, gr, ri, rows = ix.h, ix.groups, ix.ri, ix.rows
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



def dirty_updates(ix: AppendIndex) -> list[dict]:
    """dirty-update: a committed append right after a failed one in a key's version order."""
    order_key, order_val, wt, wtype = ix.order_key, ix.order_val, ix.o_wt, ix.o_wtype
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



def lost_updates(ix: AppendIndex) -> list[dict]:
    """lost-update: two committed transactions read the same version of a key and both appended
    to it (per ok txn and key: the first read of k, if some append of k follows it)."""
    h, gr, ri, vcode = ix.h, ix.groups, ix.ri, ix.vcode
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


#: the named checks, in the order their anomalies are reported
CHECKS = (("incompatible-order", incompatible_orders), ("duplicate-elements", duplicates), ("G1a", g1a_cases),
          ("future-read", future_reads), ("G1b", g1b_cases), ("internal", internal_cases),
          ("dirty-update", dirty_updates), ("lost-update", lost_updates))


# ------------------------------------------------------------------ the index the checks read

class AppendIndex:
    """What every check reads off a list-append history, built once: the (key, value) codes
    (``codes``), each append by its code (appends must be unique per key), the reads with a known
    list (``ri``: their micro-ops, with ``rk``, ``rlen``, ``rstart`` into ``elem``, ``r_txn``,
    ``r_type``), each key's longest read and which reads are a prefix of it (``compat``,
    ``bad_reads``), each key's version order (``order_key``/``order_val``/``order_code``,
    positions ``opos``, its writers ``o_wt`` and their types ``o_wtype``), the (txn, key) groups
    (``groups``), and per read its last element, that element's writer and the version it saw
    (``last_val``, ``last_wt``, ``vcode``)."""

    def __init__(self, h: History):
        self.h = h
        self._reads()
        self._appends()
        self._longest()
        self._version_order()
        self._groups()
        self._last_elements()

    def _reads(self) -> None:
        h = self.h
        m_txn, m_f, m_key, m_val = h.m_txn, h.m_f, h.m_key, h.m_val
        self.ai = ai = np.flatnonzero(m_f == APPEND)
        self.ri = ri = np.flatnonzero((m_f == R) & ~h.m_nil)   # reads with a known list (ok nil = empty)
        self.rows = rows = m_val[ri]
        self.rlen = (h.r_off[rows + 1] - h.r_off[rows]).astype(np.int64)
        self.rstart = rstart = h.r_off[rows]
        self.rk = rk = m_key[ri]
        self.r_txn = m_txn[ri]
        self.r_type = h.t_type[self.r_txn]
        self.r_poss = self.r_type != FAIL
        self.nonempty = nonempty = self.rlen > 0
        self.elem = elem = h.r_elem                   # elements of every known read, in ri order
        C = Codes(np.concatenate([m_key[ai], rk]), np.concatenate([m_val[ai], elem[rstart[nonempty]]])
                  if len(ai) or nonempty.any() else np.zeros(0, np.int64))
        if len(elem) and C.uniq is None:
            lo_, hi_ = int(elem.min()), int(elem.max())
            if lo_ < C.vmin or hi_ >= C.vmin + C.vr:
                C = Codes(np.concatenate([m_key[ai], rk]), np.concatenate([m_val[ai], elem]))
        self.codes = C

    def _appends(self) -> None:
        """(key, value) -> append mop; appends must be unique."""
        h, ai = self.h, self.ai
        m_txn, m_key, m_val = h.m_txn, h.m_key, h.m_val
        self.acode = acode = self.codes.pair(m_key[ai], m_val[ai])
        ao = np.argsort(acode, kind="stable")
        acs = acode[ao]
        dup = np.flatnonzero(acs[1:] == acs[:-1])
        if len(dup):
            m1, m2 = ai[ao[dup[0]]], ai[ao[dup[0] + 1]]
            raise HistoryError(
                f"value {h.value(int(m_val[m1]))!r} is appended to key {h.key(int(m_key[m1]))!r} more than once "
                f"(ops {int(h.t_index[m_txn[m1]])} and {int(h.t_index[m_txn[m2]])})",
                fix="list-append needs every appended value to be unique per key")
        self.writer_mop = lookup(acs, ai[ao])

    def writer_txn(self, codes, possible_only=False):
        """The transaction that appended each (key, value) code, or -1 (``possible_only``: -1 for
        a failed one too)."""
        ttype, m_txn = self.h.t_type, self.h.m_txn
        wm = self.writer_mop(codes)
        wt = np.where(wm >= 0, m_txn[np.maximum(wm, 0)], -1)
        if possible_only:
            wt = np.where((wt >= 0) & (ttype[np.maximum(wt, 0)] != FAIL), wt, -1)
        return wt

    def _longest(self) -> None:
        """The longest possible read per key, and every read compared with it."""
        rk, rlen, rstart, elem, ri = self.rk, self.rlen, self.rstart, self.elem, self.ri
        self.pr = pr = np.flatnonzero(self.r_poss & self.nonempty)
        self.lk = np.zeros(0, np.int64)
        self.lr = np.zeros(0, np.int64)
        self.compat = compat = np.ones(len(ri), bool)
        self.L_of = np.full(len(ri), -1, np.int64)
        self.bad_reads = np.zeros(0, np.int64)
        if not len(pr):
            return
        self.lr = lr = longest_reads(rk, rlen, pr)
        self.lk = lk = rk[lr]                          # sorted
        kp = lookup(lk, np.arange(len(lk)))(rk)
        has = kp >= 0
        kp[~has] = 0
        self.L_of = np.where(has, lr[kp], -1)
        cmp = np.flatnonzero(has & self.r_poss & self.nonempty)
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
            self.bad_reads = np.unique(np.concatenate(bad_parts))
            compat[self.bad_reads] = False

    def _version_order(self) -> None:
        """Per key, the distinct elements of its longest read (a key appended once and never read
        non-empty: its one value); where each is, and who wrote it."""
        h, C, lr, rlen, rk, elem, rstart = self.h, self.codes, self.lr, self.rlen, self.rk, self.elem, self.rstart
        n_l = rlen[lr]
        l_read = np.repeat(lr, n_l)
        l_pos = ranges(np.zeros(len(n_l), np.int64), n_l)
        order_key = rk[l_read]
        order_val = elem[rstart[l_read] + l_pos]
        order_code = C.pair(order_key, order_val)
        self.first_dup = first_dup = {}
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
        ai, m_key, m_val = self.ai, h.m_key, h.m_val
        sm = _single_appends(m_key[ai], self.lk, ai)
        if len(sm):
            order_key = np.concatenate([order_key, m_key[sm]])
            order_val = np.concatenate([order_val, m_val[sm]])
            order_code = np.concatenate([order_code, C.pair(m_key[sm], m_val[sm])])
            so = np.argsort(order_key, kind="stable")
            order_key, order_val, order_code = order_key[so], order_val[so], order_code[so]
        self.order_key, self.order_val, self.order_code = order_key, order_val, order_code
        self.nO = nO = len(order_key)
        kstart_mask = np.r_[True, order_key[1:] != order_key[:-1]] if nO else np.zeros(0, bool)
        kstarts = np.flatnonzero(kstart_mask)
        self.opos = np.arange(nO) - np.repeat(kstarts, np.diff(np.r_[kstarts, nO])) if nO else np.zeros(0, np.int64)
        self.okeys = order_key[kstarts]
        self.olast = np.r_[kstarts[1:], nO] - 1 if nO else np.zeros(0, np.int64)
        self.order_index = position_lookup(order_code)
        # writer of each element of the order, and its type
        self.o_wt = o_wt = self.writer_txn(order_code)
        self.o_wtype = np.where(o_wt >= 0, h.t_type[np.maximum(o_wt, 0)], INFO)

    def _groups(self) -> None:
        """Per (txn, key) group: where each append is in the order, and how long each read is."""
        h = self.h
        M = len(h.m_txn)
        self.a_oi = a_oi = self.order_index(self.acode)   # position of each append in the order
        self.mop_opos = np.full(M, -1, np.int64)
        if self.nO:  # (no version order at all: every append failed, or was made twice to a key no read shows)
            self.mop_opos[self.ai] = np.where(a_oi >= 0, self.opos[np.maximum(a_oi, 0)], -1)
        self.mop_rlen = np.full(M, -1, np.int64)
        self.mop_rlen[self.ri] = self.rlen
        self.groups = Groups(h, self.mop_rlen)

    def _last_elements(self) -> None:
        """Per read: its last element, that element's append and writer, and the version it saw
        (its last element's code, or the key's initial version)."""
        ri, rk, nonempty, C = self.ri, self.rk, self.nonempty, self.codes
        self.last_code = last_code = np.zeros(len(ri), np.int64)
        self.last_val = last_val = np.full(len(ri), INIT, np.int64)
        last_val[nonempty] = self.elem[self.rstart[nonempty] + self.rlen[nonempty] - 1]
        last_code[nonempty] = C.pair(rk[nonempty], last_val[nonempty])
        self.last_wm = last_wm = np.where(nonempty, self.writer_mop(last_code), -1)
        self.last_wt = np.where(last_wm >= 0, self.h.m_txn[np.maximum(last_wm, 0)], -1)
        self.vcode = np.where(nonempty, last_code, C.init(rk))


def _single_appends(akey: np.ndarray, lk: np.ndarray, ai: np.ndarray) -> np.ndarray:
    """The appends ``ai`` (keys ``akey``) to keys appended exactly once and not among ``lk`` (the
    keys read non-empty): such a key's order is its one value. Counted through a table of keys
    where they are dense, else by sorting."""
    if len(akey) == 0:
        return ai[:0]
    kmin, kmax = int(akey.min()), int(akey.max())
    if accel.dense(kmax - kmin, len(akey)):
        cnt = np.bincount(akey - kmin, minlength=kmax - kmin + 1)
        inr = lk[(lk >= kmin) & (lk <= kmax)]
        cnt[inr - kmin] = 0
        return ai[cnt[akey - kmin] == 1]
    uk, cnt = np.unique(akey, return_counts=True)
    single = uk[cnt == 1]
    single = single[~np.isin(single, lk)]
    return ai[np.isin(akey, single)]


# ------------------------------------------------------------------ edges

def edges(ix: AppendIndex) -> list[EdgeSet]:
    """ww (the writer of the previous element -> the appender), wr (the writer of a read's last
    element -> the reader) and rw (the readers of the previous version -> the appender), over
    possible (not failed) transactions."""
    h, C = ix.h, ix.codes
    ttype, m_txn, m_key, m_val = h.t_type, h.m_txn, h.m_key, h.m_val
    ai, a_oi, opos, okeys = ix.ai, ix.a_oi, ix.opos, ix.okeys
    poss_a = ai[ttype[m_txn[ai]] != FAIL]
    pa_oi = a_oi[ttype[m_txn[ai]] != FAIL]
    known = pa_oi >= 0
    prev_val = np.full(len(poss_a), INIT, np.int64)
    prev_code = C.init(m_key[poss_a])
    hp = np.zeros(len(poss_a), bool)
    hp[known] = opos[pa_oi[known]] > 0
    prev_val[hp] = ix.order_val[pa_oi[hp] - 1]
    prev_code[hp] = ix.order_code[pa_oi[hp] - 1]
    unk = np.flatnonzero(~known)
    if len(unk) and len(okeys):
        kp = np.minimum(np.searchsorted(okeys, m_key[poss_a[unk]]), len(okeys) - 1)
        has = okeys[kp] == m_key[poss_a[unk]]
        li = ix.olast[kp[has]]
        prev_val[unk[has]] = ix.order_val[li]
        prev_code[unk[has]] = ix.order_code[li]
    # ww: writer of the previous element -> appender (o_wt: the writer of each element of the order)
    prev_oi = np.full(len(poss_a), -1, np.int64)
    prev_oi[hp] = pa_oi[hp] - 1
    if len(unk) and len(okeys):
        prev_oi[unk[has]] = li
    pw = ix.o_wt[prev_oi] if ix.nO else np.full(len(poss_a), -1, np.int64)
    pw = np.where((prev_oi >= 0) & (pw >= 0) & (ttype[np.maximum(pw, 0)] != FAIL), pw, -1)
    a_txn = m_txn[poss_a]
    a_key, a_val = m_key[poss_a], m_val[poss_a]     # fact rows of ww and rw: one per possible append
    at = np.flatnonzero((pw >= 0) & (pw != a_txn))  # self-edges left out here, not copied out later
    ww = EdgeSet(WW, pw[at], a_txn[at], a_key, prev_val, a_val, at)
    # wr: writer of a read's last element -> reader
    last_wt, r_txn = ix.last_wt, ix.r_txn
    wt = np.where((last_wt >= 0) & (ttype[np.maximum(last_wt, 0)] != FAIL), last_wt, -1)
    at = np.flatnonzero((wt >= 0) & ix.r_poss & (wt != r_txn))
    wr = EdgeSet(WR, wt[at], r_txn[at], ix.rk, ix.last_val, ix.last_val, at)
    # rw: readers of the previous version -> appender
    rsel = np.flatnonzero(ix.r_poss)
    rep, srcs = readers_of(ix.vcode[rsel], r_txn[rsel], prev_code)
    rw = EdgeSet(RW, srcs, a_txn[rep], a_key, prev_val, a_val, rep)
    return [ww, wr, rw]
