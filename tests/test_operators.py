"""The four operators (docs/design.md#the-four-operators): winners, audit records, n-ary folds, canonical order, errors."""

from datetime import datetime, timedelta
from functools import reduce

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toki.errors import InputError, InvalidVote, NotContradicting, TokiError
from toki.model import Fact
from toki.operators import (
    BINARY,
    audit_id,
    await_confirmation,
    canonical,
    decode_witness,
    encode_witness,
    evi,
    fold_evi,
    fold_lww,
    lww,
    provenance_of,
    rule,
    set_key,
)
from toki.provenance import Carrier

T0 = datetime(2026, 3, 1)
ML, MD = Carrier.MULTILINEAR, Carrier.MULTIDEGREE


def f(fid, obj, *, st=0, conf=1.0, valid=(0, None), prov=None, subject="alice", predicate="medication"):
    start = T0 + timedelta(days=valid[0])
    end = T0 + timedelta(days=valid[1]) if valid[1] is not None else datetime(9999, 12, 31)
    return Fact(fid, subject, predicate, obj, start, end, confidence=conf, provenance=prov).stamped(
        T0 + timedelta(hours=st))


PEN = f("rx-1", "penicillin", st=0, conf=0.9)
AMOX = f("rx-2", "amoxicillin", st=5, conf=0.6)


def check_audit(res, carrier=ML):
    a = res.audit
    assert (a.winner_id, a.loser_id) == (res.winner.fact_id, res.loser.fact_id)
    assert (a.winner_object, a.loser_object) == (res.winner.object, res.loser.object)
    assert a.strategy == res.operator
    # p_w ⊕ p_l, carried by the winner too, dominating both members (provenance-complete)
    assert a.provenance == provenance_of(PEN, carrier) + provenance_of(AMOX, carrier)
    assert carrier.parse(res.winner.provenance) == a.provenance
    assert a.provenance.dominates(provenance_of(PEN, carrier))
    assert a.provenance.dominates(provenance_of(AMOX, carrier))


@pytest.mark.parametrize("a,b", [(PEN, AMOX), (AMOX, PEN)])
def test_lww_later_system_time_wins(a, b):
    res = lww(a, b)
    assert res.operator == "lww" and res.winner.fact_id == "rx-2" and res.loser.fact_id == "rx-1"
    assert res.winner.object == "amoxicillin"
    assert res.audit.provenance == ML.parse("x_rx-1 + x_rx-2")
    check_audit(res)


def test_lww_ties_on_system_time_break_by_fact_id():
    a, b = f("a", "one", st=1), f("b", "two", st=1)
    assert lww(a, b).winner.fact_id == lww(b, a).winner.fact_id == "b"


@pytest.mark.parametrize("a,b", [(PEN, AMOX), (AMOX, PEN)])
def test_evi_higher_confidence_wins(a, b):
    res = evi(a, b)
    assert res.winner.fact_id == "rx-1" and res.loser.fact_id == "rx-2"
    check_audit(res)


def test_evi_ties_break_by_system_time_then_fact_id():
    assert evi(f("a", "one", st=1, conf=0.5), f("b", "two", st=2, conf=0.5)).winner.fact_id == "b"
    assert evi(f("b", "one", st=9, conf=0.5), f("a", "two", st=2, conf=0.5)).winner.fact_id == "b"
    assert evi(f("a", "one", st=1, conf=0.5), f("b", "two", st=1, conf=0.5)).winner.fact_id == "b"


@pytest.mark.parametrize("op", [await_confirmation, rule])
@pytest.mark.parametrize("vote,winner", [(0, "rx-1"), (1, "rx-2")])
def test_index_operators_pick_over_the_canonical_order(op, vote, winner):
    # the vote indexes the pair sorted by fact id, so the argument order cannot matter
    r1, r2 = op(PEN, AMOX, vote), op(AMOX, PEN, vote)
    assert r1.winner.fact_id == r2.winner.fact_id == winner
    assert r1.audit == r2.audit
    assert r1.operator == {await_confirmation: "await", rule: "rule"}[op]
    check_audit(r1)


def test_index_operators_do_not_need_stamped_facts():
    a = Fact("rx-1", "alice", "medication", "penicillin", T0)
    b = Fact("rx-2", "alice", "medication", "amoxicillin", T0)
    assert await_confirmation(a, b, 1).winner.fact_id == "rx-2"


def test_winner_and_audit_merge_given_provenance():
    a = f("a", "one", st=1, prov="x_a * t_user")
    b = f("b", "two", st=2, prov="x_b + x_a")
    res = lww(a, b, MD)
    assert res.audit.provenance == MD.parse("x_a*t_user + x_b + x_a")
    assert res.audit.provenance.dominates(MD.parse(a.provenance))
    assert res.audit.provenance.dominates(MD.parse(b.provenance))


def test_witness_encoding_round_trips_any_string():
    for w, l in [("amoxicillin", "penicillin"), ('a"b', "c\\d"), ("", "\n{}"), ("日本", "::")]:
        assert decode_witness(encode_witness(w, l)) == (w, l)
    assert audit_id("rx-1", datetime(2026, 4, 15, 9)) == "audit::rx-1::2026-04-15T09:00:00"


