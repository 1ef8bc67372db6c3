"""Memory histories: agent memory's anomalies checked Elle's way (``toki check FILE --workload memory``).

The format is a contract (docs/memory-histories.md, design §4.9): Jepsen's op shape (``index``,
``time``, ``process``, ``type`` invoke/ok/fail/info, ``f`` "txn", ``value``), one op per line
(JSONL), a JSON array or EDN, optionally preceded by a header op ``{"type": "header",
"multi_valued": [slot or glob, ...]}``; micro-ops ``["add", slot, claim]``, ``["retract", slot,
claim]``, ``["current", slot, [claims]]``, ``["history", slot, [claims]]`` (the slot's audit
history, oldest first) and ``["decide", question, [claims considered], chosen]``. The readers
(:func:`read`, :func:`parse`, :func:`load`, :func:`loads`, re-exported here) and
:class:`MemoryHistory` are in :mod:`toki.check.reading.memory`; this module checks.

How it is checked, on the checker's own machinery:

- an audit history is an append-only list per slot, so adds and history reads are Elle's
  list-append (:mod:`toki.check.list_append`, sliced and forked by :mod:`toki.check.accel.key_slices`):
  the version order of each slot, ww/wr/rw edges, G1a, G1b, internal, lost-update, and
  duplicate-elements (here: ``duplicate-insert``);
- current reads are the set of claims added minus those retracted. Their edges are those every
  serial order must respect: a claim held was added before the read (wr) and retracted after it
  (rw); a claim missing that nobody retracted was added after it (rw); a claim missing that the
  audit order puts before one held was retracted before it (wr); an add precedes the retraction
  of its claim (ww);
- cycles are searched by :func:`toki.check.core.find_cycles` (Elle's types and order), explained here
  in the memory's words; a cycle through one transaction's reads of two slots is also ``N2``;
- ``double-supersede`` (a current read holding two claims of a single-valued slot), ``N3`` (a
  claim acknowledged or seen in a history read, missing from a later history read) and ``N1``
  (one question, one set of claims considered, two choices) are read off directly.

Layer 7: numpy, the standard library and ``toki.check``; no database.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from toki.check import core
from toki.check import graph as G
from toki.check import models as cm
from toki.check.accel.ranges import gather, ranges
from toki.check.reading.history import APPEND, FAIL, INFO, OK, R, History
from toki.check.reading.memory import (ADD, CURRENT, DECIDE, HISTORY, RETRACT, MemoryHistory, header, load, loads,
                                       multi_valued_mask, parse, read)
from toki.errors import ConfigError

#: the memory's own anomalies (beside Elle's): invariants of a memory whatever the isolation level,
#: prohibited unless ``--anomaly`` names others; N2 is a cycle, prohibited with its cycle's type
INVARIANTS = ("double-supersede", "duplicate-insert", "N1", "N3")
MEMORY_ANOMALIES = (*INVARIANTS, "N2")
#: Elle's default is strict-serializable; a memory history records processes on several machines,
#: whose real-time order is only as good as their clocks: serializable unless asked
DEFAULT_MODELS = ("serializable",)
ORDER = (G.WW, G.WR, G.RW, G.PROCESS, G.REALTIME)
#: claims in one block of the "missed add" join (bounded temporaries)
_BLOCK = 1 << 22


# ---------------------------------------------------------------------------------- inference

def _csr_by(keys: np.ndarray, n: int, *cols: np.ndarray) -> tuple:
    """Rows grouped by ``keys`` (0..n-1), stably: (offsets, each column reordered)."""
    o = np.argsort(keys, kind="stable")
    off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=off[1:])
    return (off, *(c[o] for c in cols))


def _member(sorted_codes: np.ndarray, q: np.ndarray) -> np.ndarray:
    if len(sorted_codes) == 0:
        return np.zeros(len(q), bool)
    p = np.minimum(np.searchsorted(sorted_codes, q), len(sorted_codes) - 1)
    return sorted_codes[p] == q


#: above this many bits (reads times their slots' claims), held claims are sorted codes, not a bitmap
_BITS_MAX = 1 << 27


class _Held:
    """The claims each current read holds, for membership tests of (read, pair): one bit per
    claim of the read's slot (at the claim's place among its slot's), or sorted codes read *
    pairs + pair where the bits would be too many."""

    def __init__(self, h: MemoryHistory, cur: np.ndarray, rows: np.ndarray, pairs: np.ndarray):
        P, S = h.n_pairs, len(h.slots)
        self.P = max(P, 1)
        self.pair_slot = h.pair_slot
        cnt = np.bincount(h.pair_slot, minlength=S)
        self.by_slot = np.argsort(h.pair_slot, kind="stable")
        self.slot_start = np.cumsum(cnt) - cnt
        self.local = np.empty(P, np.int64)
        self.local[self.by_slot] = np.arange(P) - np.repeat(self.slot_start, cnt)
        self.rslot = h.m_slot[cur]
        self.width = cnt[self.rslot]
        total = int(self.width.sum())
        self.n = len(cur)
        self._held = self._distinct = None
        if total <= _BITS_MAX:
            self.base = np.cumsum(self.width) - self.width
            self.bits = np.zeros(total + 1, bool)  # the last bit stays False: where a query is off its slot
            self.bits[self.base[rows] + self.local[pairs]] = True
            self.codes = None
        else:
            self.bits = None
            self.codes = np.unique(rows * self.P + pairs)

    def member(self, rows: np.ndarray, pairs: np.ndarray) -> np.ndarray:
        if self.bits is None:
            return _member(self.codes, rows * self.P + pairs)
        same = self.pair_slot[pairs] == self.rslot[rows]
        return self.bits[np.where(same, self.base[rows] + self.local[pairs], len(self.bits) - 1)]

    def held(self) -> tuple[np.ndarray, np.ndarray]:
        """(read, pair) for every distinct claim held, by read (computed once)."""
        if self._held is None:
            if self.bits is None:
                self._held = self.codes // self.P, self.codes % self.P
            else:
                nz = np.flatnonzero(self.bits[:-1])
                rows = np.repeat(np.arange(self.n), self.distinct())
                self._held = rows, self.by_slot[self.slot_start[self.rslot[rows]] + nz - self.base[rows]]
        return self._held

    def distinct(self) -> np.ndarray:
        """Distinct claims held, per read (computed once)."""
        if self._distinct is None:
            if self.bits is None:
                self._distinct = np.bincount(self.codes // self.P, minlength=self.n)
            elif self.n == 0:
                self._distinct = np.zeros(0, np.int64)
            else:
                got = np.add.reduceat(self.bits, self.base, dtype=np.int64)
                got[self.width == 0] = 0  # (reduceat gives an empty range its first element)
                self._distinct = got
        return self._distinct


def _edges(rel: int, kind: str, src, dst, key, v1, v2, at=None) -> G.EdgeSet:
    es = G.EdgeSet(rel, np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(key, np.int64),
                   np.asarray(v1, np.int64), np.asarray(v2, np.int64), None if at is None else np.asarray(at, np.int64))
    es.kind = kind
    return es


class Inference:
    """Everything read off a memory history: edge sets (``edges``) and anomaly cases (``found``,
    rendered), plus what the N2 and ``unknown`` decisions need."""

    def __init__(self, h: MemoryHistory):
        self.h = h
        self.found: dict[str, list] = {}
        self.edges: list[G.EdgeSet] = []
        self.decisions_compared = 0
        T, P = h.n_txns, h.n_pairs
        tt = h.t_type
        self.ok_txn = tt == OK
        m_f, m_txn = h.m_f, h.m_txn
        mok = self.ok_txn[m_txn]
        mposs = tt[m_txn] != FAIL
        # --- adds: one representative per (slot, claim): its first ok add, else info, else failed
        ai = np.flatnonzero(m_f == ADD)
        ap, aty = h.m_val[ai], tt[m_txn[ai]]
        o = np.lexsort((ai, aty, ap))
        aps = ap[o]
        first = np.r_[True, aps[1:] != aps[:-1]] if len(aps) else np.zeros(0, bool)
        self.rep_mop = np.full(P, -1, np.int64)
        self.rep_mop[aps[first]] = ai[o][first]
        has = self.rep_mop >= 0
        self.rep_txn = np.where(has, m_txn[np.maximum(self.rep_mop, 0)], -1)
        self.rep_type = np.where(has, tt[np.maximum(self.rep_txn, 0)], -1)
        self.ok_adds = np.bincount(ap[aty == OK], minlength=P) if P else np.zeros(0, np.int64)
        self.ai = ai
        # --- retracts that may have happened, grouped by pair
        ri = np.flatnonzero((m_f == RETRACT) & mposs & ~h.m_nil)
        rp = h.m_val[ri]
        # a slot some info op may have retracted unknown claims from: none of its claims is
        # "certainly never retracted", and no retraction of it is "the only one"
        self.wild = np.zeros(len(h.slots), bool)
        self.wild[h.m_slot[(m_f == RETRACT) & mposs & h.m_nil]] = True
        self.ret_off, self.ret_txn, self.ret_mop = _csr_by(rp, P, m_txn[ri], ri)
        self.n_ret = np.diff(self.ret_off)
        self.ri, self.rp = ri, rp
        # --- reads of ok transactions (a read in an info op is unknown: it may have seen anything)
        self.cur = np.flatnonzero((m_f == CURRENT) & mok)
        self.hist = np.flatnonzero((m_f == HISTORY) & mok)
        self.cur_len, self.cur_elem, self.cur_read = self._elements(self.cur)
        self.cur_start = np.cumsum(self.cur_len) - self.cur_len
        self.held: _Held | None = None  # what each current read holds
        self.hist_len, self.hist_elem, self.hist_read = self._elements(self.hist)
        observed = np.zeros(P, bool)
        observed[self.cur_elem] = True
        observed[self.hist_elem] = True
        self.certain = (self.rep_type == OK) | ((self.rep_type == INFO) & observed)
        self._version_order()

    def _elements(self, mops: np.ndarray):
        h = self.h
        rows = h.m_val[mops]
        lens = h.r_off[rows + 1] - h.r_off[rows]
        return lens, gather(h.r_elem, h.r_off[rows], lens), np.repeat(np.arange(len(mops)), lens)

    def _version_order(self) -> None:
        """Per slot, the audit order Elle's list-append infers: the longest ok history read (the
        last of equals), duplicates kept at their first place; a slot added to once and never read
        non-empty has that one claim. ``pos[pair]``: its place, -1 if unknown."""
        h = self.h
        S, P = len(h.slots), h.n_pairs
        self.pos = np.full(P, -1, np.int64)
        self.L_start = np.zeros(S, np.int64)
        self.L_len = np.zeros(S, np.int64)
        hs = h.m_slot[self.hist]
        hstart = np.cumsum(self.hist_len) - self.hist_len
        ne = np.flatnonzero(self.hist_len > 0)
        if len(ne):
            o = ne[np.lexsort((ne, self.hist_len[ne], hs[ne]))]
            last = np.r_[hs[o][1:] != hs[o][:-1], True]
            longest = o[last]
            ls = hs[longest]
            self.L_start[ls] = hstart[longest]
            self.L_len[ls] = self.hist_len[longest]
            el = gather(self.hist_elem, hstart[longest], self.hist_len[longest])
            at = ranges(np.zeros(len(longest), np.int64), self.hist_len[longest])
            big = np.iinfo(np.int64).max
            pos = np.full(P, big, np.int64)
            np.minimum.at(pos, el, at)
            self.pos = np.where(pos == big, -1, pos)
        # slots added to exactly once (possibly), never read non-empty
        poss = self.rep_type >= 0
        poss &= self.rep_type != FAIL
        ps = h.pair_slot[poss]
        cnt = np.bincount(ps, minlength=S)
        single = (cnt == 1) & (self.L_len == 0)
        p1 = np.flatnonzero(poss)[single[ps]]
        self.pos[p1] = 0

    # ------------------------------------------------------------------ edges

    def infer(self) -> None:
        self._retract_edges()
        self._current_edges()
        self._current_anomalies()
        self._current_lost_updates()
        self._duplicate_adds()
        self._n3()
        self._n1()

    def _retract_edges(self) -> None:
        """ww: the adder of a claim -> each transaction that retracted it."""
        h = self.h
        adder = self.rep_txn[self.rp]
        keep = (adder >= 0) & (self.rep_type[self.rp] != FAIL)
        self.edges.append(_edges(G.WW, "retract", adder[keep], h.m_txn[self.ri][keep], h.pair_slot[self.rp[keep]],
                                 self.rp[keep], self.ri[keep]))

    def _current_edges(self) -> None:
        h = self.h
        P = h.n_pairs
        cur, ep, er = self.cur, self.cur_elem, self.cur_read
        if len(cur) == 0:
            return
        reader = h.m_txn[cur]
        rmop = cur[er]
        rt = reader[er]
        slot = h.pair_slot[ep]
        # wr: a claim held was added before the read
        adder = self.rep_txn[ep]
        k = np.flatnonzero((adder >= 0) & (self.rep_type[ep] != FAIL))
        self.edges.append(_edges(G.WR, "current-holds", adder[k], rt[k], slot[k], ep[k], rmop[k]))
        # rw: ... and retracted after it, by whoever retracted it
        cnt = self.n_ret[ep]
        if cnt.any():
            rows = np.repeat(np.arange(len(ep)), cnt)
            self.edges.append(_edges(G.RW, "current-still-holds", rt[rows], gather(self.ret_txn, self.ret_off[ep], cnt),
                                     slot, ep, rmop, at=rows))
        # codes of (read, pair) held, sorted, for membership
        self.held = _Held(h, cur, er, ep)
        rs = h.m_slot[cur]
        self._missed_adds(reader, rs, cur)
        self._seen_retractions(reader, rs, cur)

    def _missed_adds(self, reader, rs, cur) -> None:
        """rw: a claim missing from a read, added for sure and never retracted, was added after it.
        Per read, the first such claim in the audit order (the later ones follow it by ww) and
        every such claim the audit order does not place. In a valid history the placed ones a read
        holds are the first few in audit order, so the first missing one is found by counting; a
        read that holds them out of order is compared claim by claim."""
        h = self.h
        S = len(h.slots)
        u = np.flatnonzero(self.certain & (self.n_ret == 0) & ~self.wild[h.pair_slot])
        if len(u) == 0:
            return
        us, upos = h.pair_slot[u], self.pos[u]
        o = np.lexsort((np.where(upos < 0, np.iinfo(np.int64).max, upos), us))
        u, us, upos = u[o], us[o], upos[o]
        n_u = np.bincount(us, minlength=S)
        u_off = np.cumsum(n_u) - n_u
        n_pl = np.bincount(us[upos >= 0], minlength=S)
        rank = np.full(h.n_pairs, -1, np.int64)
        rank[u] = np.arange(len(u)) - u_off[us]
        hr, hp = self.held.held()
        rk = rank[hp]
        placed = (rk >= 0) & (rk < n_pl[rs[hr]])
        R = len(cur)
        cnt = np.bincount(hr[placed], minlength=R)
        mx = np.full(R, -1, np.int64)
        np.maximum.at(mx, hr[placed], rk[placed])
        npl = n_pl[rs]
        prefix = mx == cnt - 1
        src, dst, rows = [], [], []
        # reads holding a prefix of the placed claims: the next one is the first missing
        k = np.flatnonzero(prefix & (cnt < npl))
        first = u[u_off[rs[k]] + cnt[k]]
        rows.append(k), dst.append(first)
        # the others: claim by claim, the first placed one not held
        k = np.flatnonzero(~prefix)
        if len(k):
            c = npl[k]
            row = np.repeat(k, c)
            pair = u[ranges(u_off[rs[k]], c)]
            out = ~self.held.member(row, pair)
            row, pair = row[out], pair[out]
            firsts = np.r_[True, row[1:] != row[:-1]] if len(row) else np.zeros(0, bool)
            rows.append(row[firsts]), dst.append(pair[firsts])
        # claims no audit read placed: each one missing
        nun = (n_u - n_pl)[rs]
        k = np.flatnonzero(nun)
        done = 0
        while done < len(k):  # in blocks of about _BLOCK claims
            csum = np.cumsum(nun[k[done:]])
            b = done + max(int(np.searchsorted(csum, _BLOCK, "right")), 1)
            kk = k[done:b]
            row = np.repeat(kk, nun[kk])
            pair = u[ranges(u_off[rs[kk]] + npl[kk], nun[kk])]
            out = ~self.held.member(row, pair)
            rows.append(row[out]), dst.append(pair[out])
            done = b
        row, pair = np.concatenate(rows), np.concatenate(dst)
        self.edges.append(_edges(G.RW, "current-missed-add", reader[row], self.rep_txn[pair], h.pair_slot[pair],
                                 pair, cur[row]))

    def _seen_retractions(self, reader, rs, cur) -> None:
        """wr: a claim missing from a read that the audit order puts before a claim the read holds
        was added before the read (the adds of one slot are ordered), so its one retraction came
        before the read too. Left out where implied: when the retracting transaction also added a
        claim at or before the read's latest in audit order (a supersede: the audit's ww edges and
        the read's wr edge already order it before the read)."""
        h = self.h
        S = len(h.slots)
        ep, er = self.cur_elem, self.cur_read
        maxpos = np.full(len(cur), -1, np.int64)
        np.maximum.at(maxpos, er, self.pos[ep])
        gone = np.flatnonzero((self.pos >= 0) & (self.n_ret == 1) & ~self.wild[h.pair_slot])
        if len(gone) == 0 or not (maxpos > 0).any():
            return
        retractor = self.ret_txn[self.ret_off[gone]]
        gslot = h.pair_slot[gone]
        # the earliest audit place of a claim each (transaction, slot) added
        placed = np.flatnonzero((self.pos >= 0) & (self.rep_txn >= 0))
        code = self.rep_txn[placed] * S + h.pair_slot[placed]
        o = np.lexsort((self.pos[placed], code))
        code, first_pos = code[o], self.pos[placed][o]
        q = retractor * S + gslot
        at = np.minimum(np.searchsorted(code, q), max(len(code) - 1, 0))
        big = np.iinfo(np.int64).max
        own = np.where((len(code) > 0) & (code[at] == q), first_pos[at], big) if len(code) else np.full(len(q), big)
        need = own > self.pos[gone] + 1  # else implied for every read past the claim
        gone, own = gone[need], own[need]
        if len(gone) == 0:
            return
        top = int(self.pos.max()) + 2
        code = h.pair_slot[gone] * top + self.pos[gone]
        o = np.argsort(code)
        gone, code, own = gone[o], code[o], own[o]
        lo = np.searchsorted(code, rs * top)
        hi = np.searchsorted(code, rs * top + np.maximum(maxpos, 0))
        cnt = np.where(maxpos > 0, hi - lo, 0)
        row = np.repeat(np.arange(len(cur)), cnt)
        j = ranges(lo, cnt)
        pair = gone[j]
        keep = (own[j] > maxpos[row]) & ~self.held.member(row, pair)
        row, pair = row[keep], pair[keep]
        self.edges.append(_edges(G.WR, "current-lacks-retracted", self.ret_txn[self.ret_off[pair]], reader[row],
                                 h.pair_slot[pair], pair, cur[row]))


    # ------------------------------------------------------------------ anomalies of current reads

    def _current_anomalies(self) -> None:
        h = self.h
        cur, ep, er = self.cur, self.cur_elem, self.cur_read
        if len(cur) == 0:
            return
        reader = h.m_txn[cur]
        # double supersede: a single-valued slot holding two claims at once
        P = h.n_pairs
        distinct = self.held.distinct()
        single = ~h.multi[h.m_slot[cur]] if len(h.multi) else np.ones(len(cur), bool)
        cases = []
        for k in np.flatnonzero((distinct >= 2) & single).tolist():
            t, m = int(reader[k]), int(cur[k])
            mine = self._held_by(k)
            claims = sorted({h.claim(p) for p in mine}, key=str)
            adders = sorted({int(self.rep_txn[p]) for p in mine if self.rep_txn[p] >= 0})
            cases.append({"op": h.op(t), "mop": h.mop(m), "slot": h.slot(int(h.m_slot[m])), "claims": claims,
                          "adders": [h.op(a) for a in adders],
                          "explanation": f"op {int(h.t_index[t])}'s current read of {_q(h.slot(int(h.m_slot[m])))} "
                                         f"held {len(claims)} claims ({', '.join(map(_q, claims))}) of a single-valued "
                                         f"slot: each superseded the same belief without seeing the other"})
        self._add("double-supersede", cases)
        # G1a, G1b, future-read over current reads
        adder = self.rep_txn[ep]
        rt = reader[er]
        g1a, g1b, fut = [], [], []
        for i in np.flatnonzero(self.rep_type[ep] == FAIL).tolist():
            t, p = int(rt[i]), int(ep[i])
            g1a.append({"op": h.op(t), "mop": h.mop(int(cur[er[i]])), "writer": h.op(int(adder[i])),
                        "slot": h.slot(int(h.pair_slot[p])), "claim": h.claim(p),
                        "explanation": f"op {int(h.t_index[t])}'s current read held {_q(h.claim(p))}, added only by "
                                       f"failed op {int(h.t_index[adder[i]])}"})
        own = np.flatnonzero((adder == rt) & (self.rep_mop[ep] > cur[er]))
        for i in own.tolist():
            t, p = int(rt[i]), int(ep[i])
            fut.append({"op": h.op(t), "mop": h.mop(int(cur[er[i]])), "claim": h.claim(p),
                        "explanation": f"op {int(h.t_index[t])}'s current read held {_q(h.claim(p))}, which the same "
                                       f"transaction adds only later"})
        # G1b: the claim read was an intermediate state of its adder, which retracted it again
        T = max(h.n_txns, 1)
        rc = np.sort(h.m_txn[self.ri] * P + self.rp) if len(self.ri) else np.zeros(0, np.int64)
        cand = np.flatnonzero((adder >= 0) & (adder != rt) & (self.rep_type[ep] != FAIL))
        inter = cand[_member(rc, adder[cand] * P + ep[cand])] if len(cand) and T else cand[:0]
        for i in inter.tolist():
            t, p, w = int(rt[i]), int(ep[i]), int(adder[i])
            a, b = h.mop_range(w)
            after = any(h.m_f[m] == RETRACT and h.m_val[m] == p and m > self.rep_mop[p] for m in range(a, b))
            if after:
                g1b.append({"op": h.op(t), "mop": h.mop(int(cur[er[i]])), "writer": h.op(w), "claim": h.claim(p),
                            "explanation": f"op {int(h.t_index[t])}'s current read held {_q(h.claim(p))}, which op "
                                           f"{int(h.t_index[w])} added and retracted again: an intermediate state"})
        self._add("G1a", g1a)
        self._add("G1b", g1b)
        self._add("future-read", fut)
        self._internal()

    def _held_by(self, k: int) -> list[int]:
        a = int(self.cur_start[k])
        return self.cur_elem[a:a + int(self.cur_len[k])].tolist()

    def _internal(self) -> None:
        """A current read after the transaction's own operations on the slot disagrees with them."""
        h = self.h
        from toki.check.joins import group_order

        sel = np.flatnonzero(self.ok_txn[h.m_txn] & (h.m_f <= CURRENT))
        if len(sel) == 0:
            return
        o, newg = group_order(h.m_txn[sel], h.m_slot[sel])
        mo = sel[o]
        cand = np.flatnonzero(~newg & (h.m_f[mo] == CURRENT))
        if len(cand) == 0:
            return
        starts = np.flatnonzero(newg)
        gstart = starts[np.searchsorted(starts, cand, "right") - 1]
        cases, seen = [], set()
        for g in np.unique(gstart).tolist():
            end = g + 1
            while end < len(mo) and not newg[end]:
                end += 1
            known: set | None = None
            added: set = set()
            gone: set = set()
            t = int(h.m_txn[mo[g]])
            for m in mo[g:end].tolist():
                f = int(h.m_f[m])
                if f == CURRENT:
                    got = set(h.r_elem[h.r_off[h.m_val[m]]:h.r_off[h.m_val[m] + 1]].tolist())
                    bad = (known is not None and got != known) or (known is None and (not added <= got or got & gone))
                    if bad and t not in seen:
                        seen.add(t)
                        exp = known if known is not None else added
                        cases.append({"op": h.op(t), "mop": h.mop(m),
                                      "expected": sorted((h.claim(p) for p in exp), key=str),
                                      "explanation": f"op {int(h.t_index[t])}'s current read of "
                                                     f"{_q(h.slot(int(h.m_slot[m])))} disagrees with its own "
                                                     f"earlier operations on the slot"
                                                     + ("" if known is not None else " (it must hold what it added "
                                                                                     "and not what it retracted)")})
                    known = got
                elif f == ADD:
                    p = int(h.m_val[m])
                    added.add(p), gone.discard(p)
                    if known is not None:
                        known.add(p)
                else:
                    p = int(h.m_val[m])
                    gone.add(p), added.discard(p)
                    if known is not None:
                        known.discard(p)
        self._add("internal", cases)

    def _current_lost_updates(self) -> None:
        """Two ok transactions read one state of a slot (the same current claims) before writing it,
        and each write was for good (an add never retracted, or a retraction of a claim it read):
        neither saw the other's, which no serial order allows (Elle's lost-update)."""
        h = self.h
        P = h.n_pairs
        from toki.check.joins import group_order

        sel = np.flatnonzero(self.ok_txn[h.m_txn] & (h.m_f <= CURRENT))
        if len(sel) == 0 or len(self.cur) == 0 or P == 0:
            return
        o, newg = group_order(h.m_txn[sel], h.m_slot[sel])
        mo = sel[o]
        gid = np.cumsum(newg) - 1
        starts = np.flatnonzero(newg)
        first = mo[starts]
        is_read = h.m_f[first] == CURRENT
        # which read (index into self.cur) starts each group
        k = np.searchsorted(self.cur, first)
        k = np.minimum(k, len(self.cur) - 1)
        is_read &= self.cur[k] == first
        f = h.m_f[mo]
        pair = np.where(f <= RETRACT, h.m_val[mo], 0)
        kk = k[gid]
        permanent = ((f == ADD) & (self.n_ret[pair] == 0) & ~self.wild[h.pair_slot[pair]]) | \
                    ((f == RETRACT) & self.held.member(np.minimum(kk, len(self.cur) - 1), pair))
        permanent &= ~newg
        wrote = np.zeros(len(starts), bool)
        np.logical_or.at(wrote, gid[permanent], True)
        g = np.flatnonzero(is_read & wrote)
        if len(g) < 2:
            return
        reads = k[g]
        rng = np.random.default_rng(0)
        tag = rng.integers(1, 1 << 62, size=max(P, 1), dtype=np.int64)
        hr, hp = self.held.held()
        fp = np.zeros(len(self.cur), np.int64)
        np.add.at(fp, hr, tag[hp])
        slot = h.m_slot[self.cur[reads]]
        key = np.stack([slot, fp[reads], self.cur_len[reads]])
        oo = np.lexsort(key[::-1])
        ks = key[:, oo]
        brk = np.r_[True, (ks[:, 1:] != ks[:, :-1]).any(axis=0), True]
        bs = np.flatnonzero(brk[:-1])
        be = np.r_[bs[1:], len(oo)]
        cases = []
        for a, b in zip(bs.tolist(), be.tolist()):
            if b - a < 2:
                continue
            groups: dict = {}
            for r in reads[oo[a:b]].tolist():
                claims = frozenset(self._held_by(r))
                groups.setdefault(claims, []).append(int(h.m_txn[self.cur[r]]))
            for claims, txns in groups.items():
                txns = sorted(set(txns))
                if len(txns) >= 2:
                    s = h.slot(int(slot[oo[a]]))
                    names = sorted((h.claim(p) for p in claims), key=str)
                    cases.append({"slot": s, "read": names, "txns": [h.op(t) for t in txns],
                                  "explanation": f"ops {', '.join(str(int(h.t_index[t])) for t in txns)} each read "
                                                 f"{_q(s)} as {names} and then changed it for good: none saw the "
                                                 f"others' change"})
        self._add("lost-update", cases)

    def _duplicate_adds(self) -> None:
        """A claim added to one slot by two ok operations: the audit history holds it twice."""
        h = self.h
        dup = np.flatnonzero(self.ok_adds >= 2)
        if len(dup) == 0:
            return
        ai = self.ai
        ok_ai = ai[self.ok_txn[h.m_txn[ai]]]
        cases = []
        for p in dup.tolist():
            txns = sorted(set(h.m_txn[ok_ai[h.m_val[ok_ai] == p]].tolist()))
            s, c = h.slot(int(h.pair_slot[p])), h.claim(p)
            cases.append({"slot": s, "claim": c, "txns": [h.op(t) for t in txns], "count": int(self.ok_adds[p]),
                          "explanation": f"{_q(c)} was added to {_q(s)} {int(self.ok_adds[p])} times, by ok ops "
                                         f"{', '.join(str(int(h.t_index[t])) for t in txns)}: each add checked "
                                         f"for it and found nothing"})
        self._add("duplicate-insert", cases)

    # ------------------------------------------------------------------ N3: audit erasure

    def _n3(self) -> None:
        """A claim missing from a history read of its slot, though the read began after the claim's
        ok add completed or after another history read showing it completed (real time, from the
        history's order), or though the read holds a claim the slot's audit order puts after it."""
        h = self.h
        P = h.n_pairs
        hist = self.hist
        if len(hist) == 0:
            return
        T = h.t_index
        big = np.iinfo(np.int64).max
        known = np.full(P, big, np.int64)
        aok = self.ai[self.ok_txn[h.m_txn[self.ai]]]
        np.minimum.at(known, h.m_val[aok], T[h.m_txn[aok]])
        rtx = h.m_txn[hist]
        np.minimum.at(known, self.hist_elem, T[rtx][self.hist_read])
        slot = h.m_slot[hist]
        lens = self.hist_len
        hstart = np.cumsum(lens) - lens
        # compatible: a prefix of the slot's longest read
        fits = lens <= self.L_len[slot]
        Lel = gather(self.hist_elem, self.L_start[slot[fits]], lens[fits])
        mine = gather(self.hist_elem, hstart[fits], lens[fits])
        bad_el = Lel != mine
        compat = fits.copy()
        if bad_el.any():
            rows = np.repeat(np.flatnonzero(fits), lens[fits])
            compat[np.unique(rows[bad_el])] = False
        # real time: a compatible read holds exactly the claims placed before its length, so it
        # misses one iff a claim known before its invocation is placed at or past its length or
        # unplaced; per slot, claims sorted by when they became known, with a running max of place
        inv = h.t_invoke[rtx]
        kn = np.flatnonzero(known < big)
        S = len(h.slots)
        flagged = np.zeros(len(hist), bool)
        if len(kn):
            ks = h.pair_slot[kn]
            o = np.lexsort((known[kn], ks))
            kn, ks = kn[o], ks[o]
            place = np.where(self.pos[kn] < 0, big, self.pos[kn])
            k_off = np.zeros(S + 1, np.int64)
            np.cumsum(np.bincount(ks, minlength=S), out=k_off[1:])
            runmax = place.copy()
            for_s = np.repeat(np.arange(S), np.diff(k_off))
            # segmented running max: offset each slot's values so a max never crosses slots
            if len(runmax):
                cap = max(P, int(lens.max(initial=0))) + 1  # past every read's length: "unplaced"
                capped = np.minimum(runmax, cap) + for_s * (cap + 1)
                runmax = np.maximum.accumulate(capped) - for_s * (cap + 1)
            kcode = ks * (int(T.max(initial=0)) + 2) + known[kn]
            q = slot * (int(T.max(initial=0)) + 2) + inv
            upto = np.searchsorted(kcode, q, "left")  # claims of the slot known before the invocation
            has = (inv >= 0) & (upto > k_off[slot])
            worst = np.where(has, runmax[np.maximum(upto - 1, 0)], -1)
            flagged = has & compat & (worst >= lens)
            # incompatible reads: compared claim by claim below
            flagged |= has & ~compat
        cases: dict = {}
        pos_known = {}

        def known_before(s: int, when: int) -> list[int]:
            if s not in pos_known:
                ps = np.flatnonzero((h.pair_slot == s) & (known < big))
                pos_known[s] = ps[np.argsort(known[ps], kind="stable")]
            ps = pos_known[s]
            return ps[known[ps] < when].tolist()

        def note(r: int, p: int, why: str) -> None:
            key = (int(slot[r]), p)
            c = cases.get(key)
            t = int(rtx[r])
            if c is None:
                cases[key] = {"read": r, "txn": t, "why": why, "count": 1}
            else:
                c["count"] += 1

        for r in np.flatnonzero(flagged).tolist():
            got = set(self.hist_elem[hstart[r]:hstart[r] + lens[r]].tolist())
            for p in known_before(int(slot[r]), int(inv[r])):
                if p not in got:
                    note(r, p, "time")
        # order: an incompatible read lacking a claim the longest read shows before one it holds
        for r in np.flatnonzero(~compat).tolist():
            s = int(slot[r])
            mine_l = self.hist_elem[hstart[r]:hstart[r] + lens[r]].tolist()
            L = self.hist_elem[self.L_start[s]:self.L_start[s] + self.L_len[s]].tolist()
            got = set(mine_l)
            last = max((i for i, p in enumerate(L) if p in got), default=-1)
            for p in L[:last]:
                if p not in got:
                    note(r, p, "order")
        out = []
        for (s, p), c in cases.items():
            r, t = c["read"], c["txn"]
            src = int(np.searchsorted(T, known[p])) if known[p] < big else -1
            sname, cname = h.slot(s), h.claim(p)
            if c["why"] == "time":
                how = ("added by ok op" if src >= 0 and self._added_by(src, p) else "seen in the history read of op")
                exp = (f"{_q(cname)} was {how} {int(T[src])}, which completed before op {int(T[t])}'s history read "
                       f"of {_q(sname)} began; that read does not hold it")
            else:
                exp = (f"op {int(T[t])}'s history read of {_q(sname)} lacks {_q(cname)}, though it holds claims "
                       f"the slot's audit history has after it")
            case = {"slot": sname, "claim": cname, "op": h.op(t), "mop": h.mop(int(hist[r])),
                    "missing_from_reads": c["count"], "explanation": exp}
            if src >= 0 and c["why"] == "time":
                case["known_from"] = h.op(src)
            out.append(case)
        self._add("N3", out)

    def _added_by(self, t: int, p: int) -> bool:
        a, b = self.h.mop_range(t)
        return any(self.h.m_f[m] == ADD and self.h.m_val[m] == p for m in range(a, b))

    # ------------------------------------------------------------------ N1: replay inconsistency

    def _n1(self) -> None:
        """Decisions of ok transactions on one question over one set of claims considered (as a
        set), grouped by codes and a fingerprint of the set (checked exactly where choices differ):
        a group that chose two ways is a replay inconsistency."""
        h = self.h
        D = h.decisions
        dm = np.flatnonzero((h.m_f == DECIDE) & self.ok_txn[h.m_txn])
        if len(dm) < 2:
            return
        rows = h.m_val[dm]
        n = len(rows)
        lens = D.length[rows]
        el = gather(D.elem, D.start[rows], lens)
        rr = np.repeat(np.arange(n), lens)
        V = max(len(D.values), 1)
        u = np.unique(rr * V + el)  # the considered claims as a set, per decision
        ur, ue = u // V, u % V
        tag = np.random.default_rng(1).integers(1, 1 << 62, size=V, dtype=np.int64)
        fp = np.zeros(n, np.int64)
        np.add.at(fp, ur, tag[ue])
        size = np.bincount(ur, minlength=n)
        key = np.stack([D.q[rows], fp, size])
        o = np.lexsort(key[::-1])
        ks = key[:, o]
        brk = np.r_[True, (ks[:, 1:] != ks[:, :-1]).any(axis=0), True]
        starts = np.flatnonzero(brk[:-1])
        ends = np.r_[starts[1:], n]
        self.decisions_compared += int((ends - starts - 1).sum())
        ch = D.chosen[rows][o]
        differ = np.flatnonzero(np.maximum.reduceat(ch, starts) != np.minimum.reduceat(ch, starts))
        cases = []
        for g in differ.tolist():
            groups: dict = {}
            for i in o[starts[g]:ends[g]].tolist():
                q, considered, chosen = D[int(rows[i])]
                groups.setdefault((q, frozenset(considered)), {}).setdefault(chosen, int(dm[i]))
            for (q, considered), choices in groups.items():
                if len(choices) < 2:
                    continue
                picks = [{"chosen": c, "op": h.op(int(h.m_txn[m])), "mop": h.mop(m)} for c, m in choices.items()]
                cases.append({"question": q, "considered": sorted(considered, key=str), "choices": picks,
                              "explanation": f"question {_q(q)} over the same {len(considered)} claims was decided "
                                             f"{len(choices)} ways ({', '.join(_q(c) for c in choices)}): a replay "
                                             f"would not give the same answer"})
        self._add("N1", cases)

    def _add(self, typ: str, cases: list) -> None:
        if cases:
            self.found.setdefault(typ, []).extend(cases)


