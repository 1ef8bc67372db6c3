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
from toki.check.history import APPEND, FAIL, INFO, OK, R, History
from toki.errors import HistoryError

INIT = NONE


class Codes:
    """Packs (key, value) pairs into one int64 so joins are sorts and searches."""

    def __init__(self, keys: np.ndarray, vals: np.ndarray):
        self.kmin = int(keys.min()) if len(keys) else 0
        kmax = int(keys.max()) if len(keys) else 0
        self.vmin = int(vals.min()) if len(vals) else 0
        vmax = int(vals.max()) if len(vals) else 0
        self.vr = vmax - self.vmin + 1
        if (kmax - self.kmin + 1) * self.vr >= 2 ** 62:
            # sparse values: rank them first
            self.uniq = np.unique(vals)
            self.vmin, self.vr = 0, len(self.uniq) + 1
        else:
            self.uniq = None

    def _v(self, v):
        return (np.searchsorted(self.uniq, v) if self.uniq is not None else v - self.vmin)

    def pair(self, k, v):
        return (np.asarray(k, np.int64) - self.kmin) * self.vr + self._v(np.asarray(v, np.int64))

    def init(self, k):
        return -(np.asarray(k, np.int64) - self.kmin) - 1


def analyse(h: History) -> dict:
    """Return {"edges": [EdgeSet...], "anomalies": {...}} for a list-append history."""
    T = h.n_txns
    ttype = h.t_type
    m_txn, m_f, m_key, m_val, m_nil = h.m_txn, h.m_f, h.m_key, h.m_val, h.m_nil
    M = len(m_txn)
    mtype = ttype[m_txn] if M else np.zeros(0, np.int8)
    possible_m = mtype != FAIL
    anomalies: dict[str, list] = {}

    ai = np.flatnonzero(m_f == APPEND)
    ri = np.flatnonzero((m_f == R) & ~m_nil)   # reads with a known list
    rows = m_val[ri]
    rlen = (h.r_off[rows + 1] - h.r_off[rows]).astype(np.int64)
    # element table for known reads
    e_read = np.repeat(np.arange(len(ri)), rlen)            # index into ri
    e_pos = np.arange(int(rlen.sum())) - np.repeat(np.cumsum(rlen) - rlen, rlen)
    e_start = h.r_off[rows]
    e_val = h.r_elem[np.repeat(e_start, rlen) + e_pos] if len(e_read) else np.zeros(0, np.int64)
    e_key = m_key[ri][e_read]
    allv = np.concatenate([m_val[ai], e_val])
    allk = np.concatenate([m_key[ai], m_key[ri]]) if len(ri) or len(ai) else np.zeros(0, np.int64)
    C = Codes(allk, allv)

    # --- append index: (key, value) -> append mop; unique appends ---
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

    def writer_mop(codes):
        p = np.searchsorted(acs, codes)
        p = np.minimum(p, max(len(acs) - 1, 0))
        found = (acs[p] == codes) if len(acs) else np.zeros(len(codes), bool)
        return np.where(found, a_sorted_mop[p] if len(acs) else -1, -1)

    e_code = C.pair(e_key, e_val)
    e_wm = writer_mop(e_code)                 # writer mop of each element, -1 unknown
    e_wt = np.where(e_wm >= 0, m_txn[np.maximum(e_wm, 0)], -1)
    r_txn = m_txn[ri]
    r_type = ttype[r_txn]
    e_rt = r_txn[e_read]

    # --- G1a: ok reads holding elements appended by failed txns ---
    e_wtype = np.where(e_wt >= 0, ttype[np.maximum(e_wt, 0)], -1)
    g1a = np.flatnonzero((e_wtype == FAIL) & (r_type[e_read] == OK))
    if len(g1a):
        anomalies["G1a"] = [{"op": int(e_rt[i]), "mop": int(ri[e_read[i]]), "writer": int(e_wt[i]),
                             "element": int(e_val[i])} for i in g1a]

    # --- future-read: an ok txn reads an element it appends later ---
    fr = np.flatnonzero((e_wt == e_rt) & (e_wm > ri[e_read]) & (r_type[e_read] == OK))
    if len(fr):
        seen = set()
        cases = []
        for i in fr:
            t = int(e_rt[i])
            if t not in seen:
                seen.add(t)
                cases.append({"op": t, "mop": int(ri[e_read[i]]), "element": int(e_val[i])})
        anomalies["future-read"] = cases

    # --- G1b: last element of an ok read is an intermediate append of another txn ---
    at = m_txn[ai]
    ak = m_key[ai]
    o = np.lexsort((ai, ak, at))
    inter = np.zeros(len(ai), bool)
    if len(ai) > 1:
        nxt_same = (at[o][1:] == at[o][:-1]) & (ak[o][1:] == ak[o][:-1])
        inter[o[:-1][nxt_same]] = True
    inter_mop = np.zeros(M, bool)
    inter_mop[ai[inter]] = True
    nonempty = rlen > 0
    last_idx = np.cumsum(rlen) - 1
    r_last_wm = np.full(len(ri), -1, np.int64)
    r_last_wm[nonempty] = e_wm[last_idx[nonempty]]
    r_last_wt = np.where(r_last_wm >= 0, m_txn[np.maximum(r_last_wm, 0)], -1)
    g1b = np.flatnonzero((r_last_wm >= 0) & inter_mop[np.maximum(r_last_wm, 0)] & (r_last_wt != r_txn)
                         & (r_type == OK))
    if len(g1b):
        anomalies["G1b"] = [{"op": int(r_txn[i]), "mop": int(ri[i]), "writer": int(r_last_wt[i]),
                             "element": int(e_val[last_idx[i]])} for i in g1b]

    # --- duplicate-elements within one read (ok and info txns) ---
    if len(e_code):
        od = np.lexsort((e_code, e_read))
        same = (e_read[od][1:] == e_read[od][:-1]) & (e_code[od][1:] == e_code[od][:-1])
        dmask = same & (r_type[e_read[od][1:]] != FAIL)
        if dmask.any():
            cases: dict[int, dict] = {}
            for j in np.flatnonzero(dmask):
                r = int(e_read[od][j + 1])
                el = int(e_val[od][j + 1])
                c = cases.setdefault(r, {"op": int(r_txn[r]), "mop": int(ri[r]), "duplicates": {}})
                c["duplicates"][el] = c["duplicates"].get(el, 1) + 1
            anomalies["duplicate-elements"] = list(cases.values())

    # --- version order per key: the longest possible read; incompatible orders ---
    poss_r = r_type != FAIL
    pr = np.flatnonzero(poss_r & nonempty)
    order_key = np.zeros(0, np.int64)
    order_code = np.zeros(0, np.int64)
    order_val = np.zeros(0, np.int64)
    longest_of_key: dict[int, int] = {}
    if len(pr):
        rk = m_key[ri[pr]]
        o = np.lexsort((pr, rlen[pr], rk))
        last_of_key = np.r_[rk[o][1:] != rk[o][:-1], True]
        lr = pr[o[last_of_key]]                # read (index into ri) that is longest for its key
        lk = m_key[ri[lr]]
        # compare every element of every possible read with the longest read's element at the same position
        kpos = np.searchsorted(lk, m_key[ri])  # lk is sorted by key
        kpos = np.minimum(kpos, len(lk) - 1)
        e_longest = lr[kpos[e_read]]
        ok_e = poss_r[e_read] & (lk[kpos[e_read]] == e_key)
        lstart = np.cumsum(rlen) - rlen
        cmp_code = e_code.copy()
        lidx = lstart[e_longest] + e_pos
        valid = ok_e & (e_pos < rlen[e_longest])
        cmp_code[valid] = e_code[np.minimum(lidx[valid], len(e_code) - 1)]
        bad_e = ok_e & ((~valid) | (cmp_code != e_code))
        if bad_e.any():
            bad_reads = np.unique(e_read[bad_e])
            cases = {}
            for r in bad_reads:
                k = int(m_key[ri[r]])
                if k in cases:
                    continue
                L = int(e_longest[np.flatnonzero(e_read == r)[0]])
                cases[k] = {"key": k, "values": [int(ri[r]), int(ri[L])]}
            anomalies["incompatible-order"] = list(cases.values())
        # order: elements of longest reads, first occurrence of each value
        lsel = np.isin(e_read, lr)
        ok_ = np.flatnonzero(lsel)
        ok_ = ok_[np.lexsort((e_pos[ok_], e_key[ok_]))]
        _, first = np.unique(e_code[ok_], return_index=True)
        keep = np.sort(first)
        sel = ok_[keep]
        sel = sel[np.lexsort((e_pos[sel], e_key[sel]))]
        order_key, order_code, order_val = e_key[sel], e_code[sel], e_val[sel]
        longest_of_key = {}
    # keys with a single append and no non-empty read: order is [v]
    ak_all = m_key[ai]
    uk, cnt = np.unique(ak_all, return_counts=True)
    single = uk[cnt == 1]
    single = single[~np.isin(single, order_key)]
    if len(single):
        sm = ai[np.isin(ak_all, single)]
        order_key = np.concatenate([order_key, m_key[sm]])
        order_code = np.concatenate([order_code, C.pair(m_key[sm], m_val[sm])])
        order_val = np.concatenate([order_val, m_val[sm]])
        o = np.argsort(order_key, kind="stable")
        order_key, order_code, order_val = order_key[o], order_code[o], order_val[o]
    # position of each element in its key's order
    okey_start = np.r_[0, np.flatnonzero(order_key[1:] != order_key[:-1]) + 1] if len(order_key) else np.zeros(0, np.int64)
    opos = np.arange(len(order_key)) - np.repeat(okey_start, np.diff(np.r_[okey_start, len(order_key)])) \
        if len(order_key) else np.zeros(0, np.int64)
    oc_sort = np.argsort(order_code)
    oc_sorted = order_code[oc_sort]

    def lookup_order(codes):
        p = np.searchsorted(oc_sorted, codes)
        p = np.minimum(p, max(len(oc_sorted) - 1, 0))
        found = (oc_sorted[p] == codes) if len(oc_sorted) else np.zeros(len(codes), bool)
        return np.where(found, oc_sort[p] if len(oc_sorted) else -1, -1)

    # previous version of each append (possible txns only)
    pa = ai[possible_m[ai]]
    pa_code = C.pair(m_key[pa], m_val[pa])
    pa_o = lookup_order(pa_code)
    # last element of each key's order
    if len(order_key):
        ukeys, last_i = np.unique(order_key[::-1], return_index=True)
        last_i = len(order_key) - 1 - last_i
    else:
        ukeys, last_i = np.zeros(0, np.int64), np.zeros(0, np.int64)
    prev_code = C.init(m_key[pa])
    prev_val = np.full(len(pa), INIT, np.int64)
    known = pa_o >= 0
    has_prev = known & (opos[np.maximum(pa_o, 0)] > 0 if len(opos) else known)
    idx_prev = np.maximum(pa_o, 0) - 1
    prev_code[has_prev] = order_code[idx_prev[has_prev]]
    prev_val[has_prev] = order_val[idx_prev[has_prev]]
    unk = ~known
    if unk.any() and len(ukeys):
        kp = np.searchsorted(ukeys, m_key[pa][unk])
        kp2 = np.minimum(kp, len(ukeys) - 1)
        has = ukeys[kp2] == m_key[pa][unk]
        li = last_i[kp2]
        pc = prev_code[unk]
        pv = prev_val[unk]
        pc[has] = order_code[li[has]]
        pv[has] = order_val[li[has]]
        prev_code[unk] = pc
        prev_val[unk] = pv

    # writer of each version code among possible txns
    def possible_writer_txn(codes):
        wm = writer_mop(codes)
        wt = np.where(wm >= 0, m_txn[np.maximum(wm, 0)], -1)
        return np.where((wt >= 0) & (ttype[np.maximum(wt, 0)] != FAIL), wt, -1)

    # ww edges
    pw = np.where(prev_code >= 0, possible_writer_txn(np.maximum(prev_code, 0)), -1)
    m = pw >= 0
    ww = EdgeSet(WW, pw[m], m_txn[pa][m], m_key[pa][m], prev_val[m], m_val[pa][m])

    # wr edges: reads (ok, and info with a known list) whose last element has a possible writer
    r_poss = r_type != FAIL
    lastcode = np.full(len(ri), 0, np.int64)
    lastcode[nonempty] = e_code[last_idx[nonempty]]
    lastval = np.full(len(ri), INIT, np.int64)
    lastval[nonempty] = e_val[last_idx[nonempty]]
    wt = np.where(nonempty, possible_writer_txn(lastcode), -1)
    m = (wt >= 0) & r_poss
    wr = EdgeSet(WR, wt[m], r_txn[m], m_key[ri][m], lastval[m], lastval[m])

    # read index: version code -> reading txns (ok/info reads; ok nil reads are the empty list)
    vcode = np.where(nonempty, lastcode, C.init(m_key[ri]))
    rsel = np.flatnonzero(r_poss)
    rv = vcode[rsel]
    ro = np.argsort(rv, kind="stable")
    rvs = rv[ro]
    rtx = r_txn[rsel][ro]
    lo = np.searchsorted(rvs, prev_code, "left")
    hi = np.searchsorted(rvs, prev_code, "right")
    cnt = hi - lo
    srcs = rtx[np.repeat(lo, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))]
    rep = np.repeat(np.arange(len(pa)), cnt)
    rw = EdgeSet(RW, srcs, m_txn[pa][rep], m_key[pa][rep], prev_val[rep], m_val[pa][rep])

    # --- internal consistency (ok txns), Python over (txn, key) groups with a read after another mop ---
    internal = _internal_cases(h, ri, rows)
    if internal:
        anomalies["internal"] = internal

    # --- dirty update: committed append right after a failed one in a key's order ---
    du = _dirty_updates(h, order_key, order_val, C, writer_mop)
    if du:
        anomalies["dirty-update"] = du

    # --- lost update: two ok txns read the same version of k and both append to k ---
    lu = _lost_updates(h, ri, vcode)
    if lu:
        anomalies["lost-update"] = lu

    return {"edges": [ww, wr, rw], "anomalies": anomalies, "codes": C}


