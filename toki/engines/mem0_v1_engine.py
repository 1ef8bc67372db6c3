"""mem0 1.0.x (PyPI ``mem0ai`` 1.0.11, the paper's "mem0 v2"), real and unmodified, offline, on
PostgreSQL+pgvector and a SQLite history.

mem0 1.0.x and 2.x share one import name (``mem0``), so they cannot share an environment: this engine
runs where ``toki[mem0-v1]`` is installed (an environment of its own: ``python -m venv .venv-mem0-v1 &&
.venv-mem0-v1/bin/pip install -e '.[test,mem0-v1]'``); where mem0 2.x is installed instead it is
unavailable and says so. Its code path is what :mod:`toki.engines.models.mem0_v2` models:

- ``Memory.add`` (``_add_to_vector_store`` with ``infer=True``): one fact-extraction LLM call; per fact
  ``embed`` and ``vector_store.search(limit=5)``; the memories found are renumbered "0", "1", ...
  (``temp_uuid_mapping``); one update LLM call (``get_update_memory_messages``) answers
  ``{"memory": [{"id", "text", "event", "old_memory"}]}`` with ADD / UPDATE / DELETE / NONE; each action
  is applied in turn (``_create_memory``: insert, then a history row; ``_update_memory``: get, update,
  history; ``_delete_memory``: get, delete, history), an exception in one action logged and skipped;
- the pgvector store (``mem0.vector_stores.pgvector.PGVector``, psycopg 3 through a psycopg_pool pool,
  each call its own transaction) and the SQLite history (``SQLiteManager``: one connection, a
  ``threading.Lock``); no lock or transaction spans the search, the LLM call and the writes.

What toki plugs in, through mem0's own extension points (as :mod:`toki.engines.mem0_engine` does for
2.x): an LLM class registered in ``LlmFactory`` (:class:`ScriptedJudgeLLM`) that answers the extraction
prompt with the message as the one fact, and the update prompt from the memories and facts written in
it: which stored memory a new fact duplicates, refines or contradicts is the model's table
(:data:`toki.engines.models.mem0_v2.RELATIONS`), and for a contradiction which fact stands is a
:mod:`toki.judges` fixture's vote (the default fixture lets the new fact win; ``rejudge`` asks a
temperature-1 fixture, p = 0.5); an embedder in ``EmbedderFactory`` (the model's hashed bag of words,
so that related facts are found by the similarity search); the storage as for 2.x (one run schema,
one collection table per trial, the history file under the trial's folder).

The state is what mem0's API answers (``get_all`` and ``history`` of every memory), with memories
named by the text they were added with (no uuids) and each memory's history a sorted multiset:
mem0 1.0.x orders history rows by ``created_at`` (the memory's creation time, the same on every row)
and ``DATETIME(updated_at)`` (whole seconds), so the order of two rows written in one second is not
the store's; the model's detectors that read that order (``non-atomic-history``, an UPDATE after a
DELETE) are not used here.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import sys
import tempfile
import threading
from pathlib import Path

from toki.engines import mem0_engine as m2
from toki.engines.models import embed as bag_of_words
from toki.engines.models import mem0_v2 as model
from toki.errors import ConfigError
from toki.harness.engine import Scenario

PIN = "1.0.11"
EXTRA_FIX = ("pip install 'toki[mem0-v1]' in an environment of its own (mem0ai 1.0.x and 2.x share the import name "
             "mem0): python -m venv .venv-mem0-v1 && .venv-mem0-v1/bin/pip install -e '.[test,mem0-v1]'")
LLM_PROVIDER = "toki_scripted_v1"
EMBEDDER_PROVIDER = "toki_bow"
DIM = 32  # the model's bag-of-words dimension

_setup_lock = threading.Lock()
_registered = False


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mem0ai")
    except PackageNotFoundError:
        raise ConfigError("mem0 is not installed", fix=EXTRA_FIX) from None


def _require():
    """Import mem0 1.0.x offline (telemetry off, its directory under a toki temp dir); register the stand-ins."""
    global _registered
    v = _version()
    if not v.startswith("1.0."):
        raise ConfigError(f"mem0ai {v} is installed here, not 1.0.x (the paper's 'mem0 v2'); the two share the import "
                          "name mem0", fix=EXTRA_FIX)
    if "mem0" not in sys.modules:
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ.setdefault("MEM0_DIR", str(Path(tempfile.gettempdir()) / f"toki-mem0v1-{os.getuid()}"))
    try:
        import psycopg_pool  # noqa: F401 - mem0's pgvector store falls back to psycopg2 without it
    except ImportError:
        raise ConfigError("mem0's pgvector store needs psycopg_pool, which is not installed", fix=EXTRA_FIX) from None
    import mem0
    from mem0.memory import main as mem0_main
    from mem0.memory import telemetry

    if telemetry.MEM0_TELEMETRY or getattr(mem0_main, "MEM0_TELEMETRY", False):
        logging.getLogger(__name__).warning("mem0 was imported with telemetry on before toki turned it off")
        telemetry.MEM0_TELEMETRY = False
        if hasattr(mem0_main, "MEM0_TELEMETRY"):
            mem0_main.MEM0_TELEMETRY = False
    with _setup_lock:
        if not _registered:
            from mem0.configs.llms.base import BaseLlmConfig
            from mem0.utils.factory import EmbedderFactory, LlmFactory

            LlmFactory.register_provider(LLM_PROVIDER, f"{__name__}.ScriptedJudgeLLM", BaseLlmConfig)
            EmbedderFactory.provider_to_class[EMBEDDER_PROVIDER] = f"{__name__}.BagOfWordsEmbedder"
            _registered = True
    return mem0


# -- the stand-ins, as mem0 classes ----------------------------------------------------------------

_BLOCK = re.compile(r"```\s*(.*?)\s*```", re.S)


def _update_prompt_parts(prompt: str) -> tuple[list[dict], list[str]]:
    """The memories and the new facts written into mem0's update prompt (Python reprs in backticks)."""
    memories: list[dict] = []
    head, sep, tail = prompt.partition("The new retrieved facts are mentioned in the triple backticks")
    if not sep:
        raise ConfigError("the scripted mem0 LLM got an update prompt it cannot read", fix="check mem0's version")
    if "current content of my memory" in head:
        blocks = _BLOCK.findall(head.split("current content of my memory", 1)[1])
        memories = ast.literal_eval(blocks[0]) if blocks else []
    facts = ast.literal_eval(_BLOCK.findall(tail)[0])
    return memories, list(facts)


