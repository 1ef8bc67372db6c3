"""The one module that talks to z3 (docs/design.md: "z3 behind one small module").

Every other module of :mod:`toki.verify` builds formulas with the constructors re-exported
here and asks one of two questions:

* :func:`prove` - does a claim hold for every assignment (under assumptions)? The verdict is
  :attr:`Verdict.PROVED` (the negation is unsatisfiable), :attr:`Verdict.REFUTED` (z3 found a
  countermodel, returned with the verdict) or :attr:`Verdict.UNKNOWN` (timeout, incomplete
  theory). ``UNKNOWN`` is never turned into ``PROVED``.
* :func:`search` - is there an assignment satisfying the constraints? ``FOUND`` (with the
  model), ``NONE`` (unsatisfiable: a proof that nothing exists within the encoding) or
  ``UNKNOWN``.

z3 runs single-threaded with a fixed random seed, so answers and models are reproducible
for a given z3 version (recorded by :func:`version`).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import z3

# Term constructors used by the encodings (nothing else in toki imports z3).
And, Or, Not, Implies, If, Distinct, Sum = z3.And, z3.Or, z3.Not, z3.Implies, z3.If, z3.Distinct, z3.Sum
ForAll, Exists = z3.ForAll, z3.Exists
Int, Ints, Bool, Bools, Real, Reals = z3.Int, z3.Ints, z3.Bool, z3.Bools, z3.Real, z3.Reals
IntVal, BoolVal, RealVal = z3.IntVal, z3.BoolVal, z3.RealVal
Term = z3.ExprRef
TRUE, FALSE = z3.BoolVal(True), z3.BoolVal(False)


def version() -> str:
    return z3.get_version_string()


class Verdict(enum.Enum):
    PROVED = "proved"
    REFUTED = "refuted"
    UNKNOWN = "unknown"


class Found(enum.Enum):
    FOUND = "found"
    NONE = "none"
    UNKNOWN = "unknown"


@dataclass
class Model:
    """A satisfying assignment, readable as Python values."""

    _model: Any = field(repr=False)

    def __call__(self, term: Any) -> Any:
        return to_python(self._model.eval(term, model_completion=True))


@dataclass
class Answer:
    verdict: Verdict | Found
    seconds: float
    model: Model | None = None
    reason: str | None = None  # z3's reason when unknown

    def show(self, terms: dict[str, Any]) -> dict[str, Any] | None:
        """The countermodel (or witness) restricted to the named terms."""
        if self.model is None:
            return None
        return {name: self.model(t) for name, t in terms.items()}


def to_python(v: Any) -> Any:
    if z3.is_true(v):
        return True
    if z3.is_false(v):
        return False
    if z3.is_int_value(v):
        return v.as_long()
    if z3.is_rational_value(v):
        f = Fraction(v.numerator_as_long(), v.denominator_as_long())
        return f.numerator if f.denominator == 1 else float(f)
    if z3.is_algebraic_value(v):
        return float(v.approx(20).as_fraction())
    return str(v)


def _solver(timeout_s: float | None) -> z3.Solver:
    s = z3.Solver()
    s.set("random_seed", 0)
    if timeout_s is not None:
        s.set("timeout", max(1, int(timeout_s * 1000)))
    return s


def prove(claim: Any, *, assumptions: Iterable[Any] = (), timeout_s: float | None = 10.0) -> Answer:
    """Is ``claim`` true in every model of ``assumptions``?"""
    s = _solver(timeout_s)
    s.add(*list(assumptions))
    s.add(z3.Not(claim))
    t0 = time.perf_counter()
    r = s.check()
    dt = time.perf_counter() - t0
    if r == z3.unsat:
        return Answer(Verdict.PROVED, dt)
    if r == z3.sat:
        return Answer(Verdict.REFUTED, dt, Model(s.model()))
    return Answer(Verdict.UNKNOWN, dt, reason=s.reason_unknown())


def search(constraints: Sequence[Any], *, timeout_s: float | None = 10.0,
           minimise: Any | None = None, max_rounds: int = 6) -> Answer:
    """Find a model of ``constraints``. With ``minimise`` (an Int term), tighten it round by
    round (at most ``max_rounds`` extra checks) so witnesses come out small; a round that does
    not finish keeps the last model found, which is still a witness."""
    s = _solver(timeout_s)
    s.add(*constraints)
    t0 = time.perf_counter()
    r = s.check()
    if r == z3.unsat:
        return Answer(Found.NONE, time.perf_counter() - t0)
    if r != z3.sat:
        return Answer(Found.UNKNOWN, time.perf_counter() - t0, reason=s.reason_unknown())
    model = s.model()
    if minimise is not None:
        for _ in range(max_rounds):
            best = model.eval(minimise, model_completion=True)
            s.push()
            s.add(minimise < best)
            r2 = s.check()
            if r2 != z3.sat:
                s.pop()
                break
            model = s.model()
            s.pop()
            s.add(minimise <= model.eval(minimise, model_completion=True))
    return Answer(Found.FOUND, time.perf_counter() - t0, Model(model))


def evaluate(term: Any) -> Any:
    """The value of a closed term (no free constants)."""
    return to_python(z3.simplify(term))


def fresh(prefix: str, sort: str = "int") -> Term:
    make: Callable[[str], Term] = {"int": z3.FreshInt, "bool": z3.FreshBool, "real": z3.FreshReal}[sort]
    return make(prefix)
