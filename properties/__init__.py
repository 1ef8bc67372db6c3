"""Hypothesis strategies and property suites for toki, usable as CI gates (DESIGN §1).

Installed as ``toki.properties``. The pytest plugin (:mod:`toki.properties.pytest_plugin`) is
registered through the ``pytest11`` entry point and gives any test suite the fixtures
``toki_server`` and ``toki_store``.
"""
