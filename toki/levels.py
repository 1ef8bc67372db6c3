"""Isolation levels x the callback axis, and how PostgreSQL spells them (docs/design.md#anomalies-and-guards, docs/design.md#schedule-files-toml).

TOKI's levels are RC, SI and SR (plus RU, which PostgreSQL runs as RC); each may carry the
callback (``+cb``): the schedule holds an external callback read between the candidate read
and the operator write. On PostgreSQL, SI is REPEATABLE READ.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from toki.errors import ConfigError


class Isolation(enum.IntEnum):
    RU = 0
    RC = 1
    SI = 2
    SR = 3

    @property
    def sql(self) -> str:
        return _SQL[self]

    @property
    def cli_name(self) -> str:
        return _CLI[self]


_SQL = {
    Isolation.RU: "READ UNCOMMITTED",
    Isolation.RC: "READ COMMITTED",
    Isolation.SI: "REPEATABLE READ",
    Isolation.SR: "SERIALIZABLE",
}
_CLI = {
    Isolation.RU: "read-uncommitted",
    Isolation.RC: "read-committed",
    Isolation.SI: "repeatable-read",
    Isolation.SR: "serializable",
}
_ALIASES = {
    "ru": Isolation.RU, "read-uncommitted": Isolation.RU, "read uncommitted": Isolation.RU,
    "rc": Isolation.RC, "read-committed": Isolation.RC, "read committed": Isolation.RC,
    "rr": Isolation.SI, "si": Isolation.SI, "repeatable-read": Isolation.SI,
    "repeatable read": Isolation.SI, "snapshot-isolation": Isolation.SI, "snapshot": Isolation.SI,
    "sr": Isolation.SR, "serializable": Isolation.SR,
}


@dataclass(frozen=True, slots=True, order=True)
class Level:
    isolation: Isolation
    callback: bool = False

    @property
    def name(self) -> str:
        """The paper's column name: RC, RC+cb, SI, SI+cb, SR, SR+cb."""
        return self.isolation.name + ("+cb" if self.callback else "")

    def __str__(self) -> str:
        return self.name

    def at_least(self, other: "Level") -> bool:
        """The product order RC ⪯ SI ⪯ SR, ⊥ ⪯ cb."""
        return self.isolation >= other.isolation and (self.callback or not other.callback)

    def join(self, other: "Level") -> "Level":
        return Level(max(self.isolation, other.isolation), self.callback or other.callback)


def parse_isolation(text: str) -> Isolation:
    key = str(text).strip().lower().replace("_", "-")
    if key in _ALIASES:
        return _ALIASES[key]
    raise ConfigError(
        f"unknown isolation level {text!r}",
        fix="use read-uncommitted, read-committed, repeatable-read or serializable (ru, rc, rr, sr)",
    )


def parse_level(text: str) -> Level:
    """Accepts the paper's names (RC, SI+cb, ...) and the CLI names, with an optional +cb."""
    raw = str(text).strip()
    cb = raw.lower().endswith("+cb")
    base = raw[:-3] if cb else raw
    return Level(parse_isolation(base), cb)


MATRIX_LEVELS = tuple(Level(i, cb) for i in (Isolation.RC, Isolation.SI, Isolation.SR) for cb in (False, True))

# The operators' preconditions (docs/design.md#the-four-operators; ⊕c needs SR on the policy table).
PRECONDITION = {
    "lww": Level(Isolation.RC),
    "evi": Level(Isolation.SI),
    "await": Level(Isolation.RC, True),
    "rule": Level(Isolation.SR),
}


def pipeline_guard(operators) -> Level:
    """The joined guard of a pipeline (docs/design.md#the-four-operators): the join of its operators' preconditions.

    ``operators`` are codes of :data:`PRECONDITION` (lww, evi, await, rule), in pipeline order;
    the join is order-free, and ``toki prove`` checks it is the least upper bound (Table 10).
    """
    ops = list(operators)
    if not ops:
        raise ConfigError("an empty pipeline has no guard", fix="give at least one operator: lww, evi, await, rule")
    unknown = [o for o in ops if o not in PRECONDITION]
    if unknown:
        raise ConfigError(f"unknown operator(s) {', '.join(map(repr, unknown))}",
                          fix="use lww, evi, await or rule")
    guard = PRECONDITION[ops[0]]
    for o in ops[1:]:
        guard = guard.join(PRECONDITION[o])
    return guard
