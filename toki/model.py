"""Facts and closed-open periods (docs/design.md#the-papers-data-model). Pure: no I/O.

Periods are closed-open ``[start, end)``; the open upper bound is the sentinel 9999-12-31.
Two facts contradict when they share subject and predicate, differ in object, and their valid
periods share an instant, which under closed-open periods is 9 of Allen's 13 relations (all but
before, after, meets, met-by).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass
from datetime import datetime, timezone

from toki.errors import InvalidConfidence, InvalidFact, InvalidPeriod

SENTINEL = datetime(9999, 12, 31)

STRATEGIES = ("lww", "evi", "await", "rule")
ROW_KINDS = ("current", "audit")


def naive_utc(t: datetime) -> datetime:
    """Timestamps are stored as TIMESTAMP (without zone), in UTC."""
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc).replace(tzinfo=None)
    return t


class Allen(enum.Enum):
    """Allen's 13 interval relations, read as ``a <relation> b``."""

    BEFORE = "before"
    MEETS = "meets"
    OVERLAPS = "overlaps"
    STARTS = "starts"
    DURING = "during"
    FINISHES = "finishes"
    EQUALS = "equals"
    FINISHED_BY = "finished-by"
    CONTAINS = "contains"
    STARTED_BY = "started-by"
    OVERLAPPED_BY = "overlapped-by"
    MET_BY = "met-by"
    AFTER = "after"

    @property
    def shares_instant(self) -> bool:
        return self not in (Allen.BEFORE, Allen.MEETS, Allen.MET_BY, Allen.AFTER)

    @property
    def inverse(self) -> "Allen":
        members = list(Allen)
        return members[len(members) - 1 - members.index(self)]


@dataclass(frozen=True, slots=True)
class Period:
    start: datetime
    end: datetime = SENTINEL

    def __post_init__(self) -> None:
        if not isinstance(self.start, datetime) or not isinstance(self.end, datetime):
            raise InvalidPeriod(
                f"period bounds must be datetimes, got {self.start!r} and {self.end!r}",
                fix="pass datetime objects (timezone-aware values are converted to naive UTC)",
            )
        object.__setattr__(self, "start", naive_utc(self.start))
        object.__setattr__(self, "end", naive_utc(self.end))
        if not self.start < self.end:
            kind = "empty" if self.start == self.end else "reversed"
            raise InvalidPeriod(
                f"{kind} period [{self.start.isoformat()}, {self.end.isoformat()})",
                fix="periods are closed-open [start, end) and need start < end",
            )

    @property
    def is_open(self) -> bool:
        return self.end == SENTINEL

    def contains(self, t: datetime) -> bool:
        t = naive_utc(t)
        return self.start <= t < self.end

    def overlaps(self, other: "Period") -> bool:
        return self.start < other.end and other.start < self.end

    def allen(self, other: "Period") -> Allen:
        a0, a1, b0, b1 = self.start, self.end, other.start, other.end
        if a1 < b0:
            return Allen.BEFORE
        if a1 == b0:
            return Allen.MEETS
        if b1 < a0:
            return Allen.AFTER
        if b1 == a0:
            return Allen.MET_BY
        if a0 == b0 and a1 == b1:
            return Allen.EQUALS
        if a0 == b0:
            return Allen.STARTS if a1 < b1 else Allen.STARTED_BY
        if a1 == b1:
            return Allen.FINISHES if a0 > b0 else Allen.FINISHED_BY
        if b0 < a0 and a1 < b1:
            return Allen.DURING
        if a0 < b0 and b1 < a1:
            return Allen.CONTAINS
        return Allen.OVERLAPS if a0 < b0 else Allen.OVERLAPPED_BY

    def minus(self, other: "Period") -> list["Period"]:
        """The parts of self outside other (0, 1 or 2 periods), in time order."""
        parts = []
        if self.start < other.start:
            parts.append(Period(self.start, min(self.end, other.start)))
        if other.end < self.end:
            parts.append(Period(max(self.start, other.end), self.end))
        return [p for p in parts if p.overlaps(self)] if self.overlaps(other) else [self]


@dataclass(frozen=True, slots=True)
class Fact:
    """One claim. ``system_time_start`` is None until the write path stamps it.

    ``provenance`` is the serialised polynomial (see :mod:`toki.provenance`); a fact with no
    provenance given gets its own write-event token ``x_<fact_id>`` when it is written.
    """

    fact_id: str
    subject: str
    predicate: str
    object: str
    valid_from: datetime
    valid_to: datetime = SENTINEL
    confidence: float = 1.0
    provenance: str | None = None
    system_time_start: datetime | None = None
    system_time_end: datetime = SENTINEL

    def __post_init__(self) -> None:
        for name in ("fact_id", "subject", "predicate", "object"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InvalidFact(
                    f"fact field {name} must be a non-empty string, got {value!r}",
                    fix=f"give the fact a {name}",
                )
        if self.fact_id.startswith("audit::"):
            raise InvalidFact(
                f"fact id {self.fact_id!r} uses the reserved prefix 'audit::'",
                fix="choose a fact id that does not start with 'audit::'",
            )
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, (int, float)) or math.isnan(c) or not 0.0 <= c <= 1.0:
            raise InvalidConfidence(
                f"confidence {c!r} of fact {self.fact_id!r} is outside [0, 1]",
                fix="give a confidence between 0 and 1 inclusive",
            )
        object.__setattr__(self, "confidence", float(c))
        # Validates and normalises both periods.
        valid = Period(self.valid_from, self.valid_to)
        object.__setattr__(self, "valid_from", valid.start)
        object.__setattr__(self, "valid_to", valid.end)
        if self.system_time_start is not None:
            system = Period(self.system_time_start, self.system_time_end)
            object.__setattr__(self, "system_time_start", system.start)
            object.__setattr__(self, "system_time_end", system.end)

    @property
    def valid(self) -> Period:
        return Period(self.valid_from, self.valid_to)

    @property
    def system(self) -> Period:
        if self.system_time_start is None:
            raise InvalidFact(
                f"fact {self.fact_id!r} has no system time yet",
                fix="stamp it (Fact.stamped) or let the write path do it",
            )
        return Period(self.system_time_start, self.system_time_end)

    @property
    def slot(self) -> tuple[str, str]:
        return (self.subject, self.predicate)

    def stamped(self, t: datetime) -> "Fact":
        return dataclasses.replace(self, system_time_start=naive_utc(t), system_time_end=SENTINEL)

    def replace(self, **changes) -> "Fact":
        return dataclasses.replace(self, **changes)


def contradicts(a: Fact, b: Fact) -> bool:
    """a # b: same slot, different object, valid periods share an instant."""
    return a.slot == b.slot and a.object != b.object and a.valid.allen(b.valid).shares_instant


def duplicates(a: Fact, b: Fact) -> bool:
    """Same slot and object with validity sharing an instant: a confirmation, not a conflict."""
    return a.slot == b.slot and a.object == b.object and a.valid.allen(b.valid).shares_instant
