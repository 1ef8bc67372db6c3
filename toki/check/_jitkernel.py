"""The loop of :mod:`toki.check.jitscan`, compiled by numba (importing this module imports numba).

One pass over a slice of a JSON history: ops ``{...}`` (in a top-level array, or one per line),
their keys, and their micro-ops, filling preallocated columns. It returns ``_BAIL`` at the first
byte outside the subset :mod:`toki.check.jitscan` describes; the caller then gives the slice to
the vectorised scanner, which knows the whole subset and names what is wrong. Positions past the
slice read the caller's zero padding, which matches nothing, so no read is bounds-checked.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_OK, _MORE, _BAIL = 0, 1, 2
# what a parse step returns in place of a position
_FAIL = -1     # outside the subset
_SHORT = -2    # ran past the slice's end (the op is cut)

_Q, _LB, _RB, _LC, _RC, _COMMA, _COLON, _MINUS = 34, 91, 93, 123, 125, 44, 58, 45

# byte classes as the vectorised scanner's: 1 literal (may be inside a string or number)
_LIT = np.zeros(256, np.uint8)
for _c in range(33, 127):
    if chr(_c) not in '[]{},:\\':
        _LIT[_c] = 1

_KEY_TYPE, _KEY_PROCESS, _KEY_F, _KEY_VALUE, _KEY_INDEX, _KEY_TIME = range(6)


@njit(cache=True, inline="always")
def _ws(b, i, n, lines_op):
    """Skip whitespace; inside an op of a JSON-lines history a line break is outside the subset."""
    while True:
        x = b[i]
        if x == 32 or x == 9:
            i += 1
        elif x == 10 or x == 13:
            if lines_op:
                return _FAIL
            i += 1
        else:
            return i


@njit(cache=True, inline="always")
def _end(b, i, n):
    """A parse step that stopped at i: past the slice it was cut, else it is outside the subset."""
    return _SHORT if i >= n else _FAIL


@njit(cache=True, inline="always")
def _word(b, i, n, lit):
    """A string at i (b[i] == '"'): (the position after it, its bytes as one little-endian word
    with the length in the top byte, 0 for strings longer than 7)."""
    j = i + 1
    w = np.uint64(0)
    while lit[b[j]] and b[j] != _Q:
        if j - i <= 7:
            w |= np.uint64(b[j]) << np.uint64(8 * (j - i - 1))
        j += 1
    if b[j] != _Q:
        return _end(b, j, n), w
    ln = j - i - 1
    if lit[b[j + 1]]:  # the token goes on after its closing quote
        return _end(b, j + 1, n), w
    if ln > 7 or ln == 0:
        return j + 1, np.uint64(0)
    return j + 1, w | (np.uint64(ln) << np.uint64(56))


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
def _null(b, i, n, lit):
    if b[i] == 110 and b[i + 1] == 117 and b[i + 2] == 108 and b[i + 3] == 108 and not lit[b[i + 4]]:
        return i + 4
    return _end(b, i + 4, n)


def _w(s: str) -> int:
    e = s.encode()
    return int.from_bytes(e, "little") | (len(e) << 56)


_W_TYPE, _W_PROCESS, _W_F, _W_VALUE, _W_INDEX, _W_TIME = (np.uint64(_w(s)) for s in
                                                          ("type", "process", "f", "value", "index", "time"))
_W_OK, _W_INFO, _W_FAIL, _W_INVOKE = (np.uint64(_w(s)) for s in ("ok", "info", "fail", "invoke"))
_W_TXN, _W_R, _W_APPEND, _W_W = (np.uint64(_w(s)) for s in ("txn", "r", "append", "w"))


@njit(cache=True)
def scan_slice(b, n, array_mode, first, final):
    """Scan b[:n] (b has at least 16 zero bytes after n). ``first``: the slice starts the file;
    else it starts right after an op's closing brace. Returns (status, bytes used, op, micro-op
    and element counts, has_index, then the columns, each longer than its count)."""
    lit = _LIT
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
    i = 0
    sep = array_mode and not first  # an op just ended: a comma or the closing bracket comes next
    closed = False
    if first:
        i = _ws(b, 0, n, False)
        if array_mode:
            if b[i] != _LB:
                status = _BAIL
            i += 1
    while status == _OK:
        start = i
        i = _ws(b, i, n, False)
        if i >= n:
            break
        if sep:
            if b[i] == _RB:
                i = _ws(b, i + 1, n, False)
                if i < n or not final:
                    status = _BAIL
                closed = True
                break
            if b[i] != _COMMA:
                status = _BAIL
                break
            i = _ws(b, i + 1, n, False)
            if i >= n:
                break
        if b[i] != _LC:
            status = _BAIL
            break
        if lines and (nops > 0 or not first):  # an op of its own line: a line break since the last
            k = start
            while k < i and b[k] != 10 and b[k] != 13:
                k += 1
            if k == i:
                status = _BAIL
                break
        if nops >= cap_ops:
            status = _BAIL
            break
        # one op
        i = _ws(b, i + 1, n, lines)
        seen = 0
        t = -1
        has_i = 0
        vk = 0
        mstart = nm
        estart = ne
        index[nops] = 0
        time[nops] = 0
        has_time[nops] = False
        while i >= 0:
            if b[i] != _Q:
                i = _end(b, i, n)
                break
            i, w = _word(b, i, n, lit)
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
            i = _ws(b, i, n, lines)
            if i < 0:
                break
            if b[i] != _COLON:
                i = _end(b, i, n)
                break
            i = _ws(b, i + 1, n, lines)
            if i < 0:
                break
            if key == _KEY_TYPE:
                if b[i] != _Q:
                    i = _end(b, i, n)
                    break
                i, w = _word(b, i, n, lit)
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
                if b[i] != _Q:
                    i = _end(b, i, n)
                    break
                i, w = _word(b, i, n, lit)
                if i >= 0 and w != _W_TXN:
                    i = _FAIL
            elif key == _KEY_INDEX:
                i, v = _int(b, i, n, lit)
                index[nops] = v
                has_i = 1
            elif key == _KEY_TIME:
                if b[i] == 110:
                    i = _null(b, i, n, lit)
                else:
                    i, v = _int(b, i, n, lit)
                    time[nops] = v
                    has_time[nops] = True
            elif b[i] == 110:  # value: null
                i = _null(b, i, n, lit)
                vk = 1
            elif b[i] == _LB:  # value: a list of micro-ops
                vk = 2
                i = _ws(b, i + 1, n, lines)
                more = True
                if i >= 0 and b[i] == _RB:
                    i += 1
                    more = False
                while i >= 0 and more:
                    if b[i] != _LB:
                        i = _end(b, i, n)
                        break
                    if nm >= cap_m:
                        i = _FAIL
                        break
                    i = _ws(b, i + 1, n, lines)
                    if i < 0:
                        break
                    if b[i] != _Q:
                        i = _end(b, i, n)
                        break
                    i, w = _word(b, i, n, lit)
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
                    i = _ws(b, i, n, lines)
                    if i < 0:
                        break
                    if b[i] != _COMMA:
                        i = _end(b, i, n)
                        break
                    i = _ws(b, i + 1, n, lines)
                    if i < 0:
                        break
                    i, v = _int(b, i, n, lit)
                    if i < 0:
                        break
                    m_key[nm] = v
                    i = _ws(b, i, n, lines)
                    if i < 0:
                        break
                    if b[i] != _COMMA:
                        i = _end(b, i, n)
                        break
                    i = _ws(b, i + 1, n, lines)
                    if i < 0:
                        break
                    x = b[i]
                    m_val[nm] = 0
                    m_len[nm] = 0
                    if x == 110:
                        i = _null(b, i, n, lit)
                        m_vkind[nm] = 1
                    elif x == _LB:
                        m_vkind[nm] = 2
                        i = _ws(b, i + 1, n, lines)
                        ln = 0
                        if i >= 0 and b[i] == _RB:
                            i += 1
                        else:
                            while i >= 0:
                                if ne >= cap_e:
                                    i = _FAIL
                                    break
                                i, v = _int(b, i, n, lit)
                                if i < 0:
                                    break
                                elem[ne] = v
                                ne += 1
                                ln += 1
                                i = _ws(b, i, n, lines)
                                if i < 0:
                                    break
                                if b[i] == _RB:
                                    i += 1
                                    break
                                if b[i] != _COMMA:
                                    i = _end(b, i, n)
                                    break
                                i = _ws(b, i + 1, n, lines)
                        m_len[nm] = ln
                    else:
                        i, v = _int(b, i, n, lit)
                        m_val[nm] = v
                        m_vkind[nm] = 0
                    if i < 0:
                        break
                    i = _ws(b, i, n, lines)
                    if i < 0:
                        break
                    if b[i] != _RB:  # a micro-op of three
                        i = _end(b, i, n)
                        break
                    nm += 1
                    i = _ws(b, i + 1, n, lines)
                    if i < 0:
                        break
                    if b[i] == _RB:
                        i += 1
                        more = False
                    elif b[i] != _COMMA:
                        i = _end(b, i, n)
                    else:
                        i = _ws(b, i + 1, n, lines)
            else:  # value: anything else
                i = _end(b, i, n)
            if i < 0:
                break
            i = _ws(b, i, n, lines)
            if i < 0:
                break
            if b[i] == _RC:
                i += 1
                break
            if b[i] != _COMMA:
                i = _end(b, i, n)
                break
            i = _ws(b, i + 1, n, lines)
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


def warm() -> None:
    """Compile (or load from the cache) before any fork: children inherit the machine code."""
    b = np.frombuffer(b'[{"type":"ok","process":0,"value":[["r",1,[1]]]}]' + bytes(16), np.uint8)
    scan_slice(b, len(b) - 16, True, True, True)
