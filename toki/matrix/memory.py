"""Memory predicates: anomalies read off what happened (recorded reads and writes, final state).

Each function takes observations, never the interleaving that produced them, so a detector
cannot "know" it ran a witness. The matrix (:mod:`toki.matrix.cells`), the property suites
and the experiments share them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from toki.model import SENTINEL
from toki.provenance import Carrier


def lost_increment(initial: float, committed_deltas: Iterable[float], final: float, tol: float = 1e-9) -> bool:
    """P4: a committed increment is missing from the final value."""
    return abs(initial + sum(committed_deltas) - final) > tol


def fuzzy_read(values_read: Sequence) -> bool:
    """P2: one transaction read the same item twice and got different values."""
    return len(set(map(repr, values_read))) > 1


def dirty_read(value_read, values_only_written_by_aborted: Iterable) -> bool:
    """P1 / G1a: a committed transaction read a value that only an aborted transaction wrote."""
    return value_read in set(values_only_written_by_aborted)


def mixed_final_writes(final: Mapping[str, object], writer_of: Mapping[tuple[str, object], str]) -> bool:
    """P0 / G0 on two items: the final values of a group come from different transactions, so
    the writes of two transactions interleaved (each overwrote the other's uncommitted work)."""
    writers = {writer_of.get((k, v)) for k, v in final.items()}
    writers.discard(None)
    return len(writers) > 1


def read_skew(seen: Sequence[float], invariant_total: float, tol: float = 1e-9) -> bool:
    """A5A: a transaction observed values that never coexisted (their sum breaks the invariant
    every committed state keeps)."""
    return abs(sum(seen) - invariant_total) > tol


def slot_emptied(current_before: int, current_after: int) -> bool:
    """A5B (cleanup agents): a slot that held two current values holds none."""
    return current_before >= 2 and current_after == 0


def duplicate_active(policies: Iterable[tuple[str, bool]]) -> bool:
    """P3 (predicate-write form): more than one active policy row for one unordered id set."""
    counts = Counter(key for key, active in policies if active)
    return any(n > 1 for n in counts.values())


def predicate_changed(reads: Sequence[Sequence]) -> bool:
    """P3 (re-read form): the same predicate read twice in one transaction returned other rows."""
    return len({tuple(sorted(map(repr, r))) for r in reads}) > 1


def conflicting_votes(votes: Iterable[tuple[str, int]]) -> bool:
    """N1: two committed votes under one judge key differ."""
    seen: dict[str, set[int]] = {}
    for key, vote in votes:
        seen.setdefault(key, set()).add(int(vote))
    return any(len(v) > 1 for v in seen.values())


def evi_winner(rows: Iterable[tuple[str, float, str]]) -> str | None:
    """⊕p over a partition: object of the row with the greatest (confidence, fact id)."""
    best = max(rows, key=lambda r: (r[1], r[2]), default=None)
    return best[0] if best else None


def belief_drift(cache_object: str | None, rows: Iterable[tuple[str, float, str]]) -> bool:
    """N2: the belief cache disagrees with ⊕p over its partition (rows: object, confidence, id)."""
    return cache_object != evi_winner(rows)


def audit_erasure(losers: Iterable[str], audit_provenances: Iterable[str],
                  carrier: Carrier = Carrier.MULTILINEAR) -> list[str]:
    """N3: losers (serialised provenance) dominated by no audit row. Returns the erased ones."""
    audits = [carrier.parse(a) for a in audit_provenances]
    erased = []
    for p in losers:
        lp = carrier.parse(p)
        if not any(lp <= a for a in audits):
            erased.append(p)
    return erased


def current_values_at(rows: Iterable, instant: datetime) -> Counter:
    """How many open current rows each (subject, predicate) slot holds at a valid-time instant.

    ``rows`` are :class:`toki.db.store.Row` (or anything with the same attributes).
    """
    c: Counter = Counter()
    for r in rows:
        if r.row_kind == "current" and r.system_time_end == SENTINEL and r.valid_from <= instant < r.valid_to:
            c[(r.subject, r.predicate)] += 1
    return c


def slots_with_several_current(rows: Sequence) -> list[tuple[str, str, datetime]]:
    """Slots and instants where more than one current value is open (checked at every row start)."""
    bad = []
    starts = sorted({r.valid_from for r in rows if r.row_kind == "current"})
    for t in starts:
        for slot, n in current_values_at(rows, t).items():
            if n > 1:
                bad.append((slot[0], slot[1], t))
    return bad
