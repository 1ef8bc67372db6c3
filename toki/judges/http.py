"""A judge behind an OpenAI-compatible chat-completions server that returns token log-probabilities.

Works with llama.cpp's ``llama-server``, vLLM and Ollama (``/v1/chat/completions`` with
``logprobs: true`` and ``top_logprobs``). The judge sends the pairwise prompt of
:mod:`toki.judges.prompt` for the candidates in the order given, asks for one token, and maps the
answer token (``A`` or ``B``, case and surrounding blanks ignored) to a vote. The probability it
reports is the answer letter's probability mass, renormalised over the two letters, read from the
returned ``top_logprobs`` (letter variants such as ``" A"`` and ``"a"`` are summed).

Nothing is ever guessed: a timeout, a connection failure, a non-200 status, a body that is not
the expected JSON, a missing ``logprobs`` block, a refusal (``message.refusal``, finish reason
``content_filter``) or an answer that is not A or B raises :class:`toki.errors.JudgeError`.
"""

from __future__ import annotations

import json
import math
import socket
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field

from toki.errors import InputError, JudgeError
from toki.judges.base import Vote
from toki.judges.prompt import LABELS, PROMPT_ID, SYSTEM, template_hash, user_prompt
from toki.model import Fact


@dataclass(frozen=True, slots=True)
class Answer:
    """What the server said: the answer letter and P(A), P(B) renormalised over the two letters."""

    letter: str
    p_a: float
    raw_token: str
    logprob: float


@dataclass
class HTTPJudge:
    base_url: str  # e.g. http://127.0.0.1:8080 (``/v1/chat/completions`` is appended)
    model: str = "local"
    model_version: str = ""
    temperature: float = 0.0
    seed: int | None = 0
    timeout_s: float = 30.0
    top_logprobs: int = 5
    max_tokens: int = 1
    api_key: str | None = None
    calls: int = field(default=0, init=False)
    last: Answer | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise InputError(f"judge URL {self.base_url!r} is not http(s)",
                             fix="give the server's base URL, e.g. http://127.0.0.1:8080")
        if not float(self.temperature) >= 0:
            raise InputError(f"temperature {self.temperature!r} is negative", fix="give a temperature >= 0")
        if not self.timeout_s > 0:
            raise InputError(f"timeout {self.timeout_s!r} s is not positive", fix="give a timeout in seconds > 0")

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else (
            base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions"))

    def theta(self) -> dict[str, str]:
        return {"model": self.model + (f"@{self.model_version}" if self.model_version else ""),
                "seed": "none" if self.seed is None else str(self.seed),
                "temperature": repr(float(self.temperature)),
                "prompt": f"{PROMPT_ID}#{template_hash()}"}

    def request_body(self, candidates: Sequence[Fact]) -> dict:
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": user_prompt(candidates)}],
            "temperature": float(self.temperature),
            "max_tokens": int(self.max_tokens),
            "logprobs": True,
            "top_logprobs": int(self.top_logprobs),
        }
        if self.seed is not None:
            body["seed"] = int(self.seed)
        return body

    def vote(self, candidates: Sequence[Fact]) -> Vote:
        self.calls += 1
        answer = self.ask(candidates)
        index = LABELS.index(answer.letter)
        p = answer.p_a if index == 0 else 1.0 - answer.p_a
        return Vote(index, p)

    def ask(self, candidates: Sequence[Fact]) -> Answer:
        body = json.dumps(self.request_body(candidates)).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        where = f"judge at {self.url}"
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:200].decode(errors="replace").strip()
            raise JudgeError(f"{where} answered HTTP {e.code}: {detail or e.reason}",
                             fix="check the model name and that the server is an OpenAI-compatible "
                                 "chat-completions endpoint") from None
        except (TimeoutError, socket.timeout) as e:
            raise JudgeError(f"{where} did not answer within {self.timeout_s:g} s",
                             fix="raise timeout_s or use a smaller model; no vote was guessed") from e
        except urllib.error.URLError as e:
            if isinstance(e.reason, (TimeoutError, socket.timeout)):
                raise JudgeError(f"{where} did not answer within {self.timeout_s:g} s",
                                 fix="raise timeout_s or use a smaller model; no vote was guessed") from e
            raise JudgeError(f"{where} is unreachable: {e.reason}",
                             fix="start the server (llama-server, vllm serve, ollama serve) or fix the URL") from e
        except OSError as e:
            raise JudgeError(f"{where} failed: {e}", fix="check the server; no vote was guessed") from e
        if status != 200:
            raise JudgeError(f"{where} answered HTTP {status}", fix="check the server log")
        self.last = parse_answer(raw, where)
        return self.last


