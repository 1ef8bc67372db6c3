"""Operator and provenance laws (docs/design.md#the-four-operators, docs/design.md#provenance), Theorem 3 and the pipeline join (Table 10, Theorem 4).

Two kinds of evidence per law:

* symbolic (z3): the law for *all* values. The operators are encoded from the real code: the
  key functions :func:`toki.operators.lww_key` and :func:`toki.operators.evi_key` are called
  on proxy facts whose fields are z3 terms, so the encoding orders facts by exactly the
  tuple the code compares (fact ids are modelled as integers: any finite set of strings with
  Python's string order embeds into the integers' order). Provenance polynomials have
  symbolic coefficients over a bounded set of monomials (variables x, y).
* bounded on the code (exhaustive): the real functions of :mod:`toki.operators` and
  :mod:`toki.provenance` over a stated finite domain, checked against the same law and
  against the encoding, so the proof is about the code and not only about a transcription.

Everything here takes the operator as a parameter, so a deliberately broken operator (a tie
broken by arrival order) can be handed to the same obligations and is refuted.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import SimpleNamespace

from toki import operators as ops
from toki.levels import MATRIX_LEVELS, PRECONDITION, Isolation, Level
from toki.model import Fact
from toki.provenance import Carrier, Poly, recover_erased
from toki.verify import solver as S
from toki.verify.obligations import PROVED, REFUTED, Obligation, Result, exhaustive, from_answer

# -- symbolic facts and choice rules ----------------------------------------------------------


def sym_fact(name: str) -> SimpleNamespace:
    """A proxy fact: the fields the operators read, as z3 terms."""
    return SimpleNamespace(fact_id=S.Int(f"{name}.id"), system_time_start=S.Int(f"{name}.t"),
                           confidence=S.Real(f"{name}.conf"), name=name)


def _fields(f) -> tuple:
    return (f.fact_id, f.system_time_start, f.confidence)


def _rebuild(vals: tuple, name: str = "?") -> SimpleNamespace:
    return SimpleNamespace(fact_id=vals[0], system_time_start=vals[1], confidence=vals[2], name=name)


def lex_gt(a: Sequence, b: Sequence):
    """Python's tuple comparison a > b, for tuples of z3 terms of equal length."""
    if not a:
        return S.FALSE
    return S.Or(a[0] > b[0], S.And(a[0] == b[0], lex_gt(a[1:], b[1:])))


def lex_ge(a: Sequence, b: Sequence):
    return S.Or(lex_gt(a, b), S.And(*[x == y for x, y in zip(a, b)]))


@dataclass(frozen=True)
class ChoiceRule:
    """A binary argmax operator as the code writes it: ``a if key(a) > key(b) else b``.

    ``first_wins_ties`` swaps ``>`` for ``>=``; with a key that does not separate every pair
    of facts this is a tie broken by arrival order.
    """

    name: str
    key: Callable
    first_wins_ties: bool = False

    def prefers_first(self, a, b):
        ka, kb = self.key(a), self.key(b)
        return lex_ge(ka, kb) if self.first_wins_ties else lex_gt(ka, kb)

    def choose(self, a, b):
        c = self.prefers_first(a, b)
        return _rebuild(tuple(S.If(c, x, y) for x, y in zip(_fields(a), _fields(b))))

    def choose_concrete(self, a: Fact, b: Fact) -> Fact:
        ka, kb = self.key(a), self.key(b)
        return a if (ka >= kb if self.first_wins_ties else ka > kb) else b


LWW = ChoiceRule("lww", ops.lww_key)
EVI = ChoiceRule("evi", ops.evi_key)
#: the deliberately broken operator of the tests: system time only, a tie goes to the first argument
BROKEN_ARRIVAL = ChoiceRule("lww-arrival-tie", lambda f: (f.system_time_start,), first_wins_ties=True)


def _domain_assumptions(facts) -> list:
    out = [S.Distinct(*[f.fact_id for f in facts])] if len(facts) > 1 else []
    out += [S.And(f.confidence >= 0, f.confidence <= 1) for f in facts]
    return out


def _show(facts) -> dict:
    return {f"{f.name}.{k}": v for f in facts for k, v in (("id", f.fact_id), ("t", f.system_time_start),
                                                            ("conf", f.confidence))}


