"""A vectorised scanner for JSON histories of the common shape (the fast path of the loader).

Turning a large JSON history into Python dicts and lists costs more than checking it (about
20 s and 4.8 GB for a million transactions). This scanner reads the bytes with numpy instead,
one slice at a time, and returns columns (per op, per micro-op, and the elements of the
list-append reads) without making a Python object per op.

It accepts a strict subset of JSON and answers ``None`` (``Unsupported`` inside) for anything
else, so that the general parser (orjson plus the checks of :mod:`toki.check.reading.history`) decides:
accepting, or naming the bad op. The subset:

- the file is pure ASCII, has no backslash, and is a JSON array of op objects, or one op
  object per line (JSON lines);
- ops are flat objects; the only nesting allowed is a list value of depth at most three
  (``value``: a list of micro-ops ``[f, k, v]`` whose ``v`` may be a list of scalars);
- strings hold no whitespace, ``[]{},:`` or control characters, and numbers are integers of at
  most 18 digits (a float, an exponent or a string key anywhere sends the file to the general
  parser);
- client ops (an integer ``process``) have ``f`` "txn" (or none), a ``value`` that is a list of
  micro-ops ``[f, k, v]`` with ``f`` one of r, append, w, an integer key, and ``v`` an integer,
  null, or a list of integers; an integer or null ``time``; an integer ``index`` in every op or
  in none. Other keys, and the values of non-client ops (nemesis), are validated as JSON and
  ignored, as the general parser ignores them.

How: a byte is whitespace, structural (``[]{},:``, or a control character) or part of a token
("literal": everything else, quotes included). Tokens start at structural bytes and at the
first byte of each literal run. A token's kind comes from its first byte; strings are checked
to be exactly one literal run between two quotes, numbers are parsed in groups of equal digit
count, the container depth of every token comes from a cumulative sum over the brackets only,
and the grammar is checked as a table of allowed (depth, token, next token) triples, plus one
rule for object keys. Slices end after an op's closing brace, so no op is split.

EDN as Jepsen writes it (``edn=True``) is scanned the same way, with three differences: commas
are whitespace, a keyword (``:ok``) is a literal run read as a name, and a map's forms alternate
key and value (keys must be keywords), so there is no comma or colon token and an element or a
value is one token on from the one before, not two. Only bytes of names, integers, nil, true,
false and brackets are taken: strings, characters, comments, tags, metadata and namespaced
keywords send the file to the EDN reader, as JSON outside the subset goes to the general parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from toki.check import accel

LBRACK, LBRACE, RBRACK, RBRACE, COMMA, COLON, STR, NUM, NULL, TRUE, FALSE, OTHER = range(12)

_WS, _STRUCT, _LIT = 0, 1, 2


def _table(default: int, pairs: dict[int, int]) -> bytes:
    t = bytearray([default] * 256)
    for k, v in pairs.items():
        t[k] = v
    return bytes(t)


# byte classes: whitespace, structural (incl. control characters and non-ASCII), literal
_CLS = _table(_LIT, {**{c: _STRUCT for c in range(32)}, **{c: _STRUCT for c in range(128, 256)},
                     **{c: _STRUCT for c in b"[]{},:\\"}, **{c: _WS for c in b" \t\n\r"}})
# EDN's bytes the scanner takes (strings, characters, comments, tags, metadata, ... are not)
_EDN_BYTES = bytes(range(48, 58)) + bytes(range(65, 91)) + bytes(range(97, 123)) + b"-_?!*+.:[]{} \t\n\r,"
# EDN: commas are whitespace, a keyword (":name") is a literal run
_CLS_EDN = _table(_LIT, {**{c: _STRUCT for c in range(32)}, **{c: _STRUCT for c in range(128, 256)},
                         **{c: _STRUCT for c in b"[]{}\\"}, **{c: _WS for c in b" \t\n\r,"}})
# token kind from its first byte
_KIND = _table(OTHER, {ord("["): LBRACK, ord("{"): LBRACE, ord("]"): RBRACK, ord("}"): RBRACE, ord(","): COMMA,
                       ord(":"): COLON, ord('"'): STR, ord("-"): NUM, ord("n"): NULL, ord("t"): TRUE,
                       ord("f"): FALSE, **{c: NUM for c in b"0123456789"}})
_KIND_EDN = _table(OTHER, {ord("["): LBRACK, ord("{"): LBRACE, ord("]"): RBRACK, ord("}"): RBRACE,
                           ord(":"): STR, ord("-"): NUM, ord("n"): NULL, ord("t"): TRUE, ord("f"): FALSE,
                           **{c: NUM for c in b"0123456789"}})

# strings the scanner knows (keys and values); any other string is "unknown" (code 255)
VOCAB = ("type", "process", "f", "value", "index", "time", "invoke", "ok", "fail", "info", "txn", "r", "append",
         "w")
S = {s: i for i, s in enumerate(VOCAB)}
S_UNKNOWN = 255
_KEYS = ("type", "process", "f", "value", "index", "time")  # codes 0..5: the op keys read


def _word(s: str) -> int:
    b = s.encode()
    return int.from_bytes(b, "little") | (len(b) << 56)




def _perfect_hash(words: list[int], bits: int = 6) -> int:
    """An odd multiplier m such that (w * m mod 2^64) >> (64 - bits) differs for all words."""
    for m in range(0x9E3779B97F4A7C15, 0x9E3779B97F4A7C15 + (1 << 20), 2):
        if len({((w * m) & ((1 << 64) - 1)) >> (64 - bits) for w in words}) == len(words):
            return m
    raise AssertionError("no multiplier")  # pragma: no cover - the vocabulary is fixed


_DELTA = _table(0, {LBRACK: 1, LBRACE: 1, RBRACK: 255, RBRACE: 255})  # bracket kind -> depth change (int8)

# vocabulary lookup: a multiplicative hash of a string's word picks the one candidate to compare
_HBITS = 6
_HMUL = np.uint64(_perfect_hash([_word(s) for s in VOCAB], _HBITS))
_HSH = np.uint64(64 - _HBITS)
_HW = np.zeros(1 << _HBITS, np.uint64)    # 0 is never a word (the length is in the top byte)
_HID = np.full(1 << _HBITS, S_UNKNOWN, np.uint8)
for _s in VOCAB:
    _h = ((_word(_s) * int(_HMUL)) & ((1 << 64) - 1)) >> (64 - _HBITS)
    _HW[_h], _HID[_h] = _word(_s), S[_s]
_MASK = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], np.uint64)
_NULLW, _TRUEW, _FALSEW, _NILW = (np.uint64(int.from_bytes(w, "little")) for w in (b"null", b"true", b"false", b"nil"))

# op type codes (as toki.check.reading.history.TYPE_CODES) and micro-op f codes (history.F_CODES)
_TYPE_OF = np.full(256, -1, np.int8)
for _name, _code in (("ok", 0), ("info", 1), ("fail", 2), ("invoke", 3)):
    _TYPE_OF[S[_name]] = _code
_F_OF = np.full(256, -1, np.int8)
for _name, _code in (("r", 0), ("append", 1), ("w", 2)):
    _F_OF[S[_name]] = _code

_VALUE_START = (LBRACK, STR, NUM, NULL, TRUE, FALSE)
_VALUE_END = (RBRACK, STR, NUM, NULL, TRUE, FALSE)


def _pairs(ctx: str, edn: bool = False) -> list[tuple[int, int]]:
    if edn:  # no commas or colons: any value may follow any value (keys and values alternate: checked apart)
        after = {"top-array": [LBRACK, RBRACE], "top-lines": [RBRACE], "object": [LBRACE, *_VALUE_END],
                 "array": [LBRACK, *_VALUE_END]}.get(ctx, [])
        nxt = {"top-array": [LBRACE, RBRACK], "top-lines": [LBRACE], "object": [*_VALUE_START, RBRACE],
               "array": [*_VALUE_START, RBRACK]}.get(ctx, [])
        pairs = [(a, b) for a in after for b in nxt]
        if ctx == "object":  # a map opens on a keyword, and holds no map
            pairs = [(a, b) for a, b in pairs if a != LBRACE or b in (STR, RBRACE)]
        return pairs
    if ctx == "top-array":      # inside the top-level array: op objects separated by commas
        return [(LBRACK, LBRACE), (LBRACK, RBRACK), (RBRACE, COMMA), (COMMA, LBRACE), (RBRACE, RBRACK)]
    if ctx == "top-lines":      # between JSON lines
        return [(RBRACE, LBRACE)]
    if ctx == "object":         # an op's members
        return ([(LBRACE, STR), (LBRACE, RBRACE), (COMMA, STR), (STR, COLON)]
                + [(COLON, k) for k in _VALUE_START] + [(k, COMMA) for k in _VALUE_END]
                + [(k, RBRACE) for k in _VALUE_END])
    if ctx == "array":          # a list inside an op
        return ([(LBRACK, k) for k in _VALUE_START] + [(LBRACK, RBRACK)] + [(COMMA, k) for k in _VALUE_START]
                + [(k, COMMA) for k in _VALUE_END] + [(k, RBRACK) for k in _VALUE_END])
    return []


def _pair_table(contexts: list[str], edn: bool = False) -> np.ndarray:
    """allowed[(depth << 8) | (kind << 4) | next_kind]; depth is the container depth after kind."""
    t = np.zeros(8 << 8, bool)
    for d, ctx in enumerate(contexts):
        for a, b in _pairs(ctx, edn):
            t[(d << 8) | (a << 4) | b] = True
    return t


def _pair_mask(table: np.ndarray) -> bytes:
    """pairmask[(kind << 4) | next_kind]: bit d set if the pair is allowed at depth d."""
    bits = table.reshape(8, 256).astype(np.uint8) << np.arange(8, dtype=np.uint8)[:, None]
    return np.bitwise_or.reduce(bits, axis=0).tobytes()


# depth after a token -> context; ops open at depth OPD (array: 2, lines: 1), lists nest 3 deep;
# step: tokens from one element of a list (or a key) to the next (JSON: a comma or colon between)
_IN_ARRAY = ["none", "top-array", "object", "array", "array", "array"]
_IN_LINES = ["top-lines", "object", "array", "array", "array"]
_ARRAY = {"opd": 2, "table": _pair_table(_IN_ARRAY), "edn": False, "step": 2, "cls": _CLS, "kind": _KIND}
_LINES = {"opd": 1, "table": _pair_table(_IN_LINES), "edn": False, "step": 2, "cls": _CLS, "kind": _KIND}
_EDN_ARRAY = {"opd": 2, "table": _pair_table(_IN_ARRAY, True), "edn": True, "step": 1, "cls": _CLS_EDN,
              "kind": _KIND_EDN}
_EDN_LINES = {"opd": 1, "table": _pair_table(_IN_LINES, True), "edn": True, "step": 1, "cls": _CLS_EDN,
              "kind": _KIND_EDN}
for _m in (_ARRAY, _LINES, _EDN_ARRAY, _EDN_LINES):
    _m["pairmask"] = _pair_mask(_m["table"])


class Unsupported(Exception):
    """The input is outside the scanner's subset: the general parser decides."""


