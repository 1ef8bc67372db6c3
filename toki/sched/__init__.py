"""Schedules and the barrier-controlled runner (layer 6: may import db and below; used by matrix,
engines, faults, verify, properties, experiments and cli).

``load(path)`` reads a TOML schedule (docs/design.md#schedule-files-toml) or an isolationtester ``.spec`` file;
``Runner(server).run(schedule, level)`` executes it and returns a :class:`RunResult`
(docs/design.md#run-result-json). A :class:`Lane` keeps a schema and connections for many runs.
"""

from toki.sched.files import load
from toki.sched.results import RunResult, StepResult, check_expectation
from toki.sched.runner import Lane, Runner
from toki.sched.schedule import Expect, Schedule, Step, parse_toml, to_toml
from toki.sched.spec import SpecFile, parse_spec

__all__ = ["Expect", "Lane", "RunResult", "Runner", "Schedule", "SpecFile", "Step", "StepResult",
           "check_expectation", "load", "parse_spec", "parse_toml", "to_toml"]
