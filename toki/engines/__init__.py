"""The memory engines toki ships (real, unmodified engines and faithful models), their scenarios
and detectors, built on :mod:`toki.harness`; :mod:`~toki.engines.registry` names them and loads
a plug-in by ``module:factory``.

``Detector``, ``Engine`` and ``Scenario`` are re-exported for plug-ins written against earlier
releases; new plug-ins import them from :mod:`toki.harness`. The harness's modules lived here
before they moved to :mod:`toki.harness` (``toki.engines.locks``, ``toki.engines.controller``, ...):
those import paths keep working, with a :class:`DeprecationWarning`, for plug-ins written then.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

from toki.harness.engine import Detector, Engine, Scenario

__all__ = ["Detector", "Engine", "Scenario"]

# Modules that moved to toki.harness in 0.1 (commit 86ac163); kept importable under the old path.
MOVED = frozenset({"controller", "draw", "engine", "file_calls", "locks", "pg_calls", "search", "sqlite_calls",
                   "trial", "witness"})


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {self.target}; import it from there (the old path will go)",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        pass  # the module it stands for is already executed


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        package, _, leaf = fullname.rpartition(".")
        if package == __name__ and leaf in MOVED:
            return importlib.util.spec_from_loader(fullname, _MovedLoader(f"toki.harness.{leaf}"))
        return None


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())
