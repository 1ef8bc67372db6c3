"""``toki.check``: an Elle-compatible checker for transactional histories, and (until it moves to a
package of its own) the matrix engine. Layer 7: may import sched and below; used by engines,
verify, cli, properties and experiments.

Public API::

    from toki.check import check
    result = check("history.json", workload="list-append", models=["serializable"])
    result["valid"]        # True, False or "unknown" (never a pass)
    result["anomalies"]    # {"G-single-item": [{"cycle": [...], "steps": [...]}], ...}
    result["not"], result["also_not"]

Inputs are Jepsen histories (a list of op maps, or a JSON / EDN file) for the list-append and
rw-register workloads; names of anomalies and consistency models are Elle's
(:mod:`toki.check.models` holds the lattice as data, with sources). The memory predicates of
the testbed (N1, N2, N3) live in :mod:`toki.check.memory`.
"""

from toki.check.core import check
from toki.check.history import History, load, parse
from toki.check.models import ALL_ANOMALIES, FRIENDLY_MODELS, boundary, lattice

__all__ = ["ALL_ANOMALIES", "FRIENDLY_MODELS", "History", "boundary", "check", "lattice", "load", "parse"]