def _q(x) -> str:
    return repr(x)


# ---------------------------------------------------------------------------------- audit histories as list-append

def audit_history(h: MemoryHistory, inf: Inference) -> tuple[History, np.ndarray]:
    """The adds and ok history reads as Elle's list-append (slots as keys, (slot, claim) pair codes
    as values), with the memory micro-op behind each of its micro-ops. One add per pair: the
    representative one (a claim added twice is a duplicate insert, reported apart)."""
    rep = inf.rep_mop
    adds = rep[rep >= 0]
    sel = np.sort(np.concatenate([adds, inf.hist]))
    is_read = h.m_f[sel] == HISTORY
    rows = h.m_val[sel[is_read]]
    lens = h.r_off[rows + 1] - h.r_off[rows]
    r_off = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lens, out=r_off[1:])
    r_elem = gather(h.r_elem, h.r_off[rows], lens)
    m_val = np.where(is_read, 0, h.m_val[sel])
    m_val[is_read] = np.arange(len(rows))
    m_f = np.where(is_read, R, APPEND).astype(np.int8)
    sub = History("list-append", h.n_ops, h.t_index, h.t_invoke, h.t_process, h.t_type, h.t_time, h.processes,
                  h.m_txn[sel], m_f, h.m_slot[sel], m_val, np.zeros(len(sel), bool), None, None, r_off, r_elem,
                  t_pgroup=h.t_pgroup)
    return sub, sel


