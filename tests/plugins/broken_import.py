"""A plug-in module whose dependency is not installed: importing it fails with ModuleNotFoundError."""

import toki_no_such_memory_library  # noqa: F401


def engine():  # pragma: no cover - never reached
    raise AssertionError
