"""Letta (PyPI ``letta`` 0.16.x, the Python server), real and unmodified, offline, on SQLite and PostgreSQL.

What runs is Letta's own service layer: ``AgentManager`` (``create_agent_async``,
``get_agent_by_id_async``, ``update_memory_if_changed_async``, ``rebuild_system_prompt_async``),
``BlockManager`` (``create_or_update_block_async``, ``update_block_async``, ``get_blocks_async``),
``LettaCoreToolExecutor.execute`` (the memory tools an agent's LLM calls: ``core_memory_append``,
``core_memory_replace``, ``memory_rethink``, ``memory_apply_patch``) and its ORM
(``letta/orm/block.py``: ``version`` is SQLAlchemy's ``version_id_col``, so the flush is
``UPDATE block SET ..., version=v+1 WHERE id=? AND version=v`` and 0 rows raise ``StaleDataError``,
which ``SqlalchemyBase.update_async`` turns into ``letta.errors.ConcurrentUpdateError``).
0.16.8 is the last release of the ``letta`` package that is the server; from 0.3x on the package is
a different product.

One user message to an agent (a request) is what Letta's ``send_message`` route does with it, minus
the LLM: the agent is loaded once with its memory (``get_agent_by_id_async(include_relationships=
["memory"])``: the blocks the request's steps see, compiled into the context), then each step is one
tool call, chosen by a deterministic stand-in for the LLM from that in-context memory and executed by
``LettaCoreToolExecutor.execute`` on the same ``agent_state`` (as ``ToolExecutionManager`` does in
the agent loop). No Letta code on this path calls an LLM or an embedder, so the stand-in is the
scenario's choice of tool call (where a call depends on whether a stored line contradicts the new one,
the choice comes from a :mod:`toki.judges` fixture, as in the model). The agent loop itself (message
persistence, step records, the LLM client) is not run: it writes no block.

What toki sets, through configuration, not code:

- the database: Letta 0.16.8 builds one SQLAlchemy ``AsyncEngine`` at import (``letta.server.db``)
  and always on asyncpg (``get_database_uri_for_context(..., "async")`` rewrites any PostgreSQL URI to
  ``postgresql+asyncpg``); toki's harness does not intercept asyncpg (a C driver), so toki binds
  ``letta.server.db.engine`` and ``letta.server.db.async_session_factory`` (the session factory
  every manager reaches through ``db_registry.async_session()``, made with Letta's own arguments:
  ``expire_on_commit=False, autoflush=False``, and Letta's default ``NullPool``) to an engine on
  ``sqlite+aiosqlite`` (a file under the run's folder) or on ``postgresql+psycopg`` (psycopg 3,
  async). ``settings.pg_uri`` is set on PostgreSQL and cleared on SQLite, so Letta's
  ``settings.database_engine`` answers what it runs on (its ORM listeners branch on it). The schema
  is Letta's ORM metadata (``Base.metadata.create_all``), as Letta creates it on SQLite; on
  PostgreSQL Letta uses alembic migrations to the same models;
- ``LETTA_DIR`` under a toki temp directory (Letta writes its log file there).

Letta reads ``asyncpg`` at import (its module-level engine), so the ``letta`` extra installs it; it
is never connected. Letta 0.16.8 pins ``openai>=2.24``, ``opentelemetry-*==1.30``,
``docstring-parser<0.17`` and ``sentry-sdk==2.19.1``: it resolves with toki's ``engines`` extra only
by downgrading openai, protobuf and opentelemetry, so it has an extra of its own (``toki[letta]``),
installed in an environment of its own (docs/engines.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toki.engines.base import OnPostgres
from toki.engines.models import JudgeFactory, ask_judge, rejudged
from toki.engines.models.letta import (
    BERLIN,
    CAT,
    CONTRADICTS,
    PARIS,
    ROME,
    VIOLIN,
    letta_judge,
    letta_wobbling_judge,
    line_twice,
    lines_lost,
    replaced_without_trace,
    rethink_lost,
    reverted,
    stale_within_call,
    superseded_twice,
)
from toki.errors import ConfigError
from toki.harness.engine import Detector, Scenario

PIN = "0.16.8"
# pip 23.2 (Python 3.11's bundled pip) stops on Letta's dependency tree with "Internal issue: Candidate
# is not for this requirement lxml[html-clean,html-clean]" (justext and readability-lxml spell the extra
# two ways); a current pip resolves it, so the command upgrades pip first.
EXTRA_FIX = ("pip install 'toki[letta]' in an environment of its own (letta 0.16.8 pins openai, protobuf and "
             "opentelemetry below toki[engines]'s): python -m venv .venv-letta && .venv-letta/bin/pip install "
             "-q -U pip && .venv-letta/bin/pip install -e '.[test,letta]'")

_import_lock = threading.Lock()
_letta: dict[str, Any] = {}


def _require() -> dict[str, Any]:
    """Import Letta's service layer once (about 10 s: it imports its whole server), offline."""
    with _import_lock:
        if _letta:
            return _letta
        os.environ.setdefault("LETTA_DIR", str(Path(tempfile.gettempdir()) / f"toki-letta-{os.getuid()}"))
        try:
            from importlib.metadata import version

            v = version("letta")
        except Exception:  # noqa: BLE001 - PackageNotFoundError
            raise ConfigError("Letta is not installed", fix=EXTRA_FIX) from None
        if not v.startswith("0.16."):
            raise ConfigError(f"letta {v} is installed; toki runs the Letta server's Python code, which the "
                              "letta package carries up to 0.16.x (from 0.3x on it is a different product)",
                              fix=EXTRA_FIX)
        try:
            import letta.server.db as db
            from letta.errors import ConcurrentUpdateError
            from letta.orm import Base
            from letta.schemas.agent import CreateAgent
            from letta.schemas.block import Block
            from letta.schemas.embedding_config import EmbeddingConfig
            from letta.schemas.llm_config import LLMConfig
            from letta.services.agent_manager import AgentManager
            from letta.services.block_manager import BlockManager
            from letta.services.organization_manager import OrganizationManager
            from letta.services.tool_executor.core_tool_executor import LettaCoreToolExecutor
            from letta.services.user_manager import UserManager
            from letta.settings import settings
        except ImportError as e:
            raise ConfigError(f"Letta cannot be imported ({e})", fix=EXTRA_FIX) from None
        _letta.update(version=v, db=db, Base=Base, ConcurrentUpdateError=ConcurrentUpdateError,
                      CreateAgent=CreateAgent, Block=Block, EmbeddingConfig=EmbeddingConfig, LLMConfig=LLMConfig,
                      AgentManager=AgentManager, BlockManager=BlockManager, OrganizationManager=OrganizationManager,
                      LettaCoreToolExecutor=LettaCoreToolExecutor, UserManager=UserManager, settings=settings)
        return _letta


