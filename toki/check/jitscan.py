"""A compiled scanner for the common shape of JSON histories (the fast path of :mod:`toki.check.jsonscan`).

The vectorised scanner makes about forty passes over every token of a slice, each a numpy call
over an int64 array, and so reads a history at 30-60 MB/s per core: at 10^7 transactions (3.3
GB) that alone is most of a minute. This one reads a slice once, byte by byte, in a loop that
numba compiles to machine code, and fills the same columns.

It accepts a narrower subset than the vectorised scanner and hands every slice it does not
accept back to it (``None``), so that the vectorised scanner, and behind it the general parser,
keep deciding what is accepted and how a bad op is named. A slice is taken here when every op in
it is a client op (an integer ``process``) whose keys are all among ``type``, ``process``, ``f``
("txn"), ``value`` (null or a list of micro-ops ``[f, k, v]``), ``index`` and ``time`` (an
integer or null), each once; anything else (a nemesis op, another key, a float, an escape, a
micro-op of another length) sends the slice to the vectorised scanner. The columns are the
vectorised scanner's, value for value and dtype for dtype; a test compares the two on every
layout and on mutated histories.

numba compiles the loop on first use and caches the machine code beside this module, so only a
process that finds no cache pays the compile (a few seconds); histories smaller than
:data:`MIN_BYTES` never start it. Without numba (or where it cannot compile), every slice goes
to the vectorised scanner.
"""

from __future__ import annotations

import os

import numpy as np

#: below this many bytes the vectorised scanner is fast enough that importing numba (and, the
#: first time, compiling) would cost more than it saves
MIN_BYTES = 48 << 20

_OK, _MORE, _BAIL = 0, 1, 2
_kernel = None
_failed = False


def available() -> bool:
    """Whether the compiled kernel can be used (numba importable and the kernel compiled)."""
    return _load() is not None


def _load():
    global _kernel, _failed
    if _kernel is not None or _failed:
        return _kernel
    if os.environ.get("TOKI_NO_JIT"):
        _failed = True
        return None
    try:
        from toki.check import _jitkernel

        k = _jitkernel.scan_slice
        # compile (or load the cache) here, before any fork: children inherit the machine code
        b = np.frombuffer(b'[{"type":"ok","process":0,"value":[["r",1,[1]]]}]' + bytes(16), np.uint8)
        k(b, len(b) - 16, True, True, True)
    except Exception:  # noqa: BLE001 - no numba, or it cannot compile here: the vectorised path stays
        _failed = True
        return None
    _kernel = k
    return k


def chunk(buf: bytes, final: bool, array_mode: bool, first: bool):
    """Scan one slice (as :func:`toki.check.jsonscan._chunk`): (columns, bytes used), or ``False``
    when no op completes in it, or ``None`` when the slice is outside this scanner's subset."""
    from toki.check.jsonscan import compact

    k = _load()
    if k is None:
        return None
    b = np.frombuffer(buf + bytes(16), np.uint8)
    (status, used, nops, nm, ne, has_index, index, typ, process, time, has_time, vkind, m_count,
     m_f, m_key, m_vkind, m_val, m_len, elem) = k(b, len(buf), array_mode, first, final)
    if status == _BAIL:
        return None
    if status == _MORE:
        return False

    def own(a: np.ndarray, narrow: bool = True) -> np.ndarray:
        # a copy, never a view: a view would keep the kernel's whole buffer alive until the
        # slices are concatenated (thousands of them at 10^7)
        c = compact(a) if narrow else a
        return a.copy() if c is a else c

    part = {"n": nops, "has_index": bool(has_index), "index": own(index[:nops]), "type": own(typ[:nops], False),
            "client": np.ones(nops, bool), "process": own(process[:nops]), "time": own(time[:nops]),
            "has_time": own(has_time[:nops], False), "vkind": own(vkind[:nops], False),
            "m_count": own(m_count[:nops]), "m_f": own(m_f[:nm], False), "m_key": own(m_key[:nm]),
            "m_vkind": own(m_vkind[:nm], False), "m_val": own(m_val[:nm]), "m_len": own(m_len[:nm]),
            "elem": own(elem[:ne])}
    return part, used
