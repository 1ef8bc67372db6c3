"""A compiled scanner for the common shape of JSON and EDN histories: the compiled twin of
:func:`toki.check.reading.json_scan._scan_slice` (importing this module imports numba).

The vectorised scanner makes about forty passes over every token of a slice, each a numpy call
over an int64 array, and so reads a history at 30-60 MB/s per core: at 10^7 transactions (3.3
GB) that alone is most of a minute. This one reads a slice once, byte by byte, in a loop that
numba compiles to machine code, and fills the same columns.

It accepts a narrower subset than the vectorised scanner and hands every slice it does not
accept back to it (``False``), so that the vectorised scanner, and behind it the general parser,
keep deciding what is accepted and how a bad op is named. A slice is taken here when every op in
it is a client op (an integer ``process``) whose keys are all among ``type``, ``process``, ``f``
("txn"), ``value`` (null or a list of micro-ops ``[f, k, v]``), ``index`` and ``time`` (an
integer or null), each once; anything else (a nemesis op, another key, a float, an escape, a
micro-op of another length) sends the slice to the vectorised scanner. The columns are the
vectorised scanner's, value for value and dtype for dtype; a test compares the two on every
layout and on mutated histories.

One pass over a slice: ops ``{...}`` (in a top-level array, or one per line), their keys, and
their micro-ops, filling preallocated columns. :func:`scan_bytes` returns ``_BAIL`` at the first
byte outside the subset; positions past the slice read the caller's zero padding, which matches
nothing, so no read is bounds-checked. numba compiles the loop on first use and caches the
machine code beside this module, so only a process that finds no cache pays the compile (about
10 s here); histories smaller than ``accel.MIN_SIZE["json_scan"]`` never start it.
"""
from __future__ import annotations

import numpy as np
from numba import literally, njit

_OK, _MORE, _BAIL = 0, 1, 2
# what a parse step returns in place of a position
_FAIL = -1     # outside the subset
_SHORT = -2    # ran past the slice's end (the op is cut)

_Q, _LB, _RB, _LC, _RC, _COMMA, _COLON, _MINUS = 34, 91, 93, 123, 125, 44, 58, 45

# byte classes as the vectorised scanner's: 1 literal (part of a string, keyword or number)
_LIT = np.zeros(256, np.uint8)
_LIT_EDN = np.zeros(256, np.uint8)
for _c in range(33, 127):
    if chr(_c) not in '[]{},:\\':
        _LIT[_c] = 1
    if chr(_c) not in '[]{},\\':
        _LIT_EDN[_c] = 1

_KEY_TYPE, _KEY_PROCESS, _KEY_F, _KEY_VALUE, _KEY_INDEX, _KEY_TIME = range(6)


@njit(cache=True, inline="always")
def _ws(b, i, n, nl_bad, edn):
    """Skip whitespace (and commas, in EDN); a line break where an op must stay on its line (JSON
    lines) is outside the subset."""
    while True:
        x = b[i]
        if x == 32 or x == 9 or (edn and x == _COMMA):
            i += 1
        elif x == 10 or x == 13:
            if nl_bad:
                return _FAIL
            i += 1
        else:
            return i


@njit(cache=True, inline="always")
def _end(b, i, n):
    """A parse step that stopped at i: past the slice it was cut, else it is outside the subset."""
    return _SHORT if i >= n else _FAIL


@njit(cache=True, inline="always")
def _word(b, i, n, lit, edn):
    """A JSON string, or an EDN keyword, at i: (the position after it, its bytes as one
    little-endian word with the length in the top byte, 0 for names longer than 7)."""
    if b[i] != (_COLON if edn else _Q):
        return _end(b, i, n), np.uint64(0)
    j = i + 1
    w = np.uint64(0)
    while lit[b[j]] and (edn or b[j] != _Q):
        if j - i <= 7:
            w |= np.uint64(b[j]) << np.uint64(8 * (j - i - 1))
        j += 1
    ln = j - i - 1
    if not edn:
        if b[j] != _Q:
            return _end(b, j, n), w
        j += 1
        if lit[b[j]]:  # the token goes on after its closing quote
            return _end(b, j, n), w
    elif j >= n:  # a keyword the slice cuts
        return _SHORT, w
    if ln > 7 or ln == 0:
        return j, np.uint64(0)
    return j, w | (np.uint64(ln) << np.uint64(56))


