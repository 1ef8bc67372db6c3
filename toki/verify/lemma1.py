"""Lemma 1 (docs/design.md#judges): with a keyed judge log, re-judging is a fuzzy read (P2) or an insert
phantom (P3) on the log rows, so classical isolation covers judge nondeterminism.

Checked exhaustively over every interleaving of a stated set of transaction programs, under
two read semantics for the log (read committed: a read sees the log rows committed before it
plus its own; snapshot: rows committed before the transaction's first step plus its own).

Source level: a transaction's program is a sequence of judge calls j(R, θ) on one
contradiction, then commit. A call returns the vote of the earliest logged row it sees under
its key; if it sees none it asks the judge - adversarially, every fresh call returns a new
vote - and appends that vote under its key (insert-if-absent, read-then-append form).

Translation: j_i(R, θ) becomes a predicate read r_i[log where key = k] followed, when the read
is empty, by an insert w_i[log(k)]. Obligations:

* conflicts: two calls of different transactions conflict at the source (same contradiction,
  at least one asks the judge) iff their translations conflict (same key, at least one insert);
* N1 <=> P2 or P3 on the log rows, where N1 = two calls in committed transactions return
  different votes, P2 = a committed transaction's two reads of one key return different row
  sets beyond its own inserts, P3 = two committed transactions each inserted a row under one
  key that the other's read had not returned.

Both hold with canonical keys (sort the read set) and both fail without: the same pair asked
in two orders gets two keys, so the log never sees a conflict while the votes still differ.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime

from toki.verify.obligations import Obligation, Result, exhaustive

PROGRAMS = (  # calls per transaction; every program then commits
    (1, 1), (1, 2), (2, 1), (2, 2), (1, 1, 1),
)
SEMANTICS = ("read-committed", "snapshot")


@dataclass
class _Txn:
    name: str
    key: str
    calls: int
    first: int | None = None
    committed_at: int | None = None
    reads: list[frozenset] = field(default_factory=list)
    inserted: int | None = None  # row id
    votes: list[int] = field(default_factory=list)


def _keys(canonical: bool) -> tuple[str, str]:
    from toki.judges.base import SimulatedJudge, judge_key
    from toki.model import Fact

    a = Fact("rx-1", "alice", "medication", "penicillin", datetime(2026, 3, 1))
    b = Fact("rx-2", "alice", "medication", "amoxicillin", datetime(2026, 4, 15))
    judge = SimulatedJudge(p=0.5, seed=0)
    return (judge_key([a, b], judge, canonicalize=canonical).digest,
            judge_key([b, a], judge, canonicalize=canonical).digest)


def _interleavings(counts):
    """Every merge of the transactions' event lists ('j' calls, then 'c')."""
    seqs = [["j"] * c + ["c"] for c in counts]

    def rec(idx):
        if all(idx[t] == len(seqs[t]) for t in range(len(seqs))):
            yield []
            return
        for t in range(len(seqs)):
            if idx[t] < len(seqs[t]):
                event = (t, seqs[t][idx[t]])
                idx[t] += 1
                for rest in rec(idx):
                    yield [event] + rest
                idx[t] -= 1
    yield from rec([0] * len(seqs))


def run(schedule, counts, keys, semantics):
    """Execute one interleaving; returns the transactions and the log (row -> (key, txn, vote, committed_at))."""
    txns = [_Txn(f"T{t + 1}", keys[t % 2], c) for t, c in enumerate(counts)]
    log: dict[int, dict] = {}
    fresh = 0
    for step, (t, kind) in enumerate(schedule):
        tx = txns[t]
        if tx.first is None:
            tx.first = step
        if kind == "c":
            tx.committed_at = step
            for row in log.values():
                if row["txn"] == t:
                    row["committed_at"] = step
            continue
        horizon = step if semantics == "read-committed" else tx.first
        seen = frozenset(rid for rid, row in log.items() if row["key"] == tx.key and
                         (row["txn"] == t or (row["committed_at"] is not None and row["committed_at"] < horizon)))
        tx.reads.append(seen)
        if seen:
            tx.votes.append(log[min(seen)]["vote"])
        else:
            fresh += 1
            rid = len(log)
            log[rid] = {"key": tx.key, "txn": t, "vote": fresh, "committed_at": None}
            tx.inserted = rid
            tx.votes.append(fresh)
    return txns, log