def _block_id(n: int) -> str:
    """A fixed block id in Letta's format (``block-<uuid4>``), so that a seeded store reads the same."""
    return f"block-{uuid.UUID(int=n, version=4)}"


_SQLITE: dict[str, Any] = {"engine": None, "path": None}


def _install(eng, pg_uri: str | None) -> None:
    """Letta's module-level engine and session factory, on ``eng`` (see the module docstring)."""
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

    L = _require()
    if L["db"].engine is not eng:
        L["db"].engine = eng
        L["db"].async_session_factory = async_sessionmaker(eng, class_=AsyncSession, expire_on_commit=False,
                                                           autocommit=False, autoflush=False)
    L["settings"].pg_uri = pg_uri


def _sqlite_engine(path: Path):
    """One AsyncEngine for every SQLite file (each connection opens the file of the current run), so
    SQLAlchemy's compiled-statement cache and its dialect set-up survive from run to run: a new engine
    per run compiled Letta's queries again each time (about 1 s per request)."""
    from sqlalchemy import NullPool
    from sqlalchemy.ext.asyncio import create_async_engine

    if _SQLITE["engine"] is None:
        import aiosqlite

        async def connect():
            # as SQLAlchemy's aiosqlite dialect connects (Letta registers functions on the raw connection)
            return await aiosqlite.connect(_SQLITE["path"], check_same_thread=False)
        _SQLITE["engine"] = create_async_engine("sqlite+aiosqlite://", poolclass=NullPool, async_creator=connect)
    _SQLITE["path"] = str(path)
    _install(_SQLITE["engine"], None)
    return _SQLITE["engine"]