def _malformed(where: str, what: str) -> JudgeError:
    return JudgeError(f"{where} sent a malformed answer: {what}",
                      fix="the server must speak OpenAI chat-completions with logprobs "
                          "(llama-server, vLLM, Ollama >= 0.12); no vote was guessed")


def _letter(token: str) -> str | None:
    t = token.strip().strip(".:)*\"'").upper()
    return t if t in LABELS else None


def parse_answer(raw: bytes, where: str = "judge") -> Answer:
    """Read the answer letter and its probability from a chat-completions response body."""
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _malformed(where, f"the body is not JSON ({e.__class__.__name__}: {str(e)[:80]})") from None
    if not isinstance(doc, dict):
        raise _malformed(where, "the body is not a JSON object")
    if "error" in doc and not doc.get("choices"):
        raise JudgeError(f"{where} returned an error: {str(doc['error'])[:200]}", fix="check the server log")
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _malformed(where, "no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    if message.get("refusal") or choice.get("finish_reason") == "content_filter":
        reason = message.get("refusal") or "content filter"
        raise JudgeError(f"{where} refused to judge: {str(reason)[:200]}",
                         fix="the pair cannot be judged by this model; route it to ⊕c or ⊕? instead")
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        raise _malformed(where, "no token log-probabilities (logprobs.content is missing or empty)")
    first = None
    for entry in content:
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
            raise _malformed(where, "a logprobs entry has no token")
        if entry["token"].strip():
            first = entry
            break
    if first is None:
        raise JudgeError(f"{where} answered only blanks", fix="raise max_tokens; no vote was guessed")
    letter = _letter(first["token"])
    if letter is None:
        text = message.get("content") if isinstance(message.get("content"), str) else first["token"]
        raise JudgeError(f"{where} did not answer A or B (it said {text.strip()[:80]!r})",
                         fix="the model refused or ignored the format; no vote was guessed")
    lp = first.get("logprob")
    if isinstance(lp, bool) or not isinstance(lp, (int, float)) or math.isnan(lp) or lp > 1e-9:
        raise _malformed(where, f"log-probability {lp!r} of the answer token is not a number <= 0")
    mass = {"A": 0.0, "B": 0.0}
    tops = first.get("top_logprobs") or []
    if not isinstance(tops, list):
        raise _malformed(where, "top_logprobs is not a list")
    seen = False
    for alt in tops:
        if not isinstance(alt, dict) or not isinstance(alt.get("token"), str):
            raise _malformed(where, "a top_logprobs entry has no token")
        a_lp = alt.get("logprob")
        if isinstance(a_lp, bool) or not isinstance(a_lp, (int, float)) or math.isnan(a_lp):
            raise _malformed(where, f"top_logprobs entry {alt['token']!r} has no numeric logprob")
        which = _letter(alt["token"])
        if which is not None:
            mass[which] += math.exp(min(float(a_lp), 0.0))
            seen = seen or which == letter
    if not seen:  # the answer token itself is always a candidate
        mass[letter] += math.exp(min(float(lp), 0.0))
    total = mass["A"] + mass["B"]
    if total <= 0:
        raise _malformed(where, "zero probability mass on A and B")
    return Answer(letter, mass["A"] / total, first["token"], float(lp))
