"""The HTTP judge against a real HTTP server on 127.0.0.1 that speaks OpenAI chat-completions
with token log-probabilities (the wire format of llama-server, vLLM and Ollama), started here.

The server samples its answer from a probability table keyed by the user prompt, reports the
temperature-1 log-probabilities, and can be switched to misbehave: slow, malformed, refusing,
without logprobs, or failing with HTTP 500. Failures must be JudgeErrors, never votes.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from toki.errors import JudgeError
from toki.judges import HTTPJudge, judge_key, temper, user_prompt
from toki.model import Fact

A = Fact("fa", "alice", "medication", "penicillin", datetime(2026, 3, 1))
B = Fact("fb", "alice", "medication", "amoxicillin", datetime(2026, 4, 15))


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.p_a: dict[str, float] = {}  # user prompt -> P(answer A) at temperature 1
        self.mode = "ok"
        self.requests: list[dict] = []
        self.rng = random.Random(0)
        self.answer_token = None  # force a token (e.g. " a", "I")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):  # keep pytest output clean
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
            pass

    def do_POST(self):
        srv: ChatServer = self.server
        if self.path != "/v1/chat/completions":
            return self._send(404, b'{"error": "not found"}')
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv.requests.append(req)
        mode = srv.mode
        if mode == "slow":
            time.sleep(1.5)
        if mode == "http-500":
            return self._send(500, b'{"error": {"message": "model crashed"}}')
        if mode == "not-json":
            return self._send(200, b"<html>gateway</html>", "text/html")
        prompt = req["messages"][-1]["content"]
        p = srv.p_a.get(prompt, 0.5)
        t = float(req.get("temperature", 1.0))
        letter = "A" if srv.rng.random() < temper(p, t) else "B"
        token = srv.answer_token or letter
        lp = lambda q: math.log(q) if q > 0 else -1e4  # noqa: E731
        tops = [{"token": "A", "logprob": lp(p)}, {"token": "B", "logprob": lp(1 - p)},
                {"token": "I", "logprob": -9.0}][: req.get("top_logprobs", 0)]
        choice = {"index": 0, "finish_reason": "length",
                  "message": {"role": "assistant", "content": token},
                  "logprobs": {"content": [{"token": token, "logprob": lp(p if letter == "A" else 1 - p),
                                            "top_logprobs": tops}]}}
        if mode == "no-logprobs":
            del choice["logprobs"]
        if mode == "refusal":
            choice["message"] = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
        if mode == "no-choices":
            return self._send(200, json.dumps({"id": "x", "choices": []}).encode())
        self._send(200, json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "model": req["model"],
                                    "choices": [choice]}).encode())


@pytest.fixture
def server():
    srv = ChatServer()
    th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    th.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def test_vote_reads_the_answer_token_and_its_probability(server):
    server.p_a[user_prompt((A, B))] = 0.8
    server.p_a[user_prompt((B, A))] = 0.3
    judge = HTTPJudge(server.url, model="qwen3-4b", temperature=0.0, timeout_s=5)
    v = judge.vote((A, B))
    assert (v.index, v.probability) == (0, pytest.approx(0.8))
    v = judge.vote((B, A))
    assert (v.index, v.probability) == (1, pytest.approx(0.7))
    req = server.requests[0]
    assert req["logprobs"] is True and req["top_logprobs"] == 5 and req["max_tokens"] == 1
    assert req["temperature"] == 0.0 and req["seed"] == 0 and req["model"] == "qwen3-4b"
    assert req["messages"][0]["role"] == "system" and req["messages"][1]["content"] == user_prompt((A, B))
    assert judge.theta()["model"] == "qwen3-4b" and judge.theta()["temperature"] == "0.0"
    assert judge_key((A, B), judge) == judge_key((B, A), judge)


@pytest.mark.slow
def test_sampled_votes_follow_the_served_probability(server):
    server.p_a[user_prompt((A, B))] = 0.7
    judge = HTTPJudge(server.url, temperature=1.0, timeout_s=5)
    n = 300
    share = sum(judge.vote((A, B)).index == 0 for _ in range(n)) / n
    assert abs(share - 0.7) < 5 * math.sqrt(0.21 / n)
    assert judge.calls == n


def test_letter_variants_are_read_and_anything_else_is_an_error(server):
    server.p_a[user_prompt((A, B))] = 0.9
    server.answer_token = " a"
    assert HTTPJudge(server.url, timeout_s=5).vote((A, B)).index == 0
    server.answer_token = "I"
    with pytest.raises(JudgeError, match="did not answer A or B"):
        HTTPJudge(server.url, timeout_s=5).vote((A, B))


@pytest.mark.parametrize("mode, message", [
    ("no-logprobs", "no token log-probabilities"),
    ("not-json", "not JSON"),
    ("no-choices", "no choices"),
    ("refusal", "refused to judge"),
    ("http-500", "HTTP 500"),
])
def test_failures_are_errors_never_votes(server, mode, message):
    server.mode = mode
    with pytest.raises(JudgeError, match=message):
        HTTPJudge(server.url, timeout_s=5).vote((A, B))


def test_timeout_is_an_error(server):
    server.mode = "slow"
    # the server answers after 1.5 s: waited for, the vote would succeed and nothing be raised
    with pytest.raises(JudgeError, match="did not answer within 0.3 s"):
        HTTPJudge(server.url, timeout_s=0.3).vote((A, B))


def test_unreachable_server_and_bad_url():
    srv = ChatServer()  # bound, then closed: nothing listens on that port any more
    url = srv.url
    srv.server_close()
    with pytest.raises(JudgeError, match="unreachable"):
        HTTPJudge(url, timeout_s=2).vote((A, B))
    from toki.errors import InputError
    with pytest.raises(InputError):
        HTTPJudge("127.0.0.1:8080")


@pytest.mark.db
def test_http_judge_behind_the_keyed_log(server, toki_store):
    """Two replays of one conflict through the write path ask the server once: the log answers the second."""
    server.p_a[user_prompt((A, B))] = 0.5
    judge = HTTPJudge(server.url, temperature=1.0, timeout_s=5)
    winners, sources = [], []
    for _ in range(2):
        toki_store.conn.execute("delete from agent_memory")
        toki_store.write(A, operator="lww")
        out = toki_store.write(B, operator="await", judge=judge)
        winners.append(out.winner_id)
        sources.append(out.vote_source)
    assert sources == ["judge", "log"] and winners[0] == winners[1] and judge.calls == 1
    # a failing judge leaves nothing behind: no vote logged, no row written
    server.mode = "no-logprobs"
    before = toki_store.rows("all")
    C = Fact("fc", "alice", "medication", "cephalexin", datetime(2026, 5, 1))
    with pytest.raises(JudgeError):
        toki_store.write(C, operator="await", judge=judge)
    assert len(toki_store.judge_votes()) == 1
    assert toki_store.rows("all") == before


def test_calibration_experiment_against_the_server(server, tmp_path):
    """judge-calibration --judge-url: the probabilities come from the server's logprobs."""
    import io

    from toki.cli import main
    from toki.judges import local_judge_study

    study = local_judge_study(42)
    for cell in study.cells:
        server.p_a[user_prompt(cell.shown)] = cell.p_a
    path = tmp_path / "cal.json"
    err = io.StringIO()
    rc = main(["experiment", "judge-calibration", "--judge-url", server.url, "--cells", "10", "--calls", "4",
               "--json", str(path)], out=io.StringIO(), err=err)
    assert rc == 0, err.getvalue()
    doc = json.loads(path.read_text())
    assert doc["judge"]["kind"] == "http" and len(server.requests) == 72 * 4
    by_key = {(c.pair.index, c.order): c.p_a for c in study.cells}
    for c in doc["cells"]:
        assert c["p"] == pytest.approx(by_key[(c["pair"], c["order"])], abs=1e-4)