@njit(cache=True, inline="always")
def _int(b, i, n, lit):
    """An integer -?(0|[1-9][0-9]*) of at most 18 digits at i: (the position after it, value)."""
    neg = b[i] == _MINUS
    j = i + 1 if neg else i
    s = j
    v = 0
    while 48 <= b[j] <= 57:
        v = v * 10 + (b[j] - 48)
        j += 1
    nd = j - s
    if nd == 0 or nd > 18 or (b[s] == 48 and nd > 1):
        return _end(b, j, n), 0
    if lit[b[j]]:  # 1.5, 1e3, 12a
        return _end(b, j, n), 0
    return j, (-v if neg else v)


@njit(cache=True, inline="always")
def _null(b, i, n, lit, edn):
    """JSON null, or EDN nil, at i."""
    if edn:
        if b[i] == 110 and b[i + 1] == 105 and b[i + 2] == 108 and not lit[b[i + 3]]:
            return i + 3
        return _end(b, i + 3, n)
    if b[i] == 110 and b[i + 1] == 117 and b[i + 2] == 108 and b[i + 3] == 108 and not lit[b[i + 4]]:
        return i + 4
    return _end(b, i + 4, n)


@njit(cache=True, inline="always")
def _next(b, i, n, nl_bad, edn, close):
    """After an element of a list or map: (the position of the next element, more to come), or
    (after the closing bracket ``close``, False). JSON separates elements by commas, EDN by
    whitespace (commas being whitespace)."""
    i = _ws(b, i, n, nl_bad, edn)
    if i < 0:
        return i, False
    if b[i] == close:
        return i + 1, False
    if edn:
        return i, True
    if b[i] != _COMMA:
        return _end(b, i, n), False
    return _ws(b, i + 1, n, nl_bad, edn), True


def _w(s: str) -> int:
    e = s.encode()
    return int.from_bytes(e, "little") | (len(e) << 56)


_W_TYPE, _W_PROCESS, _W_F, _W_VALUE, _W_INDEX, _W_TIME = (np.uint64(_w(s)) for s in
                                                          ("type", "process", "f", "value", "index", "time"))
_W_OK, _W_INFO, _W_FAIL, _W_INVOKE = (np.uint64(_w(s)) for s in ("ok", "info", "fail", "invoke"))
_W_TXN, _W_R, _W_APPEND, _W_W = (np.uint64(_w(s)) for s in ("txn", "r", "append", "w"))


@njit(cache=True)
def scan_bytes(b, n, array_mode, first, final, edn):
    """Scan b[:n] (b has at least 16 zero bytes after n). ``first``: the slice starts the file;
    else it starts right after an op's closing brace. Returns (status, bytes used, op, micro-op
    and element counts, has_index, then the columns, each longer than its count)."""
    # _scan is compiled once per format, edn a literal (numba.literally), so that the compiler
    # drops the other format's branches (one body taking edn as a variable ran JSON at 187 MB/s
    # against 309). Not inlined here at numba's IR level: that deep-copies _scan's IR twice and
    # took 82 s to compile in a fresh clone against 29 s (JSON 319 -> 309 MB/s, EDN 477 -> 414).
    if edn:
        return _scan(b, n, array_mode, first, final, True)
    return _scan(b, n, array_mode, first, final, False)


