"""Hypothesis strategies and property suites for toki, usable as CI gates (beside the engines: may
import them and everything below; used by tests, cli (certify) and engine authors' own suites).

Installed as ``toki.properties``. The pytest plugin (:mod:`toki.properties.pytest_plugin`) is
registered through the ``pytest11`` entry point and gives any test suite the fixtures
``toki_server`` and ``toki_store``.
"""