def _from_audit(h: MemoryHistory, found: dict, sel: np.ndarray) -> dict[str, list]:
    """list-append's cases in the memory's words (micro-op positions mapped back through ``sel``)."""
    out: dict[str, list] = {}

    def mop(m):
        return h.mop(int(sel[m]))

    T = h.t_index
    for typ, cases in found.items():
        name = "duplicate-insert" if typ == "duplicate-elements" else typ
        for c in cases:
            d: dict = {}
            if typ == "duplicate-elements":
                t = int(c["op"])
                dups = [{"claim": h.claim(int(v)), "count": int(n)} for v, n in c["duplicates"].items()]
                d = {"op": h.op(t), "mop": mop(c["mop"]), "duplicates": dups,
                     "explanation": f"op {int(T[t])}'s history read of {_q(mop(c['mop'])[1])} holds "
                                    + ", ".join(f"{_q(x['claim'])} {x['count']} times" for x in dups)}
            elif typ in ("G1a", "G1b"):
                t, w, p = int(c["op"]), int(c["writer"]), int(c["element"])
                d = {"op": h.op(t), "mop": mop(c["mop"]), "writer": h.op(w), "claim": h.claim(p),
                     "explanation": (f"op {int(T[t])}'s history read holds {_q(h.claim(p))}, added by failed op "
                                     f"{int(T[w])}") if typ == "G1a" else
                     (f"op {int(T[t])}'s history read ends at {_q(h.claim(p))}, which op {int(T[w])} followed with "
                      f"more adds to the slot: an intermediate state")}
            elif typ in ("internal", "future-read"):
                t = int(c["op"])
                d = {"op": h.op(t), "mop": mop(c["mop"])}
                if "expected" in c:
                    d["expected"] = [x if isinstance(x, str) else h.claim(int(x)) for x in c["expected"]]
                    d["explanation"] = (f"op {int(T[t])}'s history read disagrees with its own earlier reads and "
                                        f"adds of the slot")
                else:
                    d["claim"] = h.claim(int(c["element"]))
                    d["explanation"] = f"op {int(T[t])}'s history read holds a claim it adds only later"
            elif typ == "incompatible-order":
                s = h.slot(int(c["key"]))
                a, b = (mop(m) for m in c["values"])
                d = {"slot": s, "reads": [a, b], "ops": [h.op(int(h.m_txn[int(sel[m])])) for m in c["values"]],
                     "explanation": f"two history reads of {_q(s)} disagree on its order: neither is a prefix "
                                    f"of the other"}
            elif typ == "dirty-update":
                t1, t2 = (int(x) for x in c["txns"])
                d = {"slot": h.slot(int(c["key"])), "claims": [h.claim(int(v)) for v in c["values"]],
                     "txns": [h.op(t1), h.op(t2)],
                     "explanation": f"ok op {int(T[t2])} added to the slot right after failed op {int(T[t1])}'s add"}
            elif typ == "lost-update":
                s = h.slot(int(c["key"]))
                txns = [int(t) for t in c["txns"]]
                d = {"slot": s, "read": mop(c["read_mop"])[2], "txns": [h.op(t) for t in txns],
                     "explanation": f"ops {', '.join(str(int(T[t])) for t in txns)} each read {_q(s)}'s audit "
                                    f"history in the same state and then added to it: none saw the others' add"}
            else:
                d = dict(c)
            out.setdefault(name, []).append(d)
    return out


