"""Read-write register inference (Elle's ``elle.rw-register``), vectorised.

Writes are unique per key, so a read names its writer: wr edges from the one ok transaction
whose external write of k is v to every ok transaction whose external read of k is v. A
register's value does not reveal its history, so ww and rw edges need a version order, which is
built per key from hints, each added only if it keeps the version graph acyclic (a hint that
would close a cycle is reported as ``cyclic-versions`` with the hints involved):

- initial-state (always): nil precedes every value;
- wfr-keys (opt-in): writes follow reads inside a transaction (ext read v < ext write v');
- sequential-keys (opt-in): each key is sequential, so a process's successive transactions on k
  saw successive versions;
- linearizable-keys (opt-in): each key is linearizable, so the real-time order does the same.

From a version edge v1 -> v2 of k: ww from the writer of v1 to the writer of v2, rw from every
reader of v1 to the writer of v2. Non-cycle anomalies: internal, G1a, G1b, lost-update.
"""

from __future__ import annotations

import numpy as np

from toki.check.graph import NONE, RW, WR, WW, EdgeSet, realtime_edges, scc_labels
from toki.check.reading.history import FAIL, INFO, OK, History, R, W
from toki.check.joins import Codes, group_order, readers_of
from toki.errors import HistoryError

NIL = -1


def _groups(m_txn, m_key):
    o, newg = group_order(m_txn, m_key)
    gid = np.cumsum(newg) - 1
    return o, newg, gid


def ext_ops(h: History):
    """Per (txn, key): external read (first mop, if a read) and external write (last write)."""
    m_txn, m_key, m_f, m_val = h.m_txn, h.m_key, h.m_f, h.m_val
    M = len(m_txn)
    o, newg, gid = _groups(m_txn, m_key)
    G = int(gid[-1]) + 1 if M else 0
    g_txn = m_txn[o][newg]
    g_key = m_key[o][newg]
    first = o[newg]
    g_read = m_f[first] == R
    g_rval = np.where(g_read, m_val[first], NIL)
    g_rnil = np.where(g_read, h.m_nil[first], False)
    isw = m_f[o] == W
    lastw = np.full(G, -1, np.int64)
    pos = np.arange(M)
    if isw.any():
        np.maximum.at(lastw, gid[isw], pos[isw])
    g_write = lastw >= 0
    g_wval = np.where(g_write, m_val[o[np.maximum(lastw, 0)]], NIL)
    return dict(o=o, newg=newg, gid=gid, txn=g_txn, key=g_key, read=g_read, rval=g_rval, rnil=g_rnil,
                write=g_write, wval=g_wval, first=first)


