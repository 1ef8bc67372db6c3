"""mem0 (PyPI ``mem0ai`` 2.x), real and unmodified, offline, on PostgreSQL+pgvector and SQLite.

What runs is mem0's own ``Memory`` (``mem0.memory.main``): its ``add``, ``update``, ``delete``,
``get_all`` and ``history``, its pgvector store (``mem0.vector_stores.pgvector.PGVector``: psycopg 3
through a psycopg_pool pool, one pooled connection per call, each call commits) and its SQLite
history (``mem0.memory.storage.SQLiteManager``: one sqlite3 connection per ``Memory``, each method
``BEGIN ... COMMIT`` under a ``threading.Lock``). The harness intercepts psycopg and sqlite3 at the
driver, so every statement either store sends is a granted step; a statement that waits on a row
lock another agent's open transaction holds is seen through :attr:`Mem0Engine.pg_observer`.

The write paths under test (mem0 2.2.1):

- ``add()`` is ADD-only: read the session's last messages (SQLite), embed the messages, similarity
  search of the user's memories (PostgreSQL, top 10), ONE LLM extraction call, an MD5 duplicate
  check against the rows that search returned, insert (PostgreSQL), history rows (SQLite), save
  the messages (SQLite). Nothing spans the search and the insert.
- ``update()`` reads the memory, then writes its vector and payload without checking what it
  read, then writes a history row whose old value is the one it read.
- ``delete()`` reads the memory, deletes it, then writes a DELETE history row with the value it read.

What toki plugs in, through mem0's own extension points and configuration:

- an LLM: :class:`ScriptedLLM`, registered in mem0's ``LlmFactory`` (``register_provider``), a
  deterministic stand-in that answers the extraction prompt with the JSON mem0 expects
  (``{"memory": [{"id": "0", "text": ...}]}``) for the new messages in the prompt
  (:data:`EXTRACTIONS`). mem0 2.x asks no LLM to decide between memories (there is no
  ADD/UPDATE/DELETE judge any more), so no :mod:`toki.judges` fixture is consulted;
- an embedder: :class:`HashEmbedder` (deterministic unit vectors of :data:`DIM` dimensions from a
  hash of the text) as an entry of mem0's ``EmbedderFactory``; mem0 is told the dimension;
- mem0's config validators accept only the provider names they list, so the two configs are
  built with pydantic's ``model_construct`` (the factories themselves take any registered name);
- storage: the embedded PostgreSQL 18 of :func:`toki.db.server.resolve` (it ships pgvector; toki
  creates the extension once, mem0 re-checks it); one run schema per engine (tagged for
  ``toki db gc``) and one collection table per trial in it, so trials never see each other; the
  SQLite history file (``history_db_path``) under the trial's directory. Every ``Memory`` gets
  its connections from one psycopg_pool pool through mem0's documented ``connection_pool``
  option, instead of opening a pool per ``Memory`` (the same connections, handed out per call
  the same way; it only spares a connection set-up per handle).

Set before mem0 is imported (:func:`_require`): ``MEM0_TELEMETRY=False`` (otherwise mem0 sends
PostHog events and fetches feature flags over the network) and ``MEM0_DIR`` under a toki temp
directory (otherwise it writes ``~/.mem0``); if something imported mem0 first with telemetry on,
toki turns mem0's two telemetry flags off (with a warning) before any ``Memory`` is made.

spaCy is kept out: mem0 then skips entity extraction
(so the entity store and its ``linked_memory_ids`` read-modify-write are never reached) and
lemmatisation; toki also pins mem0's spaCy loader to "unavailable" so an installed spaCy does not
make mem0 download a model. One scenario, ``reported-linked-ids-p4``, is about that entity store:
while its calls run, mem0's spaCy model slot holds :class:`QuotedTermsNLP`, a deterministic
stand-in under which mem0's own ``extract_entities`` finds the quoted terms of a text.

Each agent has its own ``Memory`` (``shared=False``: separate workers or processes on one store);
``*-shared`` scenarios share one ``Memory`` between the agent threads, as mem0's REST server does,
with its SQLite lock replaced by an instrumented lock (:meth:`Mem0Engine.prepare`).

The state is what mem0's public API answers: ``get_all`` for the user and ``history`` of every
memory id the scenario knows, normalised: a memory is named by the text it was added with (no
uuids), history rows are (event, old value, new value, deleted) without timestamps, and a
memory's history is a sorted multiset (mem0 orders history by timestamps of one-second
resolution, so its order is not a property of the interleaving). The entity-store scenario also
reads ``Memory.entity_store.list`` (each entity with the memories its ``linked_memory_ids`` name).

Row locks matter even though every call commits: ``update()`` sends its two UPDATEs and then
commits, so another agent's UPDATE or DELETE of the same row waits on the open transaction
(about a third of the interleavings of ``update-update``); the observer sees it. A DELETE never
comes back through an update here (pgvector's update is an UPDATE, which affects no deleted
row), so ``update-vs-delete`` shows up in the history, not as a resurrection.

mem0 1.0.x (the ADD/UPDATE/DELETE/NONE judge) cannot share an environment with 2.x (one import
name): it is not run here; :mod:`toki.engines.models.mem0_v2` models it.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import math
import os
import re
import sys
import tempfile
import threading
import weakref
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toki.engines.base import OnPostgres
from toki.harness.engine import Detector, Scenario
from toki.harness.locks import InstrumentedLock
from toki.errors import ConfigError

USER = "alice"
DIM = 16
LLM_PROVIDER = "toki_scripted"
EMBEDDER_PROVIDER = "toki_hash"

# What the stand-in LLM extracts from each user message (mem0's extraction output, text only).
EXTRACTIONS: dict[str, list[str]] = {
    "I love sushi.": ["User loves sushi"],
    "I live in Berlin.": ["User lives in Berlin"],
    "I moved to Rome.": ["User lives in Rome"],
    "I moved to Paris.": ["User lives in Paris"],
    "I love Chinese food.": ["User loves Chinese food"],
    "I hate Chinese food.": ["User hates Chinese food"],
    'I am reading "Dune".': ['User is reading "Dune"'],
    'I finished "Dune".': ['User finished "Dune"'],
    'I loved "Dune".': ['User loved "Dune"'],
}

# A recorded workload (toki record) adds claims as "Remember: CLAIM." and the stand-in extracts CLAIM.
REMEMBER = "Remember: "

_setup_lock = threading.Lock()
_registered = False


def _require():
    """Import mem0 with telemetry off and its directory under a toki temp dir; register the stand-ins."""
    global _registered
    if "mem0" not in sys.modules:
        # mem0 reads both at import time: telemetry decides whether it contacts PostHog, MEM0_DIR
        # where it writes its config (default ~/.mem0).
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ.setdefault("MEM0_DIR", str(Path(tempfile.gettempdir()) / f"toki-mem0-{os.getuid()}"))
    try:
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise ConfigError("mem0's pgvector store needs psycopg_pool, which is not installed (without it mem0 "
                          "falls back to psycopg2 and fails to import)",
                          fix="pip install 'psycopg-pool>=3.2' (part of toki[engines])") from None
    try:
        import mem0
        from mem0.memory import telemetry
    except ImportError as e:
        raise ConfigError(f"mem0 cannot be imported ({e})",
                          fix="pip install 'toki[engines]' (or pip install mem0ai)") from None
    from mem0.memory import main as mem0_main

    if telemetry.MEM0_TELEMETRY or mem0_main.MEM0_TELEMETRY:
        # Something imported mem0 before toki with telemetry on (mem0 reads MEM0_TELEMETRY once, at
        # import). mem0 consults these two flags at each call, so turning them off here keeps every
        # later call offline; what the import itself did (a user id under MEM0_DIR) stays.
        logging.getLogger(__name__).warning(
            "mem0 was imported with telemetry on before toki turned it off; toki turns it off now "
            "(set MEM0_TELEMETRY=False in the environment to avoid the warning)")
        telemetry.MEM0_TELEMETRY = mem0_main.MEM0_TELEMETRY = False
    with _setup_lock:
        if not _registered:
            from mem0.configs.llms.base import BaseLlmConfig
            from mem0.utils import spacy_models
            from mem0.utils.factory import EmbedderFactory, LlmFactory

            LlmFactory.register_provider(LLM_PROVIDER, f"{__name__}.ScriptedLLM", BaseLlmConfig)
            EmbedderFactory.provider_to_class[EMBEDDER_PROVIDER] = f"{__name__}.HashEmbedder"
            # mem0's own "spaCy unavailable" state: an installed spaCy would otherwise make mem0
            # download en_core_web_sm (network) and change what add() does (entity linking).
            spacy_models._load_failed_full = spacy_models._load_failed_lemma = True
            _registered = True
    return mem0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mem0ai")
    except PackageNotFoundError:
        raise ConfigError("mem0 is not installed", fix="pip install 'toki[engines]' (or pip install mem0ai)") from None


# -- the stand-ins, as mem0 classes ----------------------------------------------------------

def _new_messages(prompt: str) -> list[str]:
    """The user messages of the prompt's "New Messages" section (not the history or the memories)."""
    if "## New Messages" not in prompt:
        return []
    part = prompt.split("## New Messages", 1)[1].split("\n## ", 1)[0]
    return [line[len("user: "):].strip() for line in part.splitlines() if line.startswith("user: ")]