def choice_obligations(rule: ChoiceRule, *, max_n: int = 8, perm_n: int = 4) -> list[Obligation]:
    p = rule.name
    a, b, c = sym_fact("a"), sym_fact("b"), sym_fact("c")

    def total(t):
        claim = S.And(S.Not(lex_gt(rule.key(a), rule.key(a))),
                      S.Or(lex_gt(rule.key(a), rule.key(b)), lex_gt(rule.key(b), rule.key(a))))
        return from_answer(S.prove(claim, assumptions=_domain_assumptions([a, b]), timeout_s=t), _show([a, b]),
                           "the key separates any two facts with distinct ids")

    def commutative(t):
        claim = rule.choose(a, b).fact_id == rule.choose(b, a).fact_id
        return from_answer(S.prove(claim, assumptions=_domain_assumptions([a, b]), timeout_s=t), _show([a, b]))

    def associative(t):
        claim = rule.choose(rule.choose(a, b), c).fact_id == rule.choose(a, rule.choose(b, c)).fact_id
        return from_answer(S.prove(claim, assumptions=_domain_assumptions([a, b, c]), timeout_s=t), _show([a, b, c]))

    def idempotent(t):
        claim = S.And(*[x == y for x, y in zip(_fields(rule.choose(a, a)), _fields(a))])
        return from_answer(S.prove(claim, assumptions=_domain_assumptions([a]), timeout_s=t), _show([a]))

    def fold_max(t):
        for n in range(2, max_n + 1):
            fs = [sym_fact(f"f{k}") for k in range(n)]
            winner = functools.reduce(rule.choose, fs)
            claim = S.And(S.Or(*[winner.fact_id == f.fact_id for f in fs]),
                          *[S.Not(lex_gt(rule.key(f), rule.key(winner))) for f in fs])
            r = from_answer(S.prove(claim, assumptions=_domain_assumptions(fs), timeout_s=t), _show(fs))
            if r.status != PROVED:
                r.detail = f"n = {n}"
                return r
        return Result(PROVED, detail=f"n = 2..{max_n}: the left fold returns a member no member's key exceeds")

    def fold_confluent(t):
        for n in range(2, perm_n + 1):
            fs = [sym_fact(f"f{k}") for k in range(n)]
            pi = [S.Int(f"pi{k}") for k in range(n)]

            def sel(pk):
                out = _fields(fs[-1])
                for k in range(n - 2, -1, -1):
                    out = tuple(S.If(pk == k, x, y) for x, y in zip(_fields(fs[k]), out))
                return _rebuild(out)

            w1 = functools.reduce(rule.choose, fs)
            w2 = functools.reduce(rule.choose, [sel(q) for q in pi])
            assume = _domain_assumptions(fs) + [S.Distinct(*pi)] + [S.And(q >= 0, q < n) for q in pi]
            show = _show(fs) | {f"pi{k}": q for k, q in enumerate(pi)}
            r = from_answer(S.prove(w1.fact_id == w2.fact_id, assumptions=assume, timeout_s=t), show)
            if r.status != PROVED:
                r.detail = f"n = {n}: folding in the order pi picks another winner"
                return r
        return Result(PROVED, detail=f"n = 2..{perm_n}, every permutation symbolic")

    return [
        Obligation(f"{p}.total-order", f"{p}'s key is a strict total order on facts with distinct ids", "proved", total),
        Obligation(f"{p}.commutative", f"{p}(a, b) and {p}(b, a) pick the same winner", "proved", commutative),
        Obligation(f"{p}.associative", f"{p}({p}(a, b), c) = {p}(a, {p}(b, c))", "proved", associative),
        Obligation(f"{p}.idempotent", f"{p}(a, a) = a (choice level)", "proved", idempotent),
        Obligation(f"{p}.fold-argmax", f"the n-ary fold of {p} returns the key-maximum, n = 2..{max_n} "
                   "(with the total order: every folding order gives the same winner)", "proved", fold_max),
        Obligation(f"{p}.fold-confluent", f"folding {p} in any permutation gives the same winner, n = 2..{perm_n}",
                   "proved", fold_confluent),
    ]


# -- bounded checks on the real operator code ------------------------------------------------

T0 = datetime(2026, 3, 1)


def fact_domain() -> list[Fact]:
    """3 ids x 3 system times x 3 confidences, one slot, object = id (so distinct ids contradict)."""
    out = []
    for fid in ("f1", "f2", "f3"):
        for dt in (0, 1, 2):
            for conf in (0.2, 0.5, 0.8):
                out.append(Fact(fid, "alice", "medication", f"obj-{fid}", datetime(2026, 1, 1),
                                confidence=conf).stamped(T0 + timedelta(hours=dt)))
    return out


