"""The checker: parse, infer, search cycles, and answer in Elle's result shape.

``{"valid": true | false | "unknown", "anomaly_types": [...], "anomalies": {...},
"not": [...], "also_not": [...]}``, as Elle's ``result-map``:

- the anomalies that make a history invalid are those the requested models prohibit, plus the
  requested anomalies and every anomaly that implies one of them (Elle's default, when neither
  models nor anomalies are given, is strict-serializable);
- reportable = invalidating ones plus ``empty-transaction-graph`` and ``cycle-search-timeout``,
  which make the result "unknown" when nothing invalidating was found: never a pass;
- ``not`` / ``also_not`` are computed from every anomaly found (reportable or not): the weakest
  models ruled out, and the stronger models also ruled out.
"""

from __future__ import annotations

import json
import time
from itertools import pairwise
from pathlib import Path

import numpy as np

from toki.check import graph as G
from toki.check import models as cm
from toki.check.reading.history import FAIL, OK, History, parse, read

DEFAULT_MODELS = ("strict-serializable",)
#: seconds of cycle search per strongly connected component before giving up ("unknown")
CYCLE_SEARCH_TIMEOUT = 5.0
CYCLE_TYPES = frozenset(
    b + s for b in ("G0", "G1c", "G-single-item", "G-nonadjacent-item", "G2-item", "G-single", "G-nonadjacent", "G2")
    for s in ("", "-process", "-realtime"))
WORKLOADS = ("list-append", "rw-register", "predicate")


def prohibited_anomalies(models, anomalies) -> set[str]:
    return cm.anomalies_implying(anomalies) | cm.anomalies_prohibited_by(models)


def order_bits(reportable: set[str]) -> int:
    if any(a.endswith("-realtime") for a in reportable):
        return G.REALTIME
    if any(a.endswith("-process") for a in reportable):
        return G.PROCESS
    return 0


def check(history, workload: str = "list-append", models=None, anomalies=None, *,
          cycle_search_timeout: float = CYCLE_SEARCH_TIMEOUT, wfr_keys: bool = False,
          sequential_keys: bool = False, linearizable_keys: bool = False, stats: bool = False,
          fmt: str | None = None, on_phase=None) -> dict:
    """Check a history (path, list of op maps, or parsed History) against consistency models.
    ``fmt`` ("edn" or "json") overrides the format a path's suffix implies; ``on_phase(name)``,
    when given, is told as each phase starts (reading, inferring, searching for cycles)."""
    t0 = time.perf_counter()
    phase = on_phase or (lambda name: None)
    phase("reading")
    if models is None and anomalies is None:
        models = list(DEFAULT_MODELS)
    models = cm.validate_models(models or [])
    anomalies = cm.validate_anomalies(anomalies or [])
    if workload == "predicate":
        from toki.check import predicate
        t_load = t0
        h = history if isinstance(history, predicate.PredicateHistory) else predicate.read(history, fmt=fmt)
    elif isinstance(history, (str, Path)):
        t_load = t0  # the scanner reads the file a slice at a time: "parse" includes reading it
        h = read(history, workload, fmt=fmt)
    else:
        t_load = time.perf_counter()
        h = history if isinstance(history, History) else parse(history, workload)
    if h.workload != workload and workload != "predicate":
        from toki.errors import HistoryError
        raise HistoryError(f"history was parsed as {h.workload}, asked to check it as {workload}",
                           fix="parse it with the same workload")
    t_parse = time.perf_counter()
    phase("inferring dependencies")
    prohibited = prohibited_anomalies(models, anomalies)
    reportable = prohibited | cm.UNKNOWN_ANOMALIES
    ord_bits = order_bits(reportable)

    from toki.check.accel import key_slices
    order_sets: list[G.EdgeSet] = []

    def order_edges() -> None:  # not per key: computed here while a forked child infers its keys
        if ord_bits & G.PROCESS:
            order_sets.append(process_edges(h))
        if ord_bits & G.REALTIME:
            order_sets.append(realtime_edge_set(h))

    if workload == "predicate":
        res = predicate.analyse(h, wfr_keys=wfr_keys, sequential_keys=sequential_keys,
                                linearizable_keys=linearizable_keys)
        order_edges()
    elif workload == "list-append":
        from toki.check import list_append
        res = key_slices.analyse(h, list_append.analyse, meanwhile=order_edges)
    else:
        from toki.check import rw_register
        res = key_slices.analyse(h, rw_register.analyse, wfr_keys=wfr_keys, sequential_keys=sequential_keys,
                                linearizable_keys=linearizable_keys, meanwhile=order_edges)
    found: dict[str, list] = dict(res["anomalies"])
    edge_sets: list[G.EdgeSet] = list(res["edges"]) + order_sets
    t_infer = time.perf_counter()
    n_edges = sum(len(e.src) for e in edge_sets)
    if n_edges == 0:
        found["empty-transaction-graph"] = True
    order = (G.WW, G.WR, G.RW, G.PROCESS, G.REALTIME) if workload == "list-append" else \
        (G.WR, G.WW, G.RW, G.PROCESS, G.REALTIME)
    phase("searching for cycles")
    cyc_found, n_scc = find_cycles(h, edge_sets, order, ord_bits, cycle_search_timeout)
    if workload == "predicate":
        # Elle's repeatable-read test (PL-2.99) is a cycle of any ww, wr and rw edges: it holds
        # without predicate reads only. With them, a cycle through a predicate rw edge is G2,
        # which repeatable read allows; the typed search names it.
        cyc_found.pop("PL-2.99-cycle-exists", None)
    for k, v in cyc_found.items():
        found.setdefault(k, []).extend(v)
    t_cycles = time.perf_counter()
    rendered = {k: render(h, k, v) for k, v in found.items()}
    result = result_map(prohibited, reportable, rendered)
    if stats:
        result["stats"] = {"parser": h.parser, "helper_max_rss_kb": h.helper_max_rss_kb, "txns": h.n_txns,
                           "ops": h.n_ops, "mops": len(h.m_txn), "edges": n_edges, "nontrivial_sccs": n_scc,
                           "seconds": {"load": t_load - t0, "parse": t_parse - t_load, "infer": t_infer - t_parse,
                                       "cycles": t_cycles - t_infer, "total": time.perf_counter() - t0}}
    return result