@dataclass
class Scanned:
    """Columns over every op of a history (file order) and the micro-ops of client ops."""

    n_ops: int
    has_index: bool
    index: np.ndarray       # int64 (zeros if no op has an index)
    type: np.ndarray        # int8: history.TYPE_CODES
    client: np.ndarray      # bool: integer process
    process: np.ndarray     # int64 (0 for non-client ops)
    time: np.ndarray        # int64
    has_time: np.ndarray    # bool (a null time is no time, as op.get("time") is None)
    vkind: np.ndarray       # int8: 0 no value, 1 null, 2 list of micro-ops, 3 anything else
    m_off: np.ndarray       # int64 CSR: micro-ops of op i are m_off[i]:m_off[i+1] (client list values only)
    m_f: np.ndarray         # int8: history.F_CODES
    m_key: np.ndarray       # int64
    m_vkind: np.ndarray     # int8: 0 integer, 1 null, 2 list
    m_val: np.ndarray       # int64 (integer values)
    m_len: np.ndarray       # int64 (list values: number of elements)
    elem: np.ndarray        # int64: elements of the list values, in micro-op order
    helper_max_rss_kb: int = 0  # peak resident set of the forked scanners, if any (KB, the largest)


def scan(data: bytes, *, chunk_bytes: int | None = None, threads: int | None = None,
         fork: bool | None = None, edn: bool = False) -> Scanned | None:
    """Columns of a JSON history, or None when it is outside the subset (see the module doc).

    Large inputs are cut at op boundaries into one piece per worker, at most one per 16 slices;
    ``threads`` (the number of workers) defaults to the number of CPUs this process may use, at
    most 4. The first piece is scanned here, the others in forked children where that is safe
    (:mod:`toki.check.accel.children`; measured 9% faster end to end than threads at 10^5), else in
    threads. ``fork=False`` forces threads, ``fork=True`` forks wherever possible.

    ``edn=True`` reads EDN as Jepsen writes it instead (see the module doc)."""
    try:
        return _scan(_Bytes(data), chunk_bytes, threads, fork, edn)
    except Unsupported:
        return None


