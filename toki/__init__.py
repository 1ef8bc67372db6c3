"""toki: certify the isolation contracts of agent-memory write paths on real databases.

The pure layer (facts, provenance, operators) is re-exported here; everything that touches a
database lives under :mod:`toki.db` and above (the layers: docs/design.md; tests/test_layers.py
checks that imports point one way).

The re-exports and ``__version__`` are resolved on first use (PEP 562), so a command that needs
neither (``toki check`` reads a history and exits) does not pay for importlib.metadata and the
model module at start-up.
"""

from toki.errors import TokiError

__all__ = ["SENTINEL", "Allen", "Fact", "Period", "TokiError", "__version__"]
_MODEL = ("SENTINEL", "Allen", "Fact", "Period")


def __getattr__(name: str):
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("toki")
        except PackageNotFoundError:  # running from a checkout that was never installed
            value = "0.0.0+checkout"
    elif name in _MODEL:
        from toki import model

        value = getattr(model, name)
    else:
        raise AttributeError(f"module 'toki' has no attribute {name!r}")
    globals()[name] = value
    return value
