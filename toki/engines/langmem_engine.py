"""LangMem (PyPI ``langmem``), real and unmodified, offline, on LangGraph's SQLite and PostgreSQL stores.

What runs is LangMem's own memory manager, ``create_memory_store_manager(...).invoke``
(``langmem.knowledge.extraction.MemoryStoreManager``), on a LangGraph ``BaseStore``:
``SqliteStore`` (``langgraph-checkpoint-sqlite``: one sqlite3 connection, each ``batch`` a
``BEGIN ... COMMIT`` under a ``threading.Lock``, vectors through sqlite-vec) or ``PostgresStore``
(``langgraph-checkpoint-postgres``: one psycopg connection in autocommit mode, each ``batch`` in
psycopg's pipeline mode, vectors through pgvector). The write path, read from langmem 0.0.30:

1. search the namespace (``store.search``, the conversation as the query, top ``query_limit``);
2. one LLM call through trustcall's extractor: the memories found are shown with their ids, and
   the model answers with tool calls - ``PatchDoc`` (a JSON patch of one memory), a new
   ``Memory``, or ``RemoveDoc`` (only with ``enable_deletes=True``);
3. ``store.put`` of every changed or new memory (a blind upsert of the whole value), then
   ``store.delete`` of every removed one; each is its own ``batch`` (its own transaction).

Nothing spans the search and the puts; a put overwrites the key's value and the store keeps no
earlier version (the manager's docstring speaks of "a versioned history of all changes"; the
stores keep only the latest value of a key).

What toki plugs in, through LangMem's and LangGraph's own extension points:

- the chat model: :class:`ScriptedChatModel`, a subclass of langchain-core's
  ``GenericFakeChatModel`` with ``bind_tools`` (trustcall binds its tools and reads the tool
  calls back) that answers from the prompt it is sent: it finds the new utterance in the
  session and the memories shown with their ids, and makes the tool calls an LLM following
  LangMem's instructions would make (:data:`UTTERANCES`). A contradiction of a stored value is
  decided by a :mod:`toki.judges` fixture judge (the new fact wins, except in ``rejudge``, which
  measures N1 with a temperature-1 fixture: LangMem's default chat models run at the provider's
  default temperature and log no decision);
- the embedder: the store's ``index={"dims", "embed"}`` with :func:`toki.engines.models.embed`
  (hashed bag of words), so ``store.search`` ranks by a deterministic similarity;
- storage: a SQLite file under the trial's directory, or a PostgreSQL schema per trial in the
  embedded server (``search_path`` set on the connection; pgvector created once). Every
  statement either store sends is a step the harness grants; each agent has its own store and
  connection (``shared=False``: two workers of one application); each store's ``threading.Lock``
  is created during the trial, so the harness instruments it.

The state is what the store answers (``store.search`` of the namespace): the memories' contents,
sorted, without keys (LangMem names new memories by ``uuid4``) or timestamps.
"""

from __future__ import annotations

import ast
import os
import re
import sqlite3
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toki.engines.base import OnPostgres
from toki.engines.models import JudgeFactory, ask_judge, embed, greedy_judge, rejudged, wobbling_judge
from toki.errors import ConfigError
from toki.harness.engine import Detector, Scenario

USER = "alice"
NAMESPACE = ("memories", USER)
CONFIG = {"configurable": {"langgraph_user_id": USER}}
DIM = 32

# The memory slots the stand-in LLM knows: a memory belongs to a slot when its content starts so.
SLOTS = {"residence": "Alice lives in ", "pets": "Alice has pets: ", "music": "Alice plays "}
# What each utterance means to the stand-in: (slot, value, how). "replace": the slot holds one
# value (a contradiction replaces it); "extend": the slot is a list the new item joins.
UTTERANCES: dict[str, tuple[str, str, str]] = {
    "I live in Berlin.": ("residence", "Berlin", "replace"),
    "I moved to Rome.": ("residence", "Rome", "replace"),
    "I moved to Paris.": ("residence", "Paris", "replace"),
    "I have a cat.": ("pets", "cat", "extend"),
    "I also have a dog.": ("pets", "dog", "extend"),
    "I also have a parrot.": ("pets", "parrot", "extend"),
    "I play the violin.": ("music", "the violin", "replace"),
}
# When each utterance's fact happened (LangMem keeps no event time: only the ingestion-order detector uses it).
EVENT_DAY = {"I live in Berlin.": "2026-01-05", "I moved to Paris.": "2026-03-01", "I moved to Rome.": "2026-05-01"}
BERLIN, ROME, PARIS = (f"Alice lives in {c}." for c in ("Berlin", "Rome", "Paris"))
CONTRADICTS = [(a, b) for a in (BERLIN, ROME, PARIS) for b in (BERLIN, ROME, PARIS) if a != b]