def scan_file(path, *, chunk_bytes: int | None = None, threads: int | None = None,
              fork: bool | None = None, edn: bool = False, why: list | None = None) -> Scanned | None:
    """As :func:`scan`, reading the file a slice at a time (the file is never held whole).
    ``why``, when given, receives the reason a file outside the subset was refused."""
    import os

    fd = os.open(path, os.O_RDONLY)
    try:
        return _scan(_File(fd), chunk_bytes, threads, fork, edn)
    except Unsupported as e:
        if why is not None:
            why.append(str(e))
        return None
    finally:
        os.close(fd)


class _Bytes:
    def __init__(self, data: bytes):
        self.data, self.size = data, len(data)

    def read(self, a: int, b: int) -> bytes:
        return self.data[a:b]


class _File:
    #: how far ahead of a read the kernel is asked to fetch the file. Two pieces read apart at
    #: 512 KB a time defeat the kernel's own readahead: a 3.3 GB history not in the page cache
    #: took 27 s to scan, against 12 s cached (cat reads it cold in 4 s)
    AHEAD = 32 << 20

    def __init__(self, fd: int):
        import os

        self.fd, self.size, self._pread = fd, os.fstat(fd).st_size, os.pread
        self._advise = getattr(os, "posix_fadvise", None)
        self._willneed = getattr(os, "POSIX_FADV_WILLNEED", 3)
        self._advised = -1  # (per process: a forked child keeps its own)

    def read(self, a: int, b: int) -> bytes:
        if self._advise is not None and b + self.AHEAD // 2 > self._advised:
            try:
                self._advise(self.fd, b, self.AHEAD, self._willneed)
            except OSError:
                self._advise = None
            self._advised = b + self.AHEAD
        out = self._pread(self.fd, b - a, a)
        if len(out) != b - a:
            raise Unsupported("the file changed while it was read")
        return out


def default_threads() -> int:
    try:
        import os

        return max(1, min(4, len(os.sched_getaffinity(0))))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return 1


