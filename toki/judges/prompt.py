"""The pairwise prompt, written from the candidates exactly in the order given.

Callers that want order-independence pass :func:`toki.operators.canonical` order (sorted by fact
id): then both arrival orders of a pair produce the same text, hence the same key and the same
answer distribution (docs/design.md#judges, "keys and prompts must be canonicalised"). Fact ids are not shown
to the model: they are keys, not evidence.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from toki.errors import InputError
from toki.model import SENTINEL, Fact
from toki.operators import canonical

PROMPT_ID = "toki-pairwise-v1"
LABELS = ("A", "B")

SYSTEM = ("You resolve contradictions in an agent's long-term memory. Two stored records make "
          "incompatible claims about the same thing. Decide which record the memory should keep "
          "as current. Answer with exactly one letter, A or B, and nothing else.")


def _when(t) -> str:
    return "open" if t is None or t == SENTINEL else t.isoformat(sep=" ", timespec="minutes")


def describe(fact: Fact) -> str:
    told = f"; recorded {_when(fact.system_time_start)}" if fact.system_time_start is not None else ""
    return (f"{fact.subject} {fact.predicate.replace('_', ' ')} {fact.object} "
            f"(valid from {_when(fact.valid_from)} to {_when(fact.valid_to)}; "
            f"confidence {fact.confidence:.2f}{told})")


def user_prompt(candidates: Sequence[Fact]) -> str:
    if len(candidates) != 2:
        raise InputError(f"the pairwise prompt takes 2 candidates, got {len(candidates)}",
                         fix="pass a contradicting pair")
    lines = [f"{label}: {describe(f)}" for label, f in zip(LABELS, candidates)]
    return "\n".join(["Records:", *lines, "Which record should stay current? Answer A or B."])


def canonical_prompt(candidates: Sequence[Fact]) -> str:
    """The prompt of the canonically ordered pair: the same text for both arrival orders."""
    return user_prompt(canonical(candidates))


def template_hash() -> str:
    """Identifies the prompt template inside θ (changing the wording changes every key)."""
    probe = SYSTEM + "\n" + "Records:\nA: {a}\nB: {b}\nWhich record should stay current? Answer A or B."
    return hashlib.sha256(probe.encode()).hexdigest()[:12]
