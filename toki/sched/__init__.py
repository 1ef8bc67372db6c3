"""Schedules and the barrier-controlled runner (layer 6: may import db and below; used by check,
engines, faults, properties, experiments and cli).

``load(path)`` reads a TOML schedule (DESIGN §4.1) or an isolationtester ``.spec`` file;
``Runner(server).run(schedule, level)`` executes it and returns a :class:`RunResult`
(DESIGN §4.2). A :class:`Lane` keeps a schema and connections for many runs.
"""

from toki.sched.runner import Lane, RunResult, Runner, StepResult, check_expectation
from toki.sched.files import load
from toki.sched.schedule import Expect, Schedule, Step, parse_toml, to_toml
from toki.sched.spec import SpecFile, parse_spec

__all__ = ["Expect", "Lane", "RunResult", "Runner", "Schedule", "SpecFile", "Step", "StepResult",
           "check_expectation", "load", "parse_spec", "parse_toml", "to_toml"]