@njit(cache=True)
def _scan(b, n, array_mode, first, final, edn):
    literally(edn)
    """Scan b[:n] (b has at least 16 zero bytes after n). ``first``: the slice starts the file;
    else it starts right after an op's closing brace. Returns (status, bytes used, op, micro-op
    and element counts, has_index, then the columns, each longer than its count)."""
    lit = _LIT_EDN if edn else _LIT
    cap_ops = n // 16 + 4
    cap_m = n // 8 + 4
    cap_e = n // 2 + 4
    index = np.empty(cap_ops, np.int64)
    typ = np.empty(cap_ops, np.int8)
    process = np.empty(cap_ops, np.int64)
    time = np.empty(cap_ops, np.int64)
    has_time = np.empty(cap_ops, np.bool_)
    vkind = np.empty(cap_ops, np.int8)
    m_count = np.empty(cap_ops, np.int64)
    m_f = np.empty(cap_m, np.int8)
    m_key = np.empty(cap_m, np.int64)
    m_vkind = np.empty(cap_m, np.int8)
    m_val = np.empty(cap_m, np.int64)
    m_len = np.empty(cap_m, np.int64)
    elem = np.empty(cap_e, np.int64)
    nops = 0
    nm = 0
    ne = 0
    used = 0
    has_index = -1  # not yet known; then 0 or 1 for every op
    status = _OK
    lines = not array_mode
    nl_bad = lines and not edn  # JSON lines: an op on one line (EDN is read form by form)
    i = 0
    sep = array_mode and not first  # an op just ended: a separator or the closing bracket comes next
    closed = False
    if first:
        i = _ws(b, 0, n, False, edn)
        if array_mode:
            if b[i] != _LB:
                status = _BAIL
            i += 1
    while status == _OK:
        start = i
        i = _ws(b, i, n, False, edn)
        if i >= n:
            break
        if sep:
            if b[i] == _RB:
                i = _ws(b, i + 1, n, False, edn)
                if i < n or not final:
                    status = _BAIL
                closed = True
                break
            if not edn:
                if b[i] != _COMMA:
                    status = _BAIL
                    break
                i = _ws(b, i + 1, n, False, edn)
                if i >= n:
                    break
        if b[i] != _LC:
            status = _BAIL
            break
        if nl_bad and (nops > 0 or not first):  # an op of its own line: a line break since the last
            k = start
            while k < i and b[k] != 10 and b[k] != 13:
                k += 1
            if k == i:
                status = _BAIL
                break
        if nops >= cap_ops:
            status = _BAIL
            break
        # one op: its members
        mstart = nm
        estart = ne
        seen = 0
        t = -1
        has_i = 0
        vk = 0
        index[nops] = 0
        time[nops] = 0
        has_time[nops] = False
        i = _ws(b, i + 1, n, nl_bad, edn)
        more = i >= 0 and b[i] != _RC
        if not more and i >= 0:
            i = _FAIL  # an op with no members (no type, no process)
        while more:
            i, w = _word(b, i, n, lit, edn)
            if i < 0:
                break
            if w == _W_TYPE:
                key = _KEY_TYPE
            elif w == _W_PROCESS:
                key = _KEY_PROCESS
            elif w == _W_F:
                key = _KEY_F
            elif w == _W_VALUE:
                key = _KEY_VALUE
            elif w == _W_INDEX:
                key = _KEY_INDEX
            elif w == _W_TIME:
                key = _KEY_TIME
            else:
                i = _FAIL
                break
            if seen & (1 << key):
                i = _FAIL
                break
            seen |= 1 << key
            i = _ws(b, i, n, nl_bad, edn)
            if i < 0:
                break
            if not edn:
                if b[i] != _COLON:
                    i = _end(b, i, n)
                    break
                i = _ws(b, i + 1, n, nl_bad, edn)
                if i < 0:
                    break
            if key == _KEY_TYPE:
                i, w = _word(b, i, n, lit, edn)
                if w == _W_OK:
                    t = 0
                elif w == _W_INFO:
                    t = 1
                elif w == _W_FAIL:
                    t = 2
                elif w == _W_INVOKE:
                    t = 3
                elif i >= 0:
                    i = _FAIL
            elif key == _KEY_PROCESS:
                i, v = _int(b, i, n, lit)
                process[nops] = v
            elif key == _KEY_F:
                i, w = _word(b, i, n, lit, edn)
                if i >= 0 and w != _W_TXN:
                    i = _FAIL
            elif key == _KEY_INDEX:
                i, v = _int(b, i, n, lit)
                index[nops] = v
                has_i = 1
            elif key == _KEY_TIME:
                if b[i] == 110:
                    i = _null(b, i, n, lit, edn)
                else:
                    i, v = _int(b, i, n, lit)
                    time[nops] = v
                    has_time[nops] = True
            elif b[i] == 110:  # value: null
                i = _null(b, i, n, lit, edn)
                vk = 1
            elif b[i] == _LB:  # value: a list of micro-ops [f k v]
                vk = 2
                i = _ws(b, i + 1, n, nl_bad, edn)
                going = i >= 0
                if going and b[i] == _RB:
                    i += 1
                    going = False
                while going:
                    if b[i] != _LB:
                        i = _end(b, i, n)
                        break
                    if nm >= cap_m:
                        i = _FAIL
                        break
                    i = _ws(b, i + 1, n, nl_bad, edn)
                    if i < 0:
                        break
                    i, w = _word(b, i, n, lit, edn)
                    if i < 0:
                        break
                    if w == _W_R:
                        m_f[nm] = 0
                    elif w == _W_APPEND:
                        m_f[nm] = 1
                    elif w == _W_W:
                        m_f[nm] = 2
                    else:
                        i = _FAIL
                        break
                    i, go = _next(b, i, n, nl_bad, edn, _RB)
                    if i < 0 or not go:
                        i = _FAIL if i >= 0 else i  # a micro-op of one
                        break
                    i, v = _int(b, i, n, lit)
                    if i < 0:
                        break
                    m_key[nm] = v
                    i, go = _next(b, i, n, nl_bad, edn, _RB)
                    if i < 0 or not go:
                        i = _FAIL if i >= 0 else i  # a micro-op of two
                        break
                    x = b[i]
                    m_val[nm] = 0
                    m_len[nm] = 0
                    if x == 110:
                        i = _null(b, i, n, lit, edn)
                        m_vkind[nm] = 1
                    elif x == _LB:
                        m_vkind[nm] = 2
                        i = _ws(b, i + 1, n, nl_bad, edn)
                        ln = 0
                        if i >= 0 and b[i] == _RB:
                            i += 1
                        else:
                            go = i >= 0
                            while go:
                                if ne >= cap_e:
                                    i = _FAIL
                                    break
                                i, v = _int(b, i, n, lit)
                                if i < 0:
                                    break
                                elem[ne] = v
                                ne += 1
                                ln += 1
                                i, go = _next(b, i, n, nl_bad, edn, _RB)
                                if i < 0:
                                    break
                        m_len[nm] = ln
                    else:
                        i, v = _int(b, i, n, lit)
                        m_val[nm] = v
                        m_vkind[nm] = 0
                    if i < 0:
                        break
                    i = _ws(b, i, n, nl_bad, edn)
                    if i < 0:
                        break
                    if b[i] != _RB:  # a micro-op of three
                        i = _end(b, i, n)
                        break
                    nm += 1
                    i, going = _next(b, i + 1, n, nl_bad, edn, _RB)
                    if i < 0:
                        break
            else:  # value: anything else
                i = _end(b, i, n)
            if i < 0:
                break
            i, more = _next(b, i, n, nl_bad, edn, _RC)
            if i < 0:
                break
        if i == _SHORT and not final:  # the op is cut: the next slice starts with it
            nm, ne = mstart, estart
            break
        if i < 0 or t < 0 or not (seen & (1 << _KEY_PROCESS)):
            status = _BAIL
            break
        if has_index == -1:
            has_index = has_i
        elif has_index != has_i:
            status = _BAIL
            break
        typ[nops] = t
        vkind[nops] = vk
        m_count[nops] = nm - mstart
        nops += 1
        used = i
        sep = array_mode
    if status == _OK:
        if final:
            if array_mode and not closed:
                status = _BAIL
            else:
                used = n
        if nops == 0:
            status = _BAIL if final else _MORE
    return (status, used, nops, nm, ne, max(has_index, 0), index, typ, process, time, has_time, vkind, m_count,
            m_f, m_key, m_vkind, m_val, m_len, elem)