def _make_llm_class():
    from mem0.llms.base import LLMBase

    class ScriptedLLM(LLMBase):
        """mem0's extraction LLM, played deterministically from :data:`EXTRACTIONS`."""

        def generate_response(self, messages, response_format=None, tools=None, tool_choice="auto", **kwargs):
            prompt = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
            texts = []
            for msg in _new_messages(prompt):
                if msg.startswith(REMEMBER) and msg.endswith("."):  # a recorded workload's claim, verbatim
                    texts.append(msg[len(REMEMBER):-1])
                    continue
                if msg not in EXTRACTIONS:
                    raise ConfigError(f"the scripted mem0 LLM has no extraction for {msg!r}",
                                      fix="add it to toki.engines.mem0_engine.EXTRACTIONS")
                texts.extend(EXTRACTIONS[msg])
            return json.dumps({"memory": [{"id": str(i), "text": t} for i, t in enumerate(texts)]})

    return ScriptedLLM


def _make_embedder_class():
    from mem0.embeddings.base import EmbeddingBase

    class HashEmbedder(EmbeddingBase):
        """Deterministic unit vectors from a hash of the text: stable across runs and processes."""

        def embed(self, text, memory_action=None):
            h = hashlib.sha256(str(text).encode()).digest()
            v = [(b - 127.5) for b in h[:DIM]]
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            return [x / n for x in v]

    return HashEmbedder