def _require(backend: str = "sqlite"):
    # LangSmith tracing stays off (it would send runs over the network when a key is set).
    os.environ["LANGSMITH_TRACING"] = os.environ["LANGCHAIN_TRACING_V2"] = "false"
    try:
        # Imported here, before any trial: during one, queue.Queue is the harness's factory, and
        # these modules subscript it (queue.Queue[...]) at import time. trustcall (langmem's
        # dependency) warns on import about a LangGraph deprecation that is not the user's to fix.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*langgraph\.constants", category=DeprecationWarning)
            import langmem  # noqa: F401
        from langchain_core.language_models import fake_chat_models  # noqa: F401
        from langmem import create_memory_store_manager  # noqa: F401

        if backend == "postgres":
            from langgraph.store.postgres import PostgresStore  # noqa: F401
        else:
            from langgraph.store.sqlite import SqliteStore  # noqa: F401
    except ImportError as e:
        raise ConfigError(f"LangMem is not installed ({e.name} is missing)",
                          fix="pip install 'toki[engines]' (or pip install langmem langgraph-checkpoint-sqlite "
                              "langgraph-checkpoint-postgres)") from None
    import langmem

    return langmem


def _version() -> str:
    from importlib.metadata import version

    return version("langmem")


def _embed(texts: list[str]) -> list[list[float]]:
    return [embed(t, DIM) for t in texts]


INDEX = {"dims": DIM, "embed": _embed}
# SqliteStore's vector index loads the sqlite-vec extension, which needs a Python whose sqlite3
# allows loadable extensions; without them the store runs unindexed (a search returns the
# namespace's items, newest first, and LangMem shows them to the model all the same). The
# version string says which.
SQLITE_VECTORS = hasattr(sqlite3.Connection, "enable_load_extension")


# -- the stand-in LLM ------------------------------------------------------------------------------

_INSTANCE = re.compile(r'<instance id=(\S+) schema_type="(\w+)">\n(.*?)\n</instance>', re.S)


def _memory_text(content: str) -> str:
    try:
        doc = ast.literal_eval(content)  # trustcall shows the instance as a Python dict
    except (ValueError, SyntaxError):
        return content
    return doc.get("content", "") if isinstance(doc, dict) else str(doc)


def _slot_of(text: str) -> str | None:
    return next((s for s, prefix in SLOTS.items() if text.startswith(prefix)), None)


def _render(slot: str, values: list[str]) -> str:
    return SLOTS[slot] + ", ".join(values) + "."


def _values(text: str, slot: str) -> list[str]:
    return [v.strip() for v in text[len(SLOTS[slot]):].rstrip(".").split(",") if v.strip()]


def decide(prompt: str, tools: list[str], judge, votes: list[dict]) -> list[dict]:
    """The tool calls an LLM following LangMem's instructions makes for the utterance in ``prompt``.

    ``prompt`` is everything the model was sent; the memories shown are ``<instance id=...>``
    blocks (trustcall's format). A new fact with no memory of its slot is a new ``Memory``; a
    value already stored is left alone ("avoid duplicate extractions"); a list slot gets the
    item added by a ``PatchDoc``; a contradicted value is replaced when the judge lets the new
    fact win - by ``PatchDoc``, or, when ``RemoveDoc`` is offered (``enable_deletes``), by removing
    the old memory and inserting the new one."""
    recorded = RECORDED.search(prompt.split("<session_", 1)[-1])
    if recorded:
        return _recorded_calls(prompt, tools, recorded.group(1), votes)
    said = [u for u in UTTERANCES if u in prompt.split("<session_", 1)[-1]]
    if len(said) != 1:
        raise ConfigError(f"the scripted chat model understands exactly one utterance per session, found {said}",
                          fix="add it to toki.engines.langmem_engine.UTTERANCES")
    slot, value, how = UTTERANCES[said[0]]
    shown = [(mid, _memory_text(body)) for mid, _, body in _INSTANCE.findall(prompt)]
    mine = [(mid, text) for mid, text in shown if _slot_of(text) == slot]
    if not mine:
        return [{"name": "Memory", "args": {"content": _render(slot, [value])}}]
    mid, text = mine[0]
    if how == "extend":
        have = _values(text, slot)
        if value in have:
            return []
        return [_patch(mid, _render(slot, have + [value]), f"add {value} to the list")]
    new = _render(slot, [value])
    if new == text or not ask_judge(judge, text, new, votes):
        return []
    if "RemoveDoc" in tools:
        return [{"name": "RemoveDoc", "args": {"json_doc_id": mid}}, {"name": "Memory", "args": {"content": new}}]
    return [_patch(mid, new, f"replace the outdated value with {value}")]


