"""Provenance semirings over write-event tokens X and trust/policy variables T (docs/design.md#provenance).

Three carriers share one polynomial representation and differ in how they normalise:

* ``MULTILINEAR``  N[X,T]   - natural coefficients, every exponent capped at 1 (x⊗x = x);
* ``MULTIDEGREE``  N[X,T]#  - natural coefficients and exponents (x⊗x = x²);
* ``BOOLEAN``      B        - the Boolean reduct: a polynomial is only "present" or "absent".

The natural order a ⪯ b (some c has a ⊕ c = b) is coefficient-wise ≤ on N[X,T] and
false ≤ true on B. Theorem 3: a single erased instance of token x is recoverable from the
polynomial alone iff x's degree is at least 2, which only the multidegree carrier keeps.

Text form (stored in ``agent_memory.provenance_id``) round-trips for every variable name:
``0``, ``1``, or monomials joined by `` + ``, each ``[coef*]var[^exp]*...``; a variable
name that is not a plain identifier is written as a JSON string.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce

from toki.errors import ProvenanceSyntaxError

Monomial = tuple[tuple[str, int], ...]  # sorted (variable, exponent) pairs, exponents >= 1


class Carrier(enum.Enum):
    MULTILINEAR = "multilinear"
    MULTIDEGREE = "multidegree"
    BOOLEAN = "boolean"

    # -- construction ---------------------------------------------------------------------
    def zero(self) -> "Poly":
        return Poly(self, ())

    def one(self) -> "Poly":
        return Poly(self, (((), 1),))

    def var(self, name: str) -> "Poly":
        if not isinstance(name, str) or not name:
            raise ProvenanceSyntaxError(
                f"provenance variable {name!r} is not a non-empty string",
                fix="name write-event tokens like 'x_<fact id>'",
            )
        return self._norm({((name, 1),): 1})

    def token(self, fact_id: str) -> "Poly":
        """The write-event token of a fact."""
        return self.var(f"x_{fact_id}")

    def _norm(self, terms: dict[Monomial, int]) -> "Poly":
        out: dict[Monomial, int] = {}
        for mono, coef in terms.items():
            if coef == 0:
                continue
            if self is not Carrier.MULTIDEGREE:
                mono = tuple((v, 1) for v, _ in mono)
            out[mono] = out.get(mono, 0) + coef
        if self is Carrier.BOOLEAN:
            return Poly(self, (((), 1),)) if out else Poly(self, ())
        return Poly(self, tuple(sorted(out.items())))

    # -- text -----------------------------------------------------------------------------
    def parse(self, text: str) -> "Poly":
        if not isinstance(text, str):
            raise ProvenanceSyntaxError(f"provenance {text!r} is not text", fix="pass a string")
        s = text.strip()
        if s in ("0", "false"):
            return self.zero()
        if s in ("1", "true"):
            return self.one()
        terms: dict[Monomial, int] = {}
        pos = 0
        while True:
            mono, coef, pos = _parse_monomial(text, pos)
            terms[mono] = terms.get(mono, 0) + coef
            pos = _skip_ws(text, pos)
            if pos == len(text):
                break
            if text[pos] != "+":
                raise ProvenanceSyntaxError(
                    f"unexpected {text[pos]!r} at offset {pos} in provenance {text!r}",
                    fix="write monomials joined by ' + ', factors by '*'",
                )
            pos += 1
        return self._norm(terms)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]*")
_INT = re.compile(r"[0-9]+")


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == " ":
        pos += 1
    return pos


def _parse_factor(text: str, pos: int) -> tuple[str | int, int]:
    pos = _skip_ws(text, pos)
    if pos < len(text) and text[pos] == '"':
        try:
            name, end = json.JSONDecoder().raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise ProvenanceSyntaxError(
                f"bad quoted variable at offset {pos} in provenance {text!r}: {e.msg}",
                fix="quote variable names as JSON strings",
            ) from None
        return name, end
    m = _INT.match(text, pos)
    if m:
        return int(m.group()), m.end()
    m = _IDENT.match(text, pos)
    if m:
        return m.group(), m.end()
    raise ProvenanceSyntaxError(
        f"expected a coefficient or variable at offset {pos} in provenance {text!r}",
        fix="write e.g. '2*x_f1^2*t_user + x_f2'",
    )


def _parse_monomial(text: str, pos: int) -> tuple[Monomial, int, int]:
    coef = 1
    exps: dict[str, int] = {}
    while True:
        factor, pos = _parse_factor(text, pos)
        if isinstance(factor, int):
            coef *= factor
        else:
            exp = 1
            if pos < len(text) and text[pos] == "^":
                m = _INT.match(text, pos + 1)
                if not m or int(m.group()) < 1:
                    raise ProvenanceSyntaxError(
                        f"bad exponent at offset {pos} in provenance {text!r}",
                        fix="exponents are positive integers",
                    )
                exp, pos = int(m.group()), m.end()
            exps[factor] = exps.get(factor, 0) + exp
        pos = _skip_ws(text, pos)
        if pos < len(text) and text[pos] == "*":
            pos += 1
            continue
        return tuple(sorted(exps.items())), coef, pos


_KEYWORDS = frozenset({"true", "false"})  # the parser reads these as the Boolean constants


def _fmt_var(name: str) -> str:
    return name if _IDENT.fullmatch(name) and name not in _KEYWORDS else json.dumps(name)


@dataclass(frozen=True, slots=True)
class Poly:
    """A provenance annotation in one carrier. Immutable; ⊕ is ``+``, ⊗ is ``*``."""

    carrier: Carrier
    terms: tuple[tuple[Monomial, int], ...]  # sorted, no zero coefficients

    def _check(self, other: "Poly") -> None:
        if not isinstance(other, Poly) or other.carrier is not self.carrier:
            raise ProvenanceSyntaxError(
                f"cannot combine {self.carrier.value} provenance with {other!r}",
                fix="convert both annotations to the same carrier first",
            )

    def __add__(self, other: "Poly") -> "Poly":
        self._check(other)
        acc = dict(self.terms)
        for mono, coef in other.terms:
            acc[mono] = acc.get(mono, 0) + coef
        return self.carrier._norm(acc)

    def __mul__(self, other: "Poly") -> "Poly":
        self._check(other)
        acc: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                exps = dict(m1)
                for v, e in m2:
                    exps[v] = exps.get(v, 0) + e
                mono = tuple(sorted(exps.items()))
                acc[mono] = acc.get(mono, 0) + c1 * c2
        return self.carrier._norm(acc)

    def __le__(self, other: "Poly") -> bool:
        """Natural order: self ⪯ other iff other = self ⊕ c for some c."""
        self._check(other)
        mine, theirs = dict(self.terms), dict(other.terms)
        return all(theirs.get(m, 0) >= c for m, c in mine.items())

    def dominates(self, other: "Poly") -> bool:
        return other <= self

    @property
    def is_zero(self) -> bool:
        return not self.terms

    def degree(self, var: str) -> int:
        return max((dict(m).get(var, 0) for m, _ in self.terms), default=0)

    def instances(self, var: str) -> int:
        """How many instances of ``var`` the annotation records: the sum of coefficient x exponent.

        In N[X,T]# every use of a token counts (x⊗x = x² is two); N[X,T] keeps only uses that
        add (x⊕x = 2x is two, x⊗x = x is one); B keeps none.
        """
        return sum(c * dict(m).get(var, 0) for m, c in self.terms)

    def variables(self) -> frozenset[str]:
        return frozenset(v for m, _ in self.terms for v, _ in m)

    def to(self, carrier: Carrier) -> "Poly":
        return carrier._norm(dict(self.terms))

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for mono, coef in self.terms:
            factors = [str(coef)] if coef != 1 or not mono else []
            factors += [_fmt_var(v) + (f"^{e}" if e != 1 else "") for v, e in mono]
            parts.append("*".join(factors))
        return " + ".join(parts)

    def __repr__(self) -> str:
        return f"Poly[{self.carrier.value}]({str(self)!r})"


def plus_all(polys: Iterable[Poly], carrier: Carrier) -> Poly:
    return reduce(lambda a, b: a + b, polys, carrier.zero())


def times_all(polys: Iterable[Poly], carrier: Carrier) -> Poly:
    return reduce(lambda a, b: a * b, polys, carrier.one())


def recover_erased(full: Poly, surviving: Poly) -> frozenset[str] | None:
    """The tokens of which one instance was erased, read off the surviving annotation.

    ``full`` is the annotation before the erasure, ``surviving`` the one left after it (both
    in one carrier). A token is recovered when the surviving polynomial still names it and
    records fewer instances of it than ``full`` did (:meth:`Poly.instances`). Returns None when
    nothing can be recovered.

    Theorem 3 (docs/design.md#provenance): one erased instance of x is recoverable from the polynomial alone iff
    x occurs at least twice (degree >= 2 in N[X,T]#), because only then does the surviving
    annotation still name x; and only the multidegree carrier always shows the missing instance:
    N[X,T] loses it whenever the instances were multiplied (x⊗x = x), B always.
    """
    full._check(surviving)
    named = surviving.variables()
    dropped = frozenset(v for v in full.variables() if v in named and surviving.instances(v) < full.instances(v))
    return dropped or None