# ---------------------------------------------------------------------------------- cycles, explained

_CLASS_REL = {G.C_WW: G.WW, G.C_WR: G.WR, G.C_RW: G.RW}
_KIND_ORDER = {"audit": 0, "retract": 1, "current-holds": 1, "current-lacks-retracted": 2,
               "current-still-holds": 1, "current-missed-add": 2}


def explain_cycle(h: MemoryHistory, typ: str, txns: list[int], cls: list[int], ob: list[int], by_rel) -> dict:
    names: dict = {}
    for t in txns[:-1]:
        names.setdefault(t, f"T{len(names) + 1}")
    steps = []
    for (a, b), c, o in zip(zip(txns, txns[1:]), cls, ob):
        an, bn = names[a], names[b]
        if c == G.C_ORD:
            steps.append(core.order_step(h, a, b, an, bn, o))
            continue
        rel = _CLASS_REL[c]
        step = {"type": G.REL_NAMES[rel]}
        for es in sorted(by_rel[rel], key=lambda e: _KIND_ORDER.get(getattr(e, "kind", ""), 9)):
            if (j := es.find(a, b)) is not None:
                step.update(_memory_step(h, es, j, an, bn))
                break
        steps.append(step)
    return {"type": typ, "cycle": [h.op(t) for t in txns], "names": [names[t] for t in txns], "steps": steps}


