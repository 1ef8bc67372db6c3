"""Slots (canonicalizers and the cross-predicate detector) and change versus correction in the
write path, with as_of answering what was believed at a system time about a valid time."""

from __future__ import annotations

from datetime import datetime

import pytest

from toki.model import SENTINEL, Fact
from toki.slots import Exact, HeadVerb, Synonyms, several_current_by_slot

JAN, MAR, MAY = datetime(2026, 1, 1), datetime(2026, 3, 1), datetime(2026, 5, 1)


def _fact(fid, pred, obj, start):
    return Fact(fid, "alice", pred, obj, start, SENTINEL, confidence=0.5)


def test_head_verb_makes_llm_made_predicates_meet():
    hv = HeadVerb()
    assert hv.slot("lives_in") == hv.slot("live_in_mangwon_dong") == hv.slot("living_in") == "live_in"
    assert hv.slot("works_at") != hv.slot("lives_in")
    assert Exact().slot("live_in_mangwon_dong") != Exact().slot("lives_in")
    syn = Synonyms({"lives_in": ["live_in", "resides_in"]})
    assert syn.slot("resides_in") == "lives_in" and syn.slot("works_at") == "works_at"
    with pytest.raises(ValueError):
        Synonyms({"a": ["x"], "b": ["x"]})


@pytest.mark.db
def test_without_a_canonicalizer_two_current_values_survive_and_the_detector_sees_them(toki_store):
    toki_store.write(_fact("f1", "lives_in", "berlin", JAN), at=datetime(2026, 1, 2))
    toki_store.write(_fact("f2", "live_in_mangwon_dong", "mangwon-dong", MAR), at=datetime(2026, 3, 2))
    rows = toki_store.rows("current")
    assert several_current_by_slot(rows, HeadVerb())
    assert not several_current_by_slot(rows, Exact())  # the failure is invisible slot by slot


@pytest.mark.db
def test_with_a_canonicalizer_the_move_supersedes(toki_store):
    hv = HeadVerb()
    toki_store.write(_fact("f1", "lives_in", "berlin", JAN), at=datetime(2026, 1, 2), canonicalizer=hv)
    o = toki_store.write(_fact("f2", "live_in_mangwon_dong", "mangwon-dong", MAR), at=datetime(2026, 3, 2),
                         canonicalizer=hv)
    assert o.action == "superseded"
    assert not several_current_by_slot(toki_store.rows("current"), hv)


@pytest.mark.db
@pytest.mark.parametrize("revision, believed_in_february_now", [("change", ["berlin"]), ("correction", [])])
def test_change_and_correction_answer_as_of_each_their_way(toki_store, revision, believed_in_february_now):
    t1, t2 = datetime(2026, 1, 2), datetime(2026, 3, 2)
    toki_store.write(_fact("f1", "lives_in", "berlin", JAN), at=t1)
    toki_store.write(_fact("f2", "lives_in", "rome", MAR), at=t2, revision=revision)

    def believed(valid, system=None):
        return sorted(r.object for r in toki_store.as_of(valid, system))

    assert believed(datetime(2026, 2, 1)) == believed_in_february_now  # now, about February
    assert believed(datetime(2026, 4, 1)) == ["rome"]  # now, about April
    assert believed(datetime(2026, 2, 1), datetime(2026, 2, 15)) == ["berlin"]  # in February, about February
    assert believed(datetime(2026, 4, 1), datetime(2026, 2, 15)) == ["berlin"]  # before the move was told


def test_an_unknown_revision_is_refused():
    from toki.db.store import WriteTxn
    from toki.errors import ConfigError
    from toki.levels import parse_level

    with pytest.raises(ConfigError, match="unknown revision"):
        WriteTxn(None, None, _fact("f", "p", "o", JAN), operator="lww", level=parse_level("RC"), mode=None,
                 judge=None, guard=True, at=None, revision="rewrite")
