"""The loop that reads memory histories, compiled by numba (importing this module imports numba).

One pass over a slice of JSON op maps (one per line, or the elements of an array): per op its
type, process, index, time and byte range; per micro-op its kind, slot and claim or read list or
decision; every string and integer used as a slot, claim or question interned as a token (its raw
bytes, decoded once per distinct token by the caller), every (slot, claim) pair interned as a pair.
It returns ``BAIL`` with the position at the first byte outside what it knows (a float, a nested
map in a micro-op, a key repeated, ...); the caller then reads the slice with the Python column
builder, which accepts more and names a bad op. Positions past the slice read the caller's zero
padding, which matches nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# No function here is inlined at numba's IR level (``inline="always"``): that deep-copies the
# scanner's IR into every caller and took 122 s to compile in a fresh clone against 10 s without,
# for no measured gain at run time (the 10^5-transaction history scanned in 0.150 s without, 0.152 s
# and 0.167 s with; LLVM inlines the small helpers anyway).
OK_, BAIL = 0, 2
_Q, _LB, _RB, _LC, _RC, _COMMA, _COLON, _MINUS, _BS = 34, 91, 93, 123, 125, 44, 58, 45, 92
# op types as toki.check.reading.history codes; 9: a header
_T_OK, _T_INFO, _T_FAIL, _T_INVOKE, _T_HEADER = 0, 1, 2, 3, 9
# micro-op kinds as toki.check.memory codes
_ADD, _RETRACT, _CURRENT, _HISTORY, _DECIDE = 0, 1, 2, 3, 4
_EMPTY = -1


@njit(cache=True)
def _ws(b, i):
    while True:
        x = b[i]
        if x == 32 or x == 9 or x == 10 or x == 13:
            i += 1
        else:
            return i


@njit(cache=True)
def _string_end(b, i, n):
    """At an opening quote: (position after the closing quote, has an escape), or (-1, ...)."""
    j = i + 1
    esc = False
    while j < n:
        x = b[j]
        if x == _Q:
            return j + 1, esc
        if x == _BS:
            esc = True
            j += 2
            continue
        if x < 32:
            return -1, esc
        j += 1
    return -1, esc


@njit(cache=True)
def _int_end(b, i, n):
    """At a '-' or digit: the position after an integer (at most 18 digits), or -1 (a float, ...)."""
    j = i
    if b[j] == _MINUS:
        j += 1
    d = j
    while j < n and 48 <= b[j] <= 57:
        j += 1
    if j == d or j - d > 18 or (b[d] == 48 and j - d > 1):  # (JSON has no leading zeros)
        return -1
    x = b[j]
    if x == 46 or x == 101 or x == 69 or (65 <= x <= 90) or (97 <= x <= 122):  # a float, EDN's 1N, ...
        return -1
    return j


@njit(cache=True)
def _int_value(b, i, j):
    neg = b[i] == _MINUS
    k = i + 1 if neg else i
    v = 0
    while k < j:
        v = v * 10 + (b[k] - 48)
        k += 1
    return -v if neg else v


@njit(cache=True)
def _skip(b, i, n, edn):
    """Past any JSON value at i (or EDN's strings, keywords, numbers, vectors, maps and lists; a
    tag, set, character, comment or metadata is not read here), or -1."""
    x = b[i]
    if x == _Q:
        j, _ = _string_end(b, i, n)
        return j
    if x == _LB or x == _LC or (edn and x == 40):
        depth = 0
        j = i
        while j < n:
            x = b[j]
            if x == _Q:
                j, _ = _string_end(b, j, n)
                if j < 0:
                    return -1
                continue
            if edn and (x == 35 or x == 59 or x == _BS or x == 94):
                return -1
            if x == _LB or x == _LC or (edn and x == 40):
                depth += 1
            elif x == _RB or x == _RC or (edn and x == 41):
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return -1
    if edn and (x == 35 or x == 59 or x == _BS or x == 94):
        return -1
    j = i
    while j < n and not _delim(b[j]):
        j += 1
    return j if j > i else -1


@njit(cache=True)
def _is(b, s, e, word):
    """Whether bytes [s, e) are ``word`` (a uint8 array)."""
    if e - s != len(word):
        return False
    for k in range(e - s):
        if b[s + k] != word[k]:
            return False
    return True


@njit(cache=True)
def _hash(b, s, e, kind):
    h = np.uint64(14695981039346656037) ^ np.uint64(kind)
    for k in range(s, e):
        h = (h ^ np.uint64(b[k])) * np.uint64(1099511628211)
    return h


@njit(cache=True)
def _pair_hash(s, c):
    h = (np.uint64(s) * np.uint64(0x9E3779B97F4A7C15)) ^ (np.uint64(c) + np.uint64(0x632BE59BD9B4E019))
    h ^= h >> np.uint64(29)
    return h * np.uint64(0xBF58476D1CE4E5B9)


@njit(cache=True)
def _ws2(b, i, edn):
    """Whitespace, and in EDN commas too."""
    while True:
        x = b[i]
        if x == 32 or x == 9 or x == 10 or x == 13 or (edn and x == _COMMA):
            i += 1
        else:
            return i


@njit(cache=True)
def _delim(x):
    return (x == 32 or x == 9 or x == 10 or x == 13 or x == _COMMA or x == _RB or x == _RC or x == _LB or x == _LC
            or x == _Q or x == 40 or x == 41 or x == 0)


@njit(cache=True)
def _name(b, i, n, edn):
    """A JSON string's content, or an EDN keyword's name, at i: (start, end, next position, has an
    escape); start -1 when there is none."""
    if edn:
        if b[i] != _COLON:
            return -1, -1, -1, False
        j = i + 1
        while j < n and not _delim(b[j]):
            x = b[j]
            if x == 35 or x == 59 or x == _BS or x == 94:  # # ; \\ ^: not in a plain keyword
                return -1, -1, -1, False
            j += 1
        if j == i + 1:
            return -1, -1, -1, False
        return i + 1, j, j, False
    if b[i] != _Q:
        return -1, -1, -1, False
    j, esc = _string_end(b, i, n)
    if j < 0:
        return -1, -1, -1, False
    return i + 1, j - 1, j, esc


@njit(cache=True)
def _nil(b, i, edn):
    """The length of JSON's null or EDN's nil at i, or 0."""
    if edn:
        return 3 if b[i] == 110 and b[i + 1] == 105 and b[i + 2] == 108 and _delim(b[i + 3]) else 0
    return 4 if b[i] == 110 and b[i + 1] == 117 and b[i + 2] == 108 and b[i + 3] == 108 else 0


@njit(cache=True)
def _sep(b, i, edn):
    """Past the separator between two elements (JSON: a comma; EDN: whitespace), or -1."""
    i = _ws2(b, i, edn)
    if edn:
        return i
    if b[i] != _COMMA:
        return -1
    return _ws(b, i + 1)


@njit(cache=True)
def _token(b, i, n, edn):
    """A slot, claim or question at i: a string, an integer, or (EDN) a keyword, whose name is the
    same token as the string: (start, end, kind, next position); start -1 when there is none.
    Kinds: 0 a string (or keyword), 1 an integer, 2 a string with an escape."""
    x = b[i]
    if x == _Q:
        j, esc = _string_end(b, i, n)
        if j < 0:
            return -1, -1, 0, -1
        return i + 1, j - 1, 2 if esc else 0, j
    if x == _MINUS or 48 <= x <= 57:
        j = _int_end(b, i, n)
        if j < 0:
            return -1, -1, 0, -1
        return i, j, 1, j
    if edn and x == _COLON:
        s, e, j, _ = _name(b, i, n, edn)
        if s < 0:
            return -1, -1, 0, -1
        return s, e, 0, j
    return -1, -1, 0, -1


@njit(cache=True)
def _intern(b, ts, te, tk, ht, tok_start, tok_len, tok_kind, tok_int, ntok):
    """The token of bytes [ts, te) of kind tk: (its number, the new count). The caller has made
    sure there is room. A row of ``ht`` is (hash, token or -1, start, length * 4 + kind): one cache
    line answers a probe, and the bytes are compared only when hash and length agree."""
    h = _hash(b, ts, te, tk)
    h63 = np.int64(h >> np.uint64(1))
    lk = (te - ts) * 4 + tk
    mask = np.uint64(len(ht) - 1)
    hh = h & mask
    while ht[hh, 1] != _EMPTY:
        if ht[hh, 0] == h63 and ht[hh, 3] == lk:
            s0 = ht[hh, 2]
            same = True
            for k in range(te - ts):
                if b[s0 + k] != b[ts + k]:
                    same = False
                    break
            if same:
                return ht[hh, 1], ntok
        hh = (hh + np.uint64(1)) & mask
    tok_start[ntok], tok_len[ntok], tok_kind[ntok] = ts, te - ts, tk
    tok_int[ntok] = _int_value(b, ts, te) if tk == 1 else 0
    ht[hh, 0], ht[hh, 1], ht[hh, 2], ht[hh, 3] = h63, ntok, ts, lk
    return ntok, ntok + 1


@njit(cache=True)
def _pair(slot_tok, tok, pht, pslot, pclaim, npair):
    """The (slot, claim) pair of two tokens: (its number, the new count). A row of ``pht`` is
    (slot token, claim token, pair or -1)."""
    mask = np.uint64(len(pht) - 1)
    ph = _pair_hash(slot_tok, tok) & mask
    while pht[ph, 2] != _EMPTY:
        if pht[ph, 0] == slot_tok and pht[ph, 1] == tok:
            return pht[ph, 2], npair
        ph = (ph + np.uint64(1)) & mask
    pslot[npair], pclaim[npair] = slot_tok, tok
    pht[ph, 0], pht[ph, 1], pht[ph, 2] = slot_tok, tok, npair
    return npair, npair + 1


#: what filled up when scan returns FULL (the caller grows it and scans again)
FULL = 1
(F_OPS, F_MOPS, F_ROWS, F_ELEMS, F_DECISIONS, F_DELEMS, F_TOKENS, F_PAIRS) = range(8)


@njit(cache=True)
def _scan(b, a, n, keep_invokes, edn, counts, arrays):
    """Scan bytes [a, n) of ``b`` (zero padded past n; JSON, or EDN as Jepsen writes it when
    ``edn``; called through :func:`scan_json` and :func:`scan_edn`) into
    the arrays given (never reallocated here: arrays reassigned inside the loop cost
    reference counting on every op). Returns (status, what filled up, position, counts: ops,
    micro-ops, read rows, elements, decisions, decision elements, tokens, pairs); when something
    filled up, the position and counts are those at the start of the op being read, to resume
    from there once it has grown. ``counts``: where to start counting (a resumed scan).
    ``ht``/``pht``: hash tables (-1 where empty)."""
    (op_start, op_end, typ, process, client, index, has_index, time, has_time, has_value, nm, mstart, m_f, m_slot,
     m_val, m_nil, rlen, elem, d_q, d_start, d_len, d_chosen, d_elem, tok_start, tok_len, tok_kind, tok_int, ht, pslot,
     pclaim, pht) = arrays
    nops, nmops, nrows, nel, nd, nde, ntok, npair = (counts[0], counts[1], counts[2], counts[3], counts[4],
                                                     counts[5], counts[6], counts[7])
    w_type = np.array([116, 121, 112, 101], np.uint8)
    w_process = np.array([112, 114, 111, 99, 101, 115, 115], np.uint8)
    w_index = np.array([105, 110, 100, 101, 120], np.uint8)
    w_time = np.array([116, 105, 109, 101], np.uint8)
    w_f = np.array([102], np.uint8)
    w_value = np.array([118, 97, 108, 117, 101], np.uint8)
    w_txn = np.array([116, 120, 110], np.uint8)
    w_invoke = np.array([105, 110, 118, 111, 107, 101], np.uint8)
    w_ok = np.array([111, 107], np.uint8)
    w_fail = np.array([102, 97, 105, 108], np.uint8)
    w_info = np.array([105, 110, 102, 111], np.uint8)
    w_header = np.array([104, 101, 97, 100, 101, 114], np.uint8)
    w_add = np.array([97, 100, 100], np.uint8)
    w_retract = np.array([114, 101, 116, 114, 97, 99, 116], np.uint8)
    w_current = np.array([99, 117, 114, 114, 101, 110, 116], np.uint8)
    w_history = np.array([104, 105, 115, 116, 111, 114, 121], np.uint8)
    w_decide = np.array([100, 101, 99, 105, 100, 101], np.uint8)

    i = a
    while True:
        # between ops: whitespace, and an array's brackets and commas
        while True:
            i = _ws(b, i)
            x = b[i]
            if i < n and (x == _COMMA or x == _LB or x == _RB):
                i += 1
            else:
                break
        if i >= n:
            break
        if b[i] != _LC:
            return (BAIL, 0, i, nops, nmops, nrows, nel, nd, nde, ntok, npair)
        m0, r0, e0, d0, de0 = nmops, nrows, nel, nd, nde
        i0 = i
        if nops >= len(typ):
            return (FULL, F_OPS, i0, nops, m0, r0, e0, d0, de0, ntok, npair)
        o = nops
        op_start[o] = i
        typ[o] = -1
        client[o] = False
        has_index[o] = False
        has_time[o] = False
        has_value[o] = False
        process[o] = 0
        index[o] = 0
        time[o] = 0
        nm[o] = 0
        mstart[o] = nmops
        seen_value = False
        seen_process = False
        bad = False
        i += 1
        while True:  # the op's entries
            i = _ws2(b, i, edn)
            if b[i] == _RC:
                i += 1
                break
            ks, ke, j, esc = _name(b, i, n, edn)
            if ks < 0 or esc:
                bad = True
                break
            if edn:
                i = _ws2(b, j, edn)
            else:
                i = _ws(b, j)
                if b[i] != _COLON:
                    bad = True
                    break
                i = _ws(b, i + 1)
            x = b[i]
            if _is(b, ks, ke, w_type):
                s, e, j, esc = _name(b, i, n, edn)
                if s < 0:
                    bad = True
                    break
                if _is(b, s, e, w_invoke):
                    typ[o] = _T_INVOKE
                elif _is(b, s, e, w_ok):
                    typ[o] = _T_OK
                elif _is(b, s, e, w_fail):
                    typ[o] = _T_FAIL
                elif _is(b, s, e, w_info):
                    typ[o] = _T_INFO
                elif _is(b, s, e, w_header):
                    typ[o] = _T_HEADER
                else:
                    bad = True
                    break
                i = j
            elif _is(b, ks, ke, w_process):
                seen_process = True
                if x == _MINUS or 48 <= x <= 57:
                    j = _int_end(b, i, n)
                    if j < 0:
                        bad = True
                        break
                    process[o] = _int_value(b, i, j)
                    client[o] = True
                    i = j
                else:
                    j = _skip(b, i, n, edn)   # a nemesis or other non-client process
                    if j < 0:
                        bad = True
                        break
                    i = j
            elif _is(b, ks, ke, w_index) or _is(b, ks, ke, w_time):
                is_index = ke - ks == 5
                if x == _MINUS or 48 <= x <= 57:
                    j = _int_end(b, i, n)
                    if j < 0:
                        bad = True
                        break
                    v = _int_value(b, i, j)
                    if is_index:
                        index[o] = v
                        has_index[o] = True
                    else:
                        time[o] = v
                        has_time[o] = True
                    i = j
                elif _nil(b, i, edn) and not is_index:
                    i += _nil(b, i, edn)
                else:
                    bad = True
                    break
            elif _is(b, ks, ke, w_f):
                if _nil(b, i, edn):
                    i += _nil(b, i, edn)
                else:
                    s, e, j, esc = _name(b, i, n, edn)
                    if s < 0 or not _is(b, s, e, w_txn):
                        bad = True
                        break
                    i = j
            elif _is(b, ks, ke, w_value):
                if seen_value:
                    bad = True
                    break
                seen_value = True
                if _nil(b, i, edn):
                    i += _nil(b, i, edn)
                else:
                    if x != _LB:
                        bad = True
                        break
                    has_value[o] = True
                    i = _ws2(b, i + 1, edn)
                    if b[i] == _RB:
                        i += 1
                    else:
                        while True:  # micro-ops
                            if b[i] != _LB:
                                bad = True
                                break
                            i = _ws2(b, i + 1, edn)
                            s, e, j, esc = _name(b, i, n, edn)
                            if s < 0:
                                bad = True
                                break
                            if _is(b, s, e, w_add):
                                f = _ADD
                            elif _is(b, s, e, w_retract):
                                f = _RETRACT
                            elif _is(b, s, e, w_current):
                                f = _CURRENT
                            elif _is(b, s, e, w_history):
                                f = _HISTORY
                            elif _is(b, s, e, w_decide):
                                f = _DECIDE
                            else:
                                bad = True
                                break
                            i = _sep(b, j, edn)
                            if i < 0:
                                bad = True
                                break
                            # the slot, or the question: a token
                            ts, te, tk, j = _token(b, i, n, edn)
                            if ts < 0:
                                bad = True
                                break
                            if ntok * 2 >= len(ht) or ntok >= len(tok_start):
                                return (FULL, F_TOKENS, i0, nops, m0, r0, e0, d0, de0, ntok, npair)
                            slot_tok, ntok = _intern(b, ts, te, tk, ht, tok_start, tok_len, tok_kind, tok_int, ntok)
                            i = _sep(b, j, edn)
                            if i < 0:
                                bad = True
                                break
                            if nmops >= len(m_f):
                                return (FULL, F_MOPS, i0, nops, m0, r0, e0, d0, de0, ntok, npair)
                            m_f[nmops] = f
                            m_slot[nmops] = slot_tok if f != _DECIDE else -1
                            m_nil[nmops] = False
                            # the third element: a claim, a list of claims, or null
                            if f == _CURRENT or f == _HISTORY or f == _DECIDE:
                                if _nil(b, i, edn):  # a read, or what a decision considers: not known yet
                                    m_nil[nmops] = True
                                    i += _nil(b, i, edn)
                                    count = -1
                                elif b[i] == _LB:
                                    i = _ws2(b, i + 1, edn)
                                    count = 0
                                else:
                                    bad = True
                                    break
                            else:
                                count = -2
                            first_elem = True
                            while count != -1:  # the claim (count -2), or each claim of the list
                                if count >= 0:
                                    if b[i] == _RB:
                                        i += 1
                                        break
                                    if not first_elem and not edn:
                                        if b[i] != _COMMA:
                                            bad = True
                                            break
                                        i = _ws(b, i + 1)
                                first_elem = False
                                ts, te, tk, j = _token(b, i, n, edn)
                                if ts < 0:
                                    if count == -2 and f == _RETRACT and _nil(b, i, edn):
                                        m_val[nmops] = -1
                                        m_nil[nmops] = True
                                        i += _nil(b, i, edn)
                                        break
                                    bad = True
                                    break
                                if ntok * 2 >= len(ht) or ntok >= len(tok_start):
                                    return (FULL, F_TOKENS, i0, nops, m0, r0, e0, d0, de0, ntok, npair)
                                tok, ntok = _intern(b, ts, te, tk, ht, tok_start, tok_len, tok_kind, tok_int, ntok)
                                i = _ws2(b, j, edn)
                                if f == _DECIDE:
                                    if nde >= len(d_elem):
                                        return (FULL, F_DELEMS, i0, nops, m0, r0, e0, d0, de0, ntok, npair)
                                    d_elem[nde] = tok
                                    nde += 1
                                    count += 1
                                    continue
                                # the (slot, claim) pair
                                if npair * 2 >= len(pht) or npair >= len(pslot):
                                    return (FULL, F_PAIRS, i0, nops, m0, r0, e0, d0, de0, ntok, npair)
                                pair, npair = _pair(slot_tok, tok, pht, pslot, pclaim, npair)
                                if count == -2:
                                    m_val[nmops] = pair
                                    break
                                if nel >= len(elem):
                                    return (FULL, F_ELEMS, i0, nops, m0, r0, e0, d0, de0, ntok, npair)
                                elem[nel] = pair
                                nel += 1
                                count += 1
                            if bad:
                                break
                            if f == _CURRENT or f == _HISTORY:
                                if nrows >= len(rlen):
                                    return (FULL, F_ROWS, i0, nops, m0, r0, e0, d0, de0, ntok, npair)
                                rlen[nrows] = count if count > 0 else 0
                                m_val[nmops] = nrows
                                nrows += 1
                            elif f == _DECIDE:
                                i = _sep(b, i, edn)
                                if i < 0:
                                    bad = True
                                    break
                                chosen = -1
                                if _nil(b, i, edn):
                                    j = i + _nil(b, i, edn)
                                else:
                                    ts, te, tk, j = _token(b, i, n, edn)
                                    if ts < 0:
                                        bad = True
                                        break
                                    if ntok * 2 >= len(ht) or ntok >= len(tok_start):
                                        return (FULL, F_TOKENS, i0, nops, m0, r0, e0, d0, de0, ntok, npair)
                                    chosen, ntok = _intern(b, ts, te, tk, ht, tok_start, tok_len, tok_kind, tok_int,
                                                           ntok)
                                i = j
                                if nd >= len(d_q):
                                    return (FULL, F_DECISIONS, i0, nops, m0, r0, e0, d0, de0, ntok, npair)
                                d_q[nd] = slot_tok
                                d_start[nd] = nde - max(count, 0)
                                d_len[nd] = max(count, 0)
                                d_chosen[nd] = chosen
                                m_val[nmops] = nd
                                nd += 1
                            nmops += 1
                            i = _ws2(b, i, edn)
                            if b[i] != _RB:   # the micro-op ends
                                bad = True
                                break
                            i = _ws2(b, i + 1, edn)
                            if b[i] == _RB:
                                i += 1
                                break
                            if not edn:
                                if b[i] != _COMMA:
                                    bad = True
                                    break
                                i = _ws(b, i + 1)
                        if bad:
                            break
            else:
                j = _skip(b, i, n, edn)  # any other entry
                if j < 0:
                    bad = True
                    break
                i = j
            i = _ws2(b, i, edn)
            if not edn:
                if b[i] == _COMMA:
                    i += 1
                elif b[i] != _RC:
                    bad = True
                    break
        if bad or typ[o] < 0 or not (seen_process or typ[o] == _T_HEADER) or \
                (client[o] and (typ[o] != _T_INVOKE or keep_invokes) and not seen_value):
            return (BAIL, 0, op_start[o], nops, nmops, nrows, nel, nd, nde, ntok, npair)
        if (typ[o] == _T_INVOKE and not keep_invokes) or not client[o] or typ[o] == _T_HEADER:
            # an invocation's micro-ops are read only if it never completes (from its bytes)
            nmops, nrows, nel, nd, nde = m0, r0, e0, d0, de0
        else:
            if typ[o] == _T_OK and not has_value[o]:
                return (BAIL, 0, op_start[o], nops, nmops, nrows, nel, nd, nde, ntok, npair)
            for k in range(m0, nmops):
                if (m_f[k] == _RETRACT or m_f[k] == _DECIDE) and m_nil[k] and typ[o] == _T_OK:
                    return (BAIL, 0, op_start[o], nops, nmops, nrows, nel, nd, nde, ntok, npair)
            nm[o] = nmops - m0
        op_end[o] = i
        nops += 1
    return (OK_, 0, i, nops, nmops, nrows, nel, nd, nde, ntok, npair)


@njit(cache=True)
def scan_json(b, a, n, keep_invokes, counts, arrays):
    """:func:`_scan` for JSON."""
    return _scan(b, a, n, keep_invokes, False, counts, arrays)


@njit(cache=True)
def scan_edn(b, a, n, keep_invokes, counts, arrays):
    """:func:`_scan` for EDN (compiled on first use)."""
    return _scan(b, a, n, keep_invokes, True, counts, arrays)


_NAMES = ("op_start", "op_end", "typ", "process", "client", "index", "has_index", "time", "has_time", "has_value",
          "nm", "mstart", "m_f", "m_slot", "m_val", "m_nil", "rlen", "elem", "d_q", "d_start", "d_len", "d_chosen",
          "d_elem", "tok_start", "tok_len", "tok_kind", "tok_int", "ht", "pslot", "pclaim", "pht")
#: each array's group (what counts its entries), and the group each FULL code names
_OF = {"op_start": "ops", "op_end": "ops", "typ": "ops", "process": "ops", "client": "ops", "index": "ops",
       "has_index": "ops", "time": "ops", "has_time": "ops", "has_value": "ops", "nm": "ops", "mstart": "ops",
       "m_f": "mops", "m_slot": "mops", "m_val": "mops", "m_nil": "mops", "rlen": "rows", "elem": "elems",
       "d_q": "decisions", "d_start": "decisions", "d_len": "decisions", "d_chosen": "decisions", "d_elem": "delems",
       "tok_start": "tokens", "tok_len": "tokens", "tok_kind": "tokens", "tok_int": "tokens", "pslot": "pairs",
       "pclaim": "pairs"}
_DTYPE = {"typ": np.int8, "client": np.bool_, "has_index": np.bool_, "has_time": np.bool_, "has_value": np.bool_,
          "m_f": np.int8, "m_nil": np.bool_, "tok_kind": np.int8}
_GROUP = {F_OPS: "ops", F_MOPS: "mops", F_ROWS: "rows", F_ELEMS: "elems", F_DECISIONS: "decisions",
          F_DELEMS: "delems", F_TOKENS: "tokens", F_PAIRS: "pairs"}
_COUNTS = ("ops", "mops", "rows", "elems", "decisions", "delems", "tokens", "pairs")


@njit(cache=True)
def _rehash_tokens(b, tok_start, tok_len, tok_kind, ntok, cap):
    ht = np.full((cap, 4), _EMPTY, np.int64)
    mask = np.uint64(cap - 1)
    for t in range(ntok):
        s0 = tok_start[t]
        h = _hash(b, s0, s0 + tok_len[t], tok_kind[t])
        hh = h & mask
        while ht[hh, 1] != _EMPTY:
            hh = (hh + np.uint64(1)) & mask
        ht[hh, 0], ht[hh, 1], ht[hh, 2], ht[hh, 3] = np.int64(h >> np.uint64(1)), t, s0, tok_len[t] * 4 + tok_kind[t]
    return ht


@njit(cache=True)
def _rehash_pairs(pslot, pclaim, npair, cap):
    pht = np.full((cap, 3), _EMPTY, np.int64)
    mask = np.uint64(cap - 1)
    for q in range(npair):
        h = _pair_hash(pslot[q], pclaim[q]) & mask
        while pht[h, 2] != _EMPTY:
            h = (h + np.uint64(1)) & mask
        pht[h, 0], pht[h, 1], pht[h, 2] = pslot[q], pclaim[q], q
    return pht


@njit(cache=True)
def token_blob(b, tok_start, tok_len, tok_kind):
    """The bytes of the plain string tokens (kind 0), each followed by a zero byte: decoded and
    split at once by the caller (a JSON string holds no raw zero byte)."""
    total = 0
    for t in range(len(tok_start)):
        if tok_kind[t] == 0:
            total += tok_len[t] + 1
    out = np.empty(total, np.uint8)
    k = 0
    for t in range(len(tok_start)):
        if tok_kind[t] == 0:
            s = tok_start[t]
            for j in range(tok_len[t]):
                out[k] = b[s + j]
                k += 1
            out[k] = 0
            k += 1
    return out


def _pow2(x: int) -> int:
    return 1 << max(int(x) - 1, 1).bit_length()


def run(b: np.ndarray, a: int, n: int, keep_invokes: bool = False, edn: bool = False) -> tuple[int, int, dict]:
    """Scan bytes [a, n) of ``b``: (status OK_ or BAIL, position, the arrays cut to their counts).
    Capacities start small and double when one fills (the scan resumes at the op it was reading).
    Invocations' micro-ops are skipped unless ``keep_invokes``."""
    size = max(n - a, 1)
    cap = {"ops": size // 128 + 64, "mops": size // 64 + 64, "rows": size // 96 + 64, "elems": size // 24 + 64,
           "decisions": size // 2048 + 64, "delems": size // 512 + 64, "tokens": size // 2048 + 256,
           "pairs": size // 2048 + 256}
    arr = {k: np.empty(cap[g], _DTYPE.get(k, np.int64)) for k, g in _OF.items()}
    arr["ht"] = np.full((_pow2(2 * cap["tokens"]), 4), _EMPTY, np.int64)
    arr["pht"] = np.full((_pow2(2 * cap["pairs"]), 3), _EMPTY, np.int64)
    counts = np.zeros(8, np.int64)
    pos = a
    while True:
        status, code, pos, *got = (scan_edn if edn else scan_json)(b, pos, n, keep_invokes, counts,
                                                                     tuple(arr[k] for k in _NAMES))
        counts[:] = got
        if status != FULL:
            break
        g = _GROUP[code]
        cap[g] *= 2
        used = dict(zip(_COUNTS, got))
        for k, gk in _OF.items():
            if gk == g:
                new = np.empty(cap[g], arr[k].dtype)
                new[:used[g]] = arr[k][:used[g]]
                arr[k] = new
        if g == "tokens":
            arr["ht"] = _rehash_tokens(b, arr["tok_start"], arr["tok_len"], arr["tok_kind"], used["tokens"],
                                       _pow2(2 * cap["tokens"]))
        if g == "pairs":
            arr["pht"] = _rehash_pairs(arr["pslot"], arr["pclaim"], used["pairs"], _pow2(2 * cap["pairs"]))
    used = dict(zip(_COUNTS, counts.tolist()))
    return status, pos, {k: arr[k][:used[g]] for k, g in _OF.items()}


def warm() -> None:
    """Compile (or load the cached machine code)."""
    text = (b'{"type":"header","multi_valued":["a"]}\n'
            b'{"index":0,"time":1,"type":"invoke","process":0,"f":"txn","value":[["current","a",null]]}\n'
            b'{"index":1,"time":2,"type":"ok","process":0,"f":"txn","value":[["current","a",["x"]],'
            b'["add","a","y"],["retract","a",1],["history","a",["x","y"]],["decide","q",["x"],"x"]]}\n')
    b = np.frombuffer(text + bytes(16), np.uint8)
    _, _, c = run(b, 0, len(text))

    token_blob(b, c["tok_start"], c["tok_len"], c["tok_kind"])
    _rehash_tokens(b, c["tok_start"], c["tok_len"], c["tok_kind"], len(c["tok_start"]), 64)
    _rehash_pairs(c["pslot"], c["pclaim"], len(c["pslot"]), 64)
