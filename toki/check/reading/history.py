"""Jepsen histories (JSON or EDN) read into columns (docs/design.md#histories-and-toki-check-output).

A history is a list of op maps: ``type`` invoke/ok/fail/info, ``process``, ``f`` "txn",
``value`` a list of micro-ops ``[f, k, v]`` with f in r, w, append, and optional ``index`` and
``time``. As in Elle, only client ops count (integer processes; nemesis ops are dropped), each
completion is paired with its process's preceding invocation, and a history of completions
alone is accepted (such an op has no known invocation: it gets no incoming real-time edge).
An invocation that never completes is treated as an ``info`` op carrying the invocation's value
(its writes may have happened; its reads are unknown), which is what Jepsen itself records.

The fast path builds numpy columns with list comprehensions; if it trips over anything, a slow
validator walks the ops one by one and names the first bad op (its index) and what is wrong.
"""

from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from toki.check import accel
from toki.check.accel.ranges import gather, ranges
from toki.check.codes import APPEND, F_CODES, F_NAMES, FAIL, INFO, INVOKE, OK, R, TYPE_CODES, TYPE_NAMES, W
from toki.errors import HistoryError

WORKLOADS = ("list-append", "rw-register")
_ALLOWED = {"list-append": (R, APPEND), "rw-register": (R, W)}


@dataclass
class History:
    """Columns over the client transactions of one history.

    Transactions (one per completion, history order): ``t_index`` (Elle's op index of the
    completion), ``t_invoke`` (index of the invocation, -1 if unknown), ``t_process`` (code into
    ``processes``), ``t_type`` (OK/INFO/FAIL), ``t_time``.
    Micro-ops, grouped by transaction in order: ``m_txn``, ``m_f``, ``m_key`` (code into
    ``keys``, or the key itself when ``keys`` is None), ``m_val`` (value code for writes and
    rw-register reads; for list-append reads the row of the read list), ``m_nil`` (read value
    unknown or nil). List-append read lists: CSR ``r_off``/``r_elem`` of value codes.
    """

    workload: str
    n_ops: int
    t_index: np.ndarray
    t_invoke: np.ndarray
    t_process: np.ndarray
    t_type: np.ndarray
    t_time: list
    processes: list
    m_txn: np.ndarray
    m_f: np.ndarray
    m_key: np.ndarray
    m_val: np.ndarray
    m_nil: np.ndarray
    keys: list | None
    values: list | None
    r_off: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    r_elem: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: which parser built it: "scan" (toki.check.reading.json_scan) or "general" (op maps)
    parser: str = "general"
    #: peak resident set (KB) of the largest forked scanner that helped read it (0: none)
    helper_max_rss_kb: int = 0
    #: overlap group of each transaction when some process had several outstanding invocations
    #: (process order orders groups, not the transactions inside one); None otherwise
    t_pgroup: np.ndarray | None = None

    @property
    def n_txns(self) -> int:
        return len(self.t_index)

    def key(self, code: int) -> Any:
        return code if self.keys is None else self.keys[code]

    def value(self, code: int) -> Any:
        return code if self.values is None else self.values[code]

    def mop_range(self, t: int) -> tuple[int, int]:
        if not hasattr(self, "_m_start"):
            self._m_start = np.searchsorted(self.m_txn, np.arange(self.n_txns + 1))
        return int(self._m_start[t]), int(self._m_start[t + 1])

    def read_list(self, row: int) -> list:
        return [self.value(int(v)) for v in self.r_elem[self.r_off[row]:self.r_off[row + 1]]]

    def mop(self, m: int) -> list:
        f = int(self.m_f[m])
        k = self.key(int(self.m_key[m]))
        if f == R:
            if self.m_nil[m]:
                v = None
            elif self.workload == "list-append":
                v = self.read_list(int(self.m_val[m]))
            else:
                v = self.value(int(self.m_val[m]))
        else:
            v = self.value(int(self.m_val[m]))
        return [F_NAMES[f], k, v]

    def op(self, t: int) -> dict:
        """The completion op of transaction ``t`` as a JSON-ready map."""
        a, b = self.mop_range(t)
        d = {"index": int(self.t_index[t]), "type": TYPE_NAMES[int(self.t_type[t])],
             "process": self.processes[int(self.t_process[t])], "f": "txn",
             "value": [self.mop(m) for m in range(a, b)]}
        if self.t_time[t] is not None:
            d["time"] = self.t_time[t]
        return d


# ---------------------------------------------------------------------------- reading files