class _Doc:
    """What mem0's entity extraction reads of a spaCy ``Doc``, for a text with no tokens tagged:
    no named entities, no tokens, no noun chunks; only ``text`` (mem0 finds quoted terms in it)."""

    ents: tuple = ()
    noun_chunks: tuple = ()

    def __init__(self, text: str):
        self.text = text

    def __iter__(self):
        return iter(())


class QuotedTermsNLP:
    """A deterministic stand-in for spaCy's ``en_core_web_sm`` in mem0's model slot
    (``mem0.utils.spacy_models._nlp_full``): with it mem0's own ``extract_entities`` finds exactly
    the quoted terms of a text (its QUOTED rule), so ``add()`` reaches the entity store."""

    def __call__(self, text: str) -> _Doc:
        return _Doc(text)

    def pipe(self, texts, batch_size: int = 32):
        return (_Doc(t) for t in texts)


_nlp_users = 0
_nlp_lock = threading.Lock()


@contextlib.contextmanager
def entity_extraction():
    """mem0 with :class:`QuotedTermsNLP` as its spaCy model while any call inside is running
    (only the entity-store scenario; everywhere else mem0 runs as without spaCy)."""
    global _nlp_users
    from mem0.utils import spacy_models as sm

    with _nlp_lock:
        _nlp_users += 1
        if _nlp_users == 1:
            sm._nlp_full, sm._load_failed_full = QuotedTermsNLP(), False
    try:
        yield
    finally:
        with _nlp_lock:
            _nlp_users -= 1
            if _nlp_users == 0:
                sm._nlp_full, sm._load_failed_full = None, True


def __getattr__(name):  # mem0's factories import the classes by dotted path; mem0 is optional for toki
    if name == "ScriptedLLM":
        cls = _make_llm_class()
    elif name == "HashEmbedder":
        cls = _make_embedder_class()
    else:
        raise AttributeError(name)
    globals()[name] = cls
    return cls


def _release(pool, server, schema: str | None) -> None:
    from toki.db.server import drop_schema
    from toki.harness.controller import uncontrolled

    # A finalizer: the garbage collector may run it on an agent thread of a later, unrelated run.
    with uncontrolled():
        with contextlib.suppress(Exception):
            pool.close(timeout=2)
        if schema is not None:  # a recording's shared schema is the recording's to drop
            drop_schema(server, schema)


# -- the engine -------------------------------------------------------------------------------

class EnginePool:
    """The engine's psycopg_pool pool as mem0's ``connection_pool`` option sees it.

    ``PGVector.__del__`` closes the pool it was given; this pool outlives every ``Memory`` (the
    engine closes it in :meth:`Mem0Engine.shutdown`), so closing it is left to the engine."""

    def __init__(self, pool):
        self.pool = pool

    def connection(self, *args, **kwargs):
        return self.pool.connection(*args, **kwargs)

    def close(self, *args, **kwargs) -> None:
        pass

    def __deepcopy__(self, memo):  # mem0 deep-copies its vector-store config for the entity store
        return self


@dataclass
class Mem0Handle:
    mem: Any  # mem0.Memory
    key: str  # the trial's location
    ids: dict[str, str] = field(default_factory=dict)  # scenario's name for a memory -> its mem0 id


