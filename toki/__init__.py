"""toki: certify the isolation contracts of agent-memory write paths on real databases.

The pure layer (facts, provenance, operators) is re-exported here; everything that touches a
database lives under :mod:`toki.db` and above (the layers: docs/design.md; tests/test_layers.py
checks that imports point one way).
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("toki")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+checkout"

from toki.errors import TokiError  # noqa: E402
from toki.model import SENTINEL, Allen, Fact, Period  # noqa: E402

__all__ = ["SENTINEL", "Allen", "Fact", "Period", "TokiError", "__version__"]
