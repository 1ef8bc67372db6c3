"""The four resolution operators (docs/design.md#the-four-operators) as pure functions. They never touch storage.

Each binary operator takes two contradicting, stamped facts and returns a :class:`Resolution`:
the winner (carrying the merged provenance p_w ⊕ p_l), the loser, and the audit record the
write path persists. ⊕t and ⊕p are argmax over total orders, so their n-ary folds are
confluent; ⊕? and ⊕c pick by index over the canonically ordered set (sorted by fact id), so
the order in which the pair arrives cannot change the outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import reduce

from toki.errors import InputError, InvalidVote, NotContradicting
from toki.model import Fact, contradicts
from toki.provenance import Carrier, Poly, plus_all

OPERATORS = ("lww", "evi", "await", "rule")
SYMBOLS = {"lww": "⊕t", "evi": "⊕p", "await": "⊕?", "rule": "⊕c"}


def provenance_of(fact: Fact, carrier: Carrier) -> Poly:
    """A fact's annotation; a fact that brings none is its own write-event token."""
    return carrier.parse(fact.provenance) if fact.provenance else carrier.token(fact.fact_id)


def audit_id(loser_id: str, at: datetime) -> str:
    return f"audit::{loser_id}::{at.isoformat()}"


def encode_witness(winner_object: str, loser_object: str) -> str:
    """The audit row's object: both sides of the conflict, any string round-trips."""
    return json.dumps({"winner": winner_object, "loser": loser_object}, ensure_ascii=False, sort_keys=True)


def decode_witness(text: str) -> tuple[str, str]:
    d = json.loads(text)
    return d["winner"], d["loser"]


@dataclass(frozen=True, slots=True)
class AuditRecord:
    loser_id: str
    winner_id: str
    winner_object: str
    loser_object: str
    provenance: Poly  # p_w ⊕ p_l: dominates both members
    strategy: str


@dataclass(frozen=True, slots=True)
class Resolution:
    operator: str
    winner: Fact  # provenance already merged
    loser: Fact
    audit: AuditRecord


def _require_pair(a: Fact, b: Fact, op: str) -> None:
    if not contradicts(a, b):
        raise NotContradicting(
            f"{SYMBOLS[op]} needs contradicting facts; {a.fact_id!r} and {b.fact_id!r} "
            f"{'have the same object' if a.object == b.object else 'do not share slot and valid instant'}",
            fix="merge duplicates with ⊕ on provenance; resolve only pairs with f1 # f2",
        )
    if a.fact_id == b.fact_id:
        raise InputError(f"both facts have id {a.fact_id!r}", fix="give each claim its own fact id")
    for f in (a, b):
        if op in ("lww", "evi") and f.system_time_start is None:
            raise InputError(
                f"{SYMBOLS[op]} orders by system time but fact {f.fact_id!r} is not stamped",
                fix="stamp facts with Fact.stamped(t) before resolving",
            )


def _resolve(op: str, winner: Fact, loser: Fact, carrier: Carrier) -> Resolution:
    merged = provenance_of(winner, carrier) + provenance_of(loser, carrier)
    audit = AuditRecord(
        loser_id=loser.fact_id,
        winner_id=winner.fact_id,
        winner_object=winner.object,
        loser_object=loser.object,
        provenance=merged,
        strategy=op,
    )
    return Resolution(op, winner.replace(provenance=str(merged)), loser, audit)


def lww_key(f: Fact) -> tuple:
    return (f.system_time_start, f.fact_id)


def evi_key(f: Fact) -> tuple:
    return (f.confidence, f.system_time_start, f.fact_id)


def lww(a: Fact, b: Fact, carrier: Carrier = Carrier.MULTILINEAR) -> Resolution:
    """⊕t: the later write wins; ties on system time broken by fact id (a total order)."""
    _require_pair(a, b, "lww")
    w, l = (a, b) if lww_key(a) > lww_key(b) else (b, a)
    return _resolve("lww", w, l, carrier)


