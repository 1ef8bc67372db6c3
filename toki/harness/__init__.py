"""The controlled-concurrency harness: unmodified engines and plug-ins certified by granting their
storage calls one at a time.

Layer 8 of toki (it imports nothing above ``sched``/``check`` and never a shipped engine). What a
plug-in author uses is re-exported here; everything else is an implementation module:

- :mod:`~toki.harness.engine`: the protocol a plug-in implements (:class:`Scenario`,
  :class:`Detector`, :class:`Engine`);
- :mod:`~toki.harness.controller`: agents as threads, each storage call a granted step;
- :mod:`~toki.harness.sqlite_calls`, :mod:`~toki.harness.pg_calls`, :mod:`~toki.harness.mysql_calls`,
  :mod:`~toki.harness.file_calls`, :mod:`~toki.harness.locks`, :mod:`~toki.harness.threads`: the
  interception of sqlite3, psycopg (sync and async), PyMySQL, files, Python locks and the threads
  an engine starts;
- :mod:`~toki.harness.trial`: one run, and the serial outcomes it is judged against;
- :mod:`~toki.harness.search`, :mod:`~toki.harness.witness`, :mod:`~toki.harness.draw`:
  search and shrinking, witness files and replay, swimlane pictures.
"""

from toki.harness.engine import Detector, Engine, Scenario
from toki.harness.findings import Finding
from toki.harness.locks import InstrumentedLock

__all__ = ["Detector", "Engine", "Finding", "InstrumentedLock", "Scenario"]
