"""The memory engines toki ships (real, unmodified engines and faithful models), their scenarios
and detectors, built on :mod:`toki.harness`; :mod:`~toki.engines.registry` names them and loads
a plug-in by ``module:factory``.

``Detector``, ``Engine`` and ``Scenario`` are re-exported for plug-ins written against earlier
releases; new plug-ins import them from :mod:`toki.harness`. The harness's modules lived here
before they moved to :mod:`toki.harness` (``toki.engines.locks``, ``toki.engines.controller``, ...):
those import paths keep working, with a :class:`DeprecationWarning`, for plug-ins written then.
"""

from toki.harness.engine import Detector, Engine, Scenario
from toki.moved import alias_moved

__all__ = ["Detector", "Engine", "Scenario"]

# Modules that moved to toki.harness in 0.1 (commit 86ac163); kept importable under the old path.
MOVED = frozenset({"controller", "draw", "engine", "file_calls", "locks", "pg_calls", "search", "sqlite_calls",
                   "trial", "witness"})
alias_moved(__name__, {leaf: f"toki.harness.{leaf}" for leaf in MOVED})
