"""Judges (layer 2): the LLM (or stand-in) that votes between contradicting facts. May import the
pure layer only; used by the write path (db), the matrix, the engines and the experiments.

A judge votes for an index into the candidate set exactly as presented (callers pass the
canonical order, sorted by fact id), under the key (R, θ): R the read set (sorted fact ids),
θ the decoder tuple (model and version, prompt template, seed, temperature). The keyed log lives
in the database layer (:mod:`toki.db.judge_log`); judges themselves are pure or talk to an HTTP
server.

* :class:`SimulatedJudge` - seeded Bernoulli judge with temperature;
* :class:`FixtureJudge` - a probability table per pair and per presentation order;
* :class:`HTTPJudge` - an OpenAI-compatible chat-completions server with token log-probabilities;
* :func:`local_judge_study` - the seeded fixture calibrated to the paper's 36-pair study.
"""

from toki.judges.base import (
    Judge,
    JudgeKey,
    SimulatedJudge,
    Vote,
    consistency,
    disagreement,
    judge_key,
    temper,
)
from toki.judges.fixture import FixtureJudge
from toki.judges.http import HTTPJudge, parse_answer
from toki.judges.prompt import canonical_prompt, user_prompt
from toki.judges.study import PUBLISHED, Study, local_judge_study

__all__ = ["FixtureJudge", "HTTPJudge", "Judge", "JudgeKey", "PUBLISHED", "SimulatedJudge", "Study", "Vote",
           "canonical_prompt", "consistency", "disagreement", "judge_key", "local_judge_study",
           "parse_answer", "temper", "user_prompt"]