@pytest.mark.parametrize("other,why", [
    (f("rx-2", "penicillin", st=5), "same object"),
    (f("rx-2", "amoxicillin", st=5, subject="bob"), "other subject"),
    (f("rx-2", "amoxicillin", st=5, predicate="allergy"), "other predicate"),
    (f("rx-2", "amoxicillin", st=5, valid=(40, 50)), "disjoint validity"),
])
@pytest.mark.parametrize("name", list(BINARY))
def test_non_contradicting_pair_is_refused(name, other, why):
    a = f("rx-1", "penicillin", valid=(0, 40))
    args = (a, other) if name in ("lww", "evi") else (a, other, 0)
    with pytest.raises(NotContradicting) as e:
        BINARY[name](*args)
    assert isinstance(e.value, TokiError) and e.value.fix


@pytest.mark.parametrize("vote", [-1, 2, 7, True, 0.0, "1", None])
@pytest.mark.parametrize("op", [await_confirmation, rule])
def test_out_of_range_vote_is_refused(op, vote):
    with pytest.raises(InvalidVote):
        op(PEN, AMOX, vote)


def test_unstamped_facts_cannot_be_ordered_by_time():
    a = Fact("rx-1", "alice", "medication", "penicillin", T0)
    with pytest.raises(InputError, match="stamp"):
        lww(a, AMOX)
    with pytest.raises(InputError, match="stamp"):
        fold_evi([a, AMOX])


def test_the_error_classes_are_distinct():
    assert len({NotContradicting, InvalidVote}) == 2
    assert not issubclass(NotContradicting, InvalidVote) and not issubclass(InvalidVote, NotContradicting)


def test_canonical_order_and_set_key():
    assert [x.fact_id for x in canonical([AMOX, PEN])] == ["rx-1", "rx-2"]
    assert set_key([AMOX, PEN]) == set_key([PEN, AMOX]) == "rx-1|rx-2"


# -- n-ary folds: confluent and provenance-complete (n = 2..8) ----------------------------

@st.composite
def conflict_sets(draw):
    n = draw(st.integers(2, 8))
    ids = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=n, max_size=n, unique=True))
    facts = []
    for i, fid in enumerate(ids):
        facts.append(f(fid, f"object-{i}", st=draw(st.integers(0, 3)),  # ties on time happen
                       conf=draw(st.sampled_from([0.0, 0.25, 0.5, 1.0])),
                       prov=draw(st.sampled_from([None, f"x_{fid}*t_user", f"x_{fid} + t_src"]))))
    return facts


@pytest.mark.parametrize("carrier", [ML, pytest.param(MD, marks=pytest.mark.slow)], ids=lambda c: c.value)
@pytest.mark.parametrize("fold,binary", [(fold_lww, lww), pytest.param(fold_evi, evi, marks=pytest.mark.slow)],
                         ids=["lww", "evi"])
@given(facts=conflict_sets(), data=st.data())
def test_nary_folds_are_confluent_and_provenance_complete(fold, binary, carrier, facts, data):
    ref = fold(facts, carrier)
    for _ in range(3):
        order = data.draw(st.permutations(facts))
        again = fold(order, carrier)
        assert again.winner == ref.winner and again.provenance == ref.provenance
        assert again.losers == ref.losers
        # the same result from binary steps, folded left in this order
        step = reduce(lambda w, x: binary(w, x, carrier).winner, order)
        assert step.fact_id == ref.winner.fact_id
        assert carrier.parse(step.provenance) == ref.provenance
    # provenance-complete: the merged annotation dominates every member's
    for member in facts:
        assert ref.provenance.dominates(provenance_of(member, carrier))
    assert {ref.winner.fact_id, *(x.fact_id for x in ref.losers)} == {x.fact_id for x in facts}
    assert ref.winner.fact_id == max(facts, key=lambda x: (x.system_time_start, x.fact_id) if fold is fold_lww
                                     else (x.confidence, x.system_time_start, x.fact_id)).fact_id


def test_fold_refuses_bad_conflict_sets():
    with pytest.raises(InputError):
        fold_lww([PEN])
    with pytest.raises(InputError, match="repeats"):
        fold_lww([PEN, PEN])
    with pytest.raises(NotContradicting):
        fold_lww([PEN, f("rx-3", "penicillin", st=7)])
    with pytest.raises(NotContradicting):
        fold_evi([PEN, f("rx-3", "aspirin", st=7, subject="bob")])


def test_every_invalid_input_has_its_own_exception_under_one_root():
    from toki.errors import AmbiguousIncumbents, InvalidConfidence, InvalidPeriod

    kinds = [InvalidConfidence, InvalidPeriod, NotContradicting, InvalidVote, AmbiguousIncumbents]
    assert len(set(kinds)) == 5 and all(issubclass(k, TokiError) for k in kinds)
    for i, a in enumerate(kinds):
        for b in kinds[i + 1:]:
            assert not issubclass(a, b) and not issubclass(b, a)