# A recorded workload (toki record) says "Remember: SLOT=VALUE." and a memory's content is the claim itself.
RECORDED = re.compile(r"Remember: ([^\s=]+=[^\s]+)\.")


def _recorded_calls(prompt: str, tools: list[str], claim: str, votes: list[dict]) -> list[dict]:
    """A recorded add supersedes every memory of its slot the model is shown: each is removed
    (``RemoveDoc``, when LangMem's ``enable_deletes`` offers it) or, without deletes, the first is
    patched into the new claim; what it retracts is appended to ``votes`` for the recorder."""
    slot = claim.split("=", 1)[0] + "="
    mine = [(mid, text) for mid, _, body in _INSTANCE.findall(prompt) if (text := _memory_text(body)).startswith(slot)]
    if any(text == claim for _, text in mine):
        votes.append({"retracted": []})
        return []
    if "RemoveDoc" in tools:
        votes.append({"retracted": [text for _, text in mine]})
        return [{"name": "RemoveDoc", "args": {"json_doc_id": mid}} for mid, _ in mine] + \
            [{"name": "Memory", "args": {"content": claim}}]
    if mine:
        votes.append({"retracted": [mine[0][1]]})
        return [_patch(mine[0][0], claim, "replace the outdated value")]
    votes.append({"retracted": []})
    return [{"name": "Memory", "args": {"content": claim}}]


def _patch(mid: str, content: str, plan: str) -> dict:
    return {"name": "PatchDoc", "args": {"json_doc_id": mid, "planned_edits": plan,
                                         "patches": [{"op": "replace", "path": "/content", "value": content}]}}


def _chat_model_class():
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.utils.function_calling import convert_to_openai_tool

    class ScriptedChatModel(GenericFakeChatModel):
        """langchain-core's fake chat model, answering from the prompt (:func:`decide`) with tool calls.

        ``bind_tools`` records the tool names offered (trustcall binds its tools, then invokes)."""

        messages: Any = iter(())
        judge: Any = None
        votes: Any = None  # the caller's list (Any: pydantic would copy a list field)
        calls: int = 0

        def bind_tools(self, tools, *, tool_choice=None, **kwargs):
            names = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
            return self.bind(tool_names=names, tool_choice=tool_choice, **kwargs)

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            prompt = "\n".join(m.content if isinstance(m.content, str) else str(m.content) for m in messages)
            calls = decide(prompt, kwargs.get("tool_names") or [], self.judge, self.votes)
            tool_calls = []
            for tc in calls:
                self.calls += 1
                tool_calls.append({**tc, "id": f"call_{self.calls}", "type": "tool_call"})
            content = "" if tool_calls else "Nothing new to remember."
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=content, tool_calls=tool_calls))])

    return ScriptedChatModel


_model_class = None


def scripted_chat_model(judge, votes: list[dict]):
    global _model_class
    if _model_class is None:
        _model_class = _chat_model_class()
    return _model_class(judge=judge, votes=votes)


def langmem_judge() -> JudgeFactory:
    return greedy_judge(CONTRADICTS, "langmem-fixture")


# -- the engine ------------------------------------------------------------------------------------

@dataclass
class _Handle:
    store: Any
    conn: Any
    key: str
    agent: str | None = None
    judge: Any = None
    factory: Any = None


