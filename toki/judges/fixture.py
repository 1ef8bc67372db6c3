"""A judge driven by a probability table per pair and per presentation order.

``table[(id_a, id_b)]`` is the probability, at temperature 1, that the judge picks the record
shown in position A when ``id_a`` is shown first and ``id_b`` second. The two orders of one pair
are separate entries, which is how a position bias is written down (docs/design.md#judges: a small local judge
flipped its winner on 13 of 36 pairs when only the order changed). Temperature scales the table
with :func:`toki.judges.base.temper`; temperature 0 is greedy. Draws come from the judge's own
seeded stream, one per call.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from toki.errors import InputError, JudgeError
from toki.judges.base import Vote, temper
from toki.judges.prompt import PROMPT_ID
from toki.model import Fact


@dataclass
class FixtureJudge:
    table: Mapping[tuple[str, str], float]
    seed: int = 0
    temperature: float = 1.0
    model: str = "fixture"
    default: float | None = None  # probability for a pair/order missing from the table; None: error
    calls: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        clean = {}
        for k, v in dict(self.table).items():
            if not (isinstance(k, tuple) and len(k) == 2 and all(isinstance(i, str) for i in k)):
                raise InputError(f"fixture table key {k!r} is not a pair of fact ids",
                                 fix="key the table by (id shown first, id shown second)")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or not 0 <= v <= 1:
                raise InputError(f"fixture probability {v!r} for {k!r} is outside [0, 1]",
                                 fix="give P(position A wins) in [0, 1]")
            clean[k] = float(v)
        if self.default is not None and not 0 <= float(self.default) <= 1:
            raise InputError(f"default probability {self.default!r} is outside [0, 1]", fix="give it in [0, 1]")
        if not float(self.temperature) >= 0:
            raise InputError(f"temperature {self.temperature!r} is negative", fix="give a temperature >= 0")
        self.table = clean
        self._rng = random.Random(self.seed)
        blob = json.dumps(sorted((list(k), v) for k, v in clean.items()), separators=(",", ":"))
        self._digest = hashlib.sha256(blob.encode()).hexdigest()[:12]

    def theta(self) -> dict[str, str]:
        return {"model": f"{self.model}:{self._digest}", "seed": str(self.seed),
                "temperature": repr(float(self.temperature)), "prompt": PROMPT_ID}

    def probability(self, candidates: Sequence[Fact]) -> float:
        """P(vote = position A) at this judge's temperature, for the order given."""
        if len(candidates) != 2:
            raise InputError(f"the fixture judge votes on pairs, got {len(candidates)} candidates",
                             fix="pass a contradicting pair")
        key = (candidates[0].fact_id, candidates[1].fact_id)
        if key in self.table:
            p = self.table[key]
        elif self.default is not None:
            p = float(self.default)
        else:
            raise JudgeError(f"the fixture judge has no probability for the pair {key[0]!r}, {key[1]!r} "
                             "in this order", fix="add the (first, second) entry to the table or give default=")
        return temper(p, self.temperature)

    def vote(self, candidates: Sequence[Fact]) -> Vote:
        self.calls += 1
        p = self.probability(candidates)
        first = self._rng.random() < p
        return Vote(0 if first else 1, p if first else 1.0 - p)
