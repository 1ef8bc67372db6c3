"""``toki.check``: an Elle-compatible checker for transactional histories, and nothing else.
Layer 7: imports only ``toki.errors`` (a history checker needs no database; and ``toki.moved``, for
the old import paths of its moved modules); used by the
command line (``toki check``) and by anyone checking a Jepsen history from Python.

Public API::

    from toki.check import check
    result = check("history.json", workload="list-append", models=["serializable"])
    result["valid"]        # True, False or "unknown" (never a pass)
    result["anomalies"]    # {"G-single-item": [{"cycle": [...], "steps": [...]}], ...}
    result["not"], result["also_not"]

Inputs are Jepsen histories (a list of op maps, or a JSON / EDN file) for the list-append and
rw-register workloads, and memory histories (``workload="memory"``: claims added to and retracted
from slots, current and audit-history reads, judges' decisions; :mod:`toki.check.memory`,
docs/memory-histories.md), checked for Elle's anomalies over slots and for the memory's own:
double-supersede, duplicate-insert, N1, N2, N3. Names of anomalies and consistency models are
Elle's (:mod:`toki.check.models` holds the lattice as data, with sources). The matrix engine reads
N1, N2 and N3 off TOKI's own outcomes (:mod:`toki.matrix.memory`); a recorded memory history is
checked here.
"""

from toki.check import core
from toki.check.reading.history import History, load, parse
from toki.moved import alias_moved

# Modules that moved into reading/ and accel/ (issue 38); kept importable under the old path.
MOVED = {"history": "toki.check.reading.history", "jsonscan": "toki.check.reading.json_scan",
         "runs": "toki.check.accel.ranges", "forked": "toki.check.accel.children",
         "partition": "toki.check.accel.key_slices", "tuning": "toki.check.accel.allocator"}
alias_moved(__name__, MOVED)


def check(history, workload: str = "list-append", models=None, anomalies=None, **kw) -> dict:
    """Check a history as ``workload`` (list-append, rw-register, predicate, memory); see
    :func:`toki.check.core.check` and :func:`toki.check.memory.check` for the options."""
    if workload == "memory":
        from toki.check import memory

        return memory.check(history, models, anomalies, **kw)
    return core.check(history, workload, models, anomalies, **kw)

from toki.check.models import ALL_ANOMALIES, FRIENDLY_MODELS, boundary, lattice

__all__ = ["ALL_ANOMALIES", "FRIENDLY_MODELS", "History", "boundary", "check", "lattice", "load", "parse"]
