"""Facts, closed-open periods, Allen's 13 relations, contradiction and duplicate predicates."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toki.errors import InputError, InvalidConfidence, InvalidFact, InvalidPeriod, TokiError
from toki.model import SENTINEL, Allen, Fact, Period, contradicts, duplicates


def d(day: int) -> datetime:
    return datetime(2026, 1, 1) + timedelta(days=day)


def P(a: int, b: int) -> Period:
    return Period(d(a), d(b))


# One witness per relation, read as `a <relation> b`, with b = [10, 20).
WITNESSES = {
    Allen.BEFORE: P(0, 5),
    Allen.MEETS: P(0, 10),
    Allen.OVERLAPS: P(5, 15),
    Allen.STARTS: P(10, 15),
    Allen.DURING: P(12, 18),
    Allen.FINISHES: P(15, 20),
    Allen.EQUALS: P(10, 20),
    Allen.FINISHED_BY: P(5, 20),
    Allen.CONTAINS: P(5, 25),
    Allen.STARTED_BY: P(10, 25),
    Allen.OVERLAPPED_BY: P(15, 25),
    Allen.MET_BY: P(20, 25),
    Allen.AFTER: P(22, 25),
}
DISJOINT = {Allen.BEFORE, Allen.MEETS, Allen.MET_BY, Allen.AFTER}


def fact(fid, obj, period, subject="alice", predicate="medication", **kw):
    return Fact(fid, subject, predicate, obj, period.start, period.end, **kw)


def test_witnesses_cover_all_13_relations():
    assert set(WITNESSES) == set(Allen) and len(Allen) == 13


@pytest.mark.parametrize("rel", list(Allen), ids=lambda r: r.value)
def test_allen_relation_and_its_inverse(rel):
    a, b = WITNESSES[rel], P(10, 20)
    assert a.allen(b) is rel
    assert b.allen(a) is rel.inverse
    assert rel.inverse.inverse is rel


@pytest.mark.parametrize("rel", list(Allen), ids=lambda r: r.value)
def test_contradiction_and_duplicate_per_relation(rel):
    a, b = WITNESSES[rel], P(10, 20)
    shares = rel not in DISJOINT
    assert rel.shares_instant is shares
    assert a.overlaps(b) is shares
    # different object: a contradiction exactly when the closed-open periods share an instant
    assert contradicts(fact("f1", "penicillin", a), fact("f2", "amoxicillin", b)) is shares
    assert contradicts(fact("f2", "amoxicillin", b), fact("f1", "penicillin", a)) is shares
    # same object: a duplicate confirmation, never a contradiction
    assert duplicates(fact("f1", "penicillin", a), fact("f2", "penicillin", b)) is shares
    assert not contradicts(fact("f1", "penicillin", a), fact("f2", "penicillin", b))


def test_nine_relations_share_an_instant():
    assert sum(r.shares_instant for r in Allen) == 9


def test_other_slot_never_contradicts():
    p = P(0, 10)
    assert not contradicts(fact("f1", "a", p), fact("f2", "b", p, subject="bob"))
    assert not contradicts(fact("f1", "a", p), fact("f2", "b", p, predicate="allergy"))
    assert not duplicates(fact("f1", "a", p), fact("f2", "a", p, predicate="allergy"))


instants = st.integers(min_value=0, max_value=40).map(d)
periods = st.tuples(instants, instants).filter(lambda t: t[0] < t[1]).map(lambda t: Period(*t))


@given(periods, periods)
def test_allen_is_exhaustive_and_consistent(a, b):
    rel = a.allen(b)
    assert b.allen(a) is rel.inverse
    assert rel.shares_instant == a.overlaps(b)
    # sharing an instant means some instant lies in both (closed-open)
    shared = any(a.contains(t) and b.contains(t) for t in (a.start, b.start))
    assert shared == rel.shares_instant


@pytest.mark.slow
@given(periods, periods)
def test_minus_is_the_part_outside(a, b):
    parts = a.minus(b)
    assert len(parts) <= 2
    for p in parts:
        assert not p.overlaps(b) or not a.overlaps(b)
        assert a.start <= p.start and p.end <= a.end
    if not a.overlaps(b):
        assert parts == [a]
    covered = sum(((p.end - p.start) for p in parts), timedelta())
    inter = max(timedelta(), min(a.end, b.end) - max(a.start, b.start))
    assert covered + inter == a.end - a.start


def test_period_defaults_to_the_sentinel_and_is_closed_open():
    p = Period(d(0))
    assert p.end == SENTINEL == datetime(9999, 12, 31) and p.is_open
    assert p.contains(d(0)) and not P(0, 1).contains(d(1))


def test_timezone_aware_bounds_become_naive_utc():
    p = Period(datetime(2026, 3, 1, 12, tzinfo=timezone(timedelta(hours=2))))
    assert p.start == datetime(2026, 3, 1, 10) and p.start.tzinfo is None


@pytest.mark.parametrize("a,b,word", [(5, 5, "empty"), (6, 5, "reversed")])
def test_empty_or_reversed_period_is_refused(a, b, word):
    with pytest.raises(InvalidPeriod, match=word) as e:
        Period(d(a), d(b))
    assert isinstance(e.value, TokiError) and e.value.fix
    with pytest.raises(InvalidPeriod):
        Fact("f", "s", "p", "o", d(a), d(b))


def test_period_bounds_must_be_datetimes():
    with pytest.raises(InvalidPeriod):
        Period("2026-01-01", d(1))


@pytest.mark.parametrize("c", [-0.01, 1.0001, float("nan"), float("inf"), True, "0.5"])
def test_confidence_outside_unit_interval_is_refused(c):
    with pytest.raises(InvalidConfidence) as e:
        Fact("f", "s", "p", "o", d(0), confidence=c)
    assert isinstance(e.value, InputError) and "confidence" in str(e.value)


@pytest.mark.parametrize("c", [0, 0.0, 0.5, 1, 1.0])
def test_confidence_bounds_are_inclusive(c):
    assert Fact("f", "s", "p", "o", d(0), confidence=c).confidence == float(c)


def test_fact_fields_and_reserved_ids():
    with pytest.raises(InvalidFact):
        Fact("", "s", "p", "o", d(0))
    with pytest.raises(InvalidFact):
        Fact("f", "s", "p", None, d(0))
    with pytest.raises(InvalidFact, match="audit::"):
        Fact("audit::x", "s", "p", "o", d(0))
    with pytest.raises(InvalidFact, match="system time"):
        Fact("f", "s", "p", "o", d(0)).system


def test_each_invalid_input_has_its_own_class():
    classes = {InvalidConfidence, InvalidPeriod, InvalidFact}
    assert len(classes) == 3 and all(issubclass(c, TokiError) for c in classes)


def test_stamping_sets_an_open_system_period():
    f = Fact("f", "s", "p", "o", d(0)).stamped(d(3))
    assert f.system == Period(d(3)) and f.system_time_end == SENTINEL