def _memory_step(h: MemoryHistory, es: G.EdgeSet, j: int, a: str, b: str) -> dict:
    k, v1, v2 = es.facts(j)
    s = h.slot(k)
    kind = getattr(es, "kind", "audit")
    c = None if v1 == G.NONE else h.claim(v1)
    if kind == "audit":
        c2 = None if v2 == G.NONE else h.claim(v2)
        if es.rel == G.WW:
            text = f"{b} added {_q(c2)} to {_q(s)} right after {a}'s {_q(c)} in the slot's audit history"
        elif es.rel == G.WR:
            text = f"{b}'s history read of {_q(s)} showed {a}'s add of {_q(c)}"
        elif c is None:
            text = f"{a}'s history read of {_q(s)} was empty, so it came before {b}'s add of {_q(c2)}"
        else:
            text = f"{a}'s history read of {_q(s)} ended at {_q(c)} and did not show {b}'s {_q(c2)}, added next"
        read = "history" if es.rel != G.WW else None
        return {"kind": "audit", "slot": s, "claim": c if es.rel != G.RW else c2, "read": read, "explanation": text}
    texts = {
        "retract": f"{b} retracted {_q(c)} from {_q(s)}, which {a} added",
        "current-holds": f"{b}'s current read of {_q(s)} held {_q(c)}, which {a} added",
        "current-still-holds": f"{a}'s current read of {_q(s)} still held {_q(c)}, which {b} retracted",
        "current-missed-add": f"{a}'s current read of {_q(s)} did not hold {_q(c)}, which {b} added and nobody retracted",
        "current-lacks-retracted": f"{b}'s current read of {_q(s)} no longer held {_q(c)}, which {a} retracted (the "
                                   f"read held a claim the audit history has after it)",
    }
    return {"kind": kind, "slot": s, "claim": c, "read": None if kind == "retract" else "current",
            "explanation": texts[kind]}