def scan_slice(buf: bytes, final: bool, mode: dict, d0: int, prev: int):
    """The compiled twin of :func:`toki.check.reading.json_scan._scan_slice`: (the slice's columns,
    the bytes used) as the vectorised scanner gives them, or None when no op completes in the
    slice; and False when the slice is outside this scanner's subset (the vectorised one decides)."""
    from toki.check.reading.json_scan import owned

    b = np.frombuffer(buf + bytes(16), np.uint8)
    (status, used, nops, nm, ne, has_index, index, typ, process, time, has_time, vkind, m_count,
     m_f, m_key, m_vkind, m_val, m_len, elem) = scan_bytes(b, len(buf), mode["opd"] == 2, prev < 0, final, mode["edn"])
    if status == _BAIL:
        return False
    if status == _MORE:
        return None
    ops = {"index": index, "type": typ, "process": process, "time": time, "has_time": has_time, "vkind": vkind,
           "m_count": m_count}
    mops = {"m_f": m_f, "m_key": m_key, "m_vkind": m_vkind, "m_val": m_val, "m_len": m_len}
    cols = {**{k: v[:nops] for k, v in ops.items()}, **{k: v[:nm] for k, v in mops.items()}, "elem": elem[:ne]}
    return owned({"n": nops, "has_index": bool(has_index), **cols}), used


def warm() -> None:
    """Compile (or load from the cache) before any fork: children inherit the machine code."""
    for text, edn in ((b'[{"type":"ok","process":0,"value":[["r",1,[1]]]}]', False),
                      (b'[{:type :ok, :process 0, :value [[:r 1 [1]]]}]', True)):
        b = np.frombuffer(text + bytes(16), np.uint8)
        scan_bytes(b, len(text), True, True, True, edn)