def analyse(h: History, *, wfr_keys=False, sequential_keys=False, linearizable_keys=False) -> dict:
    ttype = h.t_type
    m_txn, m_key, m_f, m_val, m_nil = h.m_txn, h.m_key, h.m_f, h.m_val, h.m_nil
    M = len(m_txn)
    anomalies: dict[str, list] = {}
    mtype = ttype[m_txn] if M else np.zeros(0, np.int8)
    okm = mtype == OK
    C = Codes(m_key, np.where(m_nil, 0, m_val))

    def code(k, v, nil):
        return np.where(nil, C.init(k), C.pair(k, np.where(nil, 0, v)))

    mcode = code(m_key, m_val, m_nil)
    E = ext_ops(h)
    o, newg = E["o"], E["newg"]

    # --- internal: a read differing from the previous mop on the same key in an ok txn ---
    if M:
        so = o
        prev_code = np.r_[0, mcode[so][:-1]]
        bad = (~newg) & (m_f[so] == R) & okm[so] & (mcode[so] != prev_code)
        if bad.any():
            cases, seen = [], set()
            for j in np.flatnonzero(bad).tolist():
                mm = int(so[j])
                t = int(m_txn[mm])
                if t in seen:
                    continue
                seen.add(t)
                pm = int(so[j - 1])
                cases.append({"op": t, "mop": mm, "expected": None if m_nil[pm] else h.value(int(m_val[pm]))})
            anomalies["internal"] = cases

    wi = np.flatnonzero(m_f == W)
    ri = np.flatnonzero((m_f == R) & okm & ~m_nil)
    rcode = mcode[ri]

    def index(codes):
        oo = np.argsort(codes, kind="stable")
        return oo, codes[oo]

    # --- G1a: ok reads of values written by failed txns ---
    fw = wi[mtype[wi] == FAIL]
    if len(fw) and len(ri):
        fo, fs = index(mcode[fw])
        p = np.minimum(np.searchsorted(fs, rcode), len(fs) - 1)
        hit = fs[p] == rcode
        if hit.any():
            anomalies["G1a"] = [{"op": int(m_txn[ri[i]]), "mop": int(ri[i]), "writer": int(m_txn[fw[fo[p[i]]]])}
                                for i in np.flatnonzero(hit)]
    # --- G1b: ok reads of intermediate writes by another txn ---
    if len(wi):
        wt, wk = m_txn[wi], m_key[wi]
        oo = np.lexsort((wi, wk, wt))
        inter = np.zeros(len(wi), bool)
        inter[oo[:-1][(wt[oo][1:] == wt[oo][:-1]) & (wk[oo][1:] == wk[oo][:-1])]] = True
        iw = wi[inter]
        if len(iw) and len(ri):
            io, is_ = index(mcode[iw])
            p = np.minimum(np.searchsorted(is_, rcode), len(is_) - 1)
            hit = (is_[p] == rcode) & (m_txn[iw[io[p]]] != m_txn[ri])
            if hit.any():
                anomalies["G1b"] = [{"op": int(m_txn[ri[i]]), "mop": int(ri[i]), "writer": int(m_txn[iw[io[p[i]]]])}
                                    for i in np.flatnonzero(hit)]

    # --- external reads/writes of ok txns ---
    g_ok = ttype[E["txn"]] == OK
    g_info = ttype[E["txn"]] == INFO
    xr = np.flatnonzero(E["read"] & g_ok)              # ext reads (nil included)
    xr_code = code(E["key"][xr], E["rval"][xr], E["rnil"][xr])
    xw = np.flatnonzero(E["write"] & g_ok)
    xw_code = code(E["key"][xw], E["wval"][xw], np.zeros(len(xw), bool))
    wo, ws = index(xw_code)

    # --- wr edges ---
    nn = ~E["rnil"][xr]
    rr = xr[nn]
    rc = xr_code[nn]
    lo = np.searchsorted(ws, rc, "left")
    hi = np.searchsorted(ws, rc, "right")
    multi = np.flatnonzero(hi - lo > 1)
    if len(multi):
        i = int(multi[0])
        ts = [int(h.t_index[E["txn"][xw[wo[j]]]]) for j in range(lo[i], hi[i])]
        raise HistoryError(f"key {h.key(int(E['key'][rr[i]]))!r} had value {h.value(int(E['rval'][rr[i]]))!r} "
                           f"written by more than one op (ops {', '.join(map(str, ts))})",
                           fix="rw-register needs every written value to be unique per key")
    one = hi - lo == 1
    wr_src = E["txn"][xw[wo[lo[one]]]]
    wr_dst = E["txn"][rr[one]]
    wr = EdgeSet(WR, wr_src, wr_dst, E["key"], E["rval"], E["rval"], rr[one])

    # --- version graphs ---
    sources = [("initial-state", _initial_state(E, ttype, code))]
    if wfr_keys:
        sources.append(("wfr-keys", _wfr(E, ttype, code)))
    if sequential_keys:
        sources.append(("sequential-keys", _txn_order_versions(h, E, code, "process")))
    if linearizable_keys:
        sources.append(("linearizable-keys", _txn_order_versions(h, E, code, "realtime")))
    used, cycles = [], []
    vk = np.zeros(0, np.int64)
    va = np.zeros(0, np.int64)
    vb = np.zeros(0, np.int64)
    for name, (k1, a1, b1) in sources:
        k2 = np.concatenate([vk, k1])
        a2 = np.concatenate([va, a1])
        b2 = np.concatenate([vb, b1])
        cyc = _version_cycles(h, k2, a2, b2, C)
        if cyc:
            for c in cyc:
                c["sources"] = used + [name]
            cycles += cyc
        else:
            used.append(name)
            vk, va, vb = k2, a2, b2
    if cycles:
        anomalies["cyclic-versions"] = cycles

    # --- ww and rw from version edges (deduplicated) ---
    if len(va):
        va, vb = _unique_pairs(va, vb)
    # writers of vb
    lo = np.searchsorted(ws, vb, "left")
    hi = np.searchsorted(ws, vb, "right")
    has_w2 = hi > lo
    w2 = np.where(has_w2, E["txn"][xw[wo[np.minimum(lo, len(wo) - 1)]]] if len(wo) else -1, -1)
    # ww: writer of va -> writer of vb
    lo1 = np.searchsorted(ws, va, "left")
    hi1 = np.searchsorted(ws, va, "right")
    m = (hi1 > lo1) & has_w2
    w1 = E["txn"][xw[wo[lo1[m]]]] if m.any() else np.zeros(0, np.int64)
    facts = C.key_of(va), _val_of(va, C), _val_of(vb, C)  # one row per version edge, for ww and rw
    ww = EdgeSet(WW, w1, w2[m], *facts, np.flatnonzero(m))
    # rw: readers of va -> writer of vb (none where vb has no writer: a code no read has)
    none = int(xr_code.min()) - 1 if len(xr_code) else 0
    rep, readers = readers_of(xr_code, E["txn"][xr], np.where(has_w2, va, none))
    rw = EdgeSet(RW, readers, w2[rep], *facts, rep)

    # --- lost update: ok txns that externally read k = v and then write k ---
    lu_g = np.flatnonzero(E["read"] & E["write"] & g_ok)
    if len(lu_g):
        cc = code(E["key"][lu_g], E["rval"][lu_g], E["rnil"][lu_g])
        oo = np.argsort(cc, kind="stable")
        cs = cc[oo]
        brk = np.r_[True, cs[1:] != cs[:-1], True]
        st = np.flatnonzero(brk[:-1])
        en = np.r_[st[1:], len(cs)]
        cases = []
        for s, e in zip(st.tolist(), en.tolist()):
            if e - s >= 2:
                gs = lu_g[oo[s:e]]
                cases.append({"key": int(E["key"][gs[0]]), "read_mop": int(E["first"][gs[0]]),
                              "txns": [int(t) for t in E["txn"][gs]]})
        if cases:
            anomalies["lost-update"] = cases
    _ = g_info
    return {"edges": [ww, wr, rw], "anomalies": anomalies, "codes": C, "version_sources": used}


