"""Recording memory histories where the engine runs (``toki record``, and your own client code),
for ``toki check --workload memory``.

:class:`History` is what a user wraps around their own client: it has no dependencies beyond the
standard library. :mod:`toki.record.run` drives an engine from several worker processes.
"""

from toki.record.history import History, PendingOp

__all__ = ["History", "PendingOp"]
