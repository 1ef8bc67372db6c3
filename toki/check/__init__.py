"""``toki.check``: an Elle-compatible checker for transactional histories, and nothing else.
Layer 7: imports only ``toki.errors`` (a history checker needs no database); used by the
command line (``toki check``) and by anyone checking a Jepsen history from Python.

Public API::

    from toki.check import check
    result = check("history.json", workload="list-append", models=["serializable"])
    result["valid"]        # True, False or "unknown" (never a pass)
    result["anomalies"]    # {"G-single-item": [{"cycle": [...], "steps": [...]}], ...}
    result["not"], result["also_not"]

Inputs are Jepsen histories (a list of op maps, or a JSON / EDN file) for the list-append and
rw-register workloads; names of anomalies and consistency models are Elle's
(:mod:`toki.check.models` holds the lattice as data, with sources). The memory predicates of
the testbed (N1, N2, N3), read off recorded outcomes rather than Jepsen histories, belong to
the matrix engine (:mod:`toki.matrix.memory`).
"""

from toki.check.core import check
from toki.check.history import History, load, parse
from toki.check.models import ALL_ANOMALIES, FRIENDLY_MODELS, boundary, lattice

__all__ = ["ALL_ANOMALIES", "FRIENDLY_MODELS", "History", "boundary", "check", "lattice", "load", "parse"]
