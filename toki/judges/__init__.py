"""Judges: the LLM (or stand-in) that votes between contradicting facts (SPEC §5).

A judge votes for an index into the canonically ordered candidate set, under the key (R, θ):
R the read set (sorted fact ids), θ the decoder tuple. The keyed log lives in the database
layer (:mod:`toki.db.store`); judges themselves are pure or talk to an HTTP server.
"""

from toki.judges.base import (
    Judge,
    JudgeKey,
    SimulatedJudge,
    Vote,
    judge_key,
)

__all__ = ["Judge", "JudgeKey", "SimulatedJudge", "Vote", "judge_key"]