def result_map(prohibited: set[str], reportable: set[str], found: dict) -> dict:
    bad = {k: v for k, v in found.items() if k in prohibited}
    rep = {k: v for k, v in found.items() if k in reportable}
    rep = remove_redundant_cycle_exists(rep)
    if not rep:
        return {"valid": True, "anomaly_types": [], "anomalies": {}, "not": [], "also_not": []}
    b = cm.boundary(found.keys())
    return {"valid": False if bad else "unknown", "anomaly_types": sorted(rep), "anomalies": rep,
            "not": b["not"], "also_not": b["also_not"]}


def remove_redundant_cycle_exists(anomalies: dict) -> dict:
    others = [t for t in anomalies if not t.endswith("-cycle-exists")]
    impossible = cm.impossible_models(others)
    omit = {f"{m}-cycle-exists" for m, _, _ in G.CYCLE_EXISTS if m in impossible}
    return {k: v for k, v in anomalies.items() if k not in omit}


# ------------------------------------------------------------------ order graphs

def process_edges(h: History) -> G.EdgeSet:
    ok = np.flatnonzero(h.t_type == OK)
    o = ok[np.lexsort((h.t_index[ok], h.t_process[ok]))]
    same = h.t_process[o][1:] == h.t_process[o][:-1]
    if h.t_pgroup is None:
        return G.EdgeSet(G.PROCESS, o[:-1][same], o[1:][same])
    # A process with several outstanding invocations: its ops in one overlap group ran
    # concurrently, so order each group before the next one, never the ops inside a group.
    src, dst = [], []
    runs: list[tuple[int, int, list[int]]] = []   # (process, group, transactions)
    for t in o.tolist():
        p, g = int(h.t_process[t]), int(h.t_pgroup[t])
        if runs and runs[-1][0] == p and runs[-1][1] == g:
            runs[-1][2].append(t)
        else:
            runs.append((p, g, [t]))
    for (pa, _, a), (pb, _, b) in pairwise(runs):
        if pa == pb:
            for x in a:
                src.extend([x] * len(b))
                dst.extend(b)
    return G.EdgeSet(G.PROCESS, np.array(src, np.int64), np.array(dst, np.int64))


def realtime_edge_set(h: History) -> G.EdgeSet:
    target = h.t_type != FAIL
    s, d = G.realtime_edges(h.t_invoke, h.t_index, h.t_type == OK, target)
    return G.EdgeSet(G.REALTIME, s, d)


# ------------------------------------------------------------------ cycles