class LangMemEngine(OnPostgres):
    """LangMem's memory manager on LangGraph's ``SqliteStore`` (``backend="sqlite"``) or ``PostgresStore``."""

    executed = "real"

    def __init__(self, backend: str = "sqlite", *, rejudge_judge: JudgeFactory | None = None):
        _require(backend)
        if backend not in ("sqlite", "postgres"):
            raise ConfigError(f"unknown LangGraph store {backend!r}", fix="use 'sqlite' or 'postgres'")
        self.backend = backend
        self.name = "langmem" if backend == "sqlite" else "langmem-postgres"
        self.storage_in_location = backend == "sqlite"
        self.judge_factory = langmem_judge()
        self.rejudge_judge = rejudge_judge or wobbling_judge(CONTRADICTS, "langmem-wobbling")
        self._schemas: dict[str, str] = {}
        self._ext_schema: str | None = None
        self._lock = threading.Lock()
        self._dsn = None
        self.scenarios = _scenarios(self)

    @property
    def store_package(self) -> str:
        return "langgraph-checkpoint-sqlite" if self.backend == "sqlite" else "langgraph-checkpoint-postgres"

    @property
    def version(self) -> str:
        from importlib.metadata import version

        store = "PostgresStore with pgvector" if self.backend == "postgres" else (
            "SqliteStore with sqlite-vec" if SQLITE_VECTORS else "SqliteStore without a vector index")
        return f"{_version()} on {store} ({self.store_package} {version(self.store_package)})"

    @property
    def system(self) -> str:
        """What the row stands for in verdict tables."""
        return f"LangMem {_version()} on {'SQLite' if self.backend == 'sqlite' else 'PostgreSQL'}"

    @property
    def description(self) -> str:
        return (f"LangMem's unmodified memory manager (search, one LLM call, blind puts) on LangGraph's "
                f"{'SqliteStore' if self.backend == 'sqlite' else 'PostgresStore'}, with a scripted chat model "
                "and a hash embedder")

    # -- storage -------------------------------------------------------------------------------
    def _schema(self, key: str) -> str:
        """The trial's schema (created on the trial's first open; pgvector created once)."""
        from toki.db.server import create_run_schema

        with self._lock:
            if key in self._schemas:
                return self._schemas[key]
            server = self.server
            if not server.is_postgres:
                raise ConfigError(f"LangGraph's PostgresStore needs PostgreSQL, not {server.backend}",
                                  fix="unset TOKI_DSN (the embedded PostgreSQL ships pgvector)")
            with server.connect() as c:
                if self._ext_schema is None:
                    c.execute("create extension if not exists vector")
                    self._ext_schema = c.execute("select extnamespace::regnamespace::text from pg_extension "
                                                 "where extname = 'vector'").fetchone()[0]
                schema = self._schemas[key] = create_run_schema(c, "langmem")
            return schema

    def open(self, location: Path) -> _Handle:
        key = str(location)
        if self.backend == "sqlite":
            from langgraph.store.sqlite import SqliteStore

            # As SqliteStore.from_conn_string opens it: autocommit, usable from the store's threads.
            conn = sqlite3.connect(str(Path(location) / "store.db"), check_same_thread=False, isolation_level=None)
            store = SqliteStore(conn, index=INDEX if SQLITE_VECTORS else None)
        else:
            import psycopg
            from langgraph.store.postgres import PostgresStore
            from psycopg.conninfo import make_conninfo
            from psycopg.rows import dict_row

            schema = self._schema(key)
            conninfo = make_conninfo(self.server.dsn, options=f"-c search_path={schema},{self._ext_schema}",
                                     application_name="toki-langmem")
            # As PostgresStore.from_conn_string opens it.
            conn = psycopg.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
            store = PostgresStore(conn, index=INDEX)
        store.setup()  # what an application runs once at start-up (migrations), before any agent's call
        return _Handle(store, conn, key)

    def close(self, h: _Handle) -> None:
        h.conn.close()

    def discard(self, location: Path) -> None:
        schema = self._schemas.pop(str(location), None)
        if schema is not None:
            from toki.db.server import drop_schema

            drop_schema(self.server, schema)

    def state(self, h: _Handle) -> dict:
        items = h.store.search(NAMESPACE, limit=1000)
        return {"memories": sorted(_content(it.value) for it in items)}

    # -- a trial as a memory history (toki.record.trial_history) -------------------------------
    def memory_history(self, scenario: str, outcome, returned: dict | None = None) -> dict | None:
        """Each of Alice's memory slots (residence, pets, music) as a single-valued slot
        ``alice/SLOT``, a claim a memory's content (the pets list is one memory, patched whole).
        The state holds contents only, no keys: what each call did comes from what it returned,
        its puts and the judge's votes (:func:`_remember_mops`); a recall is a current read of
        what it was told. The final reads are current reads only: the store keeps no earlier
        version of a key and no trace of a removed one, so there is no audit history to read."""
        sc = self.scenarios.get(scenario)
        plan = getattr(getattr(sc, "call", None), "plan", None)
        if not plan or not isinstance(outcome.state, dict) or "memories" not in outcome.state:
            return None
        returned = returned or {}
        agents: dict[str, list] = {}
        for agent, (op, *args) in plan.items():
            got = returned.get(agent) if agent in outcome.completed else None
            if op == "recall":
                if got is None:
                    agents[agent] = [["current", f"{USER}/residence", None]]
                else:
                    agents[agent] = [["current", f"{USER}/residence",
                                      sorted(m for m in got if _slot_of(m) == "residence")]]
                continue
            results = got if isinstance(got, list) else [got] * len(args) if len(args) == 1 else [None] * len(args)
            mops: list = []
            for utterance, res in zip(args, results):
                mine = _remember_mops(utterance, res)
                if mine is None:
                    return None
                mops += mine
            agents[agent] = mops
        seeds = getattr(sc.setup, "seeds", ())
        setup = [["add", f"{USER}/{UTTERANCES[u][0]}", _render(UTTERANCES[u][0], [UTTERANCES[u][1]])] for u in seeds]
        slots = sorted({UTTERANCES[u][0] for u in seeds} | {UTTERANCES[a][0] for _, *args in plan.values()
                                                             for a in args if a in UTTERANCES} | {"residence"})
        final = [["current", f"{USER}/{slot}", _slot_memories(outcome.state, slot)] for slot in slots]
        return {"setup": setup, "agents": agents, "final": final}

    # -- one agent's call ----------------------------------------------------------------------
    def remember(self, h: _Handle, agent: str, text: str, *, deletes: bool = False,
                 judge: JudgeFactory | None = None) -> dict:
        """One conversation turn handed to LangMem's memory manager (``invoke``), as an app does after a turn."""
        from langchain_core.messages import HumanMessage
        from langmem import create_memory_store_manager

        factory = judge or self.judge_factory
        if (h.agent, h.factory) != (agent, factory):
            h.agent, h.factory, h.judge = agent, factory, factory(agent)
        votes: list[dict] = []
        model = scripted_chat_model(h.judge, votes)
        manager = create_memory_store_manager(model, namespace=("memories", "{langgraph_user_id}"), store=h.store,
                                              enable_deletes=deletes)
        puts = manager.invoke({"messages": [HumanMessage(content=text)]}, config=CONFIG)
        return {"puts": sorted(_content(p["value"]) for p in puts), "votes": votes}

    def recall(self, h: _Handle, query: str) -> list[str]:
        """What an agent is told about Alice before it answers: the manager's own ``search``."""
        from langmem import create_memory_store_manager

        manager = create_memory_store_manager(scripted_chat_model(None, []), store=h.store,
                                              namespace=("memories", "{langgraph_user_id}"))
        return sorted(_content(it.value) for it in manager.search(query=query, limit=10, config=CONFIG))


    # -- toki record: worker processes on one PostgresStore schema --------------------------------
    record_fresh_claims = True  # a single-valued slot: every add supersedes; LangMem keeps no history
    def _record_schema(self, store: str) -> str:
        from toki.db.server import SCHEMA_PREFIX

        if self.backend != "postgres":
            raise ConfigError("toki record drives LangMem on PostgreSQL (langmem-postgres): worker processes "
                              "share one server", fix="use --engine langmem-postgres")
        return f"{SCHEMA_PREFIX}rec_langmem_" + re.sub(r"[^a-z0-9_]", "_", Path(store).name.lower())[:24]

    def record_setup(self, store: str) -> None:
        """Before any worker starts: the schema, pgvector and the store's tables (its migrations), once."""
        schema = self._record_schema(store)
        with self.server.connect() as c:
            c.execute("create extension if not exists vector")
            c.execute(f"create schema if not exists {schema}")
        self.record_client(store, setup=True).close()

    def record_client(self, store: str, *, setup: bool = False) -> "LangMemClient":
        """A memory client for ``toki record``: its own connection and PostgresStore on the shared
        schema; a slot is a namespace ("memories", slot), a claim a memory's content."""
        import psycopg
        from langgraph.store.postgres import PostgresStore
        from psycopg.conninfo import make_conninfo
        from psycopg.rows import dict_row

        schema = self._record_schema(store)
        if self._ext_schema is None:
            with self.server.connect() as c:
                self._ext_schema = c.execute("select extnamespace::regnamespace::text from pg_extension "
                                             "where extname = 'vector'").fetchone()[0]
        conninfo = make_conninfo(self.server.dsn, options=f"-c search_path={schema},{self._ext_schema}",
                                 application_name="toki-langmem-record")
        conn = psycopg.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        st = PostgresStore(conn, index=INDEX)
        if setup:
            st.setup()
        return LangMemClient(_Handle(st, conn, schema))

    def record_cleanup(self, store: str) -> None:
        from toki.db.server import drop_schema

        drop_schema(self.server, self._record_schema(store))