def evi(a: Fact, b: Fact, carrier: Carrier = Carrier.MULTILINEAR) -> Resolution:
    """⊕p: higher confidence wins; then later system time; then fact id."""
    _require_pair(a, b, "evi")
    w, l = (a, b) if evi_key(a) > evi_key(b) else (b, a)
    return _resolve("evi", w, l, carrier)


def canonical(facts: Sequence[Fact]) -> tuple[Fact, ...]:
    """The canonical order of a conflict set: by fact id. Votes index into this order."""
    return tuple(sorted(facts, key=lambda f: f.fact_id))


def set_key(facts: Sequence[Fact]) -> str:
    """Key of the unordered id set (⊕c policy rows, judge keys)."""
    return "|".join(sorted(f.fact_id for f in facts))


def _by_index(op: str, a: Fact, b: Fact, index: int, carrier: Carrier) -> Resolution:
    _require_pair(a, b, op)
    if isinstance(index, bool) or not isinstance(index, int) or index not in (0, 1):
        raise InvalidVote(
            f"{SYMBOLS[op]} vote {index!r} is out of range for a pair",
            fix="a vote is the index 0 or 1 into the pair sorted by fact id",
        )
    ordered = canonical((a, b))
    return _resolve(op, ordered[index], ordered[1 - index], carrier)


def await_confirmation(a: Fact, b: Fact, vote: int, carrier: Carrier = Carrier.MULTILINEAR) -> Resolution:
    """⊕?: the external callback's index over the canonically ordered pair."""
    return _by_index("await", a, b, vote, carrier)


def rule(a: Fact, b: Fact, policy_index: int, carrier: Carrier = Carrier.MULTILINEAR) -> Resolution:
    """⊕c: the policy row keyed by the unordered id set chooses the index."""
    return _by_index("rule", a, b, policy_index, carrier)


BINARY: dict[str, Callable[..., Resolution]] = {
    "lww": lww,
    "evi": evi,
    "await": await_confirmation,
    "rule": rule,
}


@dataclass(frozen=True, slots=True)
class FoldResult:
    operator: str
    winner: Fact  # provenance: ⊕ over all members
    losers: tuple[Fact, ...]  # sorted by fact id
    provenance: Poly


def _fold(op: str, facts: Sequence[Fact], key: Callable[[Fact], tuple], carrier: Carrier) -> FoldResult:
    if len(facts) < 2:
        raise InputError(f"an n-ary {SYMBOLS[op]} needs at least two facts, got {len(facts)}",
                         fix="pass the whole conflict set")
    ids = [f.fact_id for f in facts]
    if len(set(ids)) != len(ids):
        raise InputError(f"conflict set repeats a fact id: {ids}", fix="pass each fact once")
    for i, a in enumerate(facts):
        if a.system_time_start is None:
            raise InputError(f"{SYMBOLS[op]} orders by system time but fact {a.fact_id!r} is not stamped",
                             fix="stamp facts with Fact.stamped(t) before resolving")
        for b in facts[i + 1:]:
            if a.slot != b.slot or a.object == b.object:
                raise NotContradicting(
                    f"{a.fact_id!r} and {b.fact_id!r} cannot be in one conflict set "
                    f"({'same object' if a.slot == b.slot else 'different slots'})",
                    fix="a conflict set holds distinct objects of one (subject, predicate) slot",
                )
    # Argmax over a total order: reduce with the binary choice. Any folding order gives the
    # same winner because max over a total order is commutative, associative and idempotent.
    winner = reduce(lambda x, y: x if key(x) > key(y) else y, facts)
    merged = plus_all((provenance_of(f, carrier) for f in facts), carrier)
    losers = tuple(f for f in canonical(facts) if f.fact_id != winner.fact_id)
    return FoldResult(op, winner.replace(provenance=str(merged)), losers, merged)


def fold_lww(facts: Sequence[Fact], carrier: Carrier = Carrier.MULTILINEAR) -> FoldResult:
    return _fold("lww", facts, lww_key, carrier)


def fold_evi(facts: Sequence[Fact], carrier: Carrier = Carrier.MULTILINEAR) -> FoldResult:
    return _fold("evi", facts, evi_key, carrier)