def find_cycles(h: History, edge_sets, order, ord_bits, timeout, explain=None) -> tuple[dict, int]:
    """Every cycle type Elle searches, per strongly connected component of the edges. Each
    cycle found is explained by ``explain(h, type, txns, classes, order bits, edge sets by
    relationship)`` (default :func:`explain_cycle`; the memory workload brings its own)."""
    explain = explain or explain_cycle
    n = h.n_txns
    if not edge_sets or n == 0:
        return {}, 0
    on_cycle = _may_be_on_a_cycle(n, edge_sets)
    if on_cycle is None:
        return {}, 0
    keep = [on_cycle[e.src] & on_cycle[e.dst] for e in edge_sets]
    src = np.concatenate([e.src[k] for e, k in zip(edge_sets, keep)]).astype(np.int64)
    dst = np.concatenate([e.dst[k] for e, k in zip(edge_sets, keep)]).astype(np.int64)
    bits = np.concatenate([np.full(int(k.sum()), e.rel, np.int64) for e, k in zip(edge_sets, keep)])
    del keep, on_cycle
    if len(src) == 0:
        return {}, 0
    ncomp, lab = G.scc_labels(n, src, dst)
    counts = np.bincount(lab, minlength=ncomp)
    big = counts >= 2
    if not big.any():
        return {}, 0
    inside = (lab[src] == lab[dst]) & big[lab[src]]
    src, dst, bits = src[inside], dst[inside], bits[inside]
    # deduplicate, OR-ing relationships
    code = src * n + dst
    o = np.argsort(code, kind="stable")
    code, bits = code[o], bits[o]
    starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    bits = np.bitwise_or.reduceat(bits, starts)
    code = code[starts]
    src, dst = code // n, code % n
    comp = lab[src]
    oc = np.argsort(comp, kind="stable")
    src, dst, bits, comp = src[oc], dst[oc], bits[oc], comp[oc]
    cstarts = np.flatnonzero(np.r_[True, comp[1:] != comp[:-1]])
    cends = np.r_[cstarts[1:], len(comp)]
    out: dict[str, list] = {}
    by_rel: dict[int, list] = {}
    for e in edge_sets:
        by_rel.setdefault(e.rel, []).append(e)
    for a, b in zip(cstarts.tolist(), cends.tolist()):
        nodes = np.flatnonzero(lab == comp[a])
        ls = np.searchsorted(nodes, src[a:b])
        ld = np.searchsorted(nodes, dst[a:b])
        deadline = time.monotonic() + timeout
        r = G.search_component(len(nodes), ls, ld, bits[a:b], order, ord_bits, deadline)
        for e in r.exists:
            out.setdefault(e["type"], []).append(
                {"type": e["type"], "not": e["not"], "subgraph": e["subgraph"], "scc_size": e["scc_size"],
                 "scc": [int(h.t_index[nodes[i]]) for i in e["scc"]]})
        for (typ, cyc, cls, ob) in r.cycles:
            c = explain(h, typ, [int(nodes[i]) for i in cyc], cls, ob, by_rel)
            out.setdefault(c["type"], []).append(c)
        if r.timeout:
            out.setdefault("cycle-search-timeout", []).append(r.timeout)
    return out, len(cstarts)


def _may_be_on_a_cycle(n: int, edge_sets) -> np.ndarray | None:
    """Transactions that may lie on a cycle (bool per transaction), or None when none can.

    Transactions are numbered in history order, and a valid history's edges nearly all point
    forward in it. A cycle must come back: each transaction x on it has an edge of the cycle
    u -> v with v <= x <= u and v < u (follow the cycle from x to the first transaction below
    x). So only transactions inside the span [v, u] of some backward edge can be on a cycle,
    and the strongly connected components are computed on those alone (none, for a valid
    serial history; a few, for one with a planted anomaly), not on every edge of 10^7
    transactions."""
    cover = np.zeros(n + 1, np.int64)
    anyback = False
    for e in edge_sets:
        back = e.src > e.dst
        if back.any():
            anyback = True
            cover += np.bincount(e.dst[back], minlength=n + 1)
            cover -= np.bincount(e.src[back] + 1, minlength=n + 1)
    if not anyback:
        return None
    return np.cumsum(cover[:n]) > 0


_CLASS_REL = {G.C_WW: G.WW, G.C_WR: G.WR, G.C_RW: G.RW}