def _remember_mops(utterance: str, res: dict | None) -> list | None:
    """One ``remember`` call as micro-ops, from what it returned. The model was shown the slot's
    memory and answered by the utterance's kind: a replace asks the judge, whose vote names the
    memory it read (``stored``) and whether the new value won (then it removed or patched the
    stored one: retract, add); a list item patches the list it read, which is the list it put
    without its item; a slot with no memory shown gets a new memory (it read none); no tool call
    and no vote means the value was already there (it read it). A call that did not return (it
    failed) is its planned add, with no read."""
    slot, value, how = UTTERANCES[utterance]
    s = f"{USER}/{slot}"
    new = _render(slot, [value])
    if res is None:
        return [["add", s, new]]
    puts = [p for p in res.get("puts", []) if _slot_of(p) == slot]
    votes = [v for v in res.get("votes", []) if _slot_of(v["stored"]) == slot]
    if len(puts) > 1 or len(votes) > 1:
        return None  # more than one memory of the slot written or judged: not what these scenarios do
    out: list = []
    if votes:
        v = votes[0]
        out.append(["decide", f"{s}: {v['stored']} | {v['new']}", sorted([v["stored"], v["new"]]),
                    v["new"] if v["new_wins"] else v["stored"]])
        out.append(["current", s, [v["stored"]]])
        if v["new_wins"]:
            if puts != [v["new"]]:
                return None
            out += [["retract", s, v["stored"]], ["add", s, v["new"]]]
        return out
    if not puts:
        return [["current", s, [new]]] if how == "replace" else None
    put = puts[0]
    if how == "extend":
        have = _values(put, slot)
        if value in have and len(have) > 1:
            read = _render(slot, [x for x in have if x != value])
            return [["current", s, [read]], ["retract", s, read], ["add", s, put]]
    return [["current", s, []], ["add", s, put]]