class Mem0Engine(OnPostgres):
    name = "mem0"
    executed = "real"
    storage_in_location = False  # the vectors live in a PostgreSQL table per trial, the history under location
    # Why a verdict column has no scenario (the verdicts experiment prints it).
    abstains = {
        "N1": "mem0 2.x asks no LLM to choose between memories (add is ADD-only): there is no adjudication to replay",
        "N2": "no mem0 2.x call reads a belief across several statements that a writer could split",
        "double-supersede": "mem0 2.x never supersedes: contradicting facts both stay current by design "
                            "(both-current)",
    }
    description = ("mem0 2.x, its unmodified Memory (ADD-only add, update, delete, history) on PostgreSQL+pgvector "
                   "and a SQLite history, with a scripted extraction LLM and a hash embedder")

    def __init__(self, server=None, *, dsn: str | None = None, schema: str | None = None):
        self._server, self._dsn = server, dsn
        self._schema: str | None = schema
        self._shared_schema = schema is not None  # toki record: every process on one schema, dropped by the parent
        self._pool = None
        self._finalizer = None
        self._observer = None
        self._tables: dict[str, str] = {}
        self._ids: dict[str, dict[str, str]] = {}
        self._entity_keys: set[str] = set()  # trials whose scenario links entities
        self._n = itertools.count(1)
        self._lock = threading.Lock()
        self.scenarios = _scenarios(self)

    @property
    def version(self) -> str:
        return _version()

    @property
    def system(self) -> str:
        return f"mem0 {_version()}"  # what the row stands for (verdict tables): the paper's "mem0 v3"

    def _storage(self):
        """The engine's run schema (pgvector created once) and its connection pool."""
        with self._lock:
            if self._pool is not None:
                return self._pool
            import psycopg
            from psycopg_pool import ConnectionPool

            from toki.db.server import create_run_schema

            server = self.server
            if not server.is_postgres:
                raise ConfigError(f"mem0's pgvector store needs PostgreSQL, not {server.backend}",
                                  fix="unset TOKI_DSN (the embedded PostgreSQL ships pgvector) or point it at "
                                      "a PostgreSQL server with pgvector")
            with server.connect() as c:
                try:
                    c.execute("create extension if not exists vector")
                except psycopg.Error as e:
                    raise ConfigError(f"PostgreSQL at {server.where} has no usable pgvector extension: "
                                      f"{str(e).strip().splitlines()[0]}",
                                      fix="install pgvector there, or unset TOKI_DSN to use the embedded "
                                          "PostgreSQL (it ships pgvector)") from None
                ext_schema = c.execute("select extnamespace::regnamespace::text from pg_extension "
                                       "where extname = 'vector'").fetchone()[0]
                if self._shared_schema:
                    c.execute(f'create schema if not exists "{self._schema}"')
                else:
                    self._schema = create_run_schema(c, "mem0")
            from psycopg.conninfo import make_conninfo

            opts = [f"-c search_path={self._schema},{ext_schema}", "-c synchronous_commit=off"]
            if server.is_superuser:
                opts.append("-c deadlock_timeout=20ms")
            conninfo = make_conninfo(server.dsn, options=" ".join(opts), application_name="toki-mem0")
            # Agents hold at most one connection each between steps; a few spare avoid waiting for
            # the pool's worker to open one in the middle of a run.
            self._pool = ConnectionPool(conninfo, min_size=4, max_size=16, open=True, name="toki-mem0")
            self._pool.wait(timeout=30)
            self._finalizer = weakref.finalize(self, _release, self._pool, server,
                                               None if self._shared_schema else self._schema)
            return self._pool

    def _config(self, table: str, location: Path):
        from mem0.configs.base import MemoryConfig
        from mem0.embeddings.configs import EmbedderConfig
        from mem0.llms.configs import LlmConfig
        from mem0.vector_stores.configs import VectorStoreConfig

        return MemoryConfig(
            vector_store=VectorStoreConfig(provider="pgvector", config={
                "collection_name": table, "embedding_model_dims": DIM, "connection_pool": EnginePool(self._storage())}),
            llm=LlmConfig.model_construct(provider=LLM_PROVIDER, config={}),
            embedder=EmbedderConfig.model_construct(provider=EMBEDDER_PROVIDER, config={"embedding_dims": DIM}),
            history_db_path=str(Path(location) / "history.db"))

    def open(self, location: Path) -> Mem0Handle:
        mem0 = _require()
        key = str(location)
        with self._lock:
            table = self._tables.get(key)
            if table is None:
                table = self._tables[key] = f"mem_{next(self._n)}"
        m = mem0.Memory(self._config(table, Path(location)))
        # The collection (table and indexes) is created here, before any agent runs: mem0 creates
        # it lazily on a Memory's first call, as DDL no concurrent scenario is about.
        m.vector_store._ensure_collection()
        if key in self._entity_keys:
            m.entity_store._ensure_collection()  # likewise for the entity store, which setup created
        return Mem0Handle(m, key, self._ids.setdefault(key, {}))

    def prepare(self, h: Mem0Handle, controller) -> None:
        """The history's threading.Lock, made visible to the controller (it matters for shared handles)."""
        h.mem.db._lock = InstrumentedLock(f"SQLiteManager._lock#{id(h.mem.db) % 1000:03d}", reentrant=False)

    def close(self, h: Mem0Handle) -> None:
        h.mem.close()

    def discard(self, location: Path) -> None:
        key = str(location)
        self._ids.pop(key, None)
        self._entity_keys.discard(key)
        table = self._tables.pop(key, None)
        if table is None or self._pool is None:
            return
        with contextlib.suppress(Exception), self._pool.connection() as c:
            c.execute(f'drop table if exists "{table}"')
            c.execute(f'drop table if exists "{table}_entities"')

    def shutdown(self) -> None:
        """Close the pool and the observer, and drop the run schema (also done at exit)."""
        if self._finalizer is not None:
            self._finalizer()
        self._pool = self._schema = self._finalizer = None
        if self._observer is not None:
            with contextlib.suppress(Exception):
                self._observer.close()
            self._observer = None

    # -- toki record: a client per worker thread on one store shared by processes ---------------
    record_multi_valued = True  # ADD-only: contradicting claims all stay current, by design
    def _record_schema(self, store: str) -> None:
        from toki.db.server import SCHEMA_PREFIX

        name = f"{SCHEMA_PREFIX}rec_" + re.sub(r"[^a-z0-9_]", "_", Path(store).name.lower())[:24]
        with self._lock:
            if self._pool is None and not self._shared_schema:
                self._schema, self._shared_schema = name, True

    def record_setup(self, store: str) -> None:
        """Before any worker starts: the recording's schema, collection and history file, made once."""
        self.record_client(store).close()

    def record_client(self, store: str) -> "Mem0Client":
        """A memory client for ``toki record``: every process's engine uses the schema named after
        the store and opens the same collection and the same history file under it."""
        self._record_schema(store)
        return Mem0Client(self.open(Path(store)))

    def record_cleanup(self, store: str) -> None:
        from toki.db.server import drop_schema

        schema = self._schema
        self.shutdown()
        if schema is not None and self._shared_schema:
            with contextlib.suppress(Exception):
                drop_schema(self.server, schema)

    def memory_history(self, scenario: str, outcome, returned: dict | None = None) -> dict | None:
        """The trial as memory micro-ops (toki.record.trial_history): the add scenarios from
        what each add returned (:func:`_add_history`), the update/delete ones from mem0's history
        rows (:func:`_update_history`)."""
        sc = self.scenarios.get(scenario)
        plan = getattr(getattr(sc, "call", None), "plan", None)
        state = outcome.state
        if not plan or not isinstance(state, dict) or "memories" not in state:
            return None
        kinds = {p[0] for p in plan.values()}
        if kinds == {"add"}:
            return _add_history(plan, state, outcome, returned or {})
        return _update_history(plan, state, outcome)

    def state(self, h: Mem0Handle) -> dict:
        mem = h.mem
        rows = mem.get_all(filters={"user_id": USER}, top_k=1000)["results"]
        current = {r["id"]: r["memory"] for r in rows}
        ids = set(current) | set(h.ids.values())
        memories, history, labels = [], [], {}
        for mid in ids:
            hist = mem.history(mid)
            added = next((r["new_memory"] for r in hist if r["event"] == "ADD"), None)
            label = labels[mid] = added or current.get(mid) or "<unknown>"
            if mid in current:
                memories.append([label, current[mid]])
            events = sorted(([r["event"], r["old_memory"], r["new_memory"], bool(r["is_deleted"])] for r in hist),
                            key=canonical_key)
            history.append([label, events])
        out = {"memories": sorted(memories, key=canonical_key), "history": sorted(history, key=canonical_key)}
        if h.key in self._entity_keys:
            listed = mem.entity_store.list(filters={"user_id": USER}, top_k=1000)
            rows = listed[0] if listed and isinstance(listed[0], list) else listed
            out["entities"] = sorted(([r.payload.get("data"), sorted(labels.get(i, "<unknown>") for i in
                                                                     r.payload.get("linked_memory_ids", []))]
                                      for r in rows), key=canonical_key)
        return out


