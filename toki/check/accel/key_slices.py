"""Inference over slices of keys of a large history, so that its temporaries fit in memory.

Everything list-append and rw-register infer is per key: a key's version order, the ww, wr and
rw edges it justifies, and every non-cycle anomaly (internal, G1a, G1b, lost-update, ...) is
about one key, or one transaction and one key. So a history can be inferred a slice of keys at
a time, and the edges and cases put together after. At 10^7 transactions the inference's
temporaries (sorts, joins and gathers over every micro-op and read) are several times the
History itself; in eight slices they are an eighth of that.

Small histories are inferred whole (the result is the same, cases in the same order as before).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from toki.check import accel
from toki.check.accel import children
from toki.check.accel.allocator import trim
from toki.check.accel.ranges import gather
from toki.check.graph import EdgeSet
from toki.check.reading.history import R, History

#: micro-ops per slice: above this a history is inferred in slices of keys
SLICE_MOPS = 4_000_000
#: from this many micro-ops, a history is inferred in at least two slices, one in a forked child
FORK_MOPS = 1_000_000
#: case fields that are micro-op positions (local to a slice, mapped back to the history's)
_MOP_FIELDS = ("mop", "read_mop")


def analyse(h: History, analyse_fn, *, slice_mops: int | None = None, fork: bool | None = None,
            meanwhile=None, **kw) -> dict:
    """``analyse_fn(h, **kw)`` on the whole history, or on slices of its keys when it is large,
    with the slices' edges and anomaly cases merged (in slice order, whoever computed them).

    The slices are independent, so where forking is safe a child and this process share them,
    each taking the next one left when it is done (``fork=False``: all here). The child reads the
    History through the pages it shares with this process and sends back only its slices' edges
    and cases.
    ``meanwhile()``, if given, runs here once, while the child works (or after the slices when
    there is none): other work over the History that is not per key."""
    M = len(h.m_txn)
    slice_mops = SLICE_MOPS if slice_mops is None else slice_mops  # read now: tests lower it
    parts = -(-M // slice_mops) if slice_mops > 0 else 1
    can_fork = fork is not False and children.available()
    if parts == 1 and can_fork and M >= FORK_MOPS:
        parts = 2
    if parts <= 1:
        res = analyse_fn(h, **kw)
        if meanwhile is not None:
            meanwhile()
        return res
    bucket = h.m_key % parts  # keys may be any integers; codes of interned keys are 0..n-1
    if not can_fork or parts >= 1 << 15:  # (the slices' numbers must fit in a pipe's 64 KB)
        results = _slices(h, bucket, range(parts), analyse_fn, kw)
        if meanwhile is not None:
            meanwhile()
    else:
        results = _shared(h, bucket, parts, analyse_fn, kw, meanwhile)
    del bucket
    # The slices' edge sets are kept apart, not concatenated per relationship: the cycle search
    # takes any number of them (and copies only edges that may lie on a cycle), and a merge was
    # 1.4 s of copying at 10^7 transactions, on one core
    edges: list[EdgeSet] = []
    anomalies: dict[str, list] = {}
    for _, res in sorted(results, key=lambda r: r[0]):
        edges += res["edges"]
        for typ, cases in res["anomalies"].items():
            anomalies.setdefault(typ, []).extend(cases)
    del results
    return {"edges": edges, "anomalies": anomalies}


def _shared(h: History, bucket: np.ndarray, parts: int, analyse_fn, kw: dict, meanwhile) -> list[tuple[int, dict]]:
    """The slices shared with a forked child: each process claims the next unclaimed slice from a
    pipe holding every slice's number (a read of two bytes is atomic), so that whoever is done
    first takes more, and this process's ``meanwhile()`` work is balanced too (with every other
    slice each, the process running ``meanwhile`` finished 5-6 s after the child at 10^7)."""
    for kernel in ("ranges", "joins"):  # compiled (or loaded) once, here, before the child is forked
        accel.load(kernel)
    r, w = os.pipe()
    kid = None
    try:
        os.write(w, b"".join(p.to_bytes(2, "little") for p in range(parts)))  # parts < 2^15: 64 KB pipe
        os.close(w)
        w = None
        kid = children.Forked(_claimed, h, bucket, r, analyse_fn, kw)
        if meanwhile is not None:
            meanwhile()
        results = _claimed(h, bucket, r, analyse_fn, kw)
        try:
            results += kid.result()
            h.helper_max_rss_kb = max(h.helper_max_rss_kb, kid.max_rss_kb or 0)
        except children.ChildLost:  # redo what it claimed
            done = {p for p, _ in results}
            results += _slices(h, bucket, [p for p in range(parts) if p not in done], analyse_fn, kw)
        kid = None
    finally:
        if kid is not None:
            kid.abandon()
        os.close(r)
        if w is not None:
            os.close(w)
    return results


def _claimed(h: History, bucket: np.ndarray, fd: int, analyse_fn, kw: dict) -> list[tuple[int, dict]]:
    out = []
    while len(b := os.read(fd, 2)) == 2:
        out += _slices(h, bucket, [int.from_bytes(b, "little")], analyse_fn, kw, trim_each=False)
    trim()
    return out


def _slices(h: History, bucket: np.ndarray, which, analyse_fn, kw: dict, trim_each: bool = True) -> list[tuple[int, dict]]:
    """``analyse_fn`` on each slice ``p`` in ``which``, its cases' micro-op positions the history's."""
    out = []
    for p in which:
        sel = np.flatnonzero(bucket == p)
        if len(sel) == 0:
            continue
        sub = _slice(h, sel)
        res = analyse_fn(sub, **kw)
        res = {"edges": res["edges"],
               "anomalies": {typ: _global_mops(typ, cases, sel) for typ, cases in res["anomalies"].items()}}
        out.append((p, res))
        del sub, sel
        if trim_each:
            trim()
    return out


def _slice(h: History, sel: np.ndarray) -> History:
    """The history restricted to micro-ops ``sel`` (its transactions all kept)."""
    m_f, m_val = h.m_f[sel], h.m_val[sel]
    r_off, r_elem = h.r_off, h.r_elem
    if h.workload == "list-append":
        reads = np.flatnonzero(m_f == R)
        rows = m_val[reads]
        lens = h.r_off[rows + 1] - h.r_off[rows]
        r_off = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lens, out=r_off[1:])
        r_elem = gather(h.r_elem, h.r_off[rows], lens)
        m_val = m_val.copy()
        m_val[reads] = np.arange(len(reads))
    return dataclasses.replace(h, m_txn=h.m_txn[sel], m_f=m_f, m_key=h.m_key[sel], m_val=m_val,
                               m_nil=h.m_nil[sel], r_off=r_off, r_elem=r_elem)


def _global_mops(typ: str, cases, sel: np.ndarray):
    if not isinstance(cases, list):
        return cases
    out = []
    for c in cases:
        if isinstance(c, dict):
            c = dict(c)
            for f in _MOP_FIELDS:
                if isinstance(c.get(f), int):
                    c[f] = int(sel[c[f]])
            if typ == "incompatible-order" and isinstance(c.get("values"), list):
                c["values"] = [int(sel[m]) for m in c["values"]]
        out.append(c)
    return out