class LangMemClient:
    """LangMem's memory manager as memory micro-ops. ``add`` hands LangMem the turn "Remember:
    CLAIM." (``enable_deletes=True``, as the harness's double-remember scenario: the model removes
    the slot's memories it is shown and inserts the claim) and returns what the model removed;
    ``current`` lists the slot's memories (``store.search`` of its namespace). There is no
    ``history``: the store keeps only the latest value of a key and no trace of a removed one."""

    def __init__(self, h: _Handle):
        self.h = h

    def add(self, slot: str, claim: str) -> list[str]:
        from langchain_core.messages import HumanMessage
        from langmem import create_memory_store_manager

        votes: list[dict] = []
        manager = create_memory_store_manager(scripted_chat_model(None, votes), store=self.h.store,
                                              namespace=("memories", "{langgraph_user_id}"), enable_deletes=True)
        manager.invoke({"messages": [HumanMessage(content=f"Remember: {claim}.")]},
                       config={"configurable": {"langgraph_user_id": slot}})
        if len(votes) != 1:
            raise ConfigError(f"the scripted model was asked {len(votes)} times for one turn", fix="a bug in toki")
        return votes[0]["retracted"]

    def current(self, slot: str) -> list[str]:
        return [_content(it.value) for it in self.h.store.search(("memories", slot), limit=1000)]

    def close(self) -> None:
        self.h.conn.close()


def _content(value) -> str:
    """A memory's text, from a stored value ({"kind", "content": {"content"}}) or the manager's model."""
    content = value.get("content") if isinstance(value, dict) else value
    if isinstance(content, dict):
        content = content.get("content", content)
    return str(getattr(content, "content", content))


# -- detectors ---------------------------------------------------------------------------------------