def _make_llm_class():
    from mem0.llms.base import LLMBase

    class ScriptedJudgeLLM(LLMBase):
        """mem0 1.0.x's two LLM calls, played deterministically: extraction returns the user message as the
        one fact; the update call answers from the model's relation table and a judge fixture's votes."""

        judge = None  # the calling agent's judge and vote list: one stand-in per Memory, one Memory per agent
        votes: list | None = None

        def bind(self, judge, votes) -> None:
            """The agent's judge for its next calls (mem0 1.0.x may call the LLM on a pool thread)."""
            self.judge, self.votes = judge, votes

        def generate_response(self, messages, response_format=None, tools=None, tool_choice="auto", **kwargs):
            if any(m.get("role") == "system" for m in messages):  # fact extraction: system + "Input:\nuser: ..."
                user = next(m["content"] for m in messages if m.get("role") == "user")
                facts = [ln[len("user: "):].strip() for ln in str(user).splitlines() if ln.startswith("user: ")]
                return json.dumps({"facts": facts})
            memories, facts = _update_prompt_parts(str(messages[-1]["content"]))
            judge, votes = self.judge, self.votes
            if judge is None:
                raise ConfigError("the scripted mem0 LLM was called outside an agent's call", fix="bind a judge")
            return json.dumps({"memory": model.update_llm(_JudgeHolder(judge), memories, facts, votes)})

    return ScriptedJudgeLLM


class _JudgeHolder:  # what model.update_llm reads of its handle
    def __init__(self, judge):
        self.judge = judge


def _make_embedder_class():
    from mem0.embeddings.base import EmbeddingBase

    class BagOfWordsEmbedder(EmbeddingBase):
        """The model's hashed bag of words: shared words give cosine overlap, so related facts are found."""

        def embed(self, text, memory_action=None):
            return bag_of_words(str(text), DIM)

    return BagOfWordsEmbedder