def _internal_cases(h: History, ri: np.ndarray, rows: np.ndarray) -> list[dict]:
    m_txn, m_key, m_f = h.m_txn, h.m_key, h.m_f
    M = len(m_txn)
    if M == 0:
        return []
    ok_m = h.t_type[m_txn] == OK
    # groups (txn, key) with >= 2 mops of which some later one is a read
    o = np.lexsort((np.arange(M), m_key, m_txn))
    st, sk = m_txn[o], m_key[o]
    newg = np.r_[True, (st[1:] != st[:-1]) | (sk[1:] != sk[:-1])]
    gid = np.cumsum(newg) - 1
    later_read = (~newg) & (m_f[o] == R)
    cand_groups = np.unique(gid[later_read & ok_m[o]])
    if len(cand_groups) == 0:
        return []
    row_of = {int(m): int(r) for m, r in zip(ri.tolist(), rows.tolist())}
    gstart = np.flatnonzero(newg)
    gend = np.r_[gstart[1:], M]
    cases = []
    done_txn = set()
    for g in cand_groups.tolist():
        mops = o[gstart[g]:gend[g]].tolist()
        t = int(m_txn[mops[0]])
        if t in done_txn:
            continue
        state = None  # (known_prefix: bool, list)
        for mm in mops:
            if m_f[mm] == APPEND:
                v = int(h.m_val[mm])
                if state is None:
                    state = (False, [v])
                else:
                    state = (state[0], state[1] + [v])
            else:
                if h.m_nil[mm]:
                    read = []
                else:
                    r = row_of[mm]
                    read = h.r_elem[h.r_off[r]:h.r_off[r + 1]].tolist()
                if state is not None:
                    full, s = state
                    bad = (read != s) if full else (len(read) < len(s) or read[len(read) - len(s):] != s)
                    if bad:
                        exp = [h.value(x) for x in s] if full else ["..."] + [h.value(x) for x in s]
                        cases.append({"op": t, "mop": mm, "expected": exp})
                        done_txn.add(t)
                        break
                state = (True, read)
    return cases