def n2_cases(cycles: dict, prohibited: set[str], named: bool) -> list[dict]:
    """Cycles in which one transaction's read of one slot comes after a write its read of another
    slot did not see: the wr edge into it and the rw edge out of it are reads of two slots."""
    out = []
    for typ, cases in cycles.items():
        if not (named or typ in prohibited):
            continue
        for c in cases:
            steps = c.get("steps")
            if not steps:
                continue
            n = len(steps)
            for i in range(n):
                into, out_of = steps[i - 1], steps[i]
                if into.get("type") == "wr" and out_of.get("type") == "rw" and into.get("read") and out_of.get("read") \
                        and into.get("slot") != out_of.get("slot"):
                    t = c["names"][i]
                    out.append({"cycle_type": typ, "txn": t, "slots": [into["slot"], out_of["slot"]],
                                "cycle": c["cycle"], "names": c["names"], "steps": steps,
                                "explanation": f"{t}'s read of {_q(into['slot'])} saw a change that its read of "
                                               f"{_q(out_of['slot'])} did not: {into['explanation']}; "
                                               f"{out_of['explanation']}"})
                    break
    return out


# ---------------------------------------------------------------------------------- the check

def requested(models, anomalies) -> tuple[list, list, set]:
    """(models, Elle's anomalies, the memory's anomalies) that must not occur."""
    anomalies = None if anomalies is None else list(anomalies)
    mem = set(INVARIANTS) | {"N2"} if anomalies is None else {a for a in anomalies if a in MEMORY_ANOMALIES}
    elle = [] if anomalies is None else [a for a in anomalies if a not in MEMORY_ANOMALIES]
    if models is None and anomalies is None:
        models = list(DEFAULT_MODELS)
    try:
        elle = cm.validate_anomalies(elle)
    except ConfigError:
        bad = [a for a in elle if a not in cm.ANOMALY_DEPTH]
        raise ConfigError(f"unknown anomaly {', '.join(map(repr, bad))}",
                          fix="the memory's: " + ", ".join(MEMORY_ANOMALIES) + "; Elle's: "
                              + ", ".join(cm.ALL_ANOMALIES)) from None
    return cm.validate_models(models or []), elle, mem


