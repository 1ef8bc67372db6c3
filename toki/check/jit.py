"""numba-compiled kernels, where numba is installed and can compile here.

Each kernel module (``toki.check._jit*``) imports numba itself, so that nothing else does and a
small history never pays for it. :func:`kernels` imports one the first time it is asked for and
calls its ``warm()`` (compiling, or loading the machine code numba cached beside it), so that a
process compiles before it forks and its children inherit the code. Any failure (no numba, a
compiler error, an unwritable cache) leaves the numpy paths in place, and is not retried.
``TOKI_NO_JIT=1`` turns the kernels off.
"""

from __future__ import annotations

import importlib
import os

_loaded: dict[str, object | None] = {}


def kernels(name: str):
    """The module ``toki.check.<name>``, warmed, or None."""
    if name in _loaded:
        return _loaded[name]
    mod = None
    if not os.environ.get("TOKI_NO_JIT"):
        try:
            mod = importlib.import_module(f"toki.check.{name}")
            mod.warm()
        except Exception:  # noqa: BLE001 - no numba, or it cannot compile here: numpy stays
            mod = None
    _loaded[name] = mod
    return mod