def _fact_str(f: Fact) -> str:
    return f"{f.fact_id}(t=+{int((f.system_time_start - T0).total_seconds() // 3600)}h, conf={f.confidence})"


def code_binary(name: str, fn: Callable[[Fact, Fact], Fact], rule: ChoiceRule | None) -> Callable[[float], Result]:
    """fn(a, b) -> winner over every ordered pair of the domain with distinct ids: commutative,
    and (with ``rule``) equal to the symbolic encoding's choice."""
    dom = fact_domain()
    pairs = [(a, b) for a in dom for b in dom if a.fact_id != b.fact_id]

    def check(_t):
        def one(ab):
            a, b = ab
            w1, w2 = fn(a, b), fn(b, a)
            if w1.fact_id != w2.fact_id:
                return f"{name}(a, b) picks {w1.fact_id}, {name}(b, a) picks {w2.fact_id}"
            if rule is not None:
                enc = rule.choose_concrete(a, b)
                if enc.fact_id != w1.fact_id:
                    return f"the code picks {w1.fact_id}, the encoding {enc.fact_id}"
            return True
        return exhaustive(pairs, one, lambda ab: [_fact_str(ab[0]), _fact_str(ab[1])],
                          f"every ordered pair of {len(dom)} stamped facts with distinct ids")
    return check


