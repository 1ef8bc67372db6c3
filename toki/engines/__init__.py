"""The engine harness: unmodified memory engines certified under controlled concurrency.

Layer 8 of toki: may import model, judges, levels, backends, db and the layers below; used by
``toki.cli`` (``toki certify --engine``, ``toki engines list``) and by ``toki.properties``
(the pytest plugin's ``toki_certify_engine``).

- :mod:`~toki.engines.controller`: agents as threads, each storage call a granted step;
- :mod:`~toki.engines.sqlite_calls`, :mod:`~toki.engines.pg_calls`, :mod:`~toki.engines.file_calls`,
  :mod:`~toki.engines.locks`: the interception of sqlite3, psycopg, file writes and Python locks;
- :mod:`~toki.engines.engine`: the protocol an engine plug-in implements;
- :mod:`~toki.engines.trial`: one run, and the serial outcomes it is judged against;
- :mod:`~toki.engines.search`, :mod:`~toki.engines.witness`, :mod:`~toki.engines.draw`:
  Hypothesis search and shrinking, witness files and replay, swimlane pictures;
- :mod:`~toki.engines.registry`: the engines toki ships (SodaMem real, AtomMem as a model,
  TOKI's own write path) and loading a plug-in by ``module:factory``.
"""

from toki.engines.engine import Detector, Engine, Scenario

__all__ = ["Detector", "Engine", "Scenario"]