def _slot_memories(state, slot: str) -> list[str]:
    return [m for m in state["memories"] if _slot_of(m) == slot]


def lost_items(*items: str) -> Detector:
    def check(state, errors):
        pets = [v for m in _slot_memories(state, "pets") for v in _values(m, "pets")]
        return [f"{item!r} is in no memory although its call returned: another agent's put of the whole memory, "
                "patched from the value it read before, overwrote it" for item in items if item not in pets]
    return Detector("lost-update", check)


def lost_memory(text: str) -> Detector:
    def check(state, errors):
        return [] if text in state["memories"] else [f"{text!r}, added meanwhile, is gone after another run's write-back"]
    return Detector("lost-update", check)


def several_current(slot: str) -> Detector:
    def check(state, errors):
        mem = _slot_memories(state, slot)
        return [f"{len(mem)} memories of Alice's {slot} are current: {mem}"] if len(mem) > 1 else []
    return Detector("double-supersede", check)


def duplicates() -> Detector:
    def check(state, errors):
        seen = sorted({m for m in state["memories"] if state["memories"].count(m) > 1})
        return [f"{m!r} is stored {state['memories'].count(m)} times (two inserts under fresh uuid keys)" for m in seen]
    return Detector("duplicate-insert", check)


def replaced_without_trace(old: str) -> Detector:
    def check(state, errors):
        return ([f"{old!r} was replaced and is in no memory: the put overwrote the key's value and the store "
                 "keeps no earlier version, so the loser leaves no trace"] if old not in state["memories"] else [])
    return Detector("N3", check, always=True)


def told(reader: str, slot: str) -> Detector:
    def check(state, errors, observed):
        seen = observed.get(reader)
        if seen is None:
            return []
        mine = [m for m in seen if _slot_of(m) == slot]
        if len(mine) != 1:
            return [f"{reader} asked where Alice lives while another agent replaced it and was told {mine or 'nothing'} "
                    "(serially it is told the old value or the new one)"]
        return []
    return Detector("N2", check, observes=True)


def older_current() -> Detector:
    """The current residence is not the one that happened last (ingestion order decided it)."""
    def check(state, errors):
        cur = _slot_memories(state, "residence")
        day = {f"Alice lives in {u.split()[-1].rstrip('.')}.": d for u, d in EVENT_DAY.items()}
        newest = max(day, key=day.get)
        return [f"{cur} is current although {newest!r} happened later ({day[newest]}): LangMem keeps no event "
                "time, so the fact ingested last replaces the other"] if cur and newest not in cur else []
    return Detector("ingestion-order", check, always=True)


# -- scenarios -----------------------------------------------------------------------------------------

