"""Predicate reads: the ``predicate`` workload, and G2 with predicates (phantoms).

Elle's workloads read keys one at a time. A database also answers reads over a *predicate*
(``select ... where set_key = 'x' and active``, ``where id between 1 and 9``), and a
transaction that acts on such a read can be wrong in a way no item read shows: another
transaction inserts a row the predicate would have matched (a phantom). Adya's G2 names the
cycles this makes (Adya, Weak Consistency, 1999, §4.4.3; checked from histories by Emme,
EuroSys 2024). This workload is rw-register plus a predicate read micro-op::

    ["rp", {"where": {"set_key": "x", "active": true}, "range": [lo, hi]}, [[k, v], ...]]

- the predicate: ``where`` (a row is a map value; every listed field must be equal) and/or
  ``range`` (keys from lo to hi, inclusive); a key whose current version is nil (never
  written) matches nothing;
- the result: the rows the read returned, as ``[key, value]`` pairs;
- ``["r", k, v]`` and ``["w", k, v]`` as in rw-register (values unique per key; a value may be
  a flat map, a row).

Inference, beyond rw-register's item edges (which run unchanged on the r and w micro-ops):

- wr: the writer of each returned row's value -> the reader;
- predicate rw (Adya's predicate anti-dependency): T read predicate P and a later version of a
  key, installed by U, changes whether the key matches P -> T rw U. The version T saw of a key
  it did not get back is some version that does not match P; the edge is added only when every
  such version of the key precedes U's (in practice: the key's only non-matching version is
  its initial nil, and U's version matches, which is an insert T missed). Where the history
  does not fix that order no edge is added: a missing edge can hide an anomaly, an invented
  one would report an anomaly that did not happen.

Cycles that use a predicate rw edge are named as Adya names them (G-single, G-nonadjacent, G2),
cycles of item edges alone as Elle does (G-single-item, ...): the models place them so
(repeatable read proscribes G2-item, serializable G2 as well).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toki.check.graph import NONE, RW, WR, EdgeSet
from toki.check.reading.history import FAIL, OK, W, History, loads, parse, read_bytes
from toki.errors import HistoryError

RP = "rp"


@dataclass
class PredicateRead:
    txn: int
    where: dict
    lo: Any
    hi: Any
    rows: dict          # key -> value returned
    spec: dict          # the predicate as written, for explanations

    def matches(self, key, value) -> bool:
        if value is None:
            return False
        if self.lo is not None and not _le(self.lo, key):
            return False
        if self.hi is not None and not _le(key, self.hi):
            return False
        if self.where:
            return isinstance(value, dict) and all(value.get(f) == x for f, x in self.where.items())
        return True

    def covers(self, key) -> bool:
        return (self.lo is None or _le(self.lo, key)) and (self.hi is None or _le(key, self.hi))


def _le(a, b) -> bool:
    try:
        return a <= b
    except TypeError:
        return False


@dataclass
class PredicateHistory(History):
    """The item micro-ops as an rw-register History, plus the predicate reads and the ops as
    written (so a cycle's transactions are shown with their predicate reads)."""

    preds: list = field(default_factory=list)
    ops_by_index: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)    # canonical text of a map value -> the map

    def op(self, t: int) -> dict:
        return self.ops_by_index[int(self.t_index[t])]

    def show(self, v):
        return self.rows.get(v, v) if isinstance(v, str) else v


def _canon(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":")) if isinstance(v, dict) else v


def read(source, fmt: str | None = None) -> PredicateHistory:
    """A predicate-workload history from a path or a list of op maps."""
    if isinstance(source, (str, Path)):
        ops = loads(read_bytes(source), fmt=fmt or ("edn" if str(source).lower().endswith(".edn") else None),
                    name=str(source))
    else:
        ops = list(source)
    return parse_ops(ops)


def parse_ops(ops: list) -> PredicateHistory:
    rows: dict = {}
    items: list[dict] = []
    by_index: dict = {}
    raw_preds: list[tuple[int, int, Any, Any]] = []  # (op position, index, predicate, result)
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise HistoryError(f"op at position {i} is a {type(op).__name__}, not an op map",
                               fix="every op is a map with type, process and value")
        idx = op.get("index", i)
        by_index[idx] = op
        v = op.get("value")
        if type(op.get("process")) is not int or not isinstance(v, list):
            items.append(op)
            continue
        mops = []
        for j, m in enumerate(v):
            if isinstance(m, list) and m and m[0] == RP:
                if len(m) != 3:
                    raise HistoryError(f"op {idx}: predicate read {j} is {m!r}, not [\"rp\", predicate, rows]",
                                       fix='write ["rp", {"where": {...}, "range": [lo, hi]}, [[k, v], ...]]')
                raw_preds.append((i, idx, m[1], m[2]))
                continue
            if isinstance(m, list) and len(m) == 3 and isinstance(m[2], dict):
                c = _canon(m[2])
                rows[c] = m[2]
                m = [m[0], m[1], c]
            mops.append(m)
        items.append({**op, "value": mops})
    h = parse(items, "rw-register")
    ph = PredicateHistory(**{f.name: getattr(h, f.name) for f in dataclasses.fields(History)},
                          ops_by_index=by_index, rows=rows)
    pos_of = {int(x): t for t, x in enumerate(h.t_index.tolist())}
    for _, idx, spec, result in raw_preds:
        t = pos_of.get(idx)
        if t is None:
            continue  # an invocation that completed: its completion carries the result
        ph.preds.append(_predicate(idx, t, spec, result))
    return ph