@contextmanager
def no_gc():
    """Pause the cyclic garbage collector: building millions of lists and dicts otherwise
    triggers it again and again (a 5x slowdown on a 10^5-transaction history)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load(path: str | Path) -> list[dict]:
    """Read a history file (JSON array, JSON lines, or EDN) into a list of op maps."""
    p = Path(path)
    return loads(read_bytes(p), fmt=_fmt_of(p), name=str(p))


def read_bytes(path: str | Path) -> bytes:
    p = Path(path)
    try:
        return p.read_bytes()
    except OSError as e:
        raise HistoryError(f"cannot read history file {str(p)!r}: {e.strerror}", fix="check the path") from None


def _fmt_of(p: Path) -> str | None:
    return "edn" if p.suffix.lower() == ".edn" else None


def read(path: str | Path, workload: str, *, scan: bool = True, fmt: str | None = None) -> History:
    """Read and parse a history file in one step (the way ``toki check`` does).

    JSON goes through the scanner first, a slice of the file at a time (see :func:`parse_text`).
    ``fmt`` ("edn" or "json") overrides the suffix (.edn is EDN, anything else JSON or guessed)."""
    p = Path(path)
    _check_workload(workload)
    fmt = fmt or _fmt_of(p)
    if scan:
        from toki.check.reading import json_scan

        try:
            with open(p, "rb") as f:
                head = f.read(64).lstrip()
            edn = fmt == "edn" or (fmt is None and looks_edn(head))
            why: list = []
            sc = json_scan.scan_file(p, edn=edn, why=why)
            size = p.stat().st_size
        except OSError as e:
            raise HistoryError(f"cannot read history file {str(p)!r}: {e.strerror}", fix="check the path") from None
        h = _from_scan(sc, workload, edn)
        if h is not None:
            return h
        if size > GENERAL_MAX_BYTES:
            reason = why[0] if why else "an op the columns cannot hold (a transaction without a list of micro-ops, " \
                                        "or micro-ops this workload does not have)"
            raise HistoryError(
                f"{str(p)!r} ({size / 1e9:.1f} GB) is outside what toki reads a slice at a time ({reason}), and "
                f"too large to read whole (the general reader needs about 15 bytes of memory per byte)",
                fix="write integers for keys and values, ASCII without escapes, and one JSON op per line or one "
                    "array (as toki gen history does); or check --workload; or split the history")
        scan = False  # what the scanner does not take: straight to the general path
    return parse_text(read_bytes(p), workload, fmt=fmt, name=str(p), scan=scan)


#: files larger than this that the scanner refuses are not read whole by the general path: it
#: holds the text and a Python object per op (about 15 bytes per byte of JSON), which at 3 GB
#: fails for lack of memory after minutes instead of saying why at once
GENERAL_MAX_BYTES = 1 << 30


def looks_edn(head: str | bytes) -> bool:
    """Whether text starting with ``head`` (leading whitespace stripped) is EDN op maps: ``{:``,
    or a vector whose first element is ``{:``."""
    if isinstance(head, bytes):
        head = head.decode("ascii", "replace")
    return head.startswith("{:") or (head.startswith("[") and head[1:].lstrip(" \t\r\n,").startswith("{:"))


def _check_workload(workload: str) -> None:
    if workload not in WORKLOADS:
        raise HistoryError(f"unknown workload {workload!r}", fix="use list-append or rw-register")


def _from_scan(sc, workload: str, edn: bool) -> History | None:
    if sc is None:
        return None
    h = parse_scanned(sc, workload)
    from toki.check.accel.allocator import trim

    trim()  # the scanner's columns, freed: not kept resident under what inference allocates
    if h is not None:
        h.parser = "edn-scan" if edn else "scan"
        h.helper_max_rss_kb = sc.helper_max_rss_kb
    return h


def parse_text(text: str | bytes, workload: str, *, fmt: str | None = None, name: str = "history",
               scan: bool = True) -> History:
    """Parse history text into columns.

    JSON of the common shape, and EDN as Jepsen writes it (keywords, no strings), go through the
    vectorised scanner (:mod:`toki.check.reading.json_scan`), which makes no Python object per op; anything
    it does not accept (string keys, floats, nested maps, EDN strings, comments or tags, a
    malformed op, ...) goes through the general path (op maps, then
    :func:`parse`), which accepts it or names the bad op. Both give the same History; its
    ``parser`` field says which one ran. ``scan=False`` forces the general path.
    """
    _check_workload(workload)
    if scan and isinstance(text, bytes):
        from toki.check.reading import json_scan

        head = text[:1 << 16].lstrip()[:64]  # not text.lstrip(): that copies the whole text
        edn = fmt == "edn" or (fmt is None and looks_edn(head))
        h = _from_scan(json_scan.scan(text, edn=edn), workload, edn) if head[:1] in (b"[", b"{") else None
        if h is not None:
            return h
    ops = loads(text, fmt=fmt, name=name)
    h = parse(ops, workload)
    ops.clear()  # the op maps are the bulk of the memory: free them at once
    return h


def loads(text: str | bytes, *, fmt: str | None = None, name: str = "history") -> list[dict]:
    """Parse history text: JSON array, JSON lines, or EDN (guessed from the first characters)."""
    with no_gc():
        return _loads(text, fmt, name)


def _loads(text: str | bytes, fmt: str | None, name: str) -> list[dict]:
    s = text.lstrip()
    head = s[:2].decode("utf-8", "replace") if isinstance(s, bytes) else s[:2]
    if fmt is None:
        fmt = "edn" if looks_edn(s[:64]) or head[:1] not in ("[", "{") else "json"
    if fmt == "edn" and isinstance(s, bytes):
        try:
            s = s.decode("utf-8")
        except UnicodeDecodeError as e:
            raise HistoryError(f"{name} is not UTF-8 text: {e}", fix="save the history as UTF-8") from None
    if fmt == "json":
        try:
            if head[:1] == "[":
                data = json_loads(s)
            else:
                data = [json_loads(line) for line in s.splitlines() if line.strip()]
        except ValueError as e:
            raise HistoryError(f"{name} is not valid JSON: {e}",
                               fix="give a JSON array of op maps, one JSON op per line, or an .edn file") from None
    else:
        data = _edn_loads(s, name)
    if not isinstance(data, list):
        raise HistoryError(f"{name}: a history must be a list of op maps, got {type(data).__name__}",
                           fix="wrap the ops in a JSON array")
    return data


try:  # optional, faster
    import orjson as _orjson

    def json_loads(s: str):
        return _orjson.loads(s)
except ImportError:  # pragma: no cover - depends on the environment
    json_loads = json.loads


def _edn_loads(s: str, name: str) -> list:
    import edn_format

    if '"' not in s and "\\" not in s:
        s = s.replace("\r", " ")  # whitespace in EDN (as in Clojure's reader); edn_format's lexer refuses it
    else:
        s = s.replace("\r\n", "\n")
    try:
        vals = edn_format.loads_all(s)
    except Exception as e:  # edn_format raises its own and lexer errors
        raise HistoryError(f"{name} is not valid EDN: {e}", fix="give one op map per line, or a vector of op maps") from None
    if len(vals) == 1 and isinstance(vals[0], (list, tuple, edn_format.ImmutableList)):
        vals = list(vals[0])
    try:
        return [_from_edn(v) for v in vals]
    except TypeError:  # a map keyed by a map or a vector: no op map has one
        raise HistoryError(f"{name} has a map keyed by a map or a vector, which no op has",
                           fix="op maps have keyword keys (:type, :process, :value, ...)") from None


def _from_edn(x: Any) -> Any:
    import edn_format

    if isinstance(x, edn_format.Keyword):
        return x.name
    if isinstance(x, edn_format.Symbol):
        return str(x)
    if isinstance(x, (dict, edn_format.ImmutableDict)):
        return {_from_edn(k): _from_edn(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, edn_format.ImmutableList)):
        return [_from_edn(v) for v in x]
    if isinstance(x, (set, frozenset)):
        return [_from_edn(v) for v in x]
    return x


# ---------------------------------------------------------------------------- columns

def parse(ops: list[dict], workload: str) -> History:
    """Turn a list of op maps into columns; raise HistoryError naming the first bad op."""
    if workload not in WORKLOADS:
        raise HistoryError(f"unknown workload {workload!r}", fix="use list-append or rw-register")
    try:
        with no_gc():
            return _parse_fast(ops, workload)
    except HistoryError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as e:
        _validate_slow(ops, workload)
        raise HistoryError(f"malformed history ({type(e).__name__}: {e})",
                           fix="each op needs type, process, value (a list of [f, k, v])") from e


def _fail(ops, i, what, fix):
    idx = ops[i].get("index", i) if isinstance(ops[i], dict) else i
    raise HistoryError(f"op {idx} (position {i}): {what}", fix=fix)


def _validate_slow(ops: list, workload: str) -> None:
    allowed = {F_NAMES[c] for c in _ALLOWED[workload]}
    has_index = None
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            _fail(ops, i, f"is a {type(op).__name__}, not an op map", "every op is a map with type, process and value")
        for k in ("type", "process"):
            if k not in op:
                _fail(ops, i, f"has no {k!r}", "every op needs type, process and value")
        if op["type"] not in TYPE_CODES:
            _fail(ops, i, f"has type {op['type']!r}", "type is one of invoke, ok, fail, info")
        hi = "index" in op
        if has_index is None:
            has_index = hi
        elif hi != has_index:
            _fail(ops, i, "has an index while other ops do not (or the reverse)", "give every op an index, or none")
        if hi and (type(op["index"]) is not int):
            _fail(ops, i, f"has a non-integer index {op['index']!r}", "indices are integers")
        p = op["process"]
        if type(p) is not int:
            continue  # nemesis or other non-client op: ignored, as Elle does
        if op.get("f", "txn") not in ("txn", None):
            _fail(ops, i, f"has f {op['f']!r}", "transactional workloads use f = txn")
        if "value" not in op:
            _fail(ops, i, "has no 'value'", "value is a list of micro-ops [f, k, v]")
        v = op["value"]
        if v is None and op["type"] == "fail":
            continue
        if not isinstance(v, list):
            _fail(ops, i, f"value is a {type(v).__name__}, not a list of micro-ops", "value is a list of [f, k, v]")
        for j, mop in enumerate(v):
            if not isinstance(mop, list) or len(mop) not in (2, 3):
                _fail(ops, i, f"micro-op {j} is {mop!r}, not a 3-element [f, k, v]", "write micro-ops as [f, k, v]")
            f, k, x = mop if len(mop) == 3 else (*mop, None)
            if f not in allowed:
                # name the workload whose micro-op it is, when there is one
                owner = {"rp": "predicate", "w": "rw-register", "append": "list-append"}.get(f)
                hint = f"pass --workload {owner}" if owner and owner != workload else "is --workload right?"
                _fail(ops, i, f"micro-op {j} has f {f!r}, which the {workload} workload does not allow",
                      f"{workload} micro-ops are {', '.join(sorted(allowed))} ({hint})")
            try:
                hash(k)
            except TypeError:
                _fail(ops, i, f"micro-op {j} has an unhashable key {k!r}", "keys are numbers or strings")
            if k is None:
                _fail(ops, i, f"micro-op {j} has a null key", "keys are numbers or strings")
            if f in ("append", "w"):
                if x is None:
                    _fail(ops, i, f"micro-op {j} writes null", "written values are numbers or strings")
                if isinstance(x, (list, dict)):
                    _fail(ops, i, f"micro-op {j} writes a {type(x).__name__}", "written values are numbers or strings")
            elif f == "r" and x is not None:
                if workload == "list-append":
                    if not isinstance(x, list):
                        _fail(ops, i, f"micro-op {j} reads {x!r}, not a list", "list-append reads return a list or null")
                    for e in x:
                        if e is None or isinstance(e, (list, dict)):
                            _fail(ops, i, f"micro-op {j} reads a list holding {e!r}",
                                  "list elements are numbers or strings")
                elif isinstance(x, (list, dict)):
                    _fail(ops, i, f"micro-op {j} reads a {type(x).__name__}", "register values are numbers or strings")


def _codes(xs: list, what: str) -> tuple[np.ndarray, list | None]:
    """Integers pass through as their own codes; anything else is interned."""
    if not xs:
        return np.zeros(0, np.int64), None
    if set(map(type, xs)) == {int}:
        try:
            return np.array(xs, np.int64), None
        except OverflowError:
            pass
    table: dict = {}
    codes = np.fromiter((table.setdefault(x, len(table)) for x in xs), np.int64, count=len(xs))
    return codes, list(table)


def _parse_fast(ops: list[dict], workload: str) -> History:
    n = len(ops)
    if n and "index" in ops[0]:
        try:
            tpi = list(map(itemgetter("type", "process", "index"), ops))
        except KeyError:
            raise ValueError("mixed index") from None
        types, procs, idx_list = zip(*tpi)
        del tpi
        if set(map(type, idx_list)) != {int}:
            raise TypeError("index")
        index = np.array(idx_list, np.int64)
        del idx_list
    else:
        if any("index" in o for o in ops):
            raise ValueError("mixed index")
        types, procs = zip(*map(itemgetter("type", "process"), ops)) if n else ((), ())
        index = np.arange(n, dtype=np.int64)
    ptypes = set(map(type, procs))
    if ptypes == {int}:
        client = np.ones(n, bool)
    else:
        client = np.fromiter((type(p) is int for p in procs), bool, count=n)
    cpos = np.flatnonzero(client)
    tcode = np.fromiter(map(TYPE_CODES.__getitem__, types), np.int8, count=n)
    P = np.array(procs, np.int64) if ptypes == {int} else np.array([procs[i] for i in cpos], np.int64)
    tx = transactions(index, tcode, cpos, P)
    tpos, ttype = tx.tpos, tx.ttype
    tops = [ops[i] for i in tpos.tolist()]
    t_time = [o.get("time") for o in tops]
    if {o.get("f", "txn") for o in tops} - {"txn", None}:  # Elle's own tests leave f nil
        raise ValueError("f")
    values = list(map(itemgetter("value"), tops))
    del tops
    # A failed op may carry value None: no micro-ops.
    try:
        lens = np.array(list(map(len, values)), np.int64)
    except TypeError:
        values = [[] if v is None and ttype[j] == FAIL else v for j, v in enumerate(values)]
        lens = np.array(list(map(len, values)), np.int64)
    flat = list(chain.from_iterable(values))
    del values
    M = len(flat)
    if M and set(map(len, flat)) != {3}:
        # [f, k] is a micro-op with no value yet (Elle's tests write reads so): value nil
        if set(map(len, flat)) - {2, 3}:
            raise ValueError("mop length")
        flat = [m if len(m) == 3 else (m[0], m[1], None) for m in flat]
    fs, ks, vs = zip(*flat) if M else ((), (), ())
    del flat
    m_f = np.array(list(map(F_CODES.__getitem__, fs)), np.int8)
    del fs
    if M and not np.isin(m_f, _ALLOWED[workload]).all():
        raise ValueError("mop f")
    if type(None) in set(map(type, ks)):
        raise TypeError("null key")
    m_key, keys = _codes(ks, "key")
    if keys is None:  # integer keys: coded as the scanner's are
        m_key, keys = _dense_keys(m_key)
    del ks
    is_read = m_f == R
    ridx = np.flatnonzero(is_read)
    widx = np.flatnonzero(~is_read)
    wv = [vs[i] for i in widx.tolist()]
    rv = [vs[i] for i in ridx.tolist()]
    del vs
    if workload == "list-append":
        if any(v is None for v in wv):
            raise TypeError("null append")
        # An ok read of nil is an empty list (Jepsen clients return nil for a missing key);
        # a nil read in an info or failed op is unknown.
        rtypes = set(map(type, rv))
        if rtypes - {list, type(None)}:
            raise TypeError("read not list")
        if type(None) in rtypes:
            rnil = np.array([v is None for v in rv], bool)
            rv = [[] if v is None else v for v in rv]
        else:
            rnil = np.zeros(len(rv), bool)
        rl = np.array(list(map(len, rv)), np.int64)
        elems = list(chain.from_iterable(rv))
        del rv
        allv = wv + elems
        codes, vtable = _codes(allv, "value")
        if vtable is not None and None in vtable:
            raise TypeError("null element")
        return _list_append_history(n, tx, t_time, lens, m_f, m_key, keys, codes[:len(wv)], rnil, rl,
                                    codes[len(wv):], vtable)
    # rw-register: nil reads are the initial state (ok ops) or unknown (others)
    rnil = np.fromiter((v is None for v in rv), bool, count=len(rv))
    wnil = np.fromiter((v is None for v in wv), bool, count=len(wv))
    allv = [v for v in wv if v is not None] + [v for v in rv if v is not None]
    if wnil.any():
        raise TypeError("null write")
    if any(isinstance(v, (list, dict)) for v in allv):
        raise TypeError("register value")
    codes, vtable = _codes(allv, "value")
    nw = int((~wnil).sum())
    wcodes = np.full(len(wv), -1, np.int64)
    wcodes[~wnil] = codes[:nw]
    rcodes = np.full(len(rv), -1, np.int64)
    rcodes[~rnil] = codes[nw:]
    return _rw_register_history(n, tx, t_time, lens, m_f, m_key, keys, wcodes, wnil, rcodes, rnil, vtable)


# ---------------------------------------------------------------------------- shared by both paths
# The general path (op maps) and the scanner's (toki.check.reading.json_scan columns) meet here, so that
# pairing invocations with completions and laying out micro-ops cannot differ between them.

def _dense_codes(values: np.ndarray, sort_sparse: bool = True) -> tuple[np.ndarray, np.ndarray] | None:
    """np.unique(values, return_inverse=True), by counting the values within 2^20 of the
    smallest (processes: a handful to a few thousand) and sorting only the few beyond (Jepsen's
    process numbers grow by the concurrency at each crash; a planted anomaly's processes sit at
    2^30): sorting 2 * 10^7 processes took 2 s. Mostly far values are sorted, as np.unique does
    (or, ``sort_sparse=False``, not coded: None)."""
    if not len(values):
        return np.unique(values, return_inverse=True)
    lo = values.min()
    if int(values.max()) - int(lo) >= 1 << 62:  # value - lo would overflow int64
        return np.unique(values, return_inverse=True) if sort_sparse else None
    codes, seen, n_far = accel.twin("transactions", _near_codes, len(values))(values, lo, _NEAR)
    if n_far > len(values) // 8:
        return np.unique(values, return_inverse=True) if sort_sparse else None
    nearest = np.flatnonzero(seen) + lo
    if not n_far:
        return nearest, codes
    fi = np.flatnonzero(codes < 0)
    far = values[fi]
    far_uniq = np.unique(far)  # all above every near value: the two together stay sorted
    codes[fi] = len(nearest) + np.searchsorted(far_uniq, far)
    return np.concatenate([nearest, far_uniq]), codes


_NEAR = 1 << 20


def _near_codes(values: np.ndarray, lo, near: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Dense codes of the values within ``near`` of ``lo`` (the others -1), whether each value
    lo + j is present, and how many values lie beyond: a count and a table."""
    off = values - lo
    np.minimum(off, near, out=off)  # every far value in one bucket
    counts = np.bincount(off, minlength=near + 1)
    n_far = int(counts[near])
    seen = counts[:near] > 0
    del counts
    table = np.cumsum(seen)
    table -= 1
    return np.append(table, -1)[off], seen, n_far


class Transactions(NamedTuple):
    """A history's transactions (completions, and invocations that never complete), in history
    order."""
    tpos: np.ndarray       # op positions
    ttype: np.ndarray      # OK, INFO or FAIL (an invocation never completed is INFO)
    t_index: np.ndarray    # the ops' indices
    t_invoke: np.ndarray   # the index of each one's invocation (-1: none)
    pcodes: np.ndarray     # codes into processes
    processes: list        # the distinct processes, sorted
    pgroup: np.ndarray | None  # overlap groups (see _transactions_overlapping), or None


def transactions(index: np.ndarray, tcode: np.ndarray, cpos: np.ndarray, P: np.ndarray) -> Transactions:
    """Pair each client completion with its process's preceding invocation.

    ``index``/``tcode`` cover every op; ``cpos`` are the positions of client ops and ``P`` their
    processes. Transactions are completions plus invocations that never complete (as info), in
    history order (:class:`Transactions`)."""
    Ty = tcode[cpos]
    uniq, pc = _dense_codes(P)
    n = len(cpos)
    is_tx, inv, ok = accel.twin("transactions", _pair, n)(pc, Ty, len(uniq))
    if not ok:
        return _transactions_overlapping(index, tcode, cpos, P)
    # every process of a client op has a transaction (a completion, or an invocation left
    # outstanding): the transactions' process codes are the client ops' own
    tpos, ttype, t_index, t_invoke, pcodes = accel.twin("transactions", _collect, n)(is_tx, inv, cpos, index, Ty, pc)
    return Transactions(tpos, ttype, t_index, t_invoke, pcodes, [int(x) for x in uniq], None)


def _pair(pcode: np.ndarray, ty: np.ndarray, nproc: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Client ops in history order (``pcode``: dense process codes, ``ty``: op types): whether each
    op is a transaction (a completion, or an invocation that never completes) and the client-op
    position of its invocation (-1: none; a dangling invocation is its own). ok is False when a
    process invokes while it has an invocation outstanding: several outstanding operations are
    paired by :func:`_transactions_overlapping`."""
    order = _stable_order(pcode)  # by process, then position
    sp, st = pcode[order], ty[order]
    same_prev = np.zeros(len(sp), bool)
    same_prev[1:] = sp[1:] == sp[:-1]
    is_inv = st == INVOKE
    prev_inv = np.zeros(len(sp), bool)
    prev_inv[1:] = is_inv[:-1]
    # An invocation followed by another invocation of the same process: several outstanding
    # operations (Elle's own tests have such histories; Elle checks them). Rare: paired in Python.
    dbl = is_inv[:-1] & is_inv[1:] & same_prev[1:]
    if dbl.any():
        return np.zeros(0, bool), np.zeros(0, np.int64), False
    comp = ~is_inv
    paired = comp & same_prev & prev_inv
    next_same = np.zeros(len(sp), bool)
    next_same[:-1] = same_prev[1:]
    dangling = is_inv & ~(next_same & np.r_[~is_inv[1:], False])
    # back to history order by scattering through the permutation (linear), not by sorting the
    # transactions' positions again (10^7 of them: a second sort of a second)
    inv_of = np.where(dangling, order, -1)
    inv_of[1:][paired[1:]] = order[:-1][paired[1:]]
    is_tx = np.empty(len(sp), bool)
    is_tx[order] = comp | dangling
    inv = np.empty(len(sp), np.int64)
    inv[order] = inv_of
    return is_tx, inv, True


def _collect(is_tx, inv, cpos, index, ty, pc) -> tuple:
    """The transactions :func:`_pair` marked: op positions, types (an invocation never completed
    is info), op indices, indices of their invocations (-1: none) and process codes."""
    tpos, tinv = cpos[is_tx], inv[is_tx]
    tt = ty[is_tx]
    ttype = np.where(tt == INVOKE, INFO, tt).astype(np.int8)  # an invocation as a transaction never completed
    t_invoke = np.where(tinv >= 0, index[cpos[np.maximum(tinv, 0)]], -1)
    return tpos, ttype, index[tpos], t_invoke, pc[is_tx].astype(np.int64)


def _stable_order(P: np.ndarray) -> np.ndarray:
    """argsort(P, kind="stable"), as a radix sort when P spans fewer than 2^16 values."""
    if len(P) and int(P.max()) - int(P.min()) < 1 << 16:
        return np.argsort((P - P.min()).astype(np.uint16), kind="stable")
    return np.argsort(P, kind="stable")


def _transactions_overlapping(index: np.ndarray, tcode: np.ndarray, cpos: np.ndarray, P: np.ndarray) -> Transactions:
    """:func:`transactions` for histories where a process has several outstanding invocations.

    Elle never pairs these for its data-dependency checks (it reads completions only), and
    jepsen.history refuses to pair them (double-invoke) when an order graph needs it. toki
    pairs them so that no order is claimed that the history does not prove: a run of a
    process's ops during which it always has an invocation outstanding is one *overlap group*;
    every completion in it counts as invoked at the group's first invocation (the earliest it
    can have been invoked, so real-time edges into it are never invented), invocations left
    outstanding at the end are the last ones (first in, first out) and become info
    transactions as elsewhere, and process order (``pgroup``) orders groups, not the ops
    inside one."""
    tpos_l: list[int] = []
    tinv_l: list[int] = []
    ttype_l: list[int] = []
    group_l: list[int] = []
    open_by_p: dict[int, list] = {}   # process -> [outstanding positions (FIFO), group start, group id]
    n_groups = 0
    for pos, p, ty in zip(cpos.tolist(), P.tolist(), tcode[cpos].tolist()):
        st = open_by_p.get(p)
        if ty == INVOKE:
            if st is None or not st[0]:
                st = open_by_p[p] = [[], pos, n_groups]
                n_groups += 1
            st[0].append(pos)
            continue
        if st is None or not st[0]:  # a completion with no invocation: its own group, invocation unknown
            tpos_l.append(pos), tinv_l.append(-1), ttype_l.append(ty), group_l.append(n_groups)
            n_groups += 1
            continue
        st[0].pop(0)
        tpos_l.append(pos), tinv_l.append(st[1]), ttype_l.append(ty), group_l.append(st[2])
    for st in open_by_p.values():
        for pos in st[0]:
            tpos_l.append(pos), tinv_l.append(st[1]), ttype_l.append(INFO), group_l.append(st[2])
    tpos = np.array(tpos_l, np.int64)
    o = np.argsort(tpos, kind="stable")
    tpos, tinv = tpos[o], np.array(tinv_l, np.int64)[o]
    ttype, group = np.array(ttype_l, np.int8)[o], np.array(group_l, np.int64)[o]
    uniq, pcodes = np.unique(P[np.searchsorted(cpos, tpos)], return_inverse=True)
    return Transactions(tpos, ttype, index[tpos], np.where(tinv >= 0, index[np.maximum(tinv, 0)], -1),
                        pcodes.astype(np.int64), [int(x) for x in uniq], group)


def _micro_columns(ttype, lens, m_f, wcodes):
    """Per micro-op columns both workloads share: owning transaction, read and write
    positions, values (writes filled in) and nil flags."""
    M = len(m_f)
    m_txn = np.repeat(np.arange(len(ttype), dtype=np.int64), lens)
    is_read = m_f == R
    ridx = np.flatnonzero(is_read)
    widx = np.flatnonzero(~is_read)
    m_val = np.zeros(M, np.int64)
    m_nil = np.zeros(M, bool)
    m_val[widx] = wcodes
    return m_txn, ridx, widx, m_val, m_nil


def _list_append_history(n, tx, t_time, lens, m_f, m_key, keys, wcodes, rnil, rl, elems, vtable) -> History:
    ttype = tx.ttype
    m_txn, ridx, widx, m_val, m_nil = _micro_columns(ttype, lens, m_f, wcodes)
    r_off = np.zeros(len(ridx) + 1, np.int64)
    np.cumsum(rl, out=r_off[1:])
    m_val[ridx] = np.arange(len(ridx))
    # An ok read of nil is an empty list; a nil read in an info or failed op is unknown.
    m_nil[ridx] = rnil & (ttype[m_txn[ridx]] != OK)
    return History("list-append", n, tx.t_index, tx.t_invoke, tx.pcodes, ttype, t_time, tx.processes,
                   m_txn, m_f, m_key, m_val, m_nil, keys, vtable, r_off, _int_column(elems),
                   t_pgroup=tx.pgroup)


def _int_column(a) -> np.ndarray:
    """List elements in the narrowest integer type that holds them (comparisons and gathers
    need no more; :func:`toki.check.reading.json_scan.compact`), whichever path read them."""
    from toki.check.reading.json_scan import compact

    return compact(np.asarray(a) if isinstance(a, np.ndarray) and a.dtype.kind == "i" else np.asarray(a, np.int64))


def _rw_register_history(n, tx, t_time, lens, m_f, m_key, keys, wcodes, wnil, rcodes, rnil, vtable) -> History:
    ttype = tx.ttype
    m_txn, ridx, widx, m_val, m_nil = _micro_columns(ttype, lens, m_f, wcodes)
    m_val[ridx] = rcodes
    m_nil[widx] = wnil
    m_nil[ridx] = rnil
    return History("rw-register", n, tx.t_index, tx.t_invoke, tx.pcodes, ttype, t_time, tx.processes,
                   m_txn, m_f, m_key, m_val, m_nil, keys, vtable, t_pgroup=tx.pgroup)


# ---------------------------------------------------------------------------- the scanner's path

class Times:
    """The completion times of the transactions as the scanner read them: a list of ints or None
    (no time) to its readers, two numpy columns underneath. As a Python list, 10^7 times took
    0.36 GB; only the ops of reported cases ever read one."""

    __slots__ = ("has", "values")

    def __init__(self, values: np.ndarray, has: np.ndarray):
        self.values, self.has = values, has

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, t):
        if isinstance(t, slice):
            return [self[i] for i in range(*t.indices(len(self)))]
        return int(self.values[t]) if self.has[t] else None

    def __iter__(self):
        return (v if h else None for v, h in zip(self.values.tolist(), self.has.tolist()))

    def __eq__(self, other) -> bool:
        return list(self) == list(other)


def _dense_keys(m_key: np.ndarray) -> tuple[np.ndarray, list | None]:
    """The scanner's keys as they are (``keys`` None) when they lie within 2^20 of each other,
    else coded 0..n-1 with the table of keys (as the general parser interns them). Inference
    looks (key, value) pairs up in direct tables when keys are dense, by binary search when
    not: one key at 2^40 among keys counting from 0 (a planted anomaly) made every lookup of a
    10^7-transaction history a binary search. Keys mostly far apart are left as they are:
    sorting them to code them costs what the searches would."""
    if not len(m_key) or int(m_key.max()) - int(m_key.min()) < _NEAR:
        return m_key, None
    coded = _dense_codes(m_key, sort_sparse=False)
    if coded is None:
        return m_key, None
    return coded[1], coded[0].tolist()


def parse_scanned(sc, workload: str) -> History | None:
    """A History from :func:`toki.check.reading.json_scan.scan` columns, or None where the general parser
    must decide (it then accepts the same history, or names the bad op)."""
    n = sc.n_ops
    # the scanner's columns come narrowed (json_scan.compact); the History's are int64, the list
    # elements aside, since inference computes with them (copy=False: a column already int64,
    # keys at 2^40 say, is not copied again)
    index = sc.index.astype(np.int64, copy=False) if sc.has_index else np.arange(n, dtype=np.int64)
    cpos = np.flatnonzero(sc.client)
    tx = transactions(index, sc.type, cpos, sc.process[cpos].astype(np.int64, copy=False))
    del index
    sc.index = sc.client = sc.process = None  # freed as soon as they are used
    tpos, ttype = tx.tpos, tx.ttype
    vk = sc.vkind[tpos]
    if not ((vk == 2) | ((vk == 1) & (ttype == FAIL))).all():
        return None  # a transaction without a list of micro-ops
    tt, ht = sc.time[tpos], sc.has_time[tpos]
    t_time = Times(tt, ht)
    del tt, ht
    sc.time = sc.has_time = sc.vkind = None
    lens = sc.m_off[tpos + 1] - sc.m_off[tpos]
    mi = ranges(sc.m_off[tpos], lens)
    sc.m_off = None
    m_f = sc.m_f[mi]
    if len(m_f) and not np.isin(m_f, _ALLOWED[workload]).all():
        return None
    m_key, keys = _dense_keys(sc.m_key[mi].astype(np.int64, copy=False))
    vkind = sc.m_vkind[mi]
    sc.m_f = sc.m_key = sc.m_vkind = None
    is_read = m_f == R
    wk, rk = vkind[~is_read], vkind[is_read]
    if (wk != 0).any():
        return None  # a null or list written
    if workload == "list-append":
        if (rk == 0).any():
            return None  # a read of a number
        rm = mi[is_read]
        rl = sc.m_len[rm].astype(np.int64, copy=False)
        if int(rl.sum()) == len(sc.elem):
            elems = sc.elem  # every list read belongs to a transaction (invocations read null)
        else:
            e_off = np.zeros(len(sc.m_len) + 1, np.int64)
            np.cumsum(sc.m_len, out=e_off[1:])
            elems = gather(sc.elem, e_off[rm], rl)
            del e_off
        del rm
        wv = sc.m_val[mi[~is_read]].astype(np.int64, copy=False)
        sc.elem = sc.m_len = sc.m_val = None
        del mi, vkind
        return _list_append_history(n, tx, t_time, lens, m_f, m_key, keys, wv, rk == 1, rl, elems, None)
    if (rk == 2).any():
        return None  # a register read of a list
    rnil = rk == 1
    rcodes = np.where(rnil, -1, sc.m_val[mi[is_read]].astype(np.int64, copy=False))
    wv = sc.m_val[mi[~is_read]].astype(np.int64, copy=False)
    sc.elem = sc.m_len = sc.m_val = None
    del mi, vkind
    return _rw_register_history(n, tx, t_time, lens, m_f, m_key, keys, wv,
                                np.zeros(int((~is_read).sum()), bool), rcodes, rnil, None)