def _dirty_updates(h: History, order_key, order_val, C: Codes, writer_mop) -> list[dict]:
    if len(order_key) == 0:
        return []
    wm = writer_mop(C.pair(order_key, order_val))
    wt = np.where(wm >= 0, h.m_txn[np.maximum(wm, 0)], -1)
    wtype = np.where(wt >= 0, h.t_type[np.maximum(wt, 0)], INFO)
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


def _lost_updates(h: History, ri: np.ndarray, vcode: np.ndarray) -> list[dict]:
    """Per ok txn and key: the first read of k, if some append of k follows it."""
    m_txn, m_key, m_f = h.m_txn, h.m_key, h.m_f
    okm = h.t_type[m_txn] == OK
    M = len(m_txn)
    if M == 0:
        return []
    # version read by each read mop (nil in ok = initial); unknown reads excluded
    read_code = np.full(M, np.iinfo(np.int64).min, np.int64)
    read_code[ri] = vcode
    nilr = (m_f == R) & h.m_nil & okm
    read_code[nilr] = -(m_key[nilr] - 0) - 10 ** 15  # distinct "initial" marker per key
    o = np.lexsort((np.arange(M), m_key, m_txn))
    st, sk, sf = m_txn[o], m_key[o], m_f[o]
    newg = np.r_[True, (st[1:] != st[:-1]) | (sk[1:] != sk[:-1])]
    gid = np.cumsum(newg) - 1
    isr = sf == R
    # first read position per group
    big = M + 1
    pos = np.arange(M)
    fr = np.full(gid[-1] + 1, big)
    np.minimum.at(fr, gid[isr], pos[isr])
    # any append after first read
    isw = sf == APPEND
    lw = np.full(gid[-1] + 1, -1)
    np.maximum.at(lw, gid[isw], pos[isw])
    good = (fr < big) & (lw > fr) & okm[o][np.minimum(fr, M - 1)]
    g = np.flatnonzero(good)
    if len(g) == 0:
        return []
    first_read_mop = o[fr[g]]
    codes = read_code[first_read_mop]
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