def __getattr__(name):  # mem0's factories import the classes by dotted path
    if name == "ScriptedJudgeLLM":
        cls = _make_llm_class()
    elif name == "BagOfWordsEmbedder":
        cls = _make_embedder_class()
    else:
        raise AttributeError(name)
    globals()[name] = cls
    return cls


# -- the engine ----------------------------------------------------------------------------------------

class Mem0V1Engine(m2.Mem0Engine):
    name = "mem0-v1"
    executed = "real"
    storage_in_location = False
    record_multi_valued = False
    abstains: dict[str, str] = {}
    description = ("mem0 1.0.x, its unmodified Memory (extraction, top-5 search, the ADD/UPDATE/DELETE/NONE update "
                   "call, in-place update, hard delete, SQLite history) on PostgreSQL+pgvector, with a scripted "
                   "LLM judging through a toki fixture and a bag-of-words embedder")

    def __init__(self, *, judge=None, rejudge_judge=None):
        self.judge_factory = judge or model.mem0_judge()
        self.rejudge_judge = rejudge_judge or model.mem0_wobbling_judge()
        super().__init__()
        self.scenarios = _scenarios(self)

    @property
    def version(self) -> str:
        return _version()

    @property
    def system(self) -> str:
        return f"mem0 {_version()}"

    def _config(self, table: str, location: Path):
        from mem0.configs.base import MemoryConfig
        from mem0.embeddings.configs import EmbedderConfig
        from mem0.llms.configs import LlmConfig
        from mem0.vector_stores.configs import VectorStoreConfig

        return MemoryConfig(
            vector_store=VectorStoreConfig(provider="pgvector", config={
                "collection_name": table, "embedding_model_dims": DIM,
                "connection_pool": m2.EnginePool(self._storage())}),
            llm=LlmConfig.model_construct(provider=LLM_PROVIDER, config={}),
            embedder=EmbedderConfig.model_construct(provider=EMBEDDER_PROVIDER, config={"embedding_dims": DIM}),
            history_db_path=str(Path(location) / "history.db"))

    def open(self, location: Path) -> m2.Mem0Handle:
        mem0 = _require()
        key = str(location)
        with self._lock:
            table = self._tables.get(key)
            if table is None:
                table = self._tables[key] = f"mem_{next(self._n)}"
        m = mem0.Memory(self._config(table, Path(location)))  # 1.0.x creates its collection here
        return m2.Mem0Handle(m, key, self._ids.setdefault(key, {}))

    # -- what an agent does ------------------------------------------------------------------------

    def run_plan(self, h: m2.Mem0Handle, agent: str, plan: tuple, judge=None) -> dict:
        votes: list[dict] = []
        h.mem.llm.bind((judge or self.judge_factory)(agent), votes)
        results = []
        try:
            for op, *args in plan:
                if op == "search":
                    rows = h.mem.search(args[0], user_id=model.USER, limit=model.SEARCH_LIMIT)["results"]
                    results.append(sorted(r["memory"] for r in rows))
                elif op == "add":
                    r = h.mem.add([{"role": "user", "content": args[0]}], user_id=model.USER)
                    results.append([self._named(h, x) for x in r["results"]])
                else:
                    raise ConfigError(f"unknown mem0 call {op!r}", fix="use add or search")
        finally:
            h.mem.llm.bind(None, None)
        return {"results": results, "votes": votes}

    # -- a trial as a memory history (toki.record.trial_history) -------------------------------
    def memory_history(self, scenario: str, outcome, returned: dict | None = None) -> dict | None:
        """The model's (:func:`toki.engines.models.mem0_v2.history_spec`): the same calls and
        returns, memories named by the text they were added with. mem0 1.0.11 logs an action
        that raised and does not return it, so an add that returned no action and asked no judge
        (a NONE, or an UPDATE of a memory deleted meanwhile) has no history."""
        sc = self.scenarios.get(scenario)
        plan = getattr(getattr(sc, "call", None), "plan", None)
        if not plan or not isinstance(outcome.state, dict) or "memories" not in outcome.state:
            return None
        return model.history_spec(plan, getattr(sc.setup, "texts", ()) if sc.setup else (), outcome,
                                  returned or {}, errors_returned=False)

    def _named(self, h: m2.Mem0Handle, r: dict) -> dict:
        """One result of add() with the memory named as the state names it (its ADD text, not its uuid)."""
        out = {k: v for k, v in r.items() if k in ("memory", "event", "previous_memory")}
        out["id"] = _label(h.mem.history(r["id"]), r.get("memory"))
        return out

    def state(self, h: m2.Mem0Handle) -> dict:
        rows = h.mem.get_all(user_id=model.USER, limit=1000)["results"]
        current = {r["id"]: r["memory"] for r in rows}
        ids = set(current)
        with h.mem.db._lock:
            ids |= {r[0] for r in h.mem.db.connection.execute("SELECT DISTINCT memory_id FROM history")}
        memories, history = [], []
        for mid in ids:
            hist = h.mem.history(mid)
            label = _label(hist, current.get(mid))
            if mid in current:
                memories.append([label, current[mid]])
            history.append([label, sorted(([r["event"], r["old_memory"], r["new_memory"]] for r in hist), key=m2.canonical_key)])
        return {"memories": sorted(memories, key=m2.canonical_key), "history": sorted(history, key=m2.canonical_key)}


