"""The memory engines toki ships (real, unmodified engines and faithful models), their scenarios
and detectors, built on :mod:`toki.harness`; :mod:`~toki.engines.registry` names them and loads
a plug-in by ``module:factory``.

``Detector``, ``Engine`` and ``Scenario`` are re-exported for plug-ins written against earlier
releases; new plug-ins import them from :mod:`toki.harness`.
"""

from toki.harness.engine import Detector, Engine, Scenario

__all__ = ["Detector", "Engine", "Scenario"]
