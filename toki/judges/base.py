"""The judge protocol, canonical keys and a seeded simulated judge.

Temperature follows the usual softmax scaling of a two-way choice: a judge whose token
probability for position A is ``p`` at temperature 1 votes A with ``temper(p, T)`` =
sigmoid(logit(p) / T) at temperature T; T = 0 is greedy decoding (argmax, ties to position A).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from toki.errors import InputError, JudgeError
from toki.model import Fact
from toki.operators import canonical


@dataclass(frozen=True, slots=True)
class JudgeKey:
    """(R, θ): the sorted read set and the decoder tuple, hashed into one log key."""

    read_set: tuple[str, ...]
    theta: tuple[tuple[str, str], ...]

    @property
    def digest(self) -> str:
        payload = json.dumps([list(self.read_set), [list(p) for p in self.theta]], separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Vote:
    index: int  # into the canonically ordered candidates
    probability: float | None = None  # P(vote = index) when the judge knows it


@runtime_checkable
class Judge(Protocol):
    #: identifies model, version, prompt template, temperature: the θ of the key
    def theta(self) -> dict[str, str]: ...

    def vote(self, candidates: Sequence[Fact]) -> Vote:
        """Vote over ``candidates`` exactly in the order given (callers pass canonical order)."""
        ...


def temper(p: float, temperature: float) -> float:
    """P(vote = position A) at ``temperature`` for a judge with probability ``p`` at temperature 1."""
    p = float(p)
    if not 0.0 <= p <= 1.0 or math.isnan(p):
        raise InputError(f"judge probability {p!r} is outside [0, 1]", fix="give p in [0, 1]")
    t = float(temperature)
    if t < 0 or math.isnan(t):
        raise InputError(f"temperature {temperature!r} is negative", fix="give a temperature >= 0")
    if p in (0.0, 1.0) or t == 1.0:
        return p
    if t == 0.0:
        return 1.0 if p >= 0.5 else 0.0  # greedy; a tie goes to position A
    z = math.log(p / (1.0 - p)) / t
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def disagreement(p: float) -> float:
    """Probability that two independent calls of a p-judge disagree: 2p(1-p) (docs/design.md#judges)."""
    return 2.0 * p * (1.0 - p)


def consistency(p: float, t: int) -> float:
    """Probability that t independent calls all agree: p^t + (1-p)^t (docs/design.md#judges)."""
    if t < 1:
        raise InputError(f"t = {t} re-queries", fix="t counts calls and starts at 1")
    return p ** t + (1.0 - p) ** t


def judge_key(candidates: Sequence[Fact], judge: Judge, *, canonicalize: bool = True) -> JudgeKey:
    ids = [f.fact_id for f in candidates]
    read_set = tuple(sorted(ids)) if canonicalize else tuple(ids)
    return JudgeKey(read_set, tuple(sorted((str(k), str(v)) for k, v in judge.theta().items())))


@dataclass
class SimulatedJudge:
    """A seeded Bernoulli judge: votes for the first candidate with probability ``p``.

    ``p`` may be a float or a callable of the candidate tuple; it is the probability at
    temperature 1 and is scaled by :func:`temper` at other temperatures (0 is greedy). Every
    call draws from the judge's own seeded stream, so two calls on the same pair can disagree
    (probability 2p(1-p)): exactly the nondeterminism the keyed log exists to pin down.
    """

    p: float = 0.5
    seed: int = 0
    model: str = "simulated-bernoulli"
    temperature: float = 1.0
    fail: bool = False
    calls: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if not callable(self.p) and not 0.0 <= float(self.p) <= 1.0:
            raise InputError(f"judge probability {self.p!r} is outside [0, 1]", fix="give p in [0, 1]")
        if not float(self.temperature) >= 0:
            raise InputError(f"temperature {self.temperature!r} is negative", fix="give a temperature >= 0")
        self._rng = random.Random(self.seed)

    def theta(self) -> dict[str, str]:
        return {"model": self.model, "seed": str(self.seed), "temperature": repr(self.temperature),
                "prompt": "toki-pairwise-v1"}

    def vote(self, candidates: Sequence[Fact]) -> Vote:
        self.calls += 1
        if self.fail:
            raise JudgeError("simulated judge failure", fix="this judge was built with fail=True")
        if len(candidates) != 2:
            raise InputError(f"the simulated judge votes on pairs, got {len(candidates)} candidates",
                             fix="pass a contradicting pair")
        p = float(self.p(tuple(candidates))) if callable(self.p) else float(self.p)
        p = temper(p, self.temperature)
        first = self._rng.random() < p
        return Vote(0 if first else 1, p if first else 1.0 - p)


def canonical_candidates(facts: Sequence[Fact]) -> tuple[Fact, ...]:
    return canonical(facts)
