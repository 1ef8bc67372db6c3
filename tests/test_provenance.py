"""Provenance carriers (docs/design.md#provenance): semiring laws, natural order, text round trip, Theorem 3."""

from functools import reduce

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toki.errors import InputError, ProvenanceSyntaxError, TokiError
from toki.provenance import Carrier, Poly, plus_all, recover_erased, times_all

ML, MD, B = Carrier.MULTILINEAR, Carrier.MULTIDEGREE, Carrier.BOOLEAN
CARRIERS = list(Carrier)

odd_names = st.one_of(
    st.sampled_from(["x_f1", "t_user", "true", "false", "0", "1", "x y", 'q"uote', "a+b", "a*b",
                     "x^2", "é", "日本", "back\\slash", " lead", "trail ", "-x", "x_rx-1#pre", "\n"]),
    st.text(min_size=1, max_size=8),
)


@st.composite
def polys(draw, carrier, names=odd_names):
    n = draw(st.integers(0, 4))
    terms = {}
    for _ in range(n):
        mono = draw(st.dictionaries(names, st.integers(1, 3), max_size=3))
        coef = draw(st.integers(1, 4))
        terms[tuple(sorted(mono.items()))] = terms.get(tuple(sorted(mono.items())), 0) + coef
    return carrier._norm(terms)


@pytest.mark.parametrize("carrier", CARRIERS, ids=lambda c: c.value)
@given(data=st.data())
def test_text_round_trips(carrier, data):
    p = data.draw(polys(carrier))
    text = str(p)
    assert carrier.parse(text) == p
    assert str(carrier.parse(text)) == text


@given(st.text(min_size=1))
def test_any_variable_name_round_trips(name):
    for carrier in (ML, MD):
        p = carrier.var(name) * carrier.var(name) + carrier.var("x")
        assert carrier.parse(str(p)) == p


def test_text_form_examples():
    x, y = MD.var("x_f1"), MD.var("t_user")
    assert str(MD.zero()) == "0" and str(MD.one()) == "1"
    assert str(x * x * y + x + x) == "t_user*x_f1^2 + 2*x_f1"
    assert str((x * x).to(ML)) == "x_f1"
    assert str((x + y).to(B)) == "1"
    assert str(MD.var("true")) == '"true"'  # a variable, not the Boolean constant
    ab = MD.var("a b")
    assert MD.parse('2 * "a b"^3 + x') == ab * ab * ab + ab * ab * ab + MD.var("x")


@pytest.mark.parametrize("bad", ["x +", "+ x", "x^0", "x^", "2**x", '"open', "x $ y", "", "x y"])
def test_malformed_text_is_refused(bad):
    with pytest.raises(ProvenanceSyntaxError) as e:
        MD.parse(bad)
    assert isinstance(e.value, InputError) and isinstance(e.value, TokiError)


def test_mixing_carriers_is_refused():
    with pytest.raises(ProvenanceSyntaxError):
        ML.var("x") + MD.var("x")
    with pytest.raises(ProvenanceSyntaxError):
        ML.var("")


@pytest.mark.slow
@pytest.mark.parametrize("carrier", CARRIERS, ids=lambda c: c.value)
@given(data=st.data())
def test_commutative_semiring_laws(carrier, data):
    small = st.sampled_from(["x", "y", "t"])
    a, b, c = (data.draw(polys(carrier, small)) for _ in range(3))
    zero, one = carrier.zero(), carrier.one()
    assert a + b == b + a and a * b == b * a
    assert (a + b) + c == a + (b + c) and (a * b) * c == a * (b * c)
    assert a + zero == a and a * one == a and a * zero == zero
    assert a * (b + c) == a * b + a * c
    # natural order: a ⪯ a ⊕ b, reflexive, and ⊕ is monotone
    assert a <= a + b and (a + b).dominates(b) and a <= a
    if a <= b:
        assert a + c <= b + c


