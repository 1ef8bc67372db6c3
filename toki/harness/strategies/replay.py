"""Replay: a recorded grant sequence (a witness's), re-executed exactly, ``times`` times.

Used to confirm a found anomaly (its run again, from its grants), by ``toki certify --replay``,
and wherever a run found elsewhere is re-executed. ``found`` is the last run that shows an
anomaly; ``runs`` holds every run, in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from toki.harness.controller import ReplayChooser
from toki.harness.loop import Base, OutOfTime, Runs, Searched, timed


@dataclass(frozen=True)
class Replay(Base):
    grants: tuple[str, ...]
    times: int = 1
    mode: ClassVar[str] = "replay"

    def __post_init__(self):
        object.__setattr__(self, "grants", tuple(self.grants))

    def describe(self) -> str:
        return f"replay of {len(self.grants)} grants, {self.times} time(s)"

    def search(self, runs: Runs) -> Searched:
        made: list = []
        found, late = None, False
        for _ in range(self.times):
            try:
                r, hit = runs.trial(ReplayChooser(self.grants))
            except OutOfTime:
                late = True
                break
            made.append(r)
            runs.report(len(made), hit)
            if hit:
                found = r
        shows = sum(not r.serializable for r in made)
        return Searched(self, found, explored=len(made), runs=tuple(made), out_of_time=timed(runs.deadline, late),
                        guarantee=f"the recorded run re-executed {len(made)} time(s): {shows} show an anomaly")
