"""A compiled scanner for the common shape of JSON and EDN histories (the fast path of
:mod:`toki.check.jsonscan`).

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

numba compiles the loop on first use and caches the machine code beside its module, so only a
process that finds no cache pays the compile (about 10 s here); histories smaller than
:data:`MIN_BYTES` never start it. Without numba (or where it cannot compile), every slice goes
to the vectorised scanner.
"""

from __future__ import annotations

import numpy as np

from toki.check import jit

#: below this many bytes the vectorised scanner is fast enough that importing numba (and, the
#: first time, compiling) would cost more than it saves
MIN_BYTES = 48 << 20

_OK, _MORE, _BAIL = 0, 1, 2


def available() -> bool:
    """Whether the compiled kernel can be used (numba importable and the kernel compiled)."""
    return jit.kernels("_jitkernel") is not None


def chunk(buf: bytes, final: bool, array_mode: bool, first: bool, edn: bool = False):
    """Scan one slice (as :func:`toki.check.jsonscan._chunk`): (columns as the kernel filled them,
    each longer than its count, and the bytes used), or ``False`` when no op completes in it, or
    ``None`` when the slice is outside this scanner's subset (or numba is not here)."""
    mod = jit.kernels("_jitkernel")
    if mod is None:
        return None
    b = np.frombuffer(buf + bytes(16), np.uint8)
    (status, used, nops, nm, ne, has_index, index, typ, process, time, has_time, vkind, m_count,
     m_f, m_key, m_vkind, m_val, m_len, elem) = mod.scan_slice(b, len(buf), array_mode, first, final, edn)
    if status == _BAIL:
        return None
    if status == _MORE:
        return False
    ops = {"index": index, "type": typ, "process": process, "time": time, "has_time": has_time, "vkind": vkind,
           "m_count": m_count}
    mops = {"m_f": m_f, "m_key": m_key, "m_vkind": m_vkind, "m_val": m_val, "m_len": m_len}
    cols = {**{k: v[:nops] for k, v in ops.items()}, **{k: v[:nm] for k, v in mops.items()}, "elem": elem[:ne]}
    return {"n": nops, "has_index": bool(has_index), **cols}, used