# -- a trial as a memory history (toki.record.trial_history) -----------------------------------

def _added_texts(state: dict) -> list[str]:
    """The text of every ADD row, one per memory (a text inserted twice shows twice)."""
    return [e[2] for _, events in state["history"] for e in events if e[0] == "ADD"]


def _add_history(plan: dict, state: dict, outcome, returned: dict) -> dict | None:
    """The add-only scenarios: the user's memories are one multi-valued slot, a claim a memory's
    text. An add that inserted returns the memories it inserted (what says which call wrote which
    copy: the state names a memory by its text only); a completed add that inserted nothing was
    dropped by the MD5 check, which found its text in the search's rows: a current read of its
    text (in these scenarios the only memory the store can hold then). The entity scenario adds
    the entity's ``linked_memory_ids`` as the slot ``entity/NAME``: every add appends its
    memory's label, and the final read is the list the entity store holds. The final reads are
    current reads only: the state names memories by text with no insertion order (and sorts the
    linked list), so a history read would assert an order of two adds the state does not hold
    (mem0's store is ADD-only: a slot's history is its current list)."""
    slot = USER
    texts = {a: [t for t in EXTRACTIONS[m]] for a, (_, m) in plan.items()}
    planned = {t for ts in texts.values() for t in ts}
    seeds = [t for t in _added_texts(state) if t not in planned]
    entities = {data: labels for data, labels in state.get("entities", [])}
    agents: dict[str, list] = {}
    for agent in plan:
        if agent in outcome.completed:
            if not isinstance(returned.get(agent), list):
                return None  # the call's return does not say what it inserted
            got = returned[agent]
            dropped = [t for t in texts[agent] if t not in got]
            mops = [["current", slot, dropped]] if dropped else []
        else:
            got, mops = texts[agent], []
        mops += [["add", slot, t] for t in got]
        for name in entities:
            mops += [["add", f"entity/{name}", t] for t in got if f'"{name}"' in t]
        agents[agent] = mops
    final = [["current", slot, sorted(t for _, t in state["memories"])]]
    setup = [["add", slot, t] for t in seeds]
    for name, labels in sorted(entities.items()):
        setup += [["add", f"entity/{name}", t] for t in seeds if f'"{name}"' in t]
        final += [["current", f"entity/{name}", sorted(labels)]]
    return {"setup": setup, "agents": agents, "final": final,
            "multi_valued": [slot] + [f"entity/{n}" for n in entities]}


