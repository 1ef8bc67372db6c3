"""Memory histories read into columns: JSON lines, a JSON array or EDN, with an optional header op
(docs/memory-histories.md). The format, the micro-op codes and :class:`MemoryHistory` are here;
what is checked on them is :mod:`toki.check.memory`.

Three readers build the same columns: the compiled scanner (:mod:`toki.check.accel.compiled.memory_scan`,
from ``accel.MIN_SIZE["memory_scan"]`` bytes on, in two processes from :data:`SPLIT_BYTES`), the
Python builder over op maps (a chunk of lines at a time), and, where either trips, a validator
that walks the ops one by one and names the first bad one.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from toki.check import accel
from toki.check.accel.ranges import ranges
from toki.check.codes import INFO, INVOKE, OK, TYPE_CODES, TYPE_NAMES
from toki.check.accel import children
from toki.check.reading.history import json_loads, looks_edn, no_gc, read_bytes, transactions
from toki.errors import HistoryError

ADD, RETRACT, CURRENT, HISTORY, DECIDE = 0, 1, 2, 3, 4
F_CODES = {"add": ADD, "retract": RETRACT, "current": CURRENT, "history": HISTORY, "decide": DECIDE}
F_NAMES = {v: k for k, v in F_CODES.items()}
#: each micro-op's shape, for messages
SHAPES = {"add": '["add", slot, claim]', "retract": '["retract", slot, claim]',
          "current": '["current", slot, [claims]]', "history": '["history", slot, [claims]]',
          "decide": '["decide", question, [claims considered], chosen]'}
HEADER = "header"


def header(multi_valued=(), **extra) -> dict:
    """A header op declaring multi-valued slots (exact names or globs such as ``"*/hobbies"``)."""
    return {"type": HEADER, "multi_valued": sorted(multi_valued), **extra}

# ---------------------------------------------------------------------------------- the history

@dataclass
class MemoryHistory:
    """Columns over the client transactions of a memory history (as :class:`toki.check.reading.history.History`).

    Micro-ops in transaction order: ``m_txn``, ``m_f`` (ADD ... DECIDE), ``m_slot`` (slot code, -1
    for a decision), ``m_val`` (adds and retracts: the (slot, claim) pair code; reads: the row of
    their list in ``r_off``/``r_elem``; decisions: the row in ``decisions``), ``m_nil`` (a read
    recorded as null). Pairs: ``pair_slot`` (code), ``pair_claim`` (the claim as written).
    """

    n_ops: int
    t_index: np.ndarray
    t_invoke: np.ndarray
    t_process: np.ndarray
    t_type: np.ndarray
    t_time: list
    processes: list
    m_txn: np.ndarray
    m_f: np.ndarray
    m_slot: np.ndarray
    m_val: np.ndarray
    m_nil: np.ndarray
    r_off: np.ndarray
    r_elem: np.ndarray
    slots: list
    pair_slot: np.ndarray
    pair_claim: list
    decisions: list
    t_pgroup: np.ndarray | None = None
    header: dict | None = None
    #: per slot code: whether the slot may hold several current claims
    multi: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    workload: str = "memory"
    #: which reader built it: "compiled" (toki.check.accel.compiled.memory_scan; ", two processes" when split),
    #: "compiled EDN", or "python" (op maps)
    parser: str = "python"
    helper_max_rss_kb: int = 0

    @property
    def n_txns(self) -> int:
        return len(self.t_index)

    @property
    def n_pairs(self) -> int:
        return len(self.pair_slot)

    def slot(self, code: int) -> Any:
        return self.slots[code]

    def claim(self, pair: int) -> Any:
        return self.pair_claim[pair]

    def mop_range(self, t: int) -> tuple[int, int]:
        if not hasattr(self, "_m_start"):
            self._m_start = np.searchsorted(self.m_txn, np.arange(self.n_txns + 1))
        return int(self._m_start[t]), int(self._m_start[t + 1])

    def read_list(self, row: int) -> list:
        return [self.pair_claim[int(p)] for p in self.r_elem[self.r_off[row]:self.r_off[row + 1]]]

    def mop(self, m: int) -> list:
        f = int(self.m_f[m])
        if f == DECIDE:
            q, considered, chosen = self.decisions[int(self.m_val[m])]
            return ["decide", q, None if self.m_nil[m] else considered, chosen]
        s = self.slots[int(self.m_slot[m])]
        if f in (ADD, RETRACT):
            return [F_NAMES[f], s, None if self.m_nil[m] else self.pair_claim[int(self.m_val[m])]]
        return [F_NAMES[f], s, None if self.m_nil[m] else self.read_list(int(self.m_val[m]))]

    def op(self, t: int) -> dict:
        """The completion op of transaction ``t`` (its invocation's, if it never completed)."""
        a, b = self.mop_range(t)
        d = {"index": int(self.t_index[t]), "type": TYPE_NAMES[int(self.t_type[t])],
             "process": self.processes[int(self.t_process[t])], "f": "txn",
             "value": [self.mop(m) for m in range(a, b)]}
        if self.t_time[t] is not None:
            d["time"] = self.t_time[t]
        return d


class Decisions:
    """The decide micro-ops by row, as codes into ``values``: the question ``q``, the claims
    considered (``elem[start:start + length]``) and the claim chosen (-1: null)."""

    def __init__(self, q, start, length, chosen, elem, values: list):
        self.q, self.start, self.length, self.chosen, self.elem, self.values = q, start, length, chosen, elem, values

    @classmethod
    def of(cls, rows: list) -> "Decisions":
        """From (question, [considered], chosen) tuples."""
        ids: dict = {}

        def code(v):
            return ids.setdefault(v, len(ids))

        q = np.array([code(r[0]) for r in rows], np.int64)
        length = np.array([len(r[1]) for r in rows], np.int64)
        elem = np.array([code(c) for r in rows for c in r[1]], np.int64)
        chosen = np.array([-1 if r[2] is None else code(r[2]) for r in rows], np.int64)
        return cls(q, np.cumsum(length) - length, length, chosen, elem, list(ids))

    def __len__(self) -> int:
        return len(self.q)

    def __getitem__(self, i: int) -> tuple:
        v = self.values
        s, n, c = int(self.start[i]), int(self.length[i]), int(self.chosen[i])
        return v[int(self.q[i])], [v[int(x)] for x in self.elem[s:s + n]], None if c < 0 else v[c]


# ---------------------------------------------------------------------------------- reading

def load(path: str | Path, fmt: str | None = None) -> list:
    """A memory history file (JSON lines, a JSON array, or EDN) as a list of op maps."""
    p = Path(path)
    return loads(read_bytes(p), fmt=fmt or ("edn" if p.suffix.lower() == ".edn" else None), name=str(p))


def loads(text: bytes | str, *, fmt: str | None = None, name: str = "history") -> list:
    if isinstance(text, str):
        text = text.encode()
    head = text[:1 << 16].lstrip()[:64]
    if fmt == "edn" or (fmt is None and looks_edn(head)):
        from toki.check.reading.history import loads as loads_any

        return loads_any(text, fmt="edn", name=name)

    with no_gc():
        if head[:1] == b"[":
            try:
                data = json_loads(text)
            except ValueError as e:
                raise HistoryError(f"{name} is not valid JSON: {e}",
                                   fix="give one JSON op per line, a JSON array of ops, or an .edn file") from None
            if not isinstance(data, list):
                raise HistoryError(f"{name}: a history must be a list of op maps", fix="wrap the ops in a JSON array")
            return data
        lines = text.splitlines()
        try:
            return [json_loads(line) for line in lines]
        except ValueError:  # a blank line, or a bad one: the reader that names it
            return _ops_of_lines(text, 0, name)[0]


def read(path: str | Path, *, fmt: str | None = None, multi_valued=()) -> MemoryHistory:
    """Read and parse a memory history file (JSON lines, a JSON array, or EDN)."""
    p = Path(path)
    text = read_bytes(p)
    fmt = fmt or ("edn" if p.suffix.lower() == ".edn" else None)
    head = text[:1 << 16].lstrip()[:64]
    if fmt == "edn" or (fmt is None and looks_edn(head)):
        return parse_edn(text, name=str(p), multi_valued=multi_valued)
    return parse_json(text, name=str(p), multi_valued=multi_valued)


#: JSON from this size on is read by two processes at once (a forked child takes the second half)
SPLIT_BYTES = 8 << 20


def parse(ops: list, *, multi_valued=()) -> MemoryHistory:
    """Columns from a list of op maps (a header op first, optionally); HistoryError names the
    first bad op (its index, or its position counting from 0 with the header) and what is wrong."""
    if not isinstance(ops, list):
        raise HistoryError(f"a history must be a list of op maps, got {type(ops).__name__}",
                           fix="one JSON op per line, or a JSON array of ops")
    head = ops[0] if ops and isinstance(ops[0], dict) and ops[0].get("type") == HEADER else None
    body = ops[1:] if head is not None else ops
    patterns = list(_header_slots(head)) + list(multi_valued or ())
    try:
        with no_gc():
            h = _assemble([_columns(body)], lambda pos: [body[i] for i in pos])
    except HistoryError:
        raise
    except _BAD as e:
        _validate_safely(body, 1 if head is not None else 0)
        raise HistoryError(f"malformed memory history ({type(e).__name__}: {e})",
                           fix="each op needs type, process and a value of micro-ops") from e
    h.header = head
    h.multi = multi_valued_mask(h.slots, patterns)
    return h


_BAD = (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError)


def parse_json(text: bytes, *, name: str = "history", multi_valued=(), split: bool | None = None,
               compiled: bool | None = None) -> MemoryHistory:
    """Columns from JSON text: one op per line, or an array of ops.

    From ``accel.MIN_SIZE["memory_scan"]`` bytes on (``compiled``), the compiled scanner reads it, and from
    :data:`SPLIT_BYTES` on (``split``) in two halves at once, the second in a forked child that
    sends back its columns and its tables of slots and claims. Anything the scanner does not read
    goes to the Python builder (op maps a chunk at a time), which reads it or names the bad op."""
    if isinstance(text, str):
        text = text.encode()
    if compiled is None:
        compiled = accel.compiled_twin("memory_scan", len(text)) is not None
    if compiled:
        split = len(text) >= SPLIT_BYTES if split is None else split
        with no_gc():
            got = _parse_compiled(text, split)
        if got is not None:
            h, head = got
            h.parser = "compiled, two processes" if split else "compiled"
            h.header = head
            h.multi = multi_valued_mask(h.slots, list(_header_slots(head)) + list(multi_valued or ()))
            return h
    if text[:1 << 16].lstrip()[:1] == b"[":
        return parse(loads(text, name=name), multi_valued=multi_valued)
    return parse_jsonl(text, name=name, multi_valued=multi_valued, split=split)


def parse_jsonl(text: bytes, *, name: str = "history", multi_valued=(), split: bool | None = None) -> MemoryHistory:
    """Columns from JSON lines by the Python builder, a chunk of lines at a time (no list of
    every op map is kept); from :data:`SPLIT_BYTES` on (or ``split=True``) a forked child reads
    the second half of the lines while this process reads the first."""

    first_nl = text.find(b"\n")
    first = text[:first_nl if first_nl >= 0 else len(text)].strip()
    head = None
    if first.startswith(b"{") and b'"header"' in first:
        try:
            op = json_loads(first)
        except ValueError:
            op = None
        if isinstance(op, dict) and op.get("type") == HEADER:
            head = op
    start = first_nl + 1 if head is not None and first_nl >= 0 else (len(text) if head is not None else 0)
    patterns = list(_header_slots(head)) + list(multi_valued or ())
    split = (len(text) >= SPLIT_BYTES if split is None else split) and children.available()
    try:
        with no_gc():
            mid = text.find(b"\n", start + (len(text) - start) // 2) + 1 if split else 0
            if 0 < mid < len(text):
                kid = children.Forked(_columns_of_lines, text, mid, len(text))
                try:
                    a = _columns_of_lines(text, start, mid)
                    try:
                        b = kid.result()
                    except children.ChildLost:
                        b = _columns_of_lines(text, mid, len(text))
                finally:
                    kid.abandon()
                parts = [a, b]
            else:
                parts = [_columns_of_lines(text, start, len(text))]
            h = _assemble(parts, lambda pos: _ops_at_lines(text, start, pos))
    except HistoryError:
        raise
    except _BAD as e:
        ops, lines = _ops_of_lines(text, start, name)
        _validate_safely(ops, 1 if head is not None else 0, lines)
        raise HistoryError(f"{name}: malformed memory history ({type(e).__name__}: {e})",
                           fix="each op needs type, process and a value of micro-ops") from e
    h.header = head
    h.multi = multi_valued_mask(h.slots, patterns)
    return h


def _ops_at_lines(text: bytes, start: int, positions: list[int]) -> list:
    """The op maps at some positions of JSON lines (blank lines do not count)."""

    lines = [line for line in text[start:].splitlines() if line.strip()]
    return [json_loads(lines[i]) for i in positions]


def _ops_of_lines(text: bytes, start: int, name: str) -> tuple[list, list]:
    """Every op of JSON lines with its line number (for naming a bad op); a line that is not
    JSON is an error naming it."""

    skipped = text[:start].count(b"\n")
    ops, lines = [], []
    for i, line in enumerate(text[start:].splitlines()):
        if not line.strip():
            continue
        try:
            ops.append(json_loads(line))
        except ValueError as e:
            raise HistoryError(f"{name}: line {skipped + i + 1} is not valid JSON ({e})",
                               fix="one JSON op per line, or a JSON array of ops") from None
        lines.append(skipped + i + 1)
    return ops, lines


def _header_slots(head: dict | None) -> list:
    if head is None:
        return []
    mv = head.get("multi_valued", head.get("multi-valued", []))
    if mv is None:
        return []
    if isinstance(mv, str):
        mv = [mv]
    if not isinstance(mv, list) or not all(type(s) in (str, int) for s in mv):
        raise HistoryError(f"the header's multi_valued is {mv!r}, not a list of slots",
                           fix='e.g. {"type": "header", "multi_valued": ["alice/hobbies", "*/tags"]}')
    return mv


def multi_valued_mask(slots: list, patterns: list) -> np.ndarray:
    """Per slot: named exactly, or matched by a glob (``*``, ``?``, ``[...]``) of ``patterns``."""
    out = np.zeros(len(slots), bool)
    if not patterns:
        return out
    exact = set(patterns)
    globs = [p for p in patterns if isinstance(p, str) and any(c in p for c in "*?[")]
    for i, s in enumerate(slots):
        if s in exact or (isinstance(s, str) and any(fnmatch.fnmatchcase(s, g) for g in globs)):
            out[i] = True
    return out


class _Interner:
    """Slots and (slot, claim) pairs as dense codes, in order of first appearance."""

    def __init__(self):
        self.slot_ix: dict = {}
        self.slots: list = []
        self.pair_ix: dict = {}
        self.pair_slot: list = []
        self.pair_claim: list = []

    def slot_codes(self, ss: list) -> list:
        ix = self.slot_ix
        for s in dict.fromkeys(ss):
            if s not in ix:
                ix[s] = len(self.slots)
                self.slots.append(s)
        return list(map(ix.__getitem__, ss))

    def pair_codes(self, keys: list) -> list:
        ix = self.pair_ix
        for k in dict.fromkeys(keys):
            if k not in ix:
                ix[k] = len(self.pair_slot)
                self.pair_slot.append(k[0]), self.pair_claim.append(k[1])
        return list(map(ix.__getitem__, keys))

    def absorb(self, slots: list, pair_slot: list, pair_claim: list) -> tuple[np.ndarray, np.ndarray]:
        """Another interner's tables taken in: (its slot codes, its pair codes) -> ours."""
        smap = np.array(self.slot_codes(slots) or [0], np.int64)
        keys = list(zip(smap[np.asarray(pair_slot, np.int64)].tolist() if len(pair_slot) else [], pair_claim))
        return smap, np.array(self.pair_codes(keys) or [0], np.int64)


#: ops per chunk of the column builder (bounded temporaries: no list of every op map is kept)
_CHUNK = 1 << 16
_IDS = {str, int}


class _Columns:
    """Columns of consecutive ops, built a chunk of op maps at a time with C-level passes (map,
    zip, chain, dicts over the distinct keys only), never a Python loop per micro-op. Invocations'
    micro-ops are skipped (only an invocation that never completes needs them: :meth:`values_of`).
    Anything unexpected raises one of ``_BAD``; the caller then names the bad op."""

    def __init__(self, interner: _Interner | None = None):
        self.it = interner or _Interner()
        self.n = 0
        self.type: list = []
        self.process: list = []
        self.index: list = []
        self.time: list = []
        self.nm: list = []
        self.mstart: list = []
        self.nonclient: list = []
        self.nonevalue: list = []
        self.m: dict[str, list] = {"f": [], "slot": [], "val": [], "nil": [], "elem": [], "rlen": []}
        self.n_mops = 0
        self.n_rows = 0
        self.decisions: list = []

    def feed(self, ops: list) -> None:
        n = len(ops)
        tcode = np.array(list(map(TYPE_CODES.__getitem__, map(itemgetter("type"), ops))), np.int8)
        procs = list(map(itemgetter("process"), ops))
        idx = [o.get("index") for o in ops]
        self.time += [o.get("time") for o in ops]
        ptypes = set(map(type, procs))
        if ptypes == {int}:
            client = np.ones(n, bool)
            pa = np.array(procs, np.int64)
        else:
            client = np.fromiter((type(p) is int for p in procs), bool, count=n)
            pa = np.zeros(n, np.int64)
            pa[client] = np.array([p for p, c in zip(procs, client.tolist()) if c], np.int64)
            self.nonclient.append(np.flatnonzero(~client) + self.n)
        self.type.append(tcode)
        self.process.append(pa)
        self.index += idx
        want = np.flatnonzero(client & (tcode != INVOKE))
        nm, start = self._values([ops[i] for i in want.tolist()], tcode[want], want)
        nmo = np.zeros(n, np.int64)
        nmo[want] = nm
        st = np.zeros(n, np.int64)
        st[want] = start
        self.nm.append(nmo)
        self.mstart.append(st)
        self.n += n

    def values_of(self, ops: list, types: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The micro-ops of some more ops (invocations that never completed), appended to the
        arena: (count, start) per op."""
        return self._values(ops, types, None)

    def _values(self, tops: list, ttypes: np.ndarray, pos) -> tuple[np.ndarray, np.ndarray]:
        it, m = self.it, self.m
        if {o.get("f", "txn") for o in tops} - {"txn", None}:
            raise ValueError("f")
        values = list(map(itemgetter("value"), tops))
        vt = set(map(type, values))
        if not vt <= {list}:
            if not vt <= {list, type(None)}:
                raise TypeError("value")
            nonev = [i for i, v in enumerate(values) if v is None]
            if pos is not None:
                self.nonevalue.append(pos[nonev] + self.n)
            values = [() if v is None else v for v in values]
        lens = np.array(list(map(len, values)), np.int64)
        start = self.n_mops + np.cumsum(lens) - lens
        flat = list(chain.from_iterable(values))
        M = len(flat)
        self.n_mops += M
        if not M:
            return lens, start
        if set(map(type, flat)) != {list}:
            raise TypeError("micro-op")
        f = np.array(list(map(F_CODES.__getitem__, map(itemgetter(0), flat))), np.int8)
        if (np.array(list(map(len, flat)), np.int64) != np.where(f == DECIDE, 4, 3)).any():
            raise ValueError("micro-op length")
        mtype = np.repeat(ttypes, lens)
        dec = f == DECIDE
        val = np.zeros(M, np.int64)
        slot = np.full(M, -1, np.int64)
        nil = np.zeros(M, bool)
        if dec.any():
            di = np.flatnonzero(dec)
            ds = [flat[i] for i in di.tolist()]
            dt = mtype[di]
            for (_, q, considered, chosen), ty in zip(ds, dt.tolist()):
                if considered is None and ty != OK:  # an invocation's: not known yet
                    continue
                if type(q) not in _IDS or type(considered) is not list or not set(map(type, considered)) <= _IDS \
                        or type(chosen) not in (str, int, type(None)):
                    raise TypeError("decision")
            if any(type(d[1]) not in _IDS for d in ds):
                raise TypeError("decision")
            val[di] = len(self.decisions) + np.arange(len(di))
            nil[di] = [d[2] is None for d in ds]
            self.decisions += [(d[1], d[2] or [], d[3]) for d in ds]
            sl = np.flatnonzero(~dec).tolist()
            flat = [flat[i] for i in sl]
        else:
            sl = None
        if flat:
            ss = list(map(itemgetter(1), flat))
            xs = list(map(itemgetter(2), flat))
            if not set(map(type, ss)) <= _IDS:
                raise TypeError("slot")
            sc = np.array(it.slot_codes(ss), np.int64)
            fs = f if sl is None else f[sl]
            wr = fs <= RETRACT
            wi = np.flatnonzero(wr)
            xw = [xs[i] for i in wi.tolist()]
            nilw = np.fromiter((x is None for x in xw), bool, count=len(xw))
            if nilw.any():  # a supersede's retraction, not known when invoked: only outside ok ops
                ms = mtype if sl is None else mtype[sl]
                if ((fs[wi] != RETRACT) | (ms[wi] == OK))[nilw].any():
                    raise ValueError("null claim")
                xw = [x for x, z in zip(xw, nilw.tolist()) if not z]
            if not set(map(type, xw)) <= _IDS:
                raise TypeError("claim")
            wcodes = np.full(len(wi), -1, np.int64)
            wcodes[~nilw] = it.pair_codes(list(zip(sc[wi][~nilw].tolist(), xw)))
            ri = np.flatnonzero(~wr)
            xr = [xs[i] for i in ri.tolist()]
            rt = set(map(type, xr))
            if not rt <= {list, type(None)}:
                raise TypeError("read")
            niln = np.zeros(len(ri), bool)
            if type(None) in rt:
                niln = np.fromiter((x is None for x in xr), bool, count=len(xr))
                xr = [() if x is None else x for x in xr]
            rl = np.array(list(map(len, xr)), np.int64)
            el = list(chain.from_iterable(xr))
            if not set(map(type, el)) <= _IDS:
                raise TypeError("claim read")
            ec = it.pair_codes(list(zip(np.repeat(sc[ri], rl).tolist(), el)))
            full = np.arange(M) if sl is None else np.asarray(sl, np.int64)
            slot[full] = sc
            val[full[wi]] = wcodes
            nil[full[wi]] = nilw
            val[full[ri]] = self.n_rows + np.arange(len(ri))
            nil[full[ri]] = niln
            m["elem"].append(np.array(ec, np.int64))
            m["rlen"].append(rl)
            self.n_rows += len(ri)
        m["f"].append(f), m["slot"].append(slot), m["val"].append(val), m["nil"].append(nil)
        return lens, start

    def finish(self) -> dict:
        """The columns as arrays (each list of chunks concatenated)."""
        def cat(xs, dtype):
            return np.concatenate(xs) if xs else np.zeros(0, dtype)

        n = self.n
        idx = self.index
        with_index = n - idx.count(None)
        if with_index and (with_index != n or set(map(type, idx)) != {int}):
            raise ValueError("index")
        rlen = cat(self.m["rlen"], np.int64)
        r_off = np.zeros(len(rlen) + 1, np.int64)
        np.cumsum(rlen, out=r_off[1:])
        return {"n": n, "type": cat(self.type, np.int8), "process": cat(self.process, np.int64),
                "index": np.array(idx, np.int64) if with_index else None, "time": self.time,
                "nm": cat(self.nm, np.int64), "mstart": cat(self.mstart, np.int64),
                "nonclient": cat(self.nonclient, np.int64), "nonevalue": cat(self.nonevalue, np.int64),
                "m_f": cat(self.m["f"], np.int8), "m_slot": cat(self.m["slot"], np.int64),
                "m_val": cat(self.m["val"], np.int64), "m_nil": cat(self.m["nil"], bool), "r_off": r_off,
                "r_elem": cat(self.m["elem"], np.int64), "decisions": self.decisions,
                "slots": self.it.slots, "pair_slot": self.it.pair_slot, "pair_claim": self.it.pair_claim}


def _columns(ops: list) -> dict:
    c = _Columns()
    for a in range(0, len(ops), _CHUNK):
        c.feed(ops[a:a + _CHUNK])
    return c.finish()


def _columns_of_lines(text: bytes, a: int, b: int) -> dict:

    lines = text[a:b].splitlines()
    c = _Columns()
    for i in range(0, len(lines), _CHUNK):
        chunk = lines[i:i + _CHUNK]
        try:
            ops = list(map(json_loads, chunk))
        except ValueError:
            ops = list(map(json_loads, (line for line in chunk if line.strip())))
        c.feed(ops)
    return c.finish()


def _scan_compiled(text: bytes, a: int, e: int, buf: np.ndarray, keep_invokes: bool = False,
                   edn: bool = False) -> dict | None:
    """The compiled scanner's columns for bytes [a, e) of JSON text (lines or an array), still in
    its own tokens (each distinct raw string or integer once, decoded here), or None where the
    scanner stops (anything outside what it reads)."""
    k = accel.load("memory_scan")
    if k is None:
        return None
    status, _at, c = k.run(buf, a, e, keep_invokes, edn)
    if status != k.OK_:
        return None
    kind = c["tok_kind"]
    vals = np.empty(len(kind), object)
    k0 = kind == 0
    try:
        strs = k.token_blob(buf, c["tok_start"], c["tok_len"], kind).tobytes().decode().split("\x00")
        vals[k0] = strs[:-1]
        k1 = kind == 1
        vals[k1] = c["tok_int"][k1].tolist()
        for t in np.flatnonzero(kind == 2).tolist():  # strings with escapes: decoded one by one
            s0 = int(c["tok_start"][t])
            vals[t] = _json_string(text[s0:s0 + int(c["tok_len"][t])])
    except (UnicodeDecodeError, ValueError):
        return None
    c["vals"] = vals.tolist()
    for x in ("tok_start", "tok_len", "tok_int", "has_value"):
        del c[x]
    return {x: _narrow(v) for x, v in c.items()}


def _narrow(a):
    """An int64 column as int32 when its values fit (half the bytes a forked child sends back)."""
    if isinstance(a, np.ndarray) and a.dtype == np.int64 and len(a) and \
            -(1 << 31) <= int(a.min()) and int(a.max()) < 1 << 31:
        return a.astype(np.int32)
    return a


def _json_string(raw: bytes) -> str:
    import json

    return json.loads(b'"' + raw + b'"')


def parse_edn(text: bytes, *, name: str = "history", multi_valued=(), split: bool | None = None,
              compiled: bool | None = None) -> MemoryHistory:
    """Columns from EDN as Jepsen writes it (op maps with keywords, one per line or in a vector):
    by the compiled scanner from ``accel.MIN_SIZE["memory_scan"]`` bytes on, else (or where it stops: tags, sets,
    comments, ...) by the EDN reader, op maps then :func:`parse`."""
    if isinstance(text, str):
        text = text.encode()
    if compiled is None:
        compiled = accel.compiled_twin("memory_scan", len(text)) is not None
    if compiled:
        split = len(text) >= SPLIT_BYTES if split is None else split
        with no_gc():
            got = _parse_compiled(text, split, edn=True)
        if got is not None:
            h, head = got
            h.parser = "compiled EDN, two processes" if split else "compiled EDN"
            h.header = head
            h.multi = multi_valued_mask(h.slots, list(_header_slots(head)) + list(multi_valued or ()))
            return h
    return parse(loads(text, fmt="edn", name=name), multi_valued=multi_valued)


def _parse_compiled(text: bytes, split: bool, edn: bool = False) -> tuple[MemoryHistory, dict | None] | None:
    """A MemoryHistory read by the compiled scanner (in two halves at once when ``split``; EDN as
    Jepsen writes it when ``edn``), or None where it stops: the caller then reads the text in
    Python."""
    from toki.check.reading.history import Times

    if accel.load("memory_scan") is None:
        return None
    buf = np.frombuffer(text + bytes(16), np.uint8)
    mid = text.find(b"\n", len(text) // 2) + 1 if split and children.available() else 0
    if mid <= 0 or mid >= len(text):
        parts = [_scan_compiled(text, 0, len(text), buf, edn=edn)]
    else:
        kid = children.Forked(_scan_compiled, text, mid, len(text), buf, False, edn)
        try:
            a = _scan_compiled(text, 0, mid, buf, edn=edn)
            try:
                b = kid.result()
            except children.ChildLost:
                b = _scan_compiled(text, mid, len(text), buf, edn=edn)
        finally:
            kid.abandon()
        parts = [a, b]
    if any(p is None for p in parts):
        return None
    # ops of all parts; a header is the very first op only
    typ = np.concatenate([p["typ"] for p in parts])
    span = np.concatenate([np.stack([p["op_start"].astype(np.int64), p["op_end"].astype(np.int64)])
                           for p in parts], axis=1)
    head = None
    if len(typ) and typ[0] == 9:
        if text[:span[0, 0]].strip(b" \t\r\n[") != b"":
            return None
        head = _op_at(text, span[0, 0], span[1, 0], edn)
    body = slice(1, None) if head is not None else slice(None)
    if (typ[body] == 9).any():
        return None
    typ, span = typ[body], span[:, body]
    n = len(typ)
    cols = {x: np.concatenate([p[x] for p in parts])[body]
            for x in ("process", "client", "index", "has_index", "time", "has_time", "nm", "mstart")}
    for x in ("process", "index", "time", "nm", "mstart"):
        cols[x] = cols[x].astype(np.int64, copy=False)
    hi = cols["has_index"]
    if hi.any() and not hi.all():
        return None
    index = cols["index"] if n and hi.all() else np.arange(n, dtype=np.int64)
    cpos = np.flatnonzero(cols["client"])
    procs = cols["process"]
    tx = transactions(index, typ, cpos, procs[cpos])
    tpos, ttype = tx.tpos, tx.ttype
    # the micro-op arena: each part's, in order, then those of invocations that never completed
    mstart, nm = cols["mstart"].copy(), cols["nm"].copy()
    off = np.cumsum([0] + [len(p["m_f"]) for p in parts])
    bounds = np.cumsum([0] + [len(p["typ"]) for p in parts])[1:] - (1 if head is not None else 0)
    part_of = np.searchsorted(bounds, np.arange(n), "right")
    mstart += off[part_of]
    dangling = tpos[typ[tpos] == 3]
    if len(dangling):
        extra_text = b"\n".join(text[s:e] for s, e in span[:, dangling].T.tolist())
        extra = _scan_compiled(extra_text, 0, len(extra_text), np.frombuffer(extra_text + bytes(16), np.uint8),
                               keep_invokes=True, edn=edn)
        if extra is None or len(extra["typ"]) != len(dangling):
            return None
        parts.append(extra)
        nm[dangling] = extra["nm"]
        mstart[dangling] = off[-1] + extra["mstart"].astype(np.int64)
    c = _merge_tokens(parts)
    if c is None:
        return None
    lens = nm[tpos]
    msel = ranges(mstart[tpos], lens)
    h = MemoryHistory(
        n_ops=n, t_index=tx.t_index, t_invoke=tx.t_invoke, t_process=tx.pcodes, t_type=ttype,
        t_time=Times(cols["time"][tpos], cols["has_time"][tpos]), processes=tx.processes,
        m_txn=np.repeat(np.arange(len(tpos), dtype=np.int64), lens), m_f=c["m_f"][msel], m_slot=c["m_slot"][msel],
        m_val=c["m_val"][msel], m_nil=c["m_nil"][msel], r_off=c["r_off"], r_elem=c["r_elem"], slots=c["slots"],
        pair_slot=c["pair_slot"], pair_claim=c["pair_claim"], decisions=c["decisions"], t_pgroup=tx.pgroup)
    return h, head


def _op_at(text: bytes, s: int, e: int, edn: bool) -> dict:
    """The op map written at bytes [s, e) (a header)."""
    from toki.check.reading.history import loads as loads_any

    if edn:
        got = loads_any(text[s:e], fmt="edn")
        return got[0] if got else {}
    return json_loads(text[s:e])


def _merge_tokens(parts: list[dict]) -> dict | None:
    """The micro-op columns of the scanner's parts in one code space: tokens by their decoded
    values, (slot, claim) pairs and slots numbered by first appearance, read rows and decisions
    renumbered past the earlier parts'."""
    vals = list(parts[0]["vals"])
    ids = dict(zip(vals, range(len(vals))))
    if len(ids) < len(vals):  # one value written two ways (an escape, -0): the first stands for both
        ids = {}
        for v in vals:
            ids.setdefault(v, len(ids))
        tmaps = [np.array([ids[v] for v in vals] or [0], np.int64)]
        vals = list(ids)
    else:
        tmaps = [np.arange(max(len(vals), 1), dtype=np.int64)]
    for p in parts[1:]:  # a value is the same token in every part (and 1 is not "1": types differ)
        pv = p["vals"]
        new = [v for v in dict.fromkeys(pv) if v not in ids]
        ids.update(zip(new, range(len(vals), len(vals) + len(new))))
        vals += new
        tmaps.append(np.array(list(map(ids.__getitem__, pv)) or [0], np.int64))
    G_ = max(len(vals), 1)
    keys = np.concatenate([tm[p["pslot"]] * G_ + tm[p["pclaim"]] for p, tm in zip(parts, tmaps)])
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int64)
    rank[by_first] = np.arange(len(uniq))
    pair_of = rank[inv]                       # each part's pairs, concatenated -> global pair
    gpairs = uniq[by_first]
    gslot_tok, gclaim_tok = gpairs // G_, gpairs % G_
    slot_toks = np.concatenate([gslot_tok] + [tm[p["m_slot"][p["m_slot"] >= 0]] for p, tm in zip(parts, tmaps)])
    used, sfirst = np.unique(slot_toks, return_index=True)
    used = used[np.argsort(sfirst, kind="stable")]
    slot_of = np.full(G_, -1, np.int64)
    slot_of[used] = np.arange(len(used))
    slots = [vals[t] for t in used.tolist()]
    if not set(map(type, slots)) <= _IDS:
        return None
    m_f, m_slot, m_val, m_nil, rlen, elem = [], [], [], [], [], []
    dq, dstart, dlen, dch, delem = [], [], [], [], []
    poff = rows = ndec = nde = 0
    for p, tm in zip(parts, tmaps):
        pm = pair_of[poff:poff + len(p["pslot"])]
        poff += len(p["pslot"])
        f, v = p["m_f"], p["m_val"].astype(np.int64)
        w = (f <= RETRACT) & (v >= 0)
        v[w] = pm[v[w]]
        v[(f == CURRENT) | (f == HISTORY)] += rows
        v[f == DECIDE] += ndec
        rows += len(p["rlen"])
        ms = p["m_slot"].astype(np.int64)
        m_f.append(f), m_val.append(v), m_nil.append(p["m_nil"])
        m_slot.append(np.where(ms >= 0, slot_of[tm[np.maximum(ms, 0)]], -1))
        rlen.append(p["rlen"]), elem.append(pm[p["elem"]])
        dq.append(tm[p["d_q"]]), dstart.append(p["d_start"].astype(np.int64) + nde), dlen.append(p["d_len"])
        dch.append(np.where(p["d_chosen"] >= 0, tm[np.maximum(p["d_chosen"], 0)], -1)), delem.append(tm[p["d_elem"]])
        ndec += len(p["d_q"])
        nde += len(p["d_elem"])
    rl = np.concatenate(rlen).astype(np.int64)
    r_off = np.zeros(len(rl) + 1, np.int64)
    np.cumsum(rl, out=r_off[1:])
    decisions = Decisions(np.concatenate(dq), np.concatenate(dstart), np.concatenate(dlen).astype(np.int64),
                          np.concatenate(dch), np.concatenate(delem), vals)
    return {"m_f": np.concatenate(m_f), "m_slot": np.concatenate(m_slot), "m_val": np.concatenate(m_val),
            "m_nil": np.concatenate(m_nil), "r_off": r_off, "r_elem": np.concatenate(elem), "decisions": decisions,
            "slots": slots, "pair_slot": slot_of[gslot_tok], "pair_claim": [vals[t] for t in gclaim_tok.tolist()]}


def _merge(parts: list[dict]) -> tuple[dict, _Interner]:
    """The columns of consecutive pieces of one history as one: the later pieces' slot, claim,
    read-row, decision and micro-op positions renumbered into the first's; and the interner of
    the whole (for the micro-ops of invocations that never completed)."""
    a = parts[0]
    it = _Interner()
    it.slot_codes(a["slots"])
    it.pair_codes(list(zip(a["pair_slot"], a["pair_claim"])))
    if len(parts) == 1:
        return a, it
    cols = {k: [a[k]] for k in ("type", "process", "nm", "m_f", "m_slot", "m_nil", "r_elem", "mstart", "m_val")}
    times = list(a["time"])
    r_off, index = [a["r_off"]], [a["index"]]
    nonclient, nonevalue, decisions = [a["nonclient"]], [a["nonevalue"]], list(a["decisions"])
    n_ops, n_rows, n_elem, n_mops = a["n"], len(a["r_off"]) - 1, int(a["r_off"][-1]), len(a["m_f"])
    for b in parts[1:]:
        smap, pmap = it.absorb(b["slots"], b["pair_slot"], b["pair_claim"])
        for k in ("type", "process", "nm", "m_f", "m_nil"):
            cols[k].append(b[k])
        times += b["time"]
        cols["mstart"].append(b["mstart"] + n_mops)
        cols["m_slot"].append(np.where(b["m_slot"] >= 0, smap[np.maximum(b["m_slot"], 0)], -1))
        cols["r_elem"].append(pmap[b["r_elem"]])
        f, v = b["m_f"], b["m_val"].copy()
        pair_mop = (f <= RETRACT) & (v >= 0)
        v[pair_mop] = pmap[v[pair_mop]]
        v[f == DECIDE] += len(decisions)
        v[(f == CURRENT) | (f == HISTORY)] += n_rows
        cols["m_val"].append(v)
        r_off.append(b["r_off"][1:] + n_elem)
        index.append(b["index"])
        nonclient.append(b["nonclient"] + n_ops)
        nonevalue.append(b["nonevalue"] + n_ops)
        decisions += b["decisions"]
        n_ops += b["n"]
        n_rows += len(b["r_off"]) - 1
        n_elem += int(b["r_off"][-1])
        n_mops += len(b["m_f"])
    if any((x is None) != (index[0] is None) for x in index):
        raise ValueError("index")
    out = {k: np.concatenate(v) for k, v in cols.items()}
    out.update(n=n_ops, time=times, r_off=np.concatenate(r_off),
               index=None if index[0] is None else np.concatenate(index), nonclient=np.concatenate(nonclient),
               nonevalue=np.concatenate(nonevalue), decisions=decisions)
    return out, it


def _assemble(parts: list[dict], ops_at) -> MemoryHistory:
    """Transactions from the ops' columns: completions paired with invocations (Elle's way,
    :func:`toki.check.reading.history.transactions`), and each transaction's micro-ops. ``ops_at(positions)``
    gives the op maps at some positions (the invocations that never completed)."""
    c, it = _merge(parts)
    n = c["n"]
    index = c["index"] if c["index"] is not None else np.arange(n, dtype=np.int64)
    client = np.ones(n, bool)
    client[c["nonclient"]] = False
    cpos = np.flatnonzero(client)
    procs = c["process"]
    tx = transactions(index, c["type"], cpos, procs[cpos])
    tpos, ttype = tx.tpos, tx.ttype
    if len(c["nonevalue"]) and np.isin(c["nonevalue"], tpos[ttype == OK]).any():
        raise ValueError("an ok op without a value")
    nm, mstart = c["nm"], c["mstart"]
    more = None
    dangling = tpos[c["type"][tpos] == INVOKE]
    if len(dangling):  # invocations that never completed: their micro-ops are read now
        more = _Columns(it)
        more.n_rows = len(c["r_off"]) - 1
        more.n_mops = len(c["m_f"])
        more.decisions = c["decisions"]
        k, s = more.values_of(ops_at(dangling.tolist()), np.full(len(dangling), INFO, np.int8))
        nm, mstart = nm.copy(), mstart.copy()
        nm[dangling], mstart[dangling] = k, s
    lens = nm[tpos]
    msel = ranges(mstart[tpos], lens)
    m_f, m_slot, m_val, m_nil, r_off, r_elem = c["m_f"], c["m_slot"], c["m_val"], c["m_nil"], c["r_off"], c["r_elem"]
    if more is not None and more.m["f"]:
        m_f = np.concatenate([m_f, *more.m["f"]])
        m_slot = np.concatenate([m_slot, *more.m["slot"]])
        m_val = np.concatenate([m_val, *more.m["val"]])
        m_nil = np.concatenate([m_nil, *more.m["nil"]])
        if more.m["rlen"]:
            rl = np.concatenate(more.m["rlen"])
            r_off = np.concatenate([r_off, r_off[-1] + np.cumsum(rl)])
            r_elem = np.concatenate([r_elem, *more.m["elem"]])
    times = c["time"]
    return MemoryHistory(
        n_ops=n, t_index=tx.t_index, t_invoke=tx.t_invoke, t_process=tx.pcodes, t_type=ttype,
        t_time=[times[i] for i in tpos.tolist()], processes=tx.processes,
        m_txn=np.repeat(np.arange(len(tpos), dtype=np.int64), lens), m_f=m_f[msel], m_slot=m_slot[msel],
        m_val=m_val[msel], m_nil=m_nil[msel], r_off=r_off, r_elem=r_elem, slots=it.slots,
        pair_slot=np.array(it.pair_slot, np.int64), pair_claim=it.pair_claim, decisions=Decisions.of(c["decisions"]),
        t_pgroup=tx.pgroup)


def _fail_at(ops, i, shift, what, fix, lines=None):
    op = ops[i]
    at = f"line {lines[i]}" if lines is not None else f"position {i + shift}"
    where = f"op {op['index']} ({at})" if isinstance(op, dict) and "index" in op else f"op at {at}"
    raise HistoryError(f"{where}: {what}", fix=fix)


def _is_id(x) -> bool:
    return type(x) in (str, int)


def _validate_safely(ops: list, shift: int, lines: list | None = None) -> None:
    """:func:`_validate_slow`, whose own surprise (a shape it did not foresee) is not a traceback:
    the caller then reports the fast path's error."""
    try:
        _validate_slow(ops, shift, lines)
    except HistoryError:
        raise
    except Exception:  # noqa: BLE001 - the caller's message stands
        pass


def _validate_slow(ops: list, shift: int, lines: list | None = None) -> None:
    """Walk the ops one by one and raise for the first bad one (the fast path tripped); ``lines``:
    each op's line number, for JSON lines."""

    def _fail(ops, i, shift, what, fix):
        _fail_at(ops, i, shift, what, fix, lines)

    has_index = None
    ids = "slots and claims are strings or integers"
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            _fail(ops, i, shift, f"is a {type(op).__name__}, not an op map", "every op is a map with type, process, value")
        if op.get("type") == HEADER:
            _fail(ops, i, shift, "is a header, which may only be the first op", "move the header to the first line")
        for k in ("type", "process"):
            if k not in op:
                _fail(ops, i, shift, f"has no {k!r}", "every op needs type, process and value")
        if not isinstance(op["type"], str) or op["type"] not in TYPE_CODES:
            _fail(ops, i, shift, f"has type {op['type']!r}", "type is one of invoke, ok, fail, info")
        hi = "index" in op
        if has_index is None:
            has_index = hi
        elif hi != has_index:
            _fail(ops, i, shift, "has an index while other ops do not (or the reverse)", "give every op an index, or none")
        if hi and type(op["index"]) is not int:
            _fail(ops, i, shift, f"has a non-integer index {op['index']!r}", "indices are integers")
        if type(op["process"]) is not int:
            continue  # a nemesis or other non-client op: ignored, as Elle does
        if op.get("f", "txn") not in ("txn", None):
            _fail(ops, i, shift, f"has f {op['f']!r}", "memory ops have f = txn")
        if "value" not in op:
            _fail(ops, i, shift, "has no 'value'", "value is a list of micro-ops")
        v = op["value"]
        if v is None and op["type"] != "ok":
            continue
        if not isinstance(v, list):
            _fail(ops, i, shift, f"value is {v!r}, not a list of micro-ops", "value is a list of micro-ops")
        for j, mop in enumerate(v):
            if not isinstance(mop, list) or not mop:
                _fail(ops, i, shift, f"micro-op {j} is {mop!r}, not a list", "micro-ops are lists, e.g. " + SHAPES["add"])
            f = mop[0]
            if not isinstance(f, str) or f not in F_CODES:
                _fail(ops, i, shift, f"micro-op {j} has f {f!r}",
                      "memory micro-ops are add, retract, current, history, decide (is --workload right?)")
            want = 4 if f == "decide" else 3
            if len(mop) != want:
                _fail(ops, i, shift, f"micro-op {j} ({f}) has {len(mop)} elements", f"write it as {SHAPES[f]}")
            if f == "decide":
                _, q, considered, chosen = mop
                if not _is_id(q):
                    _fail(ops, i, shift, f"micro-op {j} decides the question {q!r}", "a question is a string or integer")
                if considered is None and op["type"] != "ok":
                    continue
                if not isinstance(considered, list) or not all(_is_id(c) for c in considered):
                    _fail(ops, i, shift, f"micro-op {j} considered {considered!r}, not a list of claims",
                          f"write it as {SHAPES['decide']}; {ids}")
                if chosen is not None and not _is_id(chosen):
                    _fail(ops, i, shift, f"micro-op {j} chose {chosen!r}", "the chosen claim is a claim or null")
                continue
            _, s, x = mop
            if not _is_id(s):
                _fail(ops, i, shift, f"micro-op {j} ({f}) has the slot {s!r}", ids)
            if f in ("add", "retract"):
                if f == "retract" and x is None:
                    if op["type"] == "ok":
                        _fail(ops, i, shift, f"micro-op {j} retracts null in an ok op",
                              "an ok op names the claim it retracted (null is for invocations: claims not yet known)")
                    continue
                if not _is_id(x):
                    _fail(ops, i, shift, f"micro-op {j} ({f}) has the claim {x!r}", ids)
            elif x is not None:
                if not isinstance(x, list):
                    _fail(ops, i, shift, f"micro-op {j} ({f}) read {x!r}, not a list of claims",
                          f"write it as {SHAPES[f]} (null when not known)")
                bad = [c for c in x if not _is_id(c)]
                if bad:
                    _fail(ops, i, shift, f"micro-op {j} ({f}) read the claim {bad[0]!r}", ids)


