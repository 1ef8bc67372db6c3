"""The controlled-concurrency harness: unmodified engines and plug-ins certified by granting their
storage calls one at a time.

Layer 8 of toki (it imports nothing above ``sched``/``check`` and never a shipped engine). The
public API is the names below (``__all__``): what plug-in authors, toki's commands, the pytest
plugin and the experiments use. ``tests/test_plugin_contract.py`` holds the two equal, and holds
code outside the harness to importing only these (the fault injector, which runs the controller
with a crash in it, is the one package built into the harness's implementation).

- the plug-in protocol: :class:`Engine`, :class:`Scenario`, :class:`Detector`, :func:`optional`,
  :func:`connect_database`, :class:`PluginError`; inside an engine, :func:`current_agent`,
  :func:`uncontrolled` and :class:`InstrumentedLock`;
- the verdict: :func:`certify` -> :class:`Verdict` (a :class:`Decision`, its :class:`Searched`,
  :class:`Finding` and :class:`DesignFinding` objects, a :class:`Witness`), :func:`replay` ->
  :class:`Replayed`, :class:`Baseline` files of accepted findings, :class:`Unverifiable`;
- the search: the strategies :class:`Random`, :class:`Pct`, :class:`Exhaustive`, :class:`Replay`
  (one file each under :mod:`~toki.harness.strategies`), run by :func:`run` in the one loop of
  :mod:`~toki.harness.loop` (:class:`Strategy`, :class:`Runs`), answering a :class:`Searched`;
  :func:`strategy_options`, the searches ``toki certify`` offers;
- single runs, for a strategy of your own or an experiment's own count: :class:`TrialRunner`,
  :class:`TrialResult`, the choosers :class:`Chooser`, :class:`SerialChooser`,
  :class:`TapeChooser`, :class:`ReplayChooser`, and :func:`context_switches`;
- steps: :class:`StepKind` and :class:`Footprint`, what a step is and what it touches (a
  plug-in that makes steps of its own through ``Controller.step`` may pass ``touches=``; without
  it the step touches anything);
- pictures: :func:`draw`, :func:`shorten`.

Everything else is implementation, and may change in any release: the controller
(``controller``), the interception of sqlite3, psycopg, PyMySQL, files, file locks, Python locks
and threads (``sqlite_calls``, ``pg_calls``, ``mysql_calls``, ``file_calls``, ``file_locks``,
``locks``, ``threads``, ``sync``, ``effects``, ``observers``), each making its steps with their
footprints (``steps``), a trial's machinery (``trial``),
the exhaustive search's tree (``explore``). The former search functions (``search``'s
``certify_search``, ``search``, ``exhaustive_part``, and ``pct``'s) stay for one release.
"""

from toki.harness.certify import Decision, Replayed, Verdict, certify, replay
from toki.harness.controller import (Chooser, ReplayChooser, SerialChooser, TapeChooser, Unverifiable,
                                     context_switches, current_agent, uncontrolled)
from toki.harness.draw import draw, shorten
from toki.harness.engine import Detector, Engine, PluginError, Scenario, connect_database, optional
from toki.harness.findings import DesignFinding, Finding, anomaly_of
from toki.harness.locks import InstrumentedLock
from toki.harness.loop import Runs, Searched, Strategy, run
from toki.harness.steps import Footprint, StepKind
from toki.harness.strategies import Exhaustive, Pct, Random, Replay, strategy_options
from toki.harness.trial import TrialResult, TrialRunner
from toki.harness.witness import Baseline, Witness

__all__ = ["Baseline", "Chooser", "Decision", "DesignFinding", "Detector", "Engine", "Exhaustive", "Finding",
           "Footprint", "InstrumentedLock", "Pct", "PluginError", "Random", "Replay", "ReplayChooser", "Replayed",
           "Runs", "Scenario", "Searched", "SerialChooser", "StepKind", "Strategy", "TapeChooser", "TrialResult",
           "TrialRunner", "Unverifiable", "Verdict", "Witness", "anomaly_of", "certify", "connect_database",
           "context_switches", "current_agent", "draw", "optional", "replay", "run", "shorten", "strategy_options",
           "uncontrolled"]
