"""Old import paths of modules that moved, kept working for a release with a DeprecationWarning.

A package that moved modules calls :func:`alias_moved` once, from its ``__init__``; afterwards
``import package.old`` (and ``from package import old``) gives the module at its new path, the
same module object, after a :class:`DeprecationWarning` naming the new path. Layer 0: imports
nothing from toki, so any package may use it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old full module name -> new full module name
ALIASES: dict[str, str] = {}


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
        new = ALIASES.get(fullname)
        return None if new is None else importlib.util.spec_from_loader(fullname, _MovedLoader(new))


def alias_moved(package: str, moved: dict[str, str]) -> None:
    """Keep ``package.<old>`` importable for each ``old -> new`` in ``moved`` (``new``: the full
    name of the module now), with a DeprecationWarning."""
    ALIASES.update({f"{package}.{old}": new for old, new in moved.items()})
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())


__all__ = ["ALIASES", "alias_moved"]