def _val_of(c, C: Codes):
    c = np.asarray(c, np.int64)
    v = c % C.vr
    v = C.uniq[np.minimum(v, len(C.uniq) - 1)] if C.uniq is not None else v + C.vmin
    return np.where(c < 0, NONE, v)


def _initial_state(E, ttype, code):
    g_ok = ttype[E["txn"]] == OK
    g_info = ttype[E["txn"]] == INFO
    w = np.flatnonzero(E["write"] & (g_ok | g_info))
    r = np.flatnonzero(E["read"] & g_ok & ~E["rnil"])
    k = np.concatenate([E["key"][w], E["key"][r]])
    b = np.concatenate([code(E["key"][w], E["wval"][w], np.zeros(len(w), bool)),
                        code(E["key"][r], E["rval"][r], np.zeros(len(r), bool))])
    a = code(k, np.zeros(len(k), np.int64), np.ones(len(k), bool))
    return k, a, b


def _wfr(E, ttype, code):
    g = np.flatnonzero(E["read"] & E["write"] & (ttype[E["txn"]] == OK) & ~E["rnil"])
    k = E["key"][g]
    a = code(k, E["rval"][g], np.zeros(len(g), bool))
    b = code(k, E["wval"][g], np.zeros(len(g), bool))
    keep = a != b
    return k[keep], a[keep], b[keep]


def _txn_order_versions(h: History, E, code, how: str):
    """Version edges from the process or real-time order, compressed per key."""
    ttype = h.t_type
    gt = E["txn"]
    ok = ttype[gt] == OK
    info = ttype[gt] == INFO
    # interacting (txn, key) groups: ok (reads or writes), info (writes)
    inter = (ok & (E["read"] | E["write"])) | (info & E["write"])
    g = np.flatnonzero(inter)
    # final value: ok -> ext write else ext read; info -> ext write
    fin_nil = ~E["write"][g] & (E["rnil"][g] | ~E["read"][g])
    fin_val = np.where(E["write"][g], E["wval"][g], E["rval"][g])
    fin = code(E["key"][g], fin_val, fin_nil)
    # first value: ok -> ext read else ext write; info -> ext write
    use_r = E["read"][g] & ok[g]
    first_nil = np.where(use_r, E["rnil"][g], False)
    first_val = np.where(use_r, E["rval"][g], E["wval"][g])
    first = code(E["key"][g], first_val, first_nil)
    keys = E["key"][g]
    if how == "process":
        sel = np.flatnonzero(ok[g])
        proc = h.t_process[gt[g[sel]]]
        o = np.lexsort((gt[g[sel]], keys[sel], proc))
        s = sel[o]
        same = (proc[o][1:] == proc[o][:-1]) & (keys[s][1:] == keys[s][:-1])
        a_i, b_i = s[:-1][same], s[1:][same]
    else:
        tx = gt[g]
        inv = h.t_invoke[tx]
        comp = h.t_index[tx]
        a_i, b_i = realtime_edges(inv, comp, ok[g], np.ones(len(g), bool), group=keys)
    a, b = fin[a_i], first[b_i]
    keep = a != b
    return keys[a_i][keep], a[keep], b[keep]


def _unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (a, b) pairs in (a, b) order, as ``np.unique(np.stack([a, b], 1), axis=0)``
    gives them: that sorts rows as structured values (1.9 s for 2.6 million pairs here), a
    lexsort of the two columns about a tenth of it."""
    o = np.lexsort((b, a))
    sa, sb = a[o], b[o]
    new = np.empty(len(o), bool)
    new[:1] = True
    np.not_equal(sa[1:], sa[:-1], out=new[1:])
    new[1:] |= sb[1:] != sb[:-1]
    return sa[new], sb[new]


def _version_cycles(h: History, k, a, b, C: Codes) -> list[dict]:
    if len(a) == 0 or bool((a < b).all()):
        # every edge goes up in code order, a topological order: no cycle (always so for the
        # initial-state hints alone, nil's codes being negative), and no need to rank the codes
        return []
    nodes, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    n = len(nodes)
    s, d = inv[:len(a)], inv[len(a):]
    ncomp, lab = scc_labels(n, s, d)
    counts = np.bincount(lab, minlength=ncomp)
    big = np.flatnonzero(counts >= 2)
    out = []
    for c in big.tolist():
        members = nodes[lab == c]
        key = int(C.key_of(members[:1])[0])
        vals = [None if v == NONE else h.value(int(v)) for v in _val_of(members, C).tolist()]
        out.append({"key": h.key(key), "scc": vals})
    return out