def _scan(src, chunk_bytes: int | None, threads: int | None, fork: bool | None = None,
          edn: bool = False) -> Scanned:
    n = src.size
    head = src.read(0, min(n, 1 << 16))
    start = len(head) - len(head.lstrip())
    if start >= n or start >= len(head):
        raise Unsupported("empty, or too much leading whitespace")
    first = head[start:start + 1]
    if first not in (b"[", b"{"):
        raise Unsupported("not a list or a map")
    mode = (_EDN_ARRAY if first == b"[" else _EDN_LINES) if edn else (_ARRAY if first == b"[" else _LINES)
    if accel.compiled_twin("json_scan", n) is not None:  # loaded (compiled) here, before a fork
        mode = {**mode, "compiled": True}
    if chunk_bytes is None:  # the compiled scanner's per-slice costs are its Python around it: 2 MB
        chunk_bytes = (2 << 20) if mode.get("compiled") else (512 << 10)  # was 12% faster than 512 KB
    threads = default_threads() if threads is None else threads
    # a thread per 16 slices at least: on a small file the second thread's fresh memory (its own
    # malloc arena, paid in page faults) costs more than it saves (3 MB: 0.08 s alone, 0.095 s in two)
    cuts = _split(src, start, max(1, min(threads, n // (16 * chunk_bytes))))
    spans = list(pairwise(cuts))
    helper_rss = 0
    if len(spans) == 1:
        results = [_scan_span(src, start, n, True, True, mode, chunk_bytes)]
    elif fork is not False and _can_fork():
        results, helper_rss = _scan_forked(src, spans, mode, chunk_bytes)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(spans)) as ex:
            futs = [ex.submit(_scan_span, src, a, b, i == 0, i == len(spans) - 1, mode, chunk_bytes)
                    for i, (a, b) in enumerate(spans)]
            results = [f.result() for f in futs]  # re-raises Unsupported
    parts = [p for r in results for p in r]
    if not parts:
        raise Unsupported("no ops")
    cat = _merge(parts)
    n_ops, has_index = cat.pop("n"), cat.pop("has_index")
    m_off = np.zeros(n_ops + 1, np.int64)
    np.cumsum(cat.pop("m_count"), out=m_off[1:])
    return Scanned(n_ops=n_ops, has_index=bool(has_index), m_off=m_off, helper_max_rss_kb=helper_rss, **cat)


def _merge(parts: list[dict]) -> dict:
    """The slices' columns as one part. A piece merges its own slices where it ran (in a forked
    child, in parallel, and it then sends a few large buffers instead of thousands of small ones);
    the pieces are merged at the end. Concatenation's dtype does not depend on the grouping."""
    if len({p["has_index"] for p in parts}) != 1:
        raise Unsupported("index in some ops only")
    cat = {"n": int(sum(p["n"] for p in parts)), "has_index": parts[0]["has_index"]}
    for k in [k for k in parts[0] if k not in ("n", "has_index")]:
        cat[k] = np.concatenate([p.pop(k) for p in parts])  # free each slice's column as it is copied
    return cat


def _can_fork() -> bool:
    from toki.check.accel import children

    return children.available()


def _scan_forked(src, spans: list[tuple[int, int]], mode: dict, chunk_bytes: int) -> tuple[list, int]:
    """Pieces 2.. in forked children, piece 1 here; a child that dies is replaced by doing its
    piece here. Returns (the pieces' parts in order, the largest child's peak RSS in KB)."""
    from toki.check.accel.children import ChildLost, Forked

    last = len(spans) - 1
    kids: list[Forked] = []
    try:
        for i, (a, b) in enumerate(spans[1:], 1):
            kids.append(Forked(_scan_span, src, a, b, False, i == last, mode, chunk_bytes))
        results = [_scan_span(src, spans[0][0], spans[0][1], True, last == 0, mode, chunk_bytes)]
        rss = 0
        while kids:
            kid = kids[0]
            i = len(results)
            try:
                results.append(kid.result())
                rss = max(rss, kid.max_rss_kb or 0)
            except ChildLost:
                a, b = spans[i]
                results.append(_scan_span(src, a, b, False, i == last, mode, chunk_bytes))
            kids.pop(0)
    except BaseException:
        for kid in kids:
            kid.abandon()
        raise
    return results, rss


def _split(src, start: int, k: int) -> list[int]:
    """Cut points right after an op's closing brace. In the subset every ``}`` closes an op (nested
    objects and braces in strings are not in it), so a wrong cut only happens on input the scan
    rejects anyway; and cutting at braces, not newlines, makes the cuts the same whatever the
    layout (one op per line, one line for the whole file, pretty-printed)."""
    n = src.size
    cuts = [start]
    for i in range(1, k):
        a = max(cuts[-1] + 1, start + (n - start) * i // k)
        win = src.read(a, min(n, a + (1 << 16)))
        j = win.find(b"}")
        if j >= 0:
            cuts.append(a + j + 1)
    cuts.append(n)
    return sorted(set(cuts))


def _scan_span(src, s: int, end: int, first: bool, last: bool, mode: dict, chunk_bytes: int) -> list:
    """Scan bytes [s, end), which start at the file start (first) or right after an op's closing
    brace, and end at the file end (last) or right after an op's closing brace."""
    parts = []
    d0, prev = (0, -1) if first else (mode["opd"] - 1, RBRACE)
    ch = chunk_bytes
    while s < end:
        buf = src.read(s, min(end, s + ch))
        if s + len(buf) < end:  # end the slice after its last closing brace (no token is cut)
            k = buf.rfind(b"}")
            if k < 0:
                ch *= 2
                continue
            buf = buf[:k + 1]
        if (buf.translate(None, _EDN_BYTES) if mode["edn"] else not buf.isascii() or b"\\" in buf):
            raise Unsupported("non-ASCII bytes or escapes (EDN: a byte outside names, numbers and brackets)")
        final = last and s + len(buf) == end
        r = accel.load("json_scan").scan_slice(buf, final, mode, d0, prev) if mode.get("compiled") else False
        if r is False:  # not the compiled scanner's: the vectorised one decides
            r = _scan_slice(buf, final, mode, d0, prev)
        if r is None:  # no op closes in this slice: take a bigger one
            if s + len(buf) == end:
                raise Unsupported("a piece does not end with an op")
            ch *= 2
            continue
        part, used = r
        if part["n"]:
            parts.append(part)
        s += used
        d0, prev = mode["opd"] - 1, RBRACE
        ch = chunk_bytes
    return [_merge(parts)] if parts else []


def _scan_slice(buf: bytes, final: bool, mode: dict, d0: int, prev: int):
    """Scan one slice, starting at container depth d0 after a token of kind prev (-1: file start).
    Returns (columns, bytes used: up to the last complete op) or None if no op completes."""
    opd, table, edn, step = mode["opd"], mode["table"], mode["edn"], mode["step"]
    lines = opd == 1
    n = len(buf)
    padded = buf + bytes(16)
    b = np.frombuffer(padded, np.uint8)
    c = np.frombuffer(padded.translate(mode["cls"]), np.uint8)
    cand = np.empty(n + 1, bool)
    cand[0] = c[0] != _WS
    np.not_equal(c[1:n] & c[:n - 1], _LIT, out=cand[1:n])
    cand[1:n] &= c[1:n] != _WS
    cand[n] = True
    pos_ext = np.flatnonzero(cand)  # token starts, then the end of the slice
    pos = pos_ext[:-1]
    kind = np.frombuffer(b[pos].tobytes().translate(mode["kind"]), np.uint8)
    if len(kind) == 0:
        if final and d0 == 0 and prev == RBRACE and lines:
            return _empty(), n
        raise Unsupported("no tokens")
    bi = np.flatnonzero(kind < 4)
    bk = kind[bi]
    dab = np.cumsum(np.frombuffer(bk.tobytes().translate(_DELTA), np.int8), dtype=np.int16)  # depth after each bracket
    if d0:
        dab += np.int16(d0)
    # cut after the last op's closing brace
    closes = np.flatnonzero((bk == RBRACE) & (dab == opd - 1))
    if final:
        T = len(pos)
        if dab[-1] != 0 if len(dab) else d0 != 0:
            raise Unsupported("unbalanced")
        used = n
    else:
        if len(closes) == 0:
            return None
        T = int(bi[closes[-1]]) + 1
        used = int(pos[T - 1]) + 1
        nb = int(closes[-1]) + 1
        bi, bk, dab = bi[:nb], bk[:nb], dab[:nb]
        pos_ext, kind = pos_ext[:T + 1], kind[:T]  # pos_ext[T]: the next token, a bound as good as n
        pos = pos_ext[:T]
    if len(dab) and (int(dab.min()) < 0 or int(dab.max()) > opd + 3):
        raise Unsupported("depth")
    if (kind == OTHER).any():
        raise Unsupported("unknown token")
    # container depth after every token (bounded by the checks above), and the grammar as allowed
    # (depth, kind, next kind): the pair of kinds gives the depths where it may occur
    cnt = np.diff(np.concatenate(([0], bi, [T])))
    dtok = np.repeat(np.concatenate(([d0], dab)).astype(np.uint8), cnt)
    pair = kind[:-1] << np.uint8(4)
    pair |= kind[1:]
    ok_at = np.frombuffer(pair.tobytes().translate(mode["pairmask"]), np.uint8)
    if not np.all(ok_at & np.left_shift(np.uint8(1), dtok[:-1])):
        raise Unsupported("grammar")
    if prev < 0:
        if kind[0] != (LBRACE if lines else LBRACK) or d0 != 0:
            raise Unsupported("start")
    elif not table[(d0 << 8) | (prev << 4) | int(kind[0])]:
        raise Unsupported("grammar at a slice start")
    if final and kind[-1] != (RBRACE if lines else RBRACK):
        raise Unsupported("end")

    # strings: a literal run (it ends at the next token, or earlier at whitespace) with a quote at
    # each end (the first is the token's kind) and no other quote: two quotes per string in all.
    # EDN keywords: a literal run after a colon (the token's kind); no quote is in an EDN slice
    si = np.flatnonzero(kind == STR)
    sp = pos[si]
    close = pos_ext[1:][si] - 1
    ws = np.flatnonzero(c[close] == _WS)
    while len(ws):
        close[ws] -= 1
        ws = ws[c[close[ws]] == _WS]
    if edn:
        slen = close - sp
        if (slen < 1).any():
            raise Unsupported("a colon alone")
    else:
        if (close <= sp).any() or (b[close] != 34).any() or np.count_nonzero(b[:used] == 34) != 2 * len(si):
            raise Unsupported("strings")
        slen = close - sp - 1
    w8 = np.ndarray((n + 8,), "<u8", padded, 0, (1,))
    word = (w8[sp + 1] & _MASK[np.minimum(slen, 8)]) | (slen.astype(np.uint64) << np.uint64(56))
    word[slen > 7] = np.uint64(0)
    j = (word * _HMUL) >> _HSH
    sid_tok = np.full(T, S_UNKNOWN, np.uint8)
    sid_tok[si] = np.where(_HW[j] == word, _HID[j], S_UNKNOWN)
    if not edn:  # object keys: a string after { or , inside an op is a key, and only a key precedes a colon
        at_obj = si[dtok[si] == opd]
        kp = kind[at_obj - 1]
        keypos = (kp == LBRACE) | (kp == COMMA)
        if not np.array_equal(keypos, kind[at_obj + 1] == COLON):
            raise Unsupported("object keys")
        key_tok = at_obj[keypos]
    # literals
    li = np.flatnonzero((kind >= NULL) & (kind <= FALSE))
    if len(li):
        lk = kind[li]
        ln = np.where(lk == FALSE, 5, np.where(lk == NULL, 3 if edn else 4, 4))
        want = np.where(lk == NULL, _NILW if edn else _NULLW, np.where(lk == TRUE, _TRUEW, _FALSEW))
        lp = pos[li]
        if not ((w8[lp] & _MASK[ln]) == want).all() or (c[lp + ln] == _LIT).any():
            raise Unsupported("literals")
    num_tok = _numbers(b, c, w8, kind, pos, T, b"-" in buf)

    # ops and their members
    op_tok = bi[bk == LBRACE]
    nops = len(op_tok)
    if nops == 0:
        return _empty(), used
    if edn:  # an op's forms (tokens right inside it, its closing brace aside) alternate key, value
        dprev = np.empty(T, np.uint8)
        dprev[0] = d0
        dprev[1:] = dtok[:-1]
        forms = np.flatnonzero((dprev == opd) & (kind != RBRACE))
        f0 = np.searchsorted(forms, op_tok)
        nf = np.diff(np.append(f0, len(forms)))
        if (nf & 1).any():
            raise Unsupported("a map with an odd number of forms")
        key_tok = forms[((np.arange(len(forms)) - np.repeat(f0, nf)) & 1) == 0]
        if (kind[key_tok] != STR).any():
            raise Unsupported("a key that is not a keyword")
    kcount = np.diff(np.append(np.searchsorted(key_tok, op_tok), len(key_tok)))
    key_op = np.repeat(np.arange(nops), kcount)
    key_id = sid_tok[key_tok]
    known = key_id < len(_KEYS)
    cell = key_op[known] * len(_KEYS) + key_id[known]
    if len(cell) and np.bincount(cell).max() > 1:
        raise Unsupported("duplicate keys")
    vt = np.full(nops * len(_KEYS), -1, np.int64)
    vt[cell] = key_tok[known] + step
    vt = vt.reshape(nops, len(_KEYS))
    t_tok, p_tok, f_tok, v_tok, i_tok, tm_tok = vt.T
    if (t_tok < 0).any() or (p_tok < 0).any():
        raise Unsupported("op without type or process")
    typ = _TYPE_OF[sid_tok[t_tok]]
    if (kind[t_tok] != STR).any() or (typ < 0).any():
        raise Unsupported("type")
    client = kind[p_tok] == NUM
    process = np.where(client, num_tok[p_tok], 0)
    has_i = i_tok >= 0
    if has_i.any() and not has_i.all():
        raise Unsupported("index in some ops only")
    has_index = bool(has_i.all())
    if has_index and (kind[i_tok] != NUM).any():
        raise Unsupported("index")
    index = num_tok[i_tok] if has_index else np.zeros(nops, np.int64)
    tk = np.where(tm_tok >= 0, kind[np.maximum(tm_tok, 0)], NULL)
    if not ((tk == NUM) | (tk == NULL)).all():
        raise Unsupported("time")
    has_time = tk == NUM
    time = np.where(has_time, num_tok[np.maximum(tm_tok, 0)], 0)
    fk = f_tok[client]
    if ((fk >= 0) & ((kind[np.maximum(fk, 0)] != STR) | (sid_tok[np.maximum(fk, 0)] != S["txn"]))).any():
        raise Unsupported("f")
    vk = np.where(v_tok >= 0, kind[np.maximum(v_tok, 0)], 255)
    vkind = np.select([v_tok < 0, vk == NULL, vk == LBRACK], [0, 1, 2], 3).astype(np.int8)

    # micro-ops: lists opening at depth opd+2 inside the value list of a client op
    vl_op = np.flatnonzero(client & (vkind == 2))
    vl_tok = v_tok[vl_op]
    B = len(bi)
    oplist = (bk == LBRACK) & (dab == opd + 1)
    owner = np.maximum.accumulate(np.where(oplist, np.arange(B), -1))
    mo_b = np.flatnonzero((bk == LBRACK) & (dab == opd + 2))
    own_tok = bi[owner[mo_b]]
    jj = np.minimum(np.searchsorted(vl_tok, own_tok), max(len(vl_tok) - 1, 0))
    good = (vl_tok[jj] == own_tok) if len(vl_tok) else np.zeros(len(mo_b), bool)
    mop_b = mo_b[good]
    mop_op = vl_op[jj[good]]
    # every element of a client value list must be a micro-op
    sc = np.flatnonzero((dtok == opd + 1) & (kind >= STR))
    if len(sc) and len(vl_tok):
        ol_tok = bi[oplist]
        sown = ol_tok[np.searchsorted(ol_tok, sc) - 1]
        if np.isin(sown, vl_tok).any():
            raise Unsupported("value element is not a micro-op")
    t = bi[mop_b]                   # a micro-op [f k v]: f at t+1, k at tk, v at tv
    tk, tv = t + 1 + step, t + 1 + 2 * step
    kx = np.concatenate([kind, np.full(8, OTHER, np.uint8)])  # a short last micro-op reads past the end
    k5 = kx[tv]
    ok = (kx[t + 1] == STR) & (kx[tk] == NUM) & ((k5 == NUM) | (k5 == NULL) | (k5 == LBRACK))
    if not edn:
        ok &= (kx[t + 2] == COMMA) & (kx[t + 4] == COMMA)
    if not ok.all():
        raise Unsupported("micro-op shape")
    islist = k5 == LBRACK
    lb = mop_b[islist]
    rclose = bi[lb + 2]
    if (kind[tv[~islist] + 1] != RBRACK).any() or (kind[rclose + 1] != RBRACK).any():
        raise Unsupported("micro-op length")
    m_f = _F_OF[sid_tok[t + 1]]
    if (m_f < 0).any():
        raise Unsupported("micro-op f")
    m_vkind = np.where(islist, 2, np.where(k5 == NULL, 1, 0)).astype(np.int8)
    m_len = np.zeros(len(t), np.int64)
    ro = tv[islist]
    nel = (rclose - ro + step - 2) // step  # tokens between the brackets: n elements (and n - 1 commas)
    m_len[islist] = nel
    tot = int(nel.sum())
    el_tok = np.repeat(ro + 1 - step * (np.cumsum(nel) - nel), nel) + step * np.arange(tot)
    if (kind[el_tok] != NUM).any():
        raise Unsupported("list element")
    part = {"n": nops, "has_index": has_index, "index": compact(index), "type": typ, "client": client,
            "process": compact(process), "time": compact(time), "has_time": has_time, "vkind": vkind,
            "m_count": compact(np.bincount(mop_op, minlength=nops)), "m_f": m_f, "m_key": compact(num_tok[tk]),
            "m_vkind": m_vkind, "m_val": compact(np.where(k5 == NUM, num_tok[tv], 0)), "m_len": compact(m_len),
            "elem": compact(num_tok[el_tok])}
    if lines and not edn:  # the general parser reads JSON lines a line at a time (the EDN reader reads forms)
        _check_lines(buf, pos, op_tok, bi[bk == RBRACE], prev >= 0)
    return part, used


_INT_TYPES = tuple((t, np.iinfo(t).min, np.iinfo(t).max) for t in (np.int8, np.int16, np.int32))


_NARROW = ("index", "process", "time", "m_count", "m_key", "m_val", "m_len", "elem")


def owned(part: dict) -> dict:
    """The compiled scanner's columns narrowed as :func:`_scan_slice` narrows its own, and always
    copies: a view would keep the kernel's whole buffers alive until the slices are merged."""
    for k, a in part.items():
        if isinstance(a, np.ndarray):
            c = compact(a) if k in _NARROW else a
            part[k] = a.copy() if c is a else c
    part["client"] = np.ones(part["n"], bool)
    return part


def compact(a: np.ndarray) -> np.ndarray:
    """``a`` in the narrowest integer type that holds it. A history's columns are mostly small
    numbers (list elements of 1-32, keys and values below 2^31), and at 10^7 transactions the
    elements of the list reads alone are 2.4 * 10^8 numbers: 1.9 GB as int64, 0.24 GB as int8.
    Slices are narrowed one by one; concatenating them widens to the widest slice's type."""
    if len(a) == 0:
        return a
    lo, hi = int(a.min()), int(a.max())
    for t, tmin, tmax in _INT_TYPES:
        if tmin <= lo and hi <= tmax:
            return a.astype(t)
    return a


def _empty() -> dict:
    z8, z64 = np.zeros(0, np.int8), np.zeros(0, np.int64)
    return {"n": 0, "has_index": None, "index": z64, "type": z8, "client": np.zeros(0, bool), "process": z64,
            "time": z64, "has_time": np.zeros(0, bool), "vkind": z8, "m_count": z64, "m_f": z8, "m_key": z64,
            "m_vkind": z8, "m_val": z64, "m_len": z64, "elem": z64}


_U = np.uint64
_HI8 = _U(0x8080808080808080)
_ADD_GT9, _ADD_LT0 = _U(0x4646464646464646), _U(0x5050505050505050)
_M1, _M2, _M3 = _U(0x00FF00FF00FF00FF), _U(0x0000FFFF0000FFFF), _U(0xFFFFFFFF)
_popcount = getattr(np, "bitwise_count", None)


def _lane_count(low: np.ndarray) -> np.ndarray:
    """For low = 0x80 << 8i (or 0): i (or the number of lanes), as uint8."""
    if _popcount is not None:
        return _popcount(low - low.dtype.type(1)) >> np.uint8(3)
    e = np.frexp(low.astype(np.float64))[1]  # numpy < 2: 2^(e-1) = low
    return np.where(low == 0, low.itemsize, (e - 8) >> 3).astype(np.uint8)


def _digits_swar(w: np.ndarray, hi, add_gt9, add_lt0, zeros):
    """Leading digit bytes of little-endian words w (uint8 count, all lanes meaning as many or
    more), and the words with those digits right-aligned as values 0..9, the other lanes 0."""
    nd = w + add_gt9
    nd |= ~(w + add_lt0)
    nd &= hi                                      # a lane's high bit marks a byte that is not a digit
    nd &= ~nd + nd.dtype.type(1)                  # the lowest one
    L = _lane_count(nd)
    sh = (np.uint8(w.itemsize) - L) << np.uint8(3)
    x = w << sh
    x -= zeros << sh
    return L, x


def _numbers(b: np.ndarray, c: np.ndarray, w8: np.ndarray, kind: np.ndarray, pos: np.ndarray,
             T: int, minus: bool = True) -> np.ndarray:
    """Value of every integer token (0 elsewhere); Unsupported for anything but -?(0|[1-9][0-9]*)
    of at most 18 digits. Up to 4 (then 8) digits at once: the bytes at the first digit are read
    as one word, the digit bytes counted from its low end, and the digits reduced in lanes."""
    out = np.zeros(T, np.int64)
    ni = np.flatnonzero(kind == NUM)
    if len(ni) == 0:
        return out
    p = pos[ni]
    if minus:                                     # a minus sign in the slice (else no number is negative)
        neg = b[p] == 45
        ds = p + neg
    else:
        neg, ds = None, p
    w4 = np.ndarray((len(b) - 4,), "<u4", b, 0, (1,))
    U4 = np.uint32
    L, x = _digits_swar(w4[ds], U4(0x80808080), U4(0x46464646), U4(0x50505050), U4(0x30303030))
    if len(L) and int(L.min()) < 1:
        raise Unsupported("not an integer")
    if ((b[ds] == 48) & (L > 1)).any():
        raise Unsupported("leading zero")
    x = (x * U4(10) + (x >> U4(8))) & U4(0x00FF00FF)
    x = (x * U4(100) + (x >> U4(16))) & U4(0xFFFF)
    vals = x.astype(np.int64)
    lg = np.flatnonzero(L == 4)
    if len(lg):                                   # 4 digits or more: 8 at once, then one at a time
        s0 = ds[lg]
        L8, y = _digits_swar(w8[s0], _HI8, _ADD_GT9, _ADD_LT0, _U(0x3030303030303030))
        y = (y * _U(10) + (y >> _U(8))) & _M1
        y = (y * _U(100) + (y >> _U(16))) & _M2
        y = (y * _U(10000) + (y >> _U(32))) & _M3
        acc = y.astype(np.int64)
        ll = np.flatnonzero(L8 == 8)
        if len(ll):
            s1, a1 = s0[ll], acc[ll]
            Ll = np.full(len(ll), 8, np.uint8)
            live = np.ones(len(ll), bool)
            last = len(b) - 1
            for k in range(8, 19):
                d = b[np.minimum(s1 + k, last)] - np.uint8(48)
                live &= d <= 9
                if not live.any():
                    break
                a1 = np.where(live, a1 * 10 + d, a1)
                Ll += live
            if live.any():
                raise Unsupported("number length")
            acc[ll], L8[ll] = a1, Ll
        vals[lg], L[lg] = acc, L8
    if (c[ds + L] == _LIT).any():               # the token goes on after its digits: 1.5, 1e3, 12a
        raise Unsupported("not an integer")
    if neg is not None:
        np.negative(vals, out=vals, where=neg)
    out[ni] = vals
    return out


def _check_lines(buf: bytes, pos: np.ndarray, op_open: np.ndarray, op_close: np.ndarray, after_op: bool) -> None:
    """JSON lines: each op on one line of its own (the general parser reads a line at a time)."""
    a = np.frombuffer(buf, np.uint8)
    nl = np.flatnonzero((a == 10) | (a == 13))
    lo = np.searchsorted(nl, pos[op_open])
    lc = np.searchsorted(nl, pos[op_close])
    if not np.array_equal(lo, lc) or (len(lo) > 1 and not (lo[1:] > lc[:-1]).all()) or (after_op and lo[0] == 0):
        raise Unsupported("JSON lines: one op per line")
