"""Transaction dependency graphs, strongly connected components and typed cycle search.

Edges live in flat numpy arrays (src, dst, relationship bit). Strongly connected components of
the whole graph come from scipy's sparse ``connected_components(connection="strong")``; only the
edges inside a non-trivial component go on to the cycle search, which is a breadth-first search
over (transaction, small automaton state) per anomaly type, run inside one component at a time
under a time budget, in Elle's order (worst anomalies first, skipping types already implied by
one found, and types that the component's cycle-existence tests rule out).

Cycle types are Elle's item-level ones (list-append and rw-register have no predicate reads, so
every rw edge is an item anti-dependency and Elle's explainer names the cycles so): G0 (ww only),
G1c (ww and wr, at least one wr), G-single-item (exactly one rw), G-nonadjacent-item (two or more
rw, never two adjacent), G2-item (two or more rw, some adjacent), each with -process / -realtime
variants when the cycle uses a process or real-time edge. Each
edge of a cycle is *explained* as the first of its relationships in the workload's explainer
order (list-append: ww, wr, rw; rw-register: wr, ww, rw; then process or real-time), as Elle's
combined explainer does, and the cycle is classified from those explained types.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from toki.check import models as cm
from toki.check.accel.ranges import gather

WW, WR, RW, PROCESS, REALTIME = 1, 2, 4, 8, 16
REL_NAMES = {WW: "ww", WR: "wr", RW: "rw", PROCESS: "process", REALTIME: "realtime"}
ORD = PROCESS | REALTIME
#: value code meaning "the initial state" (nil) in edge justifications
NONE = np.iinfo(np.int64).min
# explained edge classes used by the automaton
C_WW, C_WR, C_RW, C_ORD = 0, 1, 2, 3


@dataclass
class EdgeSet:
    """Edges of one relationship with the facts that justify them (for explanations).

    The facts (key, v1, v2) are kept as rows that edges point into (``at``), not gathered per
    edge: only the few edges of an explained cycle ever read them, and gathering three columns
    for every edge cost a third of list-append inference at 10^6 transactions. ``at`` None means
    edge i has row i (or no facts, when ``key`` is None)."""

    rel: int
    src: np.ndarray
    dst: np.ndarray
    key: np.ndarray | None = None   # key code, per fact row
    v1: np.ndarray | None = None    # value code of the source side (NONE: the initial state)
    v2: np.ndarray | None = None    # value code of the destination side
    at: np.ndarray | None = None    # fact row of each edge
    pred: np.ndarray | None = None  # per fact row: the predicate read it comes from, or -1 (toki.check.predicate)

    def __post_init__(self):
        keep = self.src != self.dst  # no self-edges in a dependency graph
        if not keep.all():
            self.src, self.dst = self.src[keep], self.dst[keep]
            if self.key is not None:
                self.at = np.flatnonzero(keep) if self.at is None else self.at[keep]
        # kept until the end of a check, for explanations: in the narrowest types that hold them
        # (10^7 transactions have about 4.5 * 10^7 edges; transaction numbers fit in 32 bits)
        from toki.check.reading.json_scan import compact

        self.src, self.dst = _int32(self.src), _int32(self.dst)
        if self.at is not None:
            self.at = _int32(self.at)
        if self.key is not None:
            same = self.v2 is self.v1
            self.key, self.v1 = compact(self.key), compact(self.v1)
            self.v2 = self.v1 if same else compact(self.v2)
        self._order, self._finds = None, 0

    def row(self, j: int) -> int:
        return j if self.at is None else int(self.at[j])

    def facts(self, j: int) -> tuple[int, int, int] | None:
        """(key, v1, v2) codes justifying edge j, or None if this relation records none."""
        if self.key is None:
            return None
        r = j if self.at is None else int(self.at[j])
        return int(self.key[r]), int(self.v1[r]), int(self.v2[r])

    def find(self, a: int, b: int) -> int | None:
        """Index of one record justifying a -> b, or None. The first few by a scan (explaining a
        cycle asks for a handful; sorting 2 * 10^7 edges for them took a second), then by an
        index."""
        self._finds += 1
        if self._order is None and self._finds <= 16:
            hit = np.flatnonzero(self.src == a)
            hit = hit[self.dst[hit] == b]
            return int(hit[0]) if len(hit) else None
        if self._order is None:
            self._order = np.lexsort((self.dst, self.src))
            self._ss = self.src[self._order]
            self._sd = self.dst[self._order]
        lo = np.searchsorted(self._ss, a, "left")
        hi = np.searchsorted(self._ss, a, "right")
        j = lo + np.searchsorted(self._sd[lo:hi], b, "left")
        if j < hi and self._sd[j] == b:
            return int(self._order[j])
        return None


def _int32(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == np.int32 or (len(a) and (int(a.max()) >= 1 << 31 or int(a.min()) < -(1 << 31))):
        return a
    return a.astype(np.int32)


@dataclass
class CycleSpec:
    name: str
    anchor: int            # explained class of the anchor edge u -> v
    path: frozenset        # classes allowed on the path v ~> u
    kind: str              # "plain", "nonadjacent", "item"
    variant: int = 0       # 0, PROCESS or REALTIME: path may use it and must use it


def _specs(variant_bit: int) -> list[CycleSpec]:
    base = [
        CycleSpec("G0", C_WW, frozenset({C_WW}), "plain"),
        CycleSpec("G1c", C_WR, frozenset({C_WW, C_WR}), "plain"),
        CycleSpec("G-single-item", C_RW, frozenset({C_WW, C_WR}), "plain"),
        CycleSpec("G-nonadjacent-item", C_RW, frozenset({C_WW, C_WR, C_RW}), "nonadjacent"),
        CycleSpec("G2-item", C_RW, frozenset({C_WW, C_WR, C_RW}), "item"),
    ]
    out = list(base)
    for bit, suffix in ((PROCESS, "-process"), (REALTIME, "-realtime")):
        if variant_bit & bit:
            out += [CycleSpec(s.name + suffix, s.anchor, s.path | {C_ORD}, s.kind, bit) for s in base]
    return sorted(out, key=lambda s: (cm.ANOMALY_DEPTH.get(s.name, 0), s.name))


#: (canonical model, subgraph) for cycle-existence tests; subgraph = (A bits, B bits or 0):
#: the edges A, or with B the sequential extension A | A;B (Elle's cycle-exists-specs).
CYCLE_EXISTS = (
    ("PL-1", WW, 0), ("PL-2", WW | WR, 0), ("PL-SI", WW | WR, RW),
    # repeatable read: no cycles but through predicate rw edges, which these workloads lack, so the
    # same subgraph as PL-3; tested first as Elle does, so a G2-item-only SCC rules it out.
    ("PL-2.99", WW | WR | RW, 0), ("PL-3", WW | WR | RW, 0),
    ("strong-session-PL-1", WW | PROCESS, 0), ("strong-session-PL-2", WW | WR | PROCESS, 0),
    ("strong-session-snapshot-isolation", WW | WR | PROCESS, RW),
    ("strong-session-serializable", WW | WR | RW | PROCESS, 0),
    ("strong-PL-1", WW | REALTIME, 0), ("strong-PL-2", WW | WR | REALTIME, 0),
    ("strong-snapshot-isolation", WW | WR | REALTIME, RW), ("PL-SS", WW | WR | RW | REALTIME, 0),
)


def _subgraph_name(a: int, b: int) -> list:
    names = ["union"] + [REL_NAMES[x] for x in (WW, WR, RW, PROCESS, REALTIME) if a & x]
    return ["extension", names, REL_NAMES[b]] if b else names


def explain_class(bits: np.ndarray, allowed: int, order: tuple[int, ...]) -> np.ndarray:
    """Class of each edge restricted to ``allowed``: the first relationship in ``order`` it has."""
    out = np.full(len(bits), -1, np.int8)
    masked = bits & allowed
    for rel in reversed(order):
        out[(masked & rel) != 0] = {WW: C_WW, WR: C_WR, RW: C_RW, PROCESS: C_ORD, REALTIME: C_ORD}[rel]
    return out


def classify(classes: list[int], ordbits: list[int]) -> str | None:
    """Elle's cycle explainer: a type from the explained edge classes of a cycle."""
    n_rw = sum(1 for c in classes if c == C_RW)
    n_wr = sum(1 for c in classes if c == C_WR)
    n_ww = sum(1 for c in classes if c == C_WW)
    adj = any(classes[i] == C_RW and classes[i - 1] == C_RW for i in range(len(classes)))
    if n_rw == 1:
        t = "G-single-item"
    elif n_rw > 1:
        t = "G2-item" if adj else "G-nonadjacent-item"
    elif n_wr:
        t = "G1c"
    elif n_ww:
        t = "G0"
    else:
        return None
    if any(b & REALTIME for b in ordbits):
        return t + "-realtime"
    if any(b & PROCESS for b in ordbits):
        return t + "-process"
    return t