def _update_history(plan: dict, state: dict, outcome) -> dict | None:
    """The update/delete scenarios: the seeded memory is one single-valued slot named by the
    text it was added with, a claim the text it holds. mem0's history rows say which call did
    what: an UPDATE row (old, new) is the update to ``new`` (each agent's new text is its own),
    which read ``old`` and replaced it; a DELETE row (old) is the delete, which read ``old`` and
    removed it. A call with no row wrote nothing (it failed, or its write was lost: the final
    reads say which). The final reads: the memory's text if ``get_all`` still returns it, and
    the texts it held (the ADD's, then each UPDATE's new text, following old -> new; two UPDATEs
    from one old value in agent order: the state's history has no order finer than that)."""
    labels = {p[1] for p in plan.values()}
    if len(labels) != 1:
        return None
    label = labels.pop()
    slot = f"{USER}/{label}"
    events = next((ev for lab, ev in state["history"] if lab == label), None)
    if events is None:
        return None
    agents: dict[str, list] = {}
    for agent, (op, _, *new) in plan.items():
        if op == "update":
            row = next((e for e in events if e[0] == "UPDATE" and e[2] == new[0]), None)
            agents[agent] = ([["current", slot, [row[1]]], ["retract", slot, row[1]], ["add", slot, row[2]]]
                             if row else [["current", slot, [label]], ["retract", slot, label], ["add", slot, new[0]]])
        else:
            row = next((e for e in events if e[0] == "DELETE"), None)
            old = row[1] if row else label
            agents[agent] = [["current", slot, [old]], ["retract", slot, old]]
    held, ups = [label], [e for e in events if e[0] == "UPDATE"]
    by_agent = [p[2] for p in plan.values() if p[0] == "update"]
    ups.sort(key=lambda e: by_agent.index(e[2]) if e[2] in by_agent else len(by_agent))
    while ups:
        nxt = next((e for e in ups if e[1] == held[-1]), ups[0])
        ups.remove(nxt)
        held.append(nxt[2])
    now = [t for lab, t in state["memories"] if lab == label]
    return {"setup": [["add", slot, label]], "agents": agents,
            "final": [["current", slot, now], ["history", slot, held]]}


class Mem0Client:
    """mem0's public API as memory micro-ops: a slot is a mem0 user, a claim a memory's text.

    mem0 2.x is ADD-only: ``add`` asks mem0 to remember the claim (its MD5 duplicate check against
    the memories a similarity search returns decides whether it inserts); ``current`` and
    ``history`` read the user's memories, oldest first (mem0 never supersedes, so a slot's audit
    history and its current claims are the same list: a claim inserted twice shows twice)."""

    def __init__(self, handle: Mem0Handle):
        self.h = handle

    def add(self, slot: str, claim: str) -> None:
        self.h.mem.add([{"role": "user", "content": f"{REMEMBER}{claim}."}], user_id=slot)

    def _claims(self, slot: str) -> list[str]:
        rows = self.h.mem.get_all(filters={"user_id": slot}, top_k=10000)["results"]
        rows.sort(key=lambda r: (str(r.get("created_at") or ""), r["id"]))
        return [r["memory"] for r in rows]

    def current(self, slot: str) -> list[str]:
        return self._claims(slot)

    def history(self, slot: str) -> list[str]:
        return self._claims(slot)

    def close(self) -> None:
        self.h.mem.close()


def canonical_key(v) -> str:
    """A state entry's sort key: its JSON, keys sorted (mem0 v1's plug-in sorts its state the same way)."""
    return json.dumps(v, sort_keys=True, default=str)


# -- what one agent does ----------------------------------------------------------------------

def _add(h: Mem0Handle, text: str):
    r = h.mem.add([{"role": "user", "content": text}], user_id=USER)
    return sorted(x["memory"] for x in r["results"])


def _seed(*texts: str):
    def setup(h: Mem0Handle):
        for t in texts:
            r = h.mem.add([{"role": "user", "content": t}], user_id=USER)
            for x in r["results"]:
                h.ids[x["memory"]] = x["id"]
    return setup


def _perform(h: Mem0Handle, what: tuple):
    op, *args = what
    if op == "add":
        return _add(h, args[0])
    if op == "update":
        return h.mem.update(h.ids[args[0]], text=args[1])["message"]
    if op == "delete":
        return h.mem.delete(h.ids[args[0]])["message"]
    raise ConfigError(f"unknown mem0 call {op!r}", fix="use add, update or delete")


def _calls(plan: dict[str, tuple]):
    def call(h: Mem0Handle, agent: str):
        return _perform(h, plan[agent])
    call.plan = plan  # what each agent calls, for the trial's memory history
    return call


# -- detectors on mem0's own state ------------------------------------------------------------

def duplicate_insert() -> Detector:
    def check(state, errors):
        counts = Counter(text for _, text in state["memories"])
        return [f"{n} current memories hold the same text {text!r} (MD5 {hashlib.md5(text.encode()).hexdigest()[:8]}): "
                "each add's duplicate check read the store before the other inserted"
                for text, n in sorted(counts.items()) if n > 1]
    return Detector("duplicate-insert", check)


def both_current(prefix: str, what: str) -> Detector:
    """mem0 2.x's design (ADD-only, no judge): contradicting facts all stay current, in every order."""
    def check(state, errors):
        cur = sorted({text for _, text in state["memories"] if text.startswith(prefix)})
        msg = (f"{what} has {len(cur)} current values {cur}: ADD-only keeps every contradicting fact current "
               "(by design, in every order)")
        return [msg] if len(cur) > 1 else []
    return Detector("both-current", check, always=True)


def _forks(events) -> dict[str, list[list]]:
    """Old value -> the UPDATE/DELETE rows that started from it (serially each value is left once)."""
    by_old: dict[str, list[list]] = {}
    for ev in events:
        if ev[0] in ("UPDATE", "DELETE"):
            by_old.setdefault(ev[1], []).append(ev)
    return {old: evs for old, evs in by_old.items() if len(evs) > 1}


