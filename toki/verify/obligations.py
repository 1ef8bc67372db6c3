"""Proof obligations: a name, what the paper expects, and how to discharge it.

Status is three-valued (``proved``, ``refuted``, ``unknown``) and ``unknown`` is never counted
as ``proved``. ``expected`` is what the paper's claims require (``proved`` for a law that must
hold, ``refuted`` for a claim the paper itself says fails, e.g. Theorem 3 for the multilinear
carrier), or None for informational obligations that gate nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toki.verify import solver as S

PROVED, REFUTED, UNKNOWN = S.Verdict.PROVED.value, S.Verdict.REFUTED.value, S.Verdict.UNKNOWN.value


@dataclass
class Result:
    status: str
    seconds: float = 0.0
    countermodel: Any = None
    detail: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Obligation:
    name: str
    claim: str
    expected: str | None
    check: Callable[[float], Result] = field(repr=False)
    method: str = "z3"  # z3 (symbolic), z3-bounded, exhaustive (bounded, on the real code)

    def run(self, timeout_s: float) -> Result:
        t0 = time.perf_counter()
        r = self.check(timeout_s)
        r.seconds = round(time.perf_counter() - t0, 3)
        return r


def from_answer(ans: S.Answer, show: dict[str, Any] | None = None, detail: str | None = None) -> Result:
    """A z3 answer to a ``prove`` query as a Result (countermodel restricted to ``show``)."""
    if ans.verdict is S.Verdict.PROVED:
        return Result(PROVED, detail=detail)
    if ans.verdict is S.Verdict.REFUTED:
        return Result(REFUTED, countermodel=ans.show(show or {}), detail=detail)
    return Result(UNKNOWN, detail=f"z3: {ans.reason}")


def exhaustive(cases, check: Callable[[Any], Any], describe: Callable[[Any], Any] = repr,
               detail: str = "") -> Result:
    """Bounded, exhaustive check over ``cases``: the first case where ``check`` returns a
    falsy value (or a string naming the problem) refutes; otherwise proved within the bound."""
    n = 0
    for case in cases:
        n += 1
        verdict = check(case)
        if verdict is not True and verdict is not None:
            cm = describe(case)
            if isinstance(verdict, str):
                cm = {"case": cm, "problem": verdict}
            return Result(REFUTED, countermodel=cm, detail=f"{detail} (case {n})".strip())
    return Result(PROVED, detail=f"{detail}; {n} cases".strip("; "))