def n1(txns) -> bool:
    votes = {v for tx in txns if tx.committed_at is not None for v in tx.votes}
    return len(votes) > 1


def p2(txns, log) -> bool:
    for tx in txns:
        if tx.committed_at is None:
            continue
        for a, b in itertools.combinations(tx.reads, 2):
            if {r for r in a ^ b if log[r]["txn"] != txns.index(tx)}:
                return True
    return False


def p3(txns, log) -> bool:
    done = [tx for tx in txns if tx.committed_at is not None and tx.inserted is not None]
    for a, b in itertools.combinations(done, 2):
        if a.key != b.key:
            continue
        if b.inserted not in a.reads[0] and a.inserted not in b.reads[0]:
            return True
    return False


def conflicts_preserved(txns, log) -> bool | str:
    """Source conflict (same contradiction, one asks the judge) iff translated conflict (same key, one inserts)."""
    for a, b in itertools.combinations(txns, 2):
        source = a.inserted is not None or b.inserted is not None  # every txn here judges the same pair
        translated = a.key == b.key and (a.inserted is not None or b.inserted is not None)
        if source != translated:
            return f"{a.name} and {b.name} conflict at the source but not on the log (keys differ)"
    return True


def _cases(canonical: bool):
    keys = _keys(canonical)
    for counts in PROGRAMS:
        for sched in _interleavings(counts):
            for sem in SEMANTICS:
                yield counts, sched, keys, sem


def _describe(case):
    counts, sched, _keys_, sem = case
    text = " ".join(f"{'j' if k == 'j' else 'c'}{t + 1}" for t, k in sched)
    return {"schedule": text, "semantics": sem, "note": "T1 asks (a, b), T2 asks (b, a)"}


def _check_equiv(case):
    counts, sched, keys, sem = case
    txns, log = run(sched, counts, keys, sem)
    lhs, rhs = n1(txns), p2(txns, log) or p3(txns, log)
    return True if lhs == rhs else f"N1 = {lhs} but P2 or P3 on the log = {rhs}"


def _check_conflicts(case):
    counts, sched, keys, sem = case
    txns, log = run(sched, counts, keys, sem)
    return conflicts_preserved(txns, log)


def obligations() -> list[Obligation]:
    n_sched = sum(1 for counts in PROGRAMS for _ in _interleavings(counts))
    bound = (f"programs {', '.join('/'.join(map(str, p)) for p in PROGRAMS)} calls per transaction "
             f"({n_sched} interleavings) x {len(SEMANTICS)} read semantics")
    out = []
    for canonical, expected in ((True, "proved"), (False, "refuted")):
        tag = "" if canonical else ".no-canonical"
        out.append(Obligation(
            f"lemma1.conflicts{tag}", "the translation of judge calls to log reads and inserts preserves conflicts"
            + ("" if canonical else " (keys not canonicalised)"), expected,
            lambda _t, c=canonical: exhaustive(_cases(c), _check_conflicts, _describe, bound), "exhaustive"))
        out.append(Obligation(
            f"lemma1.n1-iff-p2-p3{tag}", "N1 <=> P2 or P3 on the keyed log rows"
            + ("" if canonical else " (keys not canonicalised)"), expected,
            lambda _t, c=canonical: exhaustive(_cases(c), _check_equiv, _describe, bound), "exhaustive"))
    return out


def check(_t) -> Result:  # pragma: no cover - convenience
    return obligations()[1].run(0)