def lost_update() -> Detector:
    def check(state, errors):
        out = []
        cur = {label: text for label, text in state["memories"]}
        for label, events in state["history"]:
            for old, evs in sorted(_forks(events).items()):
                ups = [e for e in evs if e[0] == "UPDATE"]
                if len(ups) < 2:
                    continue
                news = sorted(e[2] for e in ups)
                now = cur.get(label)
                lost = [n for n in news if n != now]
                out.append(f"memory {label!r}: its history has {len(ups)} UPDATEs from the same old value {old!r} "
                           f"(to {news}); it now holds {now!r}: the update to {lost} was overwritten by a writer "
                           "that never read it")
        return out
    return Detector("lost-update", check)


def stale_history() -> Detector:
    """The history says a deleted memory exists (an UPDATE after its DELETE, from the value the delete removed)."""
    def check(state, errors):
        out = []
        cur = {label for label, _ in state["memories"]}
        for label, events in state["history"]:
            if label in cur or not any(e[0] == "DELETE" for e in events):
                continue
            olds = {e[1] for e in events if e[0] in ("UPDATE", "DELETE")}
            ends = sorted(e[2] for e in events if e[0] == "UPDATE" and e[2] not in olds)
            for end in ends:
                deleted_from = sorted(e[1] for e in events if e[0] == "DELETE")
                out.append(f"memory {label!r} is deleted (get_all does not return it), yet its history records an "
                           f"UPDATE to {end!r} that no later event leaves (the DELETE row's old value is "
                           f"{deleted_from}): the history says the memory exists with {end!r}")
        return out
    return Detector("stale-history", check)


def resurrected(deleter: str) -> Detector:
    def check(state, errors):
        if deleter in errors:
            return []
        cur = {label for label, _ in state["memories"]}
        return [f"memory {label!r} was deleted (agent {deleter}'s DELETE is in its history) and is current again"
                for label, events in state["history"] if label in cur and any(e[0] == "DELETE" for e in events)]
    return Detector("lost-delete", check)


def lost_link(entity: str) -> Detector:
    """P4 on the entity store: a memory that names the entity, missing from its linked_memory_ids."""
    def check(state, errors):
        linked = {data: labels for data, labels in state.get("entities", [])}
        if entity not in linked:
            return []
        naming = sorted(label for label, text in state["memories"] if f'"{entity}"' in text)
        missing = [m for m in naming if m not in linked[entity]]
        msg = (f"entity {entity!r} links {linked[entity]}, not {missing}: each add read the entity's "
               "linked_memory_ids, added its own memory and wrote the list back; the later write dropped the "
               "other's id (P4, a lost update)")
        return [msg] if missing else []
    return Detector("lost-update", check)


def empty_store() -> Detector:
    """The 1.0.x report: the judge deleted the old fact and added nothing, leaving no memory (N3)."""
    def check(state, errors):
        return [] if state["memories"] else ["the store is empty after two adds: a fact was destroyed with no memory left"]
    return Detector("N3", check, always=True)


# -- scenarios --------------------------------------------------------------------------------

BERLIN = "User lives in Berlin"


def add_same_fact(name: str = "add-same-fact", shared: bool = False) -> Scenario:
    """Two agents add the same fact ("I love sushi.") to an empty store. Serially the second add's
    search returns the first memory and its MD5 check drops the duplicate; interleaved, both
    searches run before either insert and both insert (a predicate-read phantom)."""
    return Scenario(name, "two agents add the same text 'I love sushi.': serially the MD5 check drops the second; "
                    "concurrently both may pass the check on a stale search and both insert"
                    + (" (one Memory shared by both threads, as mem0's REST server)" if shared else ""),
                    ("A", "B"), _calls({"A": ("add", "I love sushi."), "B": ("add", "I love sushi.")}),
                    None, shared, (duplicate_insert(),), ("duplicate-insert",))


def reported_duplicate_add() -> Scenario:
    """Reported race (docs/tables/verdicts.md, mem0): "two concurrent `add` of the same text both pass the duplicate
    check on a stale snapshot and both insert (duplicate insert, a predicate-read phantom)".
    The same calls as ``add-same-fact``."""
    sc = add_same_fact("reported-duplicate-add")
    return Scenario(sc.name, "reported: two concurrent add() of the same text both pass the duplicate check on a "
                    "stale snapshot and both insert", sc.agents, sc.call, sc.setup, sc.shared, sc.detectors,
                    sc.anomalies)


def add_contradicting(name: str = "add-contradicting", claim: str = "") -> Scenario:
    """Two agents add contradicting facts about where the user lives (Berlin, Rome). mem0 2.x has
    no judge: both are ADDed and both stay current in every order. A property of the design,
    reported as ``both-current`` on every outcome (serial ones included), not as a race."""
    return Scenario(name, claim or "two agents add contradicting facts ('I live in Berlin.', 'I moved to Rome.'): "
                    "ADD-only keeps both current in every order (a design property, not a race)",
                    ("A", "B"), _calls({"A": ("add", "I live in Berlin."), "B": ("add", "I moved to Rome.")}),
                    None, False, (both_current("User lives in", "where the user lives"),), ("both-current",))


def reported_add_only_both_current() -> Scenario:
    """Reported (docs/tables/verdicts.md, mem0): "the ADD-only pipeline keeps both contradicting facts current (by
    design)". The same calls as ``add-contradicting``."""
    return add_contradicting("reported-add-only-both-current",
                             "reported: the ADD-only pipeline keeps both contradicting facts current (by design)")