class Timeout(Exception):
    pass


@dataclass
class SearchResult:
    cycles: list = field(default_factory=list)        # (type, [nodes...], [classes...], [ordbits])
    exists: list = field(default_factory=list)        # cycle-exists cases (local nodes)
    timeout: dict | None = None


def csr_matrix(*a, **kw):
    # scipy.sparse is imported on first use, not with this module: it is most of the checker's
    # import time (about 0.2 s with csgraph), and a valid history never needs it (scc_labels).
    from scipy.sparse import csr_matrix as m

    return m(*a, **kw)


def connected_components(*a, **kw):
    from scipy.sparse.csgraph import connected_components as cc

    return cc(*a, **kw)


def scc_labels(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[int, np.ndarray]:
    """Strongly connected components: (count, label per node)."""
    if len(src) == 0 or bool((src < dst).all()):
        # Every edge goes forward in node order, which is then a topological order: no cycle,
        # every component a single node. Nodes are numbered in history order, so this is the
        # common case of a valid history, and it spares the check scipy's import (0.2 s).
        return n, np.arange(n)
    g = csr_matrix((np.ones(len(src), np.int8), (src, dst)), shape=(n, n))
    return connected_components(g, directed=True, connection="strong")


def _local_scc_min(n: int, src, dst) -> list[int] | None:
    """Nodes of the smallest non-trivial SCC of a local graph, or None."""
    if len(src) == 0:
        return None
    k, lab = scc_labels(n, src, dst)
    counts = np.bincount(lab, minlength=k)
    big = np.flatnonzero(counts >= 2)
    if len(big) == 0:
        return None
    c = big[np.argmin(counts[big])]
    return np.flatnonzero(lab == c).tolist()


def cycle_exists(n: int, src: np.ndarray, dst: np.ndarray, bits: np.ndarray, ord_bits: int) -> list[dict]:
    """Elle's cycle-exists cases for one component (local node ids in ``scc``)."""
    out = []
    redundant: set[str] = set()
    for model, a, b in CYCLE_EXISTS:
        if (a | b) & ORD and not (a | b) & ORD & ord_bits:
            continue  # no such order edges in this graph
        if model in redundant:
            continue
        ma = (bits & a) != 0
        s, d = src[ma], dst[ma]
        if b:
            mb = (bits & b) != 0
            A = csr_matrix((np.ones(len(s), np.int8), (s, d)), shape=(n, n))
            B = csr_matrix((np.ones(int(mb.sum()), np.int8), (src[mb], dst[mb])), shape=(n, n))
            C = (A @ B).tocoo()
            s = np.concatenate([s, C.row.astype(np.int64)])
            d = np.concatenate([d, C.col.astype(np.int64)])
            keep = s != d
            selfloop = bool((~keep).any())
            s, d = s[keep], d[keep]
        else:
            selfloop = False
        scc = _local_scc_min(n, s, d)
        if scc is None and selfloop:
            # an A;B self-loop is a two-transaction cycle a -A-> b -B-> a
            C2 = (A @ B).tocoo()
            i = int(np.flatnonzero(C2.row == C2.col)[0])
            x = int(C2.row[i])
            nb = [int(y) for y in np.flatnonzero(A.getrow(x).toarray()[0]) if B[int(y), x]]
            scc = sorted({x, nb[0]}) if nb else [x]
        if scc is None:
            continue
        out.append({"type": f"{model}-cycle-exists", "not": cm.friendly(model), "model": model,
                    "subgraph": _subgraph_name(a, b), "scc_size": len(scc), "scc": scc})
        redundant |= cm.impossible_closure([model])
    return out


def impossible_cycle_types(exists: list[dict], ord_bits: int) -> set[str]:
    """Cycle anomalies that cannot be in a component, given its cycle-exists cases."""
    impossible = cm.impossible_closure([e["model"] for e in exists]) if exists else set()
    tested = {m for m, a, b in CYCLE_EXISTS if not ((a | b) & ORD) or ((a | b) & ORD & ord_bits)}
    possible = tested - impossible
    return cm.anomalies_prohibited_by(possible) if possible else set()


def search_component(n: int, src: np.ndarray, dst: np.ndarray, bits: np.ndarray, order: tuple[int, ...],
                     ord_bits: int, deadline: float) -> SearchResult:
    """All of Elle's cycle searches inside one strongly connected component (local ids 0..n-1)."""
    res = SearchResult()
    res.exists = cycle_exists(n, src, dst, bits, ord_bits)
    skip = impossible_cycle_types(res.exists, ord_bits)
    searched: list[str] = []
    found_types: list[str] = []
    redundant: set[str] = set()
    for spec in _specs(ord_bits):
        if spec.name in skip or spec.name in redundant:
            continue
        searched.append(spec.name)
        try:
            if time.monotonic() > deadline:
                raise Timeout
            cyc = _find(n, src, dst, bits, order, spec, deadline)
        except Timeout:
            res.timeout = {"type": "cycle-search-timeout", "anomaly_spec_type": spec.name,
                           "does_not_contain": [t for t in searched[:-1] if t not in found_types],
                           "scc_size": n}
            break
        if cyc is not None:
            res.cycles.append(cyc)
            found_types.append(spec.name)
            redundant |= cm.implied_anomalies([spec.name])
    return res


def _find(n, src, dst, bits, order, spec: CycleSpec, deadline: float):
    allowed = WW | WR | RW | spec.variant
    cls = explain_class(bits, allowed, order)
    ordb = bits & spec.variant
    # anchors: edges explained as the anchor class
    anchors = np.flatnonzero(cls == spec.anchor)
    if len(anchors) == 0:
        return None
    path_ok = np.isin(cls, list(spec.path))
    # necessary condition: anchor endpoints in one SCC of (path edges + anchors)
    sub = path_ok | (cls == spec.anchor)
    _, lab = scc_labels(n, src[sub], dst[sub])
    anchors = anchors[lab[src[anchors]] == lab[dst[anchors]]]
    if len(anchors) == 0:
        return None
    # adjacency for the path
    pe = np.flatnonzero(path_ok)
    o = pe[np.argsort(src[pe], kind="stable")]
    indptr = np.searchsorted(src[o], np.arange(n + 1)).tolist()
    nbr = dst[o].tolist()
    ncls = cls[o].tolist()
    nord = ordb[o].tolist()
    # group anchors by their head v
    by_v: dict[int, list[tuple[int, int]]] = {}
    for e in anchors.tolist():
        by_v.setdefault(int(dst[e]), []).append((int(src[e]), e))
    need_ord = bool(spec.variant)
    steps = 0
    for v, us in sorted(by_v.items()):
        targets = {u: e for u, e in us}
        start_state = 1 if spec.anchor == C_RW else 0  # bit0: last edge was rw
        start = v * 16 + start_state
        parent = {start: None}
        q = deque([start])
        while q:
            steps += 1
            if steps & 1023 == 0 and time.monotonic() > deadline:
                raise Timeout
            key = q.popleft()
            node, st = divmod(key, 16)
            if node in targets and _accept(spec, st, need_ord):
                return _build(spec, parent, key, targets[node], src, dst, bits, cls, ordb, order)
            for j in range(indptr[node], indptr[node + 1]):
                c = ncls[j]
                last_rw = st & 1
                if c == C_RW:
                    if spec.kind == "nonadjacent" and last_rw:
                        continue
                    ns = (st | 1 | 2) | (4 if last_rw else 0)
                else:
                    ns = st & ~1
                if nord[j]:
                    ns |= 8
                nk = nbr[j] * 16 + ns
                if nk not in parent:
                    parent[nk] = (key, j)
                    q.append(nk)
    return None


def _accept(spec: CycleSpec, st: int, need_ord: bool) -> bool:
    if need_ord and not st & 8:
        return False
    if spec.kind == "nonadjacent":
        return not (st & 1) and bool(st & 2)
    if spec.kind == "item":
        return bool(st & 2) and bool(st & 4 or st & 1)
    return True


def _build(spec, parent, key, anchor_edge, src, dst, bits, cls, ordb, order):
    # walk back from (u, state) to (v, start)
    path_nodes = []
    while parent[key] is not None:
        prev, j = parent[key]
        path_nodes.append(key // 16)
        key = prev
    path_nodes.append(key // 16)
    path_nodes.reverse()  # v ... u
    u = int(src[anchor_edge])
    nodes = [u] + path_nodes  # u -anchor-> v ... -> u
    cyc = _simplify(nodes, src, dst, bits, order, spec)
    return cyc


def _edge_bits(src, dst, bits, a, b) -> int:
    m = (src == a) & (dst == b)
    return int(np.bitwise_or.reduce(bits[m])) if m.any() else 0


def _classes_of(nodes, src, dst, bits, order, allowed):
    cl, ob = [], []
    for a, b in zip(nodes, nodes[1:]):
        eb = _edge_bits(src, dst, bits, a, b) & allowed
        c = int(explain_class(np.array([eb]), allowed, order)[0])
        cl.append(c)
        ob.append(eb & ORD if c == C_ORD else 0)
    return cl, ob


def _simplify(nodes, src, dst, bits, order, spec):
    """Prefer a simple sub-cycle with the same type when the walk repeats a transaction."""
    allowed = WW | WR | RW | spec.variant
    best = None
    cands = [nodes]
    body = nodes[:-1]
    if len(set(body)) < len(body):
        for i in range(len(body)):
            for j in range(i + 1, len(body)):
                if body[i] == body[j]:
                    sub = body[i:j] + [body[i]]
                    if len(sub) >= 3:
                        cands.append(sub)
                    rest = body[:i] + body[j:] + [body[0]]
                    if len(rest) >= 3:
                        cands.append(rest)
    for c in sorted(cands, key=len):
        if len(set(c[:-1])) != len(c) - 1 and c is not nodes:
            continue
        cl, ob = _classes_of(c, src, dst, bits, order, allowed)
        if classify(cl, ob) == spec.name:
            if len(set(c[:-1])) == len(c) - 1:
                return (spec.name, c, cl, ob)
            best = best or (spec.name, c, cl, ob)
    return best


def realtime_edges(inv: np.ndarray, comp: np.ndarray, ok: np.ndarray, target: np.ndarray,
                   group: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A transitive reduction of the real-time order, as Elle builds it.

    a -> b when a completed ok before b was invoked, and no op c invoked after a completed
    also completed before b was invoked. ``inv``/``comp`` are history indices (an op with an
    unknown invocation has inv = -1: nothing precedes it); ``ok`` marks possible sources,
    ``target`` possible destinations. With ``group``, the order is computed within each group
    (used for per-key version orders). Returns (src, dst) as indices into the inputs.
    """
    n = len(inv)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    big = int(max(comp.max(initial=0), inv.max(initial=0))) + 2
    g = np.zeros(n, np.int64) if group is None else group.astype(np.int64)
    # targets sorted by (group, invoke)
    tg = np.flatnonzero(target)
    to = tg[np.lexsort((inv[tg], g[tg]))]
    tkey = g[to] * big + inv[to]
    # next_done(a) = min completion (of an ok op) among ops invoked after a completed, same group
    src_ok = np.flatnonzero(ok)
    so = src_ok[np.lexsort((inv[src_ok], g[src_ok]))]
    skey = g[so] * big + inv[so]
    compk = g[so] * big + comp[so]
    suf = np.minimum.accumulate(compk[::-1])[::-1] if len(so) else compk
    aq = g[src_ok] * big + comp[src_ok]
    p = np.searchsorted(skey, aq, "right")
    nd = np.where(p < len(so), suf[np.minimum(p, len(so) - 1)], g[src_ok] * big + big)
    nd = np.minimum(nd, g[src_ok] * big + big)
    lo = np.searchsorted(tkey, aq, "right")
    hi = np.searchsorted(tkey, nd, "left")
    cnt = np.maximum(hi - lo, 0)
    srcs = np.repeat(src_ok, cnt)
    dsts = gather(to, lo, cnt)
    return srcs, dsts