def explain_cycle(h: History, typ: str, txns: list[int], cls: list[int], ob: list[int], by_rel) -> dict:
    names = {}
    for t in txns[:-1]:
        names.setdefault(t, f"T{len(names) + 1}")
    steps = []
    for (a, b), c, o in zip(zip(txns, txns[1:]), cls, ob):
        an, bn = names[a], names[b]
        if c == G.C_ORD:
            steps.append(order_step(h, a, b, an, bn, o))
            continue
        rel = _CLASS_REL[c]
        es, j = None, None
        for es in by_rel[rel]:  # (one edge set per slice of keys, for a large history)
            if (j := es.find(a, b)) is not None:
                break
        step = {"type": G.REL_NAMES[rel]}
        f = es.facts(j) if j is not None else None
        p = int(es.pred[es.row(j)]) if f is not None and es.pred is not None else -1
        if p >= 0:
            step.update(_predicate_step(h, rel, an, bn, p, h.key(f[0]), None if f[1] == G.NONE else h.value(f[1]),
                                        None if f[2] == G.NONE else h.value(f[2])))
        elif f is not None:
            k = h.key(f[0])
            v1 = None if f[1] == G.NONE else h.value(f[1])
            v2 = None if f[2] == G.NONE else h.value(f[2])
            step.update({"key": k, "value": v1, "value'": v2,
                         "explanation": _sentence(h.workload, rel, an, bn, k, v1, v2)})
        steps.append(step)
    if any("predicate" in s and s["type"] == "rw" for s in steps):
        typ = typ.replace("-item", "")  # a cycle through a predicate anti-dependency: Adya's G-single, G2
    return {"type": typ, "cycle": [h.op(t) for t in txns], "names": [names[t] for t in txns], "steps": steps}


def order_step(h, a: int, b: int, an: str, bn: str, o: int) -> dict:
    """A process or real-time edge a -> b of a cycle, explained (``an``, ``bn``: their names)."""
    if o & G.PROCESS:
        p = h.processes[int(h.t_process[a])]
        return {"type": "process", "process": p, "explanation": f"process {p} executed {an} before {bn}"}
    ia, ib = int(h.t_index[a]), int(h.t_invoke[b])
    return {"type": "realtime", "completed": ia, "invoked": ib,
            "explanation": f"{an} completed at index {ia}, before the invocation of {bn}, at index {ib}"}


def _predicate_step(h, rel, a, b, p, k, v1, v2) -> dict:
    from toki.check.predicate import describe

    pr = h.preds[p]
    show = h.show
    d = {"predicate": pr.spec, "key": k, "value": show(v1), "value'": show(v2)}
    if rel == G.RW:
        d["explanation"] = (f"{a}'s predicate read ({describe(pr)}) did not see {b}'s write of {k!r} = "
                            f"{json.dumps(show(v2))}, which matches it (a phantom)")
    else:
        d["explanation"] = f"{a} wrote {k!r} = {json.dumps(show(v2))}, which {b}'s predicate read ({describe(pr)}) returned"
    return d


def _sentence(workload, rel, a, b, k, v1, v2) -> str:
    r = repr
    if workload == "list-append":
        if rel == G.WW:
            return f"{b} appended {r(v2)} after {a} appended {r(v1)} to {r(k)}"
        if rel == G.WR:
            return f"{b} observed {a}'s append of {r(v1)} to key {r(k)}"
        if v1 is None:
            return f"{a} observed the initial (nil) state of {r(k)}, which {b} created by appending {r(v2)}"
        return f"{a} did not observe {b}'s append of {r(v2)} to {r(k)}"
    if rel == G.WW:
        return (f"{a} set key {r(k)} to {r(v1)}, and {b} set it to {r(v2)}, which came later in the "
                f"version order")
    if rel == G.WR:
        return f"{a} wrote {r(k)} = {r(v1)}, which was read by {b}"
    return (f"{a} read key {r(k)} = {r(v1)}, and {b} set it to {r(v2)}, which came later in the "
            f"version order")


# ------------------------------------------------------------------ evidence for non-cycle anomalies

def render(h: History, typ: str, cases):
    if not isinstance(cases, list):
        return cases
    if typ in CYCLE_TYPES or typ.endswith("-cycle-exists") or typ == "cycle-search-timeout":
        return cases
    out = []
    for c in cases:
        d = {}
        for k, v in c.items():
            if k in ("op", "writer"):
                d[k] = h.op(v)
            elif k == "txns":
                d[k] = [h.op(t) if t is not None and t >= 0 else None for t in v]
            elif k == "mop":
                d[k] = h.mop(v)
            elif k == "read_mop":
                d["value"] = h.mop(v)[2]
            elif k == "element":
                d[k] = h.value(v)
            elif k == "key" and typ != "cyclic-versions":
                d[k] = h.key(v)
            elif k == "values" and typ == "incompatible-order":
                d[k] = [h.mop(m)[2] for m in v]
            elif k == "values" and typ == "dirty-update":
                d[k] = [h.value(x) for x in v]
            elif k == "duplicates":
                d[k] = [{"element": h.value(e), "count": n} for e, n in v.items()]
            else:
                d[k] = v
        out.append(d)
    return out


__all__ = ["check", "prohibited_anomalies", "result_map"]