def update_update() -> Scenario:
    """Two agents update one memory ("User lives in Berlin") to Rome and to Paris. Each update reads
    the memory, then writes without checking what it read: interleaved, both read Berlin, one
    write overwrites the other, and the history keeps two UPDATEs from the same old value."""
    return Scenario("update-update", "two agents update one memory (Berlin) to Rome and to Paris: serially the "
                    "second update's history row starts from the first one's value",
                    ("A", "B"), _calls({"A": ("update", BERLIN, "User lives in Rome"),
                                        "B": ("update", BERLIN, "User lives in Paris")}),
                    _seed("I live in Berlin."), False, (lost_update(),), ("lost-update",))


def update_vs_delete() -> Scenario:
    """One agent updates a memory (Berlin -> Rome) while another deletes it. Serially either the
    delete removes Rome, or the update fails (not found). Interleaved, the update can write after
    the delete (its UPDATE affects no row, and it reports success) and record an UPDATE to Rome
    after the DELETE: the history says the memory exists."""
    return Scenario("update-vs-delete", "agent A updates a memory (Berlin -> Rome) while agent B deletes it: "
                    "serially the delete removes Rome, or the update fails as not found",
                    ("A", "B"), _calls({"A": ("update", BERLIN, "User lives in Rome"), "B": ("delete", BERLIN)}),
                    _seed("I live in Berlin."), False, (stale_history(), resurrected("B")),
                    ("stale-history", "lost-delete"))


def reported_linked_ids_p4(engine: Mem0Engine) -> Scenario:
    """Reported race (docs/tables/verdicts.md, mem0): "a list of linked memory ids read, changed and written back
    without a lock loses one of two concurrent additions (P4)". In mem0 2.x the list is the entity
    store's ``linked_memory_ids``: ``add()`` (phase 7) reads the entity, adds the new memory's id to
    the list and writes the payload back (``entity_store.update``), with no lock or transaction
    around it. mem0 reaches it only when spaCy finds entities; toki keeps spaCy out, so this
    scenario alone gives mem0 :class:`QuotedTermsNLP` in spaCy's place (entities = quoted terms).
    Setup: 'I am reading "Dune".' (entity Dune, linked to it); agents add 'I finished "Dune".' and
    'I loved "Dune".': serially Dune links all three memories."""
    def setup(h: Mem0Handle):
        engine._entity_keys.add(h.key)
        with entity_extraction():
            _seed('I am reading "Dune".')(h)

    plan = {"A": ("add", 'I finished "Dune".'), "B": ("add", 'I loved "Dune".')}

    def call(h: Mem0Handle, agent: str):
        with entity_extraction():
            return _perform(h, plan[agent])
    call.plan = plan
    return Scenario("reported-linked-ids-p4", "reported: the entity store's linked_memory_ids list is read, extended "
                    "and written back without a lock by two concurrent adds naming one entity (\"Dune\"); "
                    "serially it links all three memories (mem0 reaches it with spaCy: here a quoted-term stand-in)",
                    ("A", "B"), call, setup, False, (lost_link("Dune"),), ("lost-update",))


def reported_love_hate_empty_store() -> Scenario:
    """Reported race (docs/tables/verdicts.md, mem0): '"I love Chinese food" then "I hate Chinese food" leaves an
    empty store (the judge deleted and added nothing: no audit, N3)'. That is the 1.0.x flow, whose
    LLM judge answers ADD/UPDATE/DELETE/NONE; mem0 2.x has no judge and never deletes on add, so the
    claim does not apply to it: this scenario runs the two adds on 2.x and checks, on every outcome,
    that the store is not empty (it never is: both facts stay current)."""
    return Scenario("reported-love-hate-empty-store",
                    "reported for mem0 1.0.x (its judge deleted and added nothing: empty store); not applicable "
                    "to 2.x, which has no judge: both adds stay current",
                    ("A", "B"), _calls({"A": ("add", "I love Chinese food."), "B": ("add", "I hate Chinese food.")}),
                    None, False, (empty_store(),), ())


def erased_without_history(old: str) -> Detector:
    """N3: the replaced value is in no memory and no history row (mem0 keeps it in the history)."""
    def check(state, errors):
        in_memories = any(old == text for _, text in state["memories"])
        in_history = any(old in (e[1], e[2]) for _, events in state["history"] for e in events)
        return [] if in_memories or in_history else [f"{old!r} was replaced and no memory or history row keeps it"]
    return Detector("N3", check, always=True)


def update_overwrites() -> Scenario:
    """N3 probe: one agent updates Berlin to Rome; the history row keeps the old value."""
    return Scenario("update-overwrites", "one agent updates a memory (Berlin -> Rome): the vector row is "
                    "overwritten in place, and the history table records the old value (an audit trace)",
                    ("A",), _calls({"A": ("update", BERLIN, "User lives in Rome")}), _seed("I live in Berlin."),
                    False, (erased_without_history(BERLIN),), ("N3",))


def _scenarios(engine: Mem0Engine) -> dict[str, Scenario]:
    sc = [add_same_fact(), add_same_fact("add-same-fact-shared", shared=True), add_contradicting(),
          update_update(), update_vs_delete(), update_overwrites(), reported_duplicate_add(),
          reported_add_only_both_current(), reported_linked_ids_p4(engine), reported_love_hate_empty_store()]
    return {s.name: s for s in sc}


def mem0() -> Mem0Engine:
    _require()
    return Mem0Engine()