def code_fold(name: str, fold: Callable, *, seed: int = 0, max_n: int = 8, exhaustive_n: int = 6,
              samples: int = 300) -> Callable[[float], Result]:
    """The real n-ary fold over permutations (all of them up to exhaustive_n, a seeded sample
    beyond), on conflict sets with ties in system time and confidence; the audit provenance
    dominates every member's provenance."""

    def check(_t):
        rng = random.Random(seed)
        n_cases = 0
        for n in range(2, max_n + 1):
            facts = [Fact(f"f{k}", "alice", "medication", f"obj{k}", datetime(2026, 1, 1),
                          confidence=(0.5, 0.9)[k % 2]).stamped(T0 + timedelta(hours=k // 3)) for k in range(n)]
            rng.shuffle(facts)
            if n <= exhaustive_n:
                perms = itertools.permutations(facts)
            else:
                perms = (rng.sample(facts, n) for _ in range(samples))
            winners = set()
            for perm in perms:
                n_cases += 1
                res = fold(list(perm))
                winners.add(res.winner.fact_id)
                if len(winners) > 1:
                    return Result(REFUTED, countermodel={"n": n, "winners": sorted(winners),
                                                         "facts": [_fact_str(f) for f in facts]},
                                  detail="two folding orders picked different winners")
                for f in perm:
                    if not ops.provenance_of(f, Carrier.MULTILINEAR) <= res.provenance:
                        return Result(REFUTED, countermodel={"n": n, "member": f.fact_id,
                                                             "audit": str(res.provenance)},
                                      detail="the audit provenance does not dominate a member")
        return Result(PROVED, detail=f"n = 2..{max_n}: all permutations up to n = {exhaustive_n}, "
                                     f"{samples} seeded (seed {seed}) beyond; {n_cases} folds")
    return check


def broken_arrival_lww(a: Fact, b: Fact) -> Fact:
    """Deliberately broken: later system time wins, a tie goes to whichever arrived first."""
    return BROKEN_ARRIVAL.choose_concrete(a, b)


def operator_obligations() -> list[Obligation]:
    out: list[Obligation] = []
    out += choice_obligations(LWW)
    out.append(Obligation("lww.code", "toki.operators.lww is commutative and equals the encoding on every "
                          "pair of the bounded domain", "proved",
                          code_binary("lww", lambda a, b: ops.lww(a, b).winner, LWW), "exhaustive"))
    out.append(Obligation("lww.code.fold", "toki.operators.fold_lww: one winner for every folding order, the audit "
                          "provenance dominates every member (n = 2..8)", "proved",
                          code_fold("fold_lww", ops.fold_lww), "exhaustive"))
    out += choice_obligations(EVI)
    out.append(Obligation("evi.code", "toki.operators.evi is commutative and equals the encoding on every "
                          "pair of the bounded domain", "proved",
                          code_binary("evi", lambda a, b: ops.evi(a, b).winner, EVI), "exhaustive"))
    out.append(Obligation("evi.code.fold", "toki.operators.fold_evi: one winner for every folding order, the audit "
                          "provenance dominates every member (n = 2..8)", "proved",
                          code_fold("fold_evi", ops.fold_evi), "exhaustive"))
    out += _index_obligations()
    out.append(Obligation("audit.dominates", "the audit provenance p_1 ⊕ ... ⊕ p_n dominates every member's "
                          "(N[X,T], n = 2..8, symbolic coefficients)", "proved", _audit_dominates))
    return out


def _index_obligations() -> list[Obligation]:
    """⊕? and ⊕c: the vote indexes the canonically ordered pair, so arrival order is irrelevant."""
    a, b = sym_fact("a"), sym_fact("b")
    v = S.Int("vote")

    def by_index(x, y, canonical: bool):
        if canonical:
            first = S.If(x.fact_id < y.fact_id, x.fact_id, y.fact_id)
            second = S.If(x.fact_id < y.fact_id, y.fact_id, x.fact_id)
        else:
            first, second = x.fact_id, y.fact_id
        return S.If(v == 0, first, second)

    def sym(canonical):
        def check(t):
            claim = by_index(a, b, canonical) == by_index(b, a, canonical)
            assume = [a.fact_id != b.fact_id, S.Or(v == 0, v == 1)]
            return from_answer(S.prove(claim, assumptions=assume, timeout_s=t),
                               {"a.id": a.fact_id, "b.id": b.fact_id, "vote": v})
        return check

    def code(op_name):
        fn = ops.BINARY[op_name]
        dom = [f for f in fact_domain() if f.confidence == 0.5 and f.system_time_start == T0]

        def check(_t):
            cases = [(x, y, vote) for x in dom for y in dom if x.fact_id != y.fact_id for vote in (0, 1)]
            return exhaustive(cases, lambda c: fn(c[0], c[1], c[2]).winner.fact_id == fn(c[1], c[0], c[2]).winner.fact_id,
                              lambda c: [c[0].fact_id, c[1].fact_id, f"vote={c[2]}"],
                              f"toki.operators.{fn.__name__} on every ordered pair and vote")
        return check

    def judge_keys(canonical):
        from toki.judges.base import SimulatedJudge, judge_key

        def check(_t):
            judge = SimulatedJudge(p=0.5, seed=0)
            dom = [f for f in fact_domain() if f.confidence == 0.5 and f.system_time_start == T0]
            cases = [(x, y) for x in dom for y in dom if x.fact_id != y.fact_id]
            return exhaustive(cases, lambda c: judge_key([c[0], c[1]], judge, canonicalize=canonical)
                              == judge_key([c[1], c[0]], judge, canonicalize=canonical),
                              lambda c: [c[0].fact_id, c[1].fact_id],
                              "toki.judges.judge_key of a pair in both orders")
        return check

    out = []
    for op_name, sym_name in (("await", "⊕?"), ("rule", "⊕c")):
        out.append(Obligation(f"{op_name}.order-independent", f"{sym_name} picks the same winner for (a, b) and (b, a) "
                              "when the vote indexes the pair sorted by fact id", "proved", sym(True)))
        out.append(Obligation(f"{op_name}.code", f"toki.operators.{ops.BINARY[op_name].__name__} is order-independent "
                              "on the bounded domain", "proved", code(op_name), "exhaustive"))
    out.append(Obligation("index.no-canonical", "with canonicalisation off (the vote indexes the pair as it arrived) "
                          "⊕? and ⊕c are order-independent", "refuted", sym(False)))
    out.append(Obligation("judge-key.canonical", "judge_key(canonicalize=True) keys a pair identically in both orders",
                          "proved", judge_keys(True), "exhaustive"))
    out.append(Obligation("judge-key.no-canonical", "judge_key(canonicalize=False) keys a pair identically in both "
                          "orders", "refuted", judge_keys(False), "exhaustive"))
    return out


def _audit_dominates(t: float) -> Result:
    monos = 4
    for n in range(2, 9):
        polys = [[S.Int(f"p{k}_{m}") for m in range(monos)] for k in range(n)]
        total = [S.Sum(*[p[m] for p in polys]) for m in range(monos)]
        assume = [c >= 0 for p in polys for c in p]
        claim = S.And(*[p[m] <= total[m] for p in polys for m in range(monos)])
        r = from_answer(S.prove(claim, assumptions=assume, timeout_s=t))
        if r.status != PROVED:
            return r
    return Result(PROVED, detail="n = 2..8 members over 4 monomials")


# -- provenance semirings ---------------------------------------------------------------------

VARS = ("x", "y")


class SymPoly:
    """A polynomial with z3 (or Python) coefficients, normalised like toki.provenance does."""

    def __init__(self, carrier: Carrier, terms: dict):
        self.carrier = carrier
        self.terms = terms  # monomial (tuple of exponents per VARS) -> coefficient; BOOLEAN: {(): bool}

    @staticmethod
    def symbolic(carrier: Carrier, name: str, max_exp: int) -> "SymPoly":
        if carrier is Carrier.BOOLEAN:
            return SymPoly(carrier, {(): S.Bool(f"{name}")})
        top = 1 if carrier is Carrier.MULTILINEAR else max_exp
        monos = list(itertools.product(range(top + 1), repeat=len(VARS)))
        return SymPoly(carrier, {m: S.Int(f"{name}[{'.'.join(map(str, m))}]") for m in monos})

    def assumptions(self) -> list:
        return [] if self.carrier is Carrier.BOOLEAN else [c >= 0 for c in self.terms.values()]

    def _norm(self, terms: dict) -> "SymPoly":
        if self.carrier is Carrier.MULTILINEAR:
            out: dict = {}
            for m, c in terms.items():
                m2 = tuple(min(e, 1) for e in m)
                out[m2] = out[m2] + c if m2 in out else c
            return SymPoly(self.carrier, out)
        return SymPoly(self.carrier, terms)

    def __add__(self, o: "SymPoly") -> "SymPoly":
        if self.carrier is Carrier.BOOLEAN:
            return SymPoly(self.carrier, {(): S.Or(self.terms[()], o.terms[()])})
        out = dict(self.terms)
        for m, c in o.terms.items():
            out[m] = out[m] + c if m in out else c
        return self._norm(out)

    def __mul__(self, o: "SymPoly") -> "SymPoly":
        if self.carrier is Carrier.BOOLEAN:
            return SymPoly(self.carrier, {(): S.And(self.terms[()], o.terms[()])})
        out: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in o.terms.items():
                m = tuple(x + y for x, y in zip(m1, m2))
                out[m] = out[m] + c1 * c2 if m in out else c1 * c2
        return self._norm(out)

    def eq(self, o: "SymPoly"):
        if self.carrier is Carrier.BOOLEAN:
            return self.terms[()] == o.terms[()]
        keys = set(self.terms) | set(o.terms)
        return S.And(*[self.terms.get(m, 0) == o.terms.get(m, 0) for m in keys])

    def le(self, o: "SymPoly"):
        """Coefficient-wise order (what Poly.__le__ computes)."""
        if self.carrier is Carrier.BOOLEAN:
            return S.Implies(self.terms[()], o.terms[()])
        keys = set(self.terms) | set(o.terms)
        return S.And(*[self.terms.get(m, 0) <= o.terms.get(m, 0) for m in keys])

    def minus(self, o: "SymPoly") -> "SymPoly":
        """A witness c with o ⊕ c = self when o ⪯ self (coefficient differences; B: self)."""
        if self.carrier is Carrier.BOOLEAN:
            return SymPoly(self.carrier, dict(self.terms))
        keys = set(self.terms) | set(o.terms)
        return SymPoly(self.carrier, {m: self.terms.get(m, 0) - o.terms.get(m, 0) for m in keys})

    @staticmethod
    def const(carrier: Carrier, value: int) -> "SymPoly":
        if carrier is Carrier.BOOLEAN:
            return SymPoly(carrier, {(): S.BoolVal(bool(value))})
        return SymPoly(carrier, {(0,) * len(VARS): S.IntVal(value)} if value else {})

    @staticmethod
    def var(carrier: Carrier, name: str) -> "SymPoly":
        if carrier is Carrier.BOOLEAN:
            return SymPoly(carrier, {(): S.TRUE})
        return SymPoly(carrier, {tuple(int(v == name) for v in VARS): S.IntVal(1)})


def semiring_obligations(carrier: Carrier) -> list[Obligation]:
    c = carrier.value
    mk = functools.partial(SymPoly.symbolic, carrier, max_exp=1)
    a, b, d = mk("a"), mk("b"), mk("c")
    zero, one = SymPoly.const(carrier, 0), SymPoly.const(carrier, 1)
    base = a.assumptions() + b.assumptions() + d.assumptions()
    show = {}
    for name, p in (("a", a), ("b", b), ("c", d)):
        for m, term in p.terms.items():
            show[f"{name}{list(m) if m else ''}"] = term

    laws = {
        "plus.associative": ((a + b) + d).eq(a + (b + d)),
        "plus.commutative": (a + b).eq(b + a),
        "plus.zero": (a + zero).eq(a),
        "times.associative": ((a * b) * d).eq(a * (b * d)),
        "times.commutative": (a * b).eq(b * a),
        "times.one": (a * one).eq(a),
        "times.zero-annihilates": (a * zero).eq(zero),
        "distributive": (a * (b + d)).eq((a * b) + (a * d)),
        "order.reflexive": a.le(a),
        "order.antisymmetric": S.Implies(S.And(a.le(b), b.le(a)), a.eq(b)),
        "order.transitive": S.Implies(S.And(a.le(b), b.le(d)), a.le(d)),
        "order.natural-sum": a.le(a + b),  # a ⪯ a ⊕ c: the "some c" direction
        "order.natural-witness": S.Implies(a.le(b), (a + b.minus(a)).eq(b)),  # a ⪯ b gives c = b - a
        "order.plus-monotone": S.Implies(a.le(b), (a + d).le(b + d)),
        "order.times-monotone": S.Implies(a.le(b), (a * d).le(b * d)),
    }
    out = []
    for law, claim in laws.items():
        extra = []
        if law == "order.natural-witness" and carrier is not Carrier.BOOLEAN:
            extra = [t >= 0 for t in b.minus(a).terms.values()]

        def check(t, claim=claim, extra=extra, law=law):
            r = from_answer(S.prove(claim, assumptions=base, timeout_s=t), show)
            if extra and r.status == PROVED:  # the witness c must itself be a polynomial (c >= 0)
                r2 = from_answer(S.prove(S.And(*extra), assumptions=base + [a.le(b)], timeout_s=t), show)
                if r2.status != PROVED:
                    return r2
            return r
        out.append(Obligation(f"semiring.{c}.{law}", f"{law.replace('.', ' ')} in the {c} carrier "
                              "(symbolic coefficients, monomials over x, y)", "proved", check))
    out.append(Obligation(f"semiring.{c}.code", f"toki.provenance's {c} ⊕, ⊗, ⪯ agree with the encoding and obey "
                          "the semiring laws on a bounded set of polynomials", "proved", _code_semiring(carrier),
                          "exhaustive"))
    return out


def _concrete_polys(carrier: Carrier) -> list[tuple[Poly, "SymPoly"]]:
    texts = ["0", "1", "x", "y", "2*x", "x*y", "x^2", "x + y", "2*x^2 + y", "x*y + 3"]
    out = []
    for t in texts:
        p = carrier.parse(t)
        if carrier is Carrier.BOOLEAN:
            sp = SymPoly(carrier, {(): S.BoolVal(not p.is_zero)})
        else:
            terms: dict = {}
            for mono, coef in p.terms:
                e = dict(mono)
                terms[tuple(e.get(v, 0) for v in VARS)] = S.IntVal(coef)
            sp = SymPoly(carrier, terms)
        out.append((p, sp))
    return out


def _code_semiring(carrier: Carrier) -> Callable[[float], Result]:
    def agree(p: Poly, sp: SymPoly) -> bool:
        if carrier is Carrier.BOOLEAN:
            return (not p.is_zero) == S.evaluate(sp.terms[()])
        terms = {}
        for mono, coef in p.terms:
            e = dict(mono)
            terms[tuple(e.get(v, 0) for v in VARS)] = coef
        keys = set(terms) | set(sp.terms)
        return all(terms.get(m, 0) == S.evaluate(sp.terms.get(m, S.IntVal(0))) for m in keys)

    def check(_t):
        polys = _concrete_polys(carrier)

        def one(case):
            (p, sp), (q, sq), (r, _sr) = case
            if not agree(p + q, sp + sq):
                return f"⊕ differs from the encoding: {p} + {q} = {p + q}"
            if not agree(p * q, sp * sq):
                return f"⊗ differs from the encoding: {p} * {q} = {p * q}"
            if (p <= q) != S.evaluate(sp.le(sq)):
                return f"⪯ differs from the encoding on {p}, {q}"
            if (p + q) + r != p + (q + r) or p + q != q + p:
                return "⊕ is not associative/commutative"
            if (p * q) * r != p * (q * r) or p * q != q * p:
                return "⊗ is not associative/commutative"
            if p * (q + r) != p * q + p * r:
                return "⊗ does not distribute over ⊕"
            return True
        return exhaustive(itertools.product(polys, repeat=3), one,
                          lambda c: [str(c[0][0]), str(c[1][0]), str(c[2][0])],
                          f"all triples of {len(polys)} {carrier.value} polynomials")
    return check


def theorem3_obligations() -> list[Obligation]:
    """One erased instance of x is recoverable from the annotation alone iff the carrier keeps
    x's degree: x ⊗ x ⊗ q must differ from x ⊗ q for every non-zero q."""
    out = []
    for carrier, expected in ((Carrier.MULTIDEGREE, "proved"), (Carrier.MULTILINEAR, "refuted"),
                              (Carrier.BOOLEAN, "refuted")):
        def check(t, carrier=carrier):
            q = SymPoly.symbolic(carrier, "q", max_exp=2)
            x = SymPoly.var(carrier, "x")
            nonzero = (q.terms[()] if carrier is Carrier.BOOLEAN
                       else S.Or(*[c > 0 for c in q.terms.values()]))
            show = {f"q{list(m) if m else ''}": c for m, c in q.terms.items()}
            return from_answer(S.prove(S.Not((x * x * q).eq(x * q)), assumptions=q.assumptions() + [nonzero],
                                       timeout_s=t), show,
                               "countermodel: a q for which erasing one instance of x leaves the annotation unchanged")
        out.append(Obligation(f"theorem3.{carrier.value}", f"Theorem 3 in the {carrier.value} carrier: erasing one of "
                              "two instances of x changes the annotation (so it is recoverable)", expected, check))

    def code(_t):
        qs = ["1", "y", "t_user", "y + t_user", "2*y^2"]

        def one(case):
            carrier, qt, deg = case
            q = carrier.parse(qt)
            x = carrier.var("x_f1")
            full = x * x * q if deg == 2 else x * q
            surviving = x * q if deg == 2 else q
            got = recover_erased(full, surviving)
            want = frozenset({"x_f1"}) if (deg == 2 and carrier is Carrier.MULTIDEGREE) else None
            return True if got == want else f"recover_erased returned {got}, Theorem 3 says {want}"
        cases = [(c, qt, d) for c in Carrier for qt in qs for d in (1, 2)]
        return exhaustive(cases, one, lambda c: {"carrier": c[0].value, "q": c[1], "degree of x": c[2]},
                          "toki.provenance.recover_erased: recovered iff multidegree and degree >= 2")
    out.append(Obligation("theorem3.code", "toki.provenance.recover_erased recovers an erased instance of x exactly "
                          "when the carrier is multidegree and x's degree was at least 2", "proved", code, "exhaustive"))
    return out


# -- pipelines (Table 10, Theorem 4) ---------------------------------------------------------

OPS = tuple(PRECONDITION)  # lww, evi, await, rule


def _pre_terms(op_term):
    iso = S.IntVal(int(PRECONDITION[OPS[-1]].isolation))
    cb = S.BoolVal(PRECONDITION[OPS[-1]].callback)
    for k in range(len(OPS) - 2, -1, -1):
        lv = PRECONDITION[OPS[k]]
        iso = S.If(op_term == k, int(lv.isolation), iso)
        cb = S.If(op_term == k, S.BoolVal(lv.callback), cb)
    return iso, cb


def pipeline_obligations(max_len: int = 5) -> list[Obligation]:
    def theorem4(t):
        for n in range(1, max_len + 1):
            opv = [S.Int(f"op{k}") for k in range(n)]
            pres = [_pre_terms(o) for o in opv]
            j_iso = pres[0][0]
            for iso, _ in pres[1:]:
                j_iso = S.If(iso > j_iso, iso, j_iso)
            j_cb = S.Or(*[cb for _, cb in pres])
            L_iso, L_cb = S.Int("L.iso"), S.Bool("L.cb")

            def below(iso, cb):
                return S.And(iso <= L_iso, S.Implies(cb, L_cb))
            claim = S.And(S.And(*[below(i, c) for i, c in pres]) == below(j_iso, j_cb),
                          *[S.And(i <= j_iso, S.Implies(c, j_cb)) for i, c in pres])
            assume = [S.And(o >= 0, o < len(OPS)) for o in opv] + [S.And(L_iso >= int(Isolation.RC),
                                                                         L_iso <= int(Isolation.SR))]
            show = {f"op{k}": o for k, o in enumerate(opv)} | {"L.iso": L_iso, "L.cb": L_cb}
            r = from_answer(S.prove(claim, assumptions=assume, timeout_s=t), show)
            if r.status != PROVED:
                r.detail = f"length {n}"
                return r
        return Result(PROVED, detail=f"lengths 1..{max_len}, operators symbolic: a level runs every step iff it "
                                     "is at or above the join, and the join is an upper bound of every step")

    def code(_t):
        counts: dict[str, int] = {}
        at, below, n_pipes = 0, 0, 0
        for n in range(1, max_len + 1):
            for pipe in itertools.product(OPS, repeat=n):
                n_pipes += 1
                joined = functools.reduce(Level.join, (PRECONDITION[o] for o in pipe))
                # least upper bound: joined is above every step and below every common upper bound
                uppers = [L for L in MATRIX_LEVELS if all(L.at_least(PRECONDITION[o]) for o in pipe)]
                if not all(joined.at_least(PRECONDITION[o]) for o in pipe) or any(not L.at_least(joined) for L in uppers):
                    return Result(REFUTED, countermodel={"pipeline": list(pipe), "join": joined.name},
                                  detail="Level.join is not the least upper bound")
                if joined not in MATRIX_LEVELS:
                    return Result(REFUTED, countermodel={"pipeline": list(pipe), "join": joined.name})
                counts[joined.name] = counts.get(joined.name, 0) + 1
                for L in MATRIX_LEVELS:
                    if L.at_least(joined):
                        at += 1
                    else:
                        below += 1
        examples = {("lww", "evi"): "SI", ("evi", "await"): "SI+cb"}
        for pipe, want in examples.items():
            got = functools.reduce(Level.join, (PRECONDITION[o] for o in pipe)).name
            if got != want:
                return Result(REFUTED, countermodel={"pipeline": list(pipe), "join": got, "docs/design.md#the-four-operators": want})
        rule_ok = all(functools.reduce(Level.join, (PRECONDITION[o] for o in p)).isolation is Isolation.SR
                      for n in range(1, max_len + 1) for p in itertools.product(OPS, repeat=n) if "rule" in p)
        if not rule_ok:
            return Result(REFUTED, detail="a pipeline with ⊕c does not need SR")
        return Result(PROVED, detail=f"{n_pipes} pipelines; joins {dict(sorted(counts.items()))}; "
                                     f"{at} (pipeline, level) cells at or above the join, {below} below",
                      extra={"pipelines": n_pipes, "join_counts": counts, "cells_at_or_above": at,
                             "cells_below": below})

    def audit_row(t):
        """One conflict resolved by a pipeline: a step in audit-row mode records p_w ⊕ p_l."""
        for n in range(1, max_len + 1):
            modes = [S.Bool(f"audit{k}") for k in range(n)]
            pw = [S.Int(f"pw[{m}]") for m in range(3)]
            pl = [S.Int(f"pl[{m}]") for m in range(3)]
            swap = [S.Bool(f"winner_swapped{k}") for k in range(n)]  # each step may pick either side
            dominated = S.Or(*[S.And(modes[k], S.And(*[S.If(swap[k], pw[m], pl[m]) <= pw[m] + pl[m]
                                                       for m in range(3)])) for k in range(n)])
            claim = S.Or(*modes) == dominated
            r = from_answer(S.prove(claim, assumptions=[c >= 0 for c in pw + pl], timeout_s=t),
                            {f"audit{k}": m for k, m in enumerate(modes)})
            if r.status != PROVED:
                r.detail = f"length {n}"
                return r
        return Result(PROVED, detail=f"lengths 1..{max_len}: the loser is dominated by an audit tuple iff some "
                                     "step runs in audit-row mode")

    return [
        Obligation("pipeline.theorem4", "Theorem 4: a pipeline runs safely at level L iff L is at or above the join "
                   "of its steps' preconditions (RC ⪯ SI ⪯ SR, ⊥ ⪯ cb), lengths 1..5", "proved", theorem4),
        Obligation("pipeline.table10", "Table 10 over all 1,364 pipelines of length 1..5: toki.levels' join is the "
                   "least upper bound; ⊕t;⊕p needs SI, ⊕p;⊕? needs SI+cb, anything with ⊕c needs SR", "proved", code,
                   "exhaustive"),
        Obligation("pipeline.audit-row", "one audit-row step makes the pipeline audit-row: the loser's provenance is "
                   "dominated by an audit tuple iff some step writes one (N3)", "proved", audit_row),
    ]


def all_law_obligations() -> list[Obligation]:
    out = operator_obligations()
    for carrier in Carrier:
        out += semiring_obligations(carrier)
    out += theorem3_obligations()
    out += pipeline_obligations()
    return out