@dataclass
class _Handle:
    engine: "LettaEngine"
    key: str
    sa_engine: Any = None  # the SQLAlchemy AsyncEngine Letta's session factory is bound to
    agents: dict[str, str] = field(default_factory=dict)  # scenario agent name -> Letta agent id
    judge: Any = None
    judge_key: Any = None


def _run(coro):
    """A coroutine from synchronous code (open, setup, state): its own event loop."""
    return asyncio.run(coro)


class LettaEngine:
    executed = "real"
    description = ("Letta's memory blocks through its unmodified service layer: a request loads the agent's blocks "
                   "once, each memory tool edits that copy and update_memory_if_changed_async writes every label that "
                   "differs from a fresh read through BlockManager.update_block_async (SQLAlchemy's version check "
                   "around the final read and flush)")
    storage_in_location = True  # one SQLite file under the run's folder
    clean_aborts: tuple = ()
    abstains: dict[str, str] = {}

    def __init__(self, backend: str = "sqlite", *, judge: JudgeFactory | None = None,
                 rejudge_judge: JudgeFactory | None = None):
        if backend not in ("sqlite", "postgres"):
            raise ConfigError(f"unknown Letta backend {backend!r}", fix="use sqlite or postgres")
        L = _require()
        self.backend = backend
        self.name = "letta-sqlite" if backend == "sqlite" else "letta-postgres"
        self.clean_aborts = (L["ConcurrentUpdateError"],)
        self.judge_factory = judge or letta_judge()
        self.rejudge_judge = rejudge_judge or letta_wobbling_judge()
        self._schema: str | None = None
        self._lock = threading.Lock()
        self._finalizer = None
        self._observer = None
        self._agent_ids: dict[str, dict[str, str]] = {}
        self._am = self._bm = None
        self.scenarios = _scenarios(self)

    @property
    def version(self) -> str:
        return _require()["version"]

    @property
    def system(self) -> str:
        return f"Letta {self.version} on {'SQLite' if self.backend == 'sqlite' else 'PostgreSQL'}"

    # -- storage -------------------------------------------------------------------------------

    def _pg(self):
        """The engine's AsyncEngine on its run schema (Letta's tables created in it once)."""
        with self._lock:
            if self._schema is not None:
                return self._pg_engine
            server = self.server
            if not server.is_postgres:
                raise ConfigError(f"Letta on PostgreSQL needs PostgreSQL, not {server.backend}",
                                  fix="unset TOKI_DSN (the embedded PostgreSQL ships pgvector)")
            import psycopg
            from sqlalchemy import NullPool
            from sqlalchemy.ext.asyncio import create_async_engine

            from toki.db.server import create_run_schema

            with server.connect() as c:
                try:
                    c.execute("create extension if not exists vector")
                except psycopg.Error as e:
                    raise ConfigError(f"PostgreSQL at {server.where} has no usable pgvector extension (Letta's "
                                      f"passage tables need it): {str(e).strip().splitlines()[0]}",
                                      fix="install pgvector there, or unset TOKI_DSN to use the embedded "
                                          "PostgreSQL (it ships pgvector)") from None
                self._ext = c.execute("select extnamespace::regnamespace::text from pg_extension "
                                      "where extname = 'vector'").fetchone()[0]
                self._schema = create_run_schema(c, "letta")
            self._finalizer = weakref.finalize(self, _drop, server, self._schema)
            dsn, args = server.dsn, self._connect_args()

            async def connect():  # psycopg 3, async: every round trip a step the harness grants
                return await psycopg.AsyncConnection.connect(dsn, **args)
            self._pg_engine = create_async_engine("postgresql+psycopg://", poolclass=NullPool, async_creator=connect)
            _install(self._pg_engine, dsn)
            _run(_create_schema(self._pg_engine, pg=True))
            return self._pg_engine

    def _connect_args(self) -> dict:
        opts = f"-c search_path={self._schema},{self._ext} -c synchronous_commit=off"
        if self.server.is_superuser:
            opts += " -c deadlock_timeout=20ms"
        return {"options": opts, "application_name": "toki-letta"}

    def _managers(self):
        if self._am is None:
            L = _require()
            self._bm = L["BlockManager"]()
            self._am = self._bm.agent_manager  # BlockManager makes its AgentManager(block_manager=self)
        return self._am, self._bm

    def open(self, location: Path) -> _Handle:
        key = str(location)
        if self.backend == "sqlite":
            db = Path(location) / "letta.db"
            fresh = not db.exists()
            eng = _sqlite_engine(db)
            if fresh:
                _run(_create_schema(eng, pg=False))
        else:
            eng = self._pg()
            _install(eng, self.server.dsn)
        h = _Handle(self, key, eng, self._agent_ids.get(key) or {})
        if not h.agents:
            h.agents = _run(self._list_agents())
        return h

    async def _list_agents(self) -> dict[str, str]:
        am, _ = self._managers()
        actor = await _actor()
        if actor is None:
            return {}
        return {a.name: a.id for a in await am.list_agents_async(actor=actor, include_relationships=[], limit=100)}

    def close(self, h: _Handle) -> None:
        pass  # NullPool (Letta's default): every session's connection is closed when the session ends

    def discard(self, location: Path) -> None:
        self._agent_ids.pop(str(location), None)

    def shutdown(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._schema = self._finalizer = None
        if self._observer is not None:
            with contextlib.suppress(Exception):
                self._observer.close()
            self._observer = None

    def state(self, h: _Handle) -> dict:
        async def read():
            _, bm = self._managers()
            actor = await _actor()
            blocks = await bm.get_blocks_async(actor=actor, limit=1000)
            return sorted([b.label, b.value] for b in blocks)
        return {"blocks": _run(read())}

    # -- seeding and requests --------------------------------------------------------------------

    def seed(self, h: _Handle, blocks: tuple, agents: tuple[str, ...]) -> None:
        """Fresh store: Letta's default organisation and user, the blocks, one agent per name with
        the blocks that name it attached (``create_agent_async``, no tools, a stand-in LLM config)."""
        L = _require()

        async def go():
            if self.backend == "postgres":
                await _truncate(h.sa_engine)
            am, bm = self._managers()
            await L["OrganizationManager"]().create_default_organization_async()
            actor = await L["UserManager"]().create_default_actor_async()
            ids = {}
            for n, (label, value, owners) in enumerate(blocks, 1):
                b = await bm.create_or_update_block_async(L["Block"](id=_block_id(n), label=label, value=value),
                                                          actor=actor)
                ids[label] = (b.id, owners)
            out = {}
            for name in agents:
                st = await am.create_agent_async(L["CreateAgent"](
                    name=name, include_base_tools=False,
                    block_ids=[bid for bid, owners in ids.values() if name in owners],
                    llm_config=L["LLMConfig"](model="toki-stand-in", model_endpoint_type="openai",
                                              model_endpoint="http://127.0.0.1:9", context_window=8000),
                    embedding_config=L["EmbeddingConfig"](embedding_model="toki-stand-in",
                                                          embedding_endpoint_type="openai",
                                                          embedding_endpoint="http://127.0.0.1:9", embedding_dim=16)),
                    actor=actor)
                out[name] = st.id
            return out
        h.agents = _run(go())
        self._agent_ids[h.key] = h.agents

    async def request(self, h: _Handle, agent: str, plan: tuple, judge: JudgeFactory | None = None,
                      retry: bool = False) -> dict:
        """One user message to Letta agent ``agent``: load it once, then one tool call per step."""
        L = _require()
        am, bm = self._managers()
        factory = judge or self.judge_factory
        if h.judge_key != (agent, factory):
            h.judge, h.judge_key = factory(agent), (agent, factory)
        actor = await _actor()
        st = await am.get_agent_by_id_async(agent_id=h.agents[agent], actor=actor, include_relationships=["memory"])
        ex = L["LettaCoreToolExecutor"](message_manager=am.message_manager, agent_manager=am, block_manager=bm,
                                        run_manager=None, passage_manager=am.passage_manager, actor=actor)
        votes: list[dict] = []
        steps = []
        for op, label, arg in plan:
            call = _stand_in_llm(st, op, label, arg, h.judge, votes)
            reply = None
            if call is None:
                if op == "ask":
                    reply = _answer(st, label, arg)
                steps.append({"reply": reply})
                continue
            fn, args = call
            res = await ex.execute(fn, args, None, actor, st)
            if res.status == "error" and retry:  # the LLM is told the tool failed and calls it again
                res = await ex.execute(fn, args, None, actor, st)
            if res.status == "error":
                err = res.func_return
                if isinstance(err, BaseException):
                    raise err  # the stand-in ends the request with the tool's error
                raise ConfigError(f"Letta tool {fn} failed: {err}", fix="check the scenario's tool call")
            steps.append({"reply": reply, "tool": fn})
        return {"steps": steps, "votes": votes}


async def _actor():
    from letta.services.user_manager import UserManager

    try:
        return await UserManager().get_actor_by_id_async(UserManager.DEFAULT_USER_ID)
    except Exception:  # noqa: BLE001 - NoResultFound: not seeded
        return None


def _tables(pg: bool) -> list:
    """Letta's tables for the backend. Letta fixes one column type at import from its settings: the
    passages' ``embedding`` (pgvector's ``Vector`` when imported for PostgreSQL, its ``CommonVector``
    blob, SQL type BINARY, for SQLite); toki imports Letta as Letta runs on SQLite (no ``pg_uri``), so on
    PostgreSQL those tables are created with pgvector's ``Vector`` in that column, as Letta's migrations
    create them (no scenario writes a passage; the system prompt counts them)."""
    from sqlalchemy import MetaData

    Base = _require()["Base"]
    if not pg:
        return list(Base.metadata.sorted_tables)
    from letta.constants import MAX_EMBEDDING_DIM
    from pgvector.sqlalchemy import Vector

    md, out = MetaData(), []
    for t in Base.metadata.sorted_tables:  # a copy of the schema (foreign keys resolve within it)
        t = t.to_metadata(md)
        for c in t.columns:
            if type(c.type).__name__ == "CommonVector":
                c.type = Vector(MAX_EMBEDDING_DIM)
        out.append(t)
    return out


async def _create_schema(eng, pg: bool) -> None:
    tables = _tables(pg)

    def create(sc):
        for t in tables:
            t.create(sc, checkfirst=True)
    async with eng.begin() as c:
        await c.run_sync(create)
        if pg:  # what Letta's alembic migrations (not in the wheel) add: messages.sequence_id from a sequence
            from sqlalchemy import text

            await c.execute(text("CREATE SEQUENCE IF NOT EXISTS message_sequence_id_seq"))
            await c.execute(text("ALTER TABLE messages ALTER COLUMN sequence_id "
                                 "SET DEFAULT nextval('message_sequence_id_seq')"))


async def _truncate(eng) -> None:
    from sqlalchemy import text

    names = ", ".join(f'"{t.name}"' for t in _tables(True))
    async with eng.begin() as c:
        await c.execute(text(f"TRUNCATE {names} CASCADE"))


def _drop(server, schema: str) -> None:
    from toki.db.server import drop_schema
    from toki.harness.controller import uncontrolled

    with uncontrolled(), contextlib.suppress(Exception):
        drop_schema(server, schema)


# -- the stand-in LLM: which tool call a step makes, from the in-context memory -------------------------

def _lines(st, label: str) -> list[str]:
    return str(st.memory.get_block(label).value).split("\n")


def _answer(st, label: str, topic: str):
    return next((ln for ln in _lines(st, label) if topic in ln), None)


def _stand_in_llm(st, op: str, label: str, arg, judge, votes: list[dict]):
    """(tool name, arguments), or None for a step that calls no memory tool."""
    if op == "remember":  # core_memory_replace over a contradicted line, else core_memory_append
        lines = _lines(st, label)
        hit = next((ln for ln in lines if (ln, arg) in CONTRADICTS), None)
        if hit is not None:
            if ask_judge(judge, hit, arg, votes):
                return "core_memory_replace", {"label": label, "old_content": hit, "new_content": arg}
            return None
        if arg in lines:
            return None
        return "core_memory_append", {"label": label, "content": arg}
    if op == "note":
        return "core_memory_append", {"label": label, "content": arg}
    if op == "rethink":  # memory_rethink: the whole block rewritten from the in-context copy
        return "memory_rethink", {"label": label,
                                  "new_memory": "Summary: " + " ".join(ln for ln in _lines(st, label) if ln)}
    if op == "patch":  # memory_apply_patch over several blocks: arg = ((label, old, new), ...)
        body = []
        for lb, old, new in arg:
            body += [f"*** Update Block: {lb}", "@@", f"-{old}", f"+{new}"]
        return "memory_apply_patch", {"label": label, "patch": "\n".join(body)}
    if op == "ask":
        return None
    raise ConfigError(f"unknown Letta message {op!r}", fix="use remember, note, rethink, patch or ask")


# -- detectors only the real engine needs ---------------------------------------------------------------

def split_read(agent: str, labels: tuple[str, str], old: str, new: str) -> Detector:
    """N2: one request's in-context memory holds the new value in one block and the old in the other."""
    def check(state, errors, observed):
        res = (observed or {}).get(agent)
        if not res:
            return []
        replies = [s["reply"] for s in res["steps"]]
        says = [("new" if r and new in r else "old" if r and old in r else None) for r in replies]
        if len(set(says)) > 1:
            return [(f"agent {agent}'s request read block {labels[0]!r} saying {replies[0]!r} and block {labels[1]!r} "
                    f"saying {replies[1]!r}: memory_apply_patch wrote the two blocks in two transactions "
                    "(update_memory_if_changed_async per action, update_block_async per label) and the request "
                    "loaded its memory between them")]
        return []
    return Detector("N2", check, observes=True)


# -- scenarios --------------------------------------------------------------------------------------------

def _scenarios(engine: LettaEngine) -> dict[str, Scenario]:
    def setup_blocks(*blocks):
        def setup(h):  # the scenario's agents only: each block update rebuilds every attached agent's prompt
            engine.seed(h, blocks, tuple(sorted({a for _, _, owners in blocks for a in owners})))
        return setup

    def calls(plan: dict[str, tuple], judge: JudgeFactory | None = None, retry: bool = False):
        async def call(h, agent):
            return await engine.request(h, agent, plan[agent], judge, retry)
        return call

    def human(*agents):
        return ("human", BERLIN, agents)
    sc = [
        Scenario("two-writers-one-block",
                 "the reported Letta race 'two writers to one block get a conflict error from its version check': "
                 "agents A and B share block 'human' and each remembers a fact (core_memory_append). When their "
                 "update_block_async sessions overlap, the later flush matches 0 rows and raises "
                 "ConcurrentUpdateError (a clean abort; the request ends with the tool error). When only their "
                 "requests overlap, the later flush reads the new version and writes its request-start copy",
                 ("A", "B"), calls({"A": (("remember", "human", CAT),), "B": (("remember", "human", VIOLIN),)}),
                 setup_blocks(human("A", "B")), False, (lines_lost("human", CAT, VIOLIN),), ("lost-update",)),
        Scenario("conflict-retry",
                 "as two-writers-one-block, but the stand-in LLM does what Letta's error tells it ('Please retry "
                 "your request'): it calls the tool again in the same request, on the same in-context memory "
                 "(Letta does not reload an agent's memory between the steps of a request)",
                 ("A", "B"), calls({"A": (("remember", "human", CAT),), "B": (("remember", "human", VIOLIN),)},
                                   retry=True),
                 setup_blocks(human("A", "B")), False, (lines_lost("human", CAT, VIOLIN),), ("lost-update",)),
        Scenario("shared-block-stale-read",
                 "the reported Letta race 'a shared block change is not seen until the agent's next step': agent A "
                 "answers 'where does Alice live?' in two steps of one request while agent S remembers that Alice "
                 "moved to Rome in the shared block 'human'. Letta loads the memory once per request, so both "
                 "steps answer from one copy (a snapshot, which a serial order explains)",
                 ("A", "S"), calls({"A": (("ask", "human", "lives"), ("ask", "human", "lives")),
                                    "S": (("remember", "human", ROME),)}),
                 setup_blocks(human("A", "S")), False, (stale_within_call("A"),), ("N2",), observe=True),
        Scenario("patch-two-blocks",
                 "agent S moves Alice from Berlin to Rome in two blocks with one memory_apply_patch call (Update "
                 "Block: human, Update Block: residence); agent A's request loads its memory and answers from "
                 "both blocks. Each action of the patch is flushed by its own update_memory_if_changed_async",
                 ("A", "S"), calls({"A": (("ask", "human", "lives"), ("ask", "residence", "home")),
                                    "S": (("patch", "human", (("human", BERLIN, ROME),
                                                              ("residence", "Alice's home: Berlin.",
                                                               "Alice's home: Rome."))),)}),
                 setup_blocks(human("A", "S"), ("residence", "Alice's home: Berlin.", ("A", "S"))), False,
                 (split_read("A", ("human", "residence"), "Berlin", "Rome"),), ("N2",), observe=True),
        Scenario("stale-write-back",
                 "agent A appends a note to its own block 'notes' while agent S replaces Berlin by Rome in the shared "
                 "block 'human': A's update_memory_if_changed_async compares its whole request-start memory with a "
                 "fresh read and writes back the stale 'human' too",
                 ("A", "S"), calls({"A": (("note", "notes", "Asked about the move."),),
                                    "S": (("remember", "human", ROME),)}),
                 setup_blocks(human("A", "S"), ("notes", "Notes:", ("A",))), False,
                 (reverted("human", BERLIN, ROME),), ("lost-update",)),
        Scenario("consolidation-overwrites",
                 "the reported race 'a long LLM consolidation writes back over memories added meanwhile (P4)', on "
                 "Letta: agent C rethinks the shared block (memory_rethink from its request-start copy) while agent "
                 "A remembers a new fact in it",
                 ("C", "A"), calls({"C": (("rethink", "human", ""),), "A": (("remember", "human", CAT),)}),
                 setup_blocks(human("C", "A")), False, (lines_lost("human", CAT), rethink_lost("human")), ("lost-update",)),
        Scenario("remember-overwrites",
                 "one agent remembers that Alice moved to Rome: core_memory_replace rewrites the line in place, and "
                 "the block keeps only its latest value (block_history is written only by explicit checkpoints)",
                 ("S",), calls({"S": (("remember", "human", ROME),)}), setup_blocks(human("S")), False,
                 (replaced_without_trace("human", BERLIN),), ("N3",)),
        Scenario("double-supersede",
                 "agents A and B share block 'human' (Alice lives in Berlin) and remember that she moved, to Rome "
                 "and to Paris: each replaces the Berlin line in its request-start copy (core_memory_replace)",
                 ("A", "B"), calls({"A": (("remember", "human", ROME),), "B": (("remember", "human", PARIS),)}),
                 setup_blocks(human("A", "B")), False, (superseded_twice("human", BERLIN),), ("double-supersede",),
                 observe=True),
        Scenario("duplicate-remember",
                 "agents A and B share block 'human' and both remember 'Alice has a cat' (core_memory_append "
                 "unless the line is already in the in-context copy)",
                 ("A", "B"), calls({"A": (("remember", "human", CAT),), "B": (("remember", "human", CAT),)}),
                 setup_blocks(human("A", "B")), False, (line_twice("human"),), ("duplicate-insert",)),
        Scenario("rejudge",
                 "two agents remember that Alice moved to Rome; each asks its LLM stand-in (a temperature-1 fixture, "
                 "p = 0.5) whether the stored 'lives in Berlin' should be replaced; Letta keeps each agent's tool "
                 "calls in that agent's messages, not a log keyed by the read set that another agent consults",
                 ("A", "B"), calls({"A": (("remember", "human", ROME),), "B": (("remember", "human", ROME),)},
                                   engine.rejudge_judge),
                 setup_blocks(human("A", "B")), False, (rejudged(),), ("N1",), observe=True),
    ]
    return {s.name: s for s in sc}


class LettaPostgresEngine(OnPostgres, LettaEngine):
    """Letta on a PostgreSQL server (toki's embedded one by default, or ``--dsn``): one run schema per
    engine with Letta's tables, truncated and seeded again for every run; a lock wait is seen through
    :attr:`pg_observer`."""

    storage_in_location = False

    def __init__(self, **kw):
        LettaEngine.__init__(self, "postgres", **kw)


def letta_sqlite() -> LettaEngine:
    return LettaEngine("sqlite")


def letta_postgres() -> LettaPostgresEngine:
    return LettaPostgresEngine()