def _predicate(idx, t: int, spec, result) -> PredicateRead:
    fix = 'a predicate is {"where": {field: value, ...}} and/or {"range": [lo, hi]}'
    if not isinstance(spec, dict) or not spec or set(spec) - {"where", "range"}:
        raise HistoryError(f"op {idx}: predicate {spec!r} is not a where/range map", fix=fix)
    where = spec.get("where") or {}
    rng = spec.get("range")
    if not isinstance(where, dict) or (rng is not None and (not isinstance(rng, list) or len(rng) != 2)):
        raise HistoryError(f"op {idx}: predicate {spec!r} is malformed", fix=fix)
    lo, hi = (rng if rng is not None else (None, None))
    rows = {}
    if result is not None:
        if not isinstance(result, list) or any(not isinstance(r, list) or len(r) != 2 for r in result):
            raise HistoryError(f"op {idx}: a predicate read's result must be a list of [key, value] rows, got "
                               f"{result!r}", fix="write the rows it returned as [[k, v], ...], or null if unknown")
        for k, v in result:
            if isinstance(k, (list, dict)):
                raise HistoryError(f"op {idx}: predicate read row key {k!r}", fix="keys are numbers or strings")
            rows[k] = v
    return PredicateRead(t, where, lo, hi, rows if result is not None else None, spec)


def analyse(h: PredicateHistory, **kw) -> dict:
    """rw-register's inference on the item micro-ops, plus the predicate reads' wr and rw edges."""
    from toki.check import rw_register

    res = rw_register.analyse(h, **kw)
    # kept beside the item edge sets (the cycle search takes any number per relationship; an
    # explanation looks in each in turn, item edges first)
    res["edges"] = list(res["edges"]) + [e for e in _predicate_edges(h) if len(e.src)]
    return res


def _predicate_edges(h: PredicateHistory) -> tuple[EdgeSet, EdgeSet]:
    ttype = h.t_type
    key_code = {k: i for i, k in enumerate(h.keys)} if h.keys is not None else None
    val_code = {v: i for i, v in enumerate(h.values)} if h.values is not None else None
    # the version each non-failed transaction installs on each key (its last write), by key
    installs: dict[Any, list[tuple[int, Any]]] = {}
    writer: dict[tuple[Any, Any], int] = {}
    last: dict[tuple[int, Any], Any] = {}
    for m in np.flatnonzero(h.m_f == W).tolist():
        t = int(h.m_txn[m])
        if ttype[t] == FAIL:
            continue
        last[(t, h.key(int(h.m_key[m])))] = h.value(int(h.m_val[m]))
    for (t, k), v in last.items():
        installs.setdefault(k, []).append((t, v))
        writer[(k, v)] = t
    wr, rw = ([], [], [], [], [], []), ([], [], [], [], [], [])

    def add(cols, a, b, k, v1, v2, p):
        kc = key_code[k] if key_code is not None else k
        c1 = NONE if v1 is None else (val_code[v1] if val_code is not None else v1)
        c2 = NONE if v2 is None else (val_code[v2] if val_code is not None else v2)
        for col, x in zip(cols, (a, b, kc, c1, c2, p)):
            col.append(x)

    for p, pr in enumerate(h.preds):
        t = pr.txn
        if pr.rows is None or ttype[t] != OK:
            continue  # the rows an unfinished or failed read returned are unknown
        for k, v in pr.rows.items():
            w = writer.get((k, _canon(v)))
            if w is not None and w != t and (val_code is None or _canon(v) in val_code):
                add(wr, w, t, k, _canon(v), _canon(v), p)
        for k, vs in installs.items():
            if not pr.covers(k) or k in pr.rows:
                continue  # (a key it got back: the versions after the one it saw have no known order)
            shown = [(u, h.show(v)) for u, v in vs]
            if not all(pr.matches(k, x) for _, x in shown):
                continue  # some version of k does not match either: which one it saw is not known
            # it saw nil, the only version of k that does not match; every installed one follows
            for u, v in vs:
                if u != t:
                    add(rw, t, u, k, None, v, p)
    return _edge_set(WR, wr), _edge_set(RW, rw)


def _edge_set(rel: int, cols) -> EdgeSet:
    a, b, k, v1, v2, p = (np.array(c, np.int64) for c in cols)
    return EdgeSet(rel, a, b, k, v1, v2, pred=p)


def describe(pr: PredicateRead) -> str:
    parts = [f"{f} = {json.dumps(x)}" for f, x in pr.where.items()]
    if pr.lo is not None or pr.hi is not None:
        parts.append(f"key in [{pr.lo!r}, {pr.hi!r}]")
    return " and ".join(parts) or "true"


__all__ = ["PredicateHistory", "PredicateRead", "analyse", "describe", "parse_ops", "read"]
