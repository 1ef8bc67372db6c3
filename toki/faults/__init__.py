"""Fault injection: crash points, lost connections and indeterminate commits (``toki faults``).

What breaks memory is not only concurrency but failure in the middle of a write. This package
injects real faults at every fault point of a write path and checks the state the system
recovers to: :mod:`~toki.faults.write_path` for TOKI's own write path on PostgreSQL (connection
terminated between statements, lost COMMIT acknowledgement, process killed, server crashed and
restarted), :mod:`~toki.faults.engines` for the engines of the harness and plug-ins (the process
killed at each granted storage call, a file write torn in the middle),
:mod:`~toki.faults.power_loss` for power loss (the scenario's file operations recorded by
:mod:`~toki.faults.fs_trace`, the crash states they allow built by
:mod:`~toki.faults.crash_states` as ALICE builds them, each reopened in a fresh process),
:mod:`~toki.faults.report` for the fault table and the replayable fault file, and
:mod:`~toki.faults.child` for waiting, with a bound, on the forked process each of them kills at
a point.

Layer 8.5. Imports: ``toki.harness``, ``toki.db``, ``toki.engines``, ``toki.backends``,
``toki.judges``, ``toki.model``, ``toki.errors`` and ``toki.runinfo``; never ``toki.cli``, which
sits above. Used
by the command line (``toki faults``) and its tests.
"""

from toki.faults.proxy import FaultTimeout

__all__ = ["FaultTimeout"]