def _scenarios(engine: LangMemEngine) -> dict[str, Scenario]:
    def seeded(*texts):
        def setup(h):
            for t in texts:
                engine.remember(h, "setup", t)
        setup.seeds = texts
        return setup

    def calls(plan: dict[str, tuple], **kw):
        def call(h, agent):
            op, *args = plan[agent]
            if op == "recall":
                return engine.recall(h, args[0])
            return [engine.remember(h, agent, a, **kw) for a in args] if len(args) > 1 else \
                engine.remember(h, agent, args[0], **kw)
        call.plan = plan  # what each agent says, for the trial's memory history
        return call

    sc = [
        Scenario("blind-put",
                 "the reported race 'a blind put overwrites a concurrent writer's record and destroys the loser "
                 "(P4 and N3)': the memory 'Alice has pets: cat.' is stored; agents A and B each tell LangMem about "
                 "another pet. Serially the second patches the list the first wrote (cat, dog, parrot); "
                 "concurrently both search before either puts, both patch 'cat', and the later put wins",
                 ("A", "B"), calls({"A": ("remember", "I also have a dog."), "B": ("remember", "I also have a parrot.")}),
                 seeded("I have a cat."), False, (lost_items("dog", "parrot"),), ("lost-update",)),
        Scenario("consolidation-vs-add",
                 "the reported race 'a long LLM consolidation writes back over memories added meanwhile (P4)': "
                 "agent C's manager run consolidates the pets memory (patches 'cat' into 'cat, dog') while agent "
                 "A's adds a memory LangMem has not seen ('I play the violin'): the write-back is a put per key, "
                 "so can C's run erase A's new memory?",
                 ("C", "A"), calls({"C": ("remember", "I also have a dog."), "A": ("remember", "I play the violin.")}),
                 seeded("I have a cat."), False,
                 (lost_items("dog"), lost_memory("Alice plays the violin.")), ("lost-update",)),
        Scenario("ingestion-order",
                 "the reported 'order by ingestion instead of event time lets an older fact replace a newer one': "
                 "one agent tells LangMem 'I moved to Rome' (May) and then 'I live in Berlin' (January, told "
                 "late); the model replaces the stored residence each time",
                 ("A",), calls({"A": ("remember", "I moved to Rome.", "I live in Berlin.")}), None, False,
                 (older_current(),), ("ingestion-order",)),
        Scenario("double-remember",
                 "the reported race 'two concurrent remember calls both replace one memory, leaving two latest "
                 "versions' (A5B), with enable_deletes=True: 'Alice lives in Berlin' is stored; A says she moved "
                 "to Rome, B to Paris. The model removes the outdated memory and inserts the new one (RemoveDoc + "
                 "Memory). Serially the second replaces the first's; concurrently both replace Berlin",
                 ("A", "B"), calls({"A": ("remember", "I moved to Rome."), "B": ("remember", "I moved to Paris.")},
                                   deletes=True),
                 seeded("I live in Berlin."), False, (several_current("residence"),), ("double-supersede",)),
        Scenario("double-remember-and-recall",
                 "two writers and a reader: A says Alice moved to Rome, B to Paris (enable_deletes=True, over the "
                 "stored Berlin) while R recalls where she lives; serially one move ends current and R is told "
                 "one residence",
                 ("A", "B", "R"), calls({"A": ("remember", "I moved to Rome."), "B": ("remember", "I moved to Paris."),
                                         "R": ("recall", "Where does Alice live?")}, deletes=True),
                 seeded("I live in Berlin."), False, (several_current("residence"), told("R", "residence")),
                 ("double-supersede", "N2"), observe=True),
        Scenario("double-patch",
                 "the same two moves with LangMem's defaults (no deletes): each patches the Berlin memory in place "
                 "(PatchDoc), one key, so at most one value survives; the later put decides which",
                 ("A", "B"), calls({"A": ("remember", "I moved to Rome."), "B": ("remember", "I moved to Paris.")}),
                 seeded("I live in Berlin."), False, (several_current("residence"),), ("double-supersede",)),
        Scenario("duplicate-remember",
                 "two agents tell LangMem 'I play the violin' (nothing about music stored): serially the second "
                 "sees the memory and the model makes no call; concurrently both search first and both insert a "
                 "new memory under a fresh uuid key",
                 ("A", "B"), calls({"A": ("remember", "I play the violin."), "B": ("remember", "I play the violin.")}),
                 seeded("I live in Berlin."), False, (duplicates(),), ("duplicate-insert",)),
        Scenario("replace-overwrites",
                 "one agent says Alice moved to Rome: the model patches the Berlin memory and the put overwrites "
                 "it (N3 by design, in a serial run: no earlier version is kept)",
                 ("A",), calls({"A": ("remember", "I moved to Rome.")}), seeded("I live in Berlin."), False,
                 (replaced_without_trace(BERLIN),), ("N3",)),
        Scenario("recall-during-replace",
                 "agent R recalls where Alice lives (the manager's search) while agent A replaces Berlin by Rome "
                 "with enable_deletes=True: LangMem puts the new memory, then deletes the old one, each its own "
                 "transaction",
                 ("A", "R"), calls({"A": ("remember", "I moved to Rome."), "R": ("recall", "Where does Alice live?")},
                                   deletes=True),
                 seeded("I live in Berlin."), False, (told("R", "residence"),), ("N2",), observe=True),
        Scenario("rejudge",
                 "two agents say Alice moved to Rome; each asks its model whether the stored 'lives in Berlin' is "
                 "outdated. With the temperature-1 fixture this scenario uses (LangMem's chat models run at the "
                 "provider's default temperature) the answers can differ, and nothing logs the first: N1",
                 ("A", "B"), calls({"A": ("remember", "I moved to Rome."), "B": ("remember", "I moved to Rome.")},
                                   judge=engine.rejudge_judge),
                 seeded("I live in Berlin."), False, (rejudged(),), ("N1",), observe=True),
    ]
    return {s.name: s for s in sc}


def langmem() -> LangMemEngine:
    return LangMemEngine("sqlite")


def langmem_postgres() -> LangMemEngine:
    return LangMemEngine("postgres")
