"""A plug-in module that raises while it is imported (not an ImportError): a configuration read at
import time."""

import os

HOME = os.environ["TOKI_TEST_NO_SUCH_VARIABLE_COUNTER_HOME"]  # KeyError at import


def engine():  # pragma: no cover - never reached
    raise AssertionError