def test_carrier_specific_multiplication():
    x = "x"
    assert MD.var(x) * MD.var(x) != MD.var(x) and (MD.var(x) * MD.var(x)).degree(x) == 2
    assert ML.var(x) * ML.var(x) == ML.var(x)
    assert ML.var(x) + ML.var(x) != ML.var(x) and (ML.var(x) + ML.var(x)).instances(x) == 2
    assert B.var(x) + B.var(x) == B.var(x) == B.one() and B.zero() <= B.one() and not B.one() <= B.zero()


def test_plus_all_and_times_all():
    xs = [MD.var(v) for v in "abc"]
    assert plus_all(xs, MD) == reduce(Poly.__add__, xs)
    assert times_all(xs, MD) == MD.parse("a*b*c")
    assert plus_all([], MD) == MD.zero() and times_all([], MD) == MD.one()


# -- Theorem 3: recovery of one erased instance --------------------------------------------
# An expression is a token or ("+"|"*", [children >= 2]); erasing an instance removes one leaf
# from its parent (a summand or a factor), which is what overwriting a row does to the
# annotation of everything derived from it.

TOKENS = ["x", "y", "z"]
exprs = st.recursive(st.sampled_from(TOKENS),
                     lambda kids: st.tuples(st.sampled_from("+*"), st.lists(kids, min_size=2, max_size=3)),
                     max_leaves=8)


def evaluate(e, carrier):
    if isinstance(e, str):
        return carrier.var(e)
    op, kids = e
    vals = [evaluate(k, carrier) for k in kids]
    return plus_all(vals, carrier) if op == "+" else times_all(vals, carrier)


def leaves(e, path=()):
    if isinstance(e, str):
        yield path, e
    else:
        for i, k in enumerate(e[1]):
            yield from leaves(k, path + (i,))


def erase(e, path):
    op, kids = e
    i, rest = path[0], path[1:]
    if not rest:
        kept = kids[:i] + kids[i + 1:]
        return kept[0] if len(kept) == 1 else (op, kept)
    return (op, kids[:i] + [erase(kids[i], rest)] + kids[i + 1:])


@given(exprs.filter(lambda e: not isinstance(e, str)), st.data())
def test_theorem3_only_multidegree_recovers_every_erased_instance(e, data):
    path, token = data.draw(st.sampled_from(list(leaves(e))))
    after = erase(e, path)
    occurrences = sum(1 for _, t in leaves(e) if t == token)
    got = {c: recover_erased(evaluate(e, c), evaluate(after, c)) for c in CARRIERS}
    # N[X,T]#: recovered exactly when the token occurred at least twice (Theorem 3)
    assert (got[MD] is not None and token in got[MD]) == (occurrences >= 2)
    # N[X,T] never recovers more than N[X,T]#; B recovers nothing
    if got[ML] is not None and token in got[ML]:
        assert got[MD] is not None and token in got[MD]
    assert got[B] is None
    # token recall: the surviving annotation still names the token in both polynomial carriers
    assert (token in evaluate(after, ML).variables()) == (occurrences >= 2)
    assert not evaluate(after, B).variables()


@pytest.mark.parametrize("expr,erased,recovers", [
    # x used twice in one derivation (x⊗x⊗y): multilinear has already collapsed x² to x
    (("*", ["x", "x", "y"]), ("*", ["x", "y"]), {MD}),
    # x confirmed twice (x⊕x ⊕ y): the coefficient shows it in N[X,T] as well
    (("+", ["x", "x", "y"]), ("+", ["x", "y"]), {MD, ML}),
    # x used once: the surviving annotation no longer names x, nobody can recover it
    (("*", ["x", "y"]), "y", set()),
])
def test_theorem3_examples(expr, erased, recovers):
    for c in CARRIERS:
        got = recover_erased(evaluate(expr, c), evaluate(erased, c))
        assert (got == frozenset({"x"})) == (c in recovers), c
