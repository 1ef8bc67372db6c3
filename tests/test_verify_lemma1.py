"""Lemma 1: judge calls translate to log reads/inserts; N1 <=> P2 or P3 on the log rows."""

from toki.verify import lemma1
from toki.verify.obligations import PROVED, REFUTED


def test_lemma1_holds_with_canonical_keys_and_fails_without():
    got = {o.name: o.run(5).status for o in lemma1.obligations()}
    assert got == {"lemma1.conflicts": PROVED, "lemma1.n1-iff-p2-p3": PROVED,
                   "lemma1.conflicts.no-canonical": REFUTED, "lemma1.n1-iff-p2-p3.no-canonical": REFUTED}


def test_the_equivalence_is_not_vacuous():
    keys = lemma1._keys(True)
    seen = set()
    for counts, sched, _k, sem in lemma1._cases(True):
        txns, log = lemma1.run(sched, counts, keys, sem)
        seen.add((sem, lemma1.n1(txns), lemma1.p2(txns, log), lemma1.p3(txns, log)))
    assert ("read-committed", True, True, True) in seen  # re-read after a concurrent insert
    assert ("snapshot", True, False, True) in seen  # snapshot: only the predicate-write form
    assert any(not n for _, n, _, _ in seen)
    assert not any(p2 for sem, _, p2, _ in seen if sem == "snapshot")


def test_interleavings_are_all_distinct_merges():
    merges = list(lemma1._interleavings((2, 1)))
    assert len(merges) == 10 and len({tuple(m) for m in merges}) == 10
