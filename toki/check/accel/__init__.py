"""Acceleration: how the checker computes faster, never what it computes.

Everything here gives the same answer as the plain numpy code it stands in for: index ranges and
gathers (:mod:`~toki.check.accel.ranges`), work done in forked child processes
(:mod:`~toki.check.accel.children`), a large history checked in slices of keys
(:mod:`~toki.check.accel.key_slices`), glibc's allocator tuned for large checks
(:mod:`~toki.check.accel.allocator`), and the compiled twins (:mod:`toki.check.accel.compiled`).

**Compiled twins.** A loop that numpy does in many passes has a twin compiled by numba, in
``toki.check.accel.compiled.<kernel>``, under the same name and signature as its numpy form (the
numpy form is the same name with a leading underscore, as psycopg binds ``execute`` to its C
``execute`` or its Python ``_execute``). Each kernel module imports numba itself, so that nothing
else does and a small history never pays for it. This module holds the one switch and the one
policy that choose between the two:

- the switch, :data:`MODE`: ``TOKI_JIT=auto`` (the default), ``always`` or ``never``;
  ``TOKI_NO_JIT=1`` is ``never``. Tests set :data:`MODE` to force one path.
- the policy, :func:`compiled_twin`: in ``auto``, a kernel is used from :data:`MIN_SIZE` units of work
  on (below it importing numba, about half a second, and the first time compiling, cost more
  than the twin saves); in ``always`` from any size; in ``never`` not at all. Where a twin works
  through a direct table of values, it is used only while the values are :func:`dense` enough
  that the table stays about as small as the input, whatever the mode.

:func:`load` imports a kernel module the first time it is asked for and calls its ``warm()``
(compiling, or loading the machine code numba cached beside it), so that a process compiles
before it forks and its children inherit the code. Any failure (no numba, a compiler error, an
unwritable cache) leaves the numpy forms in place, and is not retried.
"""

from __future__ import annotations

import importlib
import os
from typing import Callable

MODES = ("auto", "always", "never")


def _mode() -> str:
    if os.environ.get("TOKI_NO_JIT"):
        return "never"
    m = os.environ.get("TOKI_JIT", "auto").strip().lower()
    return m if m in MODES else "auto"


#: the one switch: auto | always | never (``TOKI_JIT``; ``TOKI_NO_JIT=1`` is never)
MODE = _mode()

#: per kernel, the work from which ``auto`` takes the compiled twin, in the unit its callers count
MIN_SIZE = {
    "ranges": 1 << 22,        # positions a run of ranges or a gather writes (accel.ranges)
    "joins": 1 << 20,         # micro-ops, or reads, grouped or looked up (toki.check.joins)
    "transactions": 1 << 22,  # client ops paired with their invocations (reading.history): 2.5 s -> 0.5 s at 2 * 10^7
    "json_scan": 48 << 20,    # bytes of a JSON or EDN history (reading.json_scan)
    "memory_scan": 4 << 20,   # bytes of a memory history (reading.memory)
}

_loaded: dict[str, object | None] = {}


def dense(span: int, n: int, per: int = 8) -> bool:
    """Whether ``n`` values spanning ``span`` are dense enough for a direct table over the span
    (about ``per`` slots a value at most, plus a page's worth)."""
    return span < per * n + 4096


def can_compile() -> bool:
    """Whether compiled twins may be used here (numba importable, :data:`MODE` not ``never``),
    without compiling anything: what a test's skip condition asks at collection."""
    import importlib.util

    return MODE != "never" and importlib.util.find_spec("numba") is not None


def load(kernel: str):
    """The module ``toki.check.accel.compiled.<kernel>``, warmed, or None (``never``, no numba, or
    it cannot compile here)."""
    if MODE == "never":
        return None
    if kernel in _loaded:
        return _loaded[kernel]
    mod = None
    try:
        mod = importlib.import_module(f"toki.check.accel.compiled.{kernel}")
        mod.warm()
    except Exception:  # noqa: BLE001 - no numba, or it cannot compile here: numpy stays
        mod = None
    _loaded[kernel] = mod
    return mod


def compiled_twin(kernel: str, size: int, *, span: int | None = None, per: int = 8):
    """The policy: the compiled module ``kernel`` when :data:`MODE`, the work's ``size`` (against
    :data:`MIN_SIZE`) and, for a twin that tables values, their ``span`` (:func:`dense`) say so;
    else None."""
    if MODE == "never" or (MODE == "auto" and size < MIN_SIZE[kernel]):
        return None
    if span is not None and not dense(span, size, per):
        return None
    return load(kernel)


def twin(kernel: str, numpy_form: Callable, size: int, *, span: int | None = None, per: int = 8) -> Callable:
    """``numpy_form`` (a function ``_name``), or its compiled twin ``name`` in kernel module
    ``kernel`` when :func:`compiled_twin` says so: the same signature, the same results."""
    mod = compiled_twin(kernel, size, span=span, per=per)
    return numpy_form if mod is None else getattr(mod, numpy_form.__name__.lstrip("_"))


__all__ = ["MIN_SIZE", "MODE", "MODES", "compiled_twin", "dense", "load", "twin"]