def _label(hist: list[dict], fallback) -> str:
    added = next((r["new_memory"] for r in hist if r["event"] == "ADD"), None)
    return "m:" + str(added or fallback or "<unknown>")


# -- scenarios: the model's, on the real code (the detectors that read history order left out) ------------

_ORDERED = {"non-atomic-history"}


def _scenarios(engine: Mem0V1Engine) -> dict[str, Scenario]:
    def seeded(*texts):
        def setup(h):
            engine.run_plan(h, "setup", tuple(("add", t) for t in texts))
        setup.texts = texts  # the seed, for the trial's memory history
        return setup

    def calls(plan: dict[str, tuple], judge=None):
        def call(h, agent):
            return engine.run_plan(h, agent, plan[agent], judge)
        call.plan = plan  # what each agent says, for the trial's memory history
        return call

    # the model's scenarios carry its own calls and seeds; keep their agents, plans, detectors and tags
    PLANS = {
        "concurrent-update": ({"A": (("add", model.GREEN),), "B": (("add", model.MILK),)}, (model.TEA,), None),
        "delete-vs-update": ({"A": (("add", model.NOTEA),), "B": (("add", model.GREEN),)}, (model.TEA,), None),
        "duplicate-add": ({"A": (("add", model.DOG),), "B": (("add", model.DOG),)}, (model.TEA,), None),
        "double-supersede": ({"A": (("add", model.GLOBEX),), "B": (("add", model.INITECH),)}, (model.ACME,), None),
        "search-during-replace": ({"A": (("add", model.GLOBEX),), "R": (("search", "Where does Alice work?"),)},
                                  (model.ACME,), None),
        "update-overwrites": ({"U": (("add", model.GREEN),)}, (model.TEA,), None),
        "love-then-hate": ({"U": (("add", model.HATE),)}, (model.LOVE,), None),
        "rejudge": ({"A": (("add", model.ROME),), "B": (("add", model.ROME),)}, (model.PARIS,), "rejudge"),
        "ingestion-order": ({"A": (("add", model.ROME),), "B": (("add", model.PARIS),)}, (), None),
    }
    drop = {"update_after_delete", "history_out_of_order"}
    out = {}
    for sc in model.Mem0V2Model().scenarios.values():
        plan, seed, judge = PLANS[sc.name]
        dets = tuple(d for d in sc.detectors if d.anomaly not in _ORDERED
                     and getattr(d.check, "__qualname__", "").split(".")[0] not in drop)
        out[sc.name] = Scenario(sc.name, sc.description, sc.agents,
                                calls(plan, engine.rejudge_judge if judge else None),
                                seeded(*seed) if seed else None, False, dets,
                                tuple(a for a in sc.anomalies if a not in _ORDERED), sc.observe)
    return out


def mem0_v1() -> Mem0V1Engine:
    _require()
    return Mem0V1Engine()