def check(history, models=None, anomalies=None, *, multi_valued=(), cycle_search_timeout: float | None = None,
          stats: bool = False, fmt: str | None = None, on_phase=None, **_ignored) -> dict:
    """Check a memory history (a path, a list of op maps, or a MemoryHistory): Elle's result shape,
    ``{"valid", "anomaly_types", "anomalies", "not", "also_not"}``. Default model: serializable;
    the memory's invariants (double-supersede, duplicate-insert, N1, N3) and N2 always, unless
    ``anomalies`` names what to look for."""
    t0 = time.perf_counter()
    phase = on_phase or (lambda name: None)
    phase("reading")
    models, elle, mem = requested(models, anomalies)
    if isinstance(history, MemoryHistory):
        h = history
        if multi_valued:
            h.multi = h.multi | multi_valued_mask(h.slots, list(multi_valued))
    elif isinstance(history, (str, Path)):
        h = read(history, fmt=fmt, multi_valued=multi_valued)
    else:
        h = parse(history, multi_valued=multi_valued)
    t_parse = time.perf_counter()
    phase("inferring dependencies")
    prohibited = core.prohibited_anomalies(models, elle) | mem
    reportable = prohibited | cm.UNKNOWN_ANOMALIES
    ord_bits = core.order_bits(reportable)
    inf = Inference(h)
    sub, sel = audit_history(h, inf)
    order_sets: list[G.EdgeSet] = []

    def meanwhile() -> None:  # while a forked child infers the audit histories' slices
        inf.infer()
        if ord_bits & G.PROCESS:
            order_sets.append(core.process_edges(h))
        if ord_bits & G.REALTIME:
            order_sets.append(core.realtime_edge_set(h))

    from toki.check import list_append
    from toki.check.accel import key_slices

    res = key_slices.analyse(sub, list_append.analyse, meanwhile=meanwhile)
    for es in res["edges"]:
        es.kind = "audit"
    found = _from_audit(h, res["anomalies"], sel)
    for typ, cases in inf.found.items():
        found.setdefault(typ, []).extend(cases)
    edge_sets = [e for e in res["edges"] + inf.edges if len(e.src)] + order_sets
    t_infer = time.perf_counter()
    n_edges = sum(len(e.src) for e in edge_sets)
    if n_edges == 0 and inf.decisions_compared == 0:
        found["empty-transaction-graph"] = True
    phase("searching for cycles")
    timeout = core.CYCLE_SEARCH_TIMEOUT if cycle_search_timeout is None else cycle_search_timeout
    cycles, n_scc = core.find_cycles(h, edge_sets, ORDER, ord_bits, timeout, explain=explain_cycle)
    if "N2" in mem:
        n2 = n2_cases(cycles, prohibited, named=anomalies is not None)
        if n2:
            found["N2"] = n2
    for k, v in cycles.items():
        found.setdefault(k, []).extend(v)
    t_cycles = time.perf_counter()
    result = core.result_map(prohibited, reportable, found)
    if stats:
        result["stats"] = {"parser": h.parser, "txns": h.n_txns, "ops": h.n_ops, "mops": len(h.m_txn),
                           "slots": len(h.slots), "claims": h.n_pairs, "edges": n_edges, "nontrivial_sccs": n_scc,
                           "seconds": {"parse": t_parse - t0, "infer": t_infer - t_parse, "cycles": t_cycles - t_infer,
                                       "total": time.perf_counter() - t0}}
    return result


__all__ = ["DEFAULT_MODELS", "MEMORY_ANOMALIES", "MemoryHistory", "check", "header", "load", "loads", "parse", "read"]
