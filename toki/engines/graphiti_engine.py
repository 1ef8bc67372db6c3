"""Graphiti (PyPI ``graphiti-core`` 0.31.2), real and unmodified, on embedded Kuzu; Zep CE as a model of it.

Executed: Graphiti's own ``Graphiti.add_episode`` (asyncio) against graphiti's ``KuzuDriver`` on a Kuzu
database file under the run's folder (``kuzu`` 0.11.x). Each agent is a coroutine that the harness
runs on its own event loop in its own thread; every ``KuzuDriver.execute_query`` an agent awaits is
one granted step (``Controller.step_async``), so the order of Cypher statements is exactly the
grant sequence. What one ``add_episode`` does, read from 0.31.2 and seen in the step traces: read
the previous episodes; the LLM extracts entities; entity look-ups (exact name, then the LLM's
dedupe); the LLM extracts edges; per edge, candidate searches (same endpoints, then the whole
group); the LLM's ``resolve_edge`` names duplicates and contradicted facts; invalidation is applied
in memory to the copies of the old edges it read (``invalid_at = new.valid_at``,
``expired_at = now``); then the episode, the entities (with their summaries) and the edges (all
fields, including ``episodes``, ``invalid_at``, ``expired_at``) are MERGEd, each statement its own
auto-commit. No transaction spans the reads and the writes.

Stand-ins, each through graphiti's own extension point, all deterministic:
- :class:`ScriptedLLM` (an ``LLMClient`` subclass; graphiti's ``generate_response`` runs as
  shipped and calls its ``_generate_response``) answers by prompt name from the table
  :data:`EPISODES`, reading the sections graphiti renders into the prompt (the current message,
  the entities, the existing facts): ``extract_nodes.extract_text``/``extract_message`` ->
  ``ExtractedEntities``; ``dedupe_nodes.nodes`` -> exact (case-insensitive) name match;
  ``extract_edges.edge`` -> ``ExtractedEdges`` with ``valid_at``; ``dedupe_edges.resolve_edge`` ->
  ``EdgeDuplicate``: a listed fact with the same text is a duplicate, and for every listed fact of
  the same slot (same subject and predicate, another object) a :mod:`toki.judges` judge votes on
  the pair (stored, new): a vote for the new fact puts it in ``contradicted_facts``. So the
  decision to invalidate is measured through graphiti's own decision code (N1 with a
  temperature-1 judge). Every vote is returned to the caller; graphiti itself keeps no judge log;
- :class:`HashEmbedder` (an ``EmbedderClient``): a bag of words hashed into 16 buckets;
- :class:`RankCrossEncoder` (a ``CrossEncoderClient``): keeps the order it is given.

Snags of 0.31.2 worked round here (none edits graphiti): ``GRAPHITI_TELEMETRY_ENABLED=false`` is set
before import; ``KuzuDriver`` does not set ``_database`` (set to the group id, so
``_resolve_request_scope`` keeps the shared driver); its ``build_indices_and_constraints`` is a no-op,
so ``driver.graph_ops.build_indices_and_constraints(driver)`` runs once, sequentially, when a database
file is created (full-text indexes; re-running it fails with "Index ... already exists").

How the agents share Kuzu: Kuzu allows one ``kuzu.Database`` per file and many connections on it,
and one write transaction at a time (a second writer fails at once with "Only one write
transaction at a time is allowed"; that error is classified as busy: the statement is re-issued
after another agent progresses). ``graphiti`` shares one ``Graphiti`` object (one ``KuzuDriver``,
the driver's default single query worker, ``max_concurrent_queries=1``) among the agents, which is
how one application process serves concurrent ``add_episode`` calls; Kuzu's ``AsyncConnection``
runs queries on a thread pool, so one connection serves the agents' separate event loops.
Within one agent, graphiti gathers some queries concurrently (``semaphore_gather``); with the
single query worker they run one at a time in submission order, and the wrapper keeps that order
(an ``asyncio.Lock`` per agent loop, FIFO), so each query is its own step and replays are exact.

``zep`` (Zep CE, executed = "model"): Zep Community Edition's knowledge graph is Graphiti behind
its HTTP ``graph_service`` (``server/graph_service/routers/ingest.py``: ``/messages`` queues one job
per message on an ``AsyncWorker``, whose job calls ``graphiti.add_episode(..., source=message)``
with the body ``"{role}({role_type}): {content}"``). One server process has one worker, so its
jobs run one at a time; the concurrency is between server processes (replicas or uvicorn
workers) writing one graph. The model runs the same graphiti code as ``graphiti``, with these
differences: each agent is one server worker with its own ``Graphiti`` and its own ``KuzuDriver``
connection on the shared database (one ``kuzu.Database`` per file per process; Zep runs Neo4j,
whose sessions are also per request); episodes are ``EpisodeType.message`` with the server's body
format and ``extract_nodes.extract_message``; the HTTP layer, the queue and Zep's Go server (its
session and message store in PostgreSQL) are not run. Zep CE itself cannot run here: it is a Docker
deployment (Go server, graph_service, Neo4j) and the machine has no Docker and no network.

The reported races of docs/tables/verdicts.md (Graphiti / Zep) as scenarios: "episodes ingested out of order let an
older fact survive a newer one" is ``out-of-order-episodes`` (serially graphiti expires the older
edge on arrival, so it reproduces only as a race); "some contradictions are caught in one run out of
nine" is ``rejudge`` (N1, with the temperature-1 judge :func:`wobbling_judge`); "invalidation searched
too widely and retired facts that did not contradict" is ``wide-invalidation``, a judge error made
in every order (:func:`sloppy_judge`, an always-checked detector), not a race; "per-group workers share
one driver, so a write lands in another group's graph" is ``groups-share-driver``, which cannot
reproduce here: graphiti 0.31.2 scopes the driver per request (``_resolve_request_scope``, issue
#1676) and on Kuzu ``clone()`` returns the same driver over the one database, where the group is
only a property of each node and edge.

Normalised state (read with Cypher through the driver, outside any agent): entities
``[name, group, summary]``, edges ``[source, fact, target, valid_at date, invalid_at date or None,
expired?, sorted episode names]``, episodes ``[name, group]``; no uuids and no wall-clock times.

Simpler than a real deployment: the extraction LLM is a table (one entity list and one edge list
per episode text); node summaries are graphiti's own (short summaries are built from the new
edges' facts without an LLM call); communities and sagas are off, as in ``add_episode``'s defaults.
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import contextlib
import contextvars
import copy
import hashlib
import json
import math
import os
import re
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")  # before graphiti is imported: no network

from toki.harness.controller import current_agent
from toki.harness.engine import Detector, Scenario
from toki.errors import ConfigError
from toki.judges.fixture import FixtureJudge
from toki.model import Fact

GROUP = "toki"
DB_FILE = "graphiti.kuzu"
DIM = 16


def _require():
    try:
        import graphiti_core  # noqa: F401
        import kuzu  # noqa: F401
    except ImportError as e:
        raise ConfigError(f"Graphiti on Kuzu is not installed ({e})",
                          fix="pip install 'toki[engines]' (graphiti-core, kuzu, httpx)") from None


def _version() -> str:
    from importlib.metadata import version

    try:
        return f"graphiti-core {version('graphiti-core')} on kuzu {version('kuzu')}"
    except Exception:  # noqa: BLE001 - metadata missing: the import check reports it
        return "graphiti-core (unknown version)"


# -- what the extraction LLM "reads" in each episode ---------------------------------------------

@dataclass(frozen=True)
class Said:
    entities: tuple[str, ...]
    edges: tuple[tuple[str, str, str, str, str], ...]  # (source, target, RELATION, fact, valid_at day)
    day: str  # the episode's reference time


BERLIN_F, PARIS_F, ROME_F = "Alice lives in Berlin", "Alice lives in Paris", "Alice lives in Rome"
ACME_F = "Alice works at Acme"

EPISODES: dict[str, Said] = {
    "Alice lives in Berlin.": Said(("Alice", "Berlin"), (("Alice", "Berlin", "LIVES_IN", BERLIN_F, "2026-01-05"),),
                                   "2026-01-05"),
    "Alice moved to Paris.": Said(("Alice", "Paris"), (("Alice", "Paris", "LIVES_IN", PARIS_F, "2026-03-01"),),
                                  "2026-03-01"),
    "Alice moved to Rome.": Said(("Alice", "Rome"), (("Alice", "Rome", "LIVES_IN", ROME_F, "2026-05-01"),),
                                 "2026-05-01"),
    "Alice still lives in Berlin.": Said(("Alice", "Berlin"),
                                         (("Alice", "Berlin", "LIVES_IN", BERLIN_F, "2026-01-05"),), "2026-02-01"),
    "Alice works at Acme.": Said(("Alice", "Acme"), (("Alice", "Acme", "WORKS_AT", ACME_F, "2026-01-02"),),
                                 "2026-01-02"),
    "Alice met Bob.": Said(("Alice", "Bob"), (("Alice", "Bob", "KNOWS", "Alice knows Bob", "2026-02-10"),),
                           "2026-02-10"),
    "Bob plays chess.": Said(("Bob", "Chess"), (("Bob", "Chess", "PLAYS", "Bob plays chess", "2026-02-11"),),
                             "2026-02-11"),
    "Carol lives in Oslo.": Said(("Carol", "Oslo"), (("Carol", "Oslo", "LIVES_IN", "Carol lives in Oslo",
                                                        "2026-02-12"),), "2026-02-12"),
}

# fact -> (subject, predicate, object): two facts of one (subject, predicate) with different objects contradict
SLOTS: dict[str, tuple[str, str, str]] = {
    f: (s, p, o) for s, p, o, f in (
        ("Alice", "lives in", "Berlin", BERLIN_F), ("Alice", "lives in", "Paris", PARIS_F),
        ("Alice", "lives in", "Rome", ROME_F), ("Alice", "works at", "Acme", ACME_F),
        ("Alice", "knows", "Bob", "Alice knows Bob"), ("Bob", "plays", "Chess", "Bob plays chess"),
        ("Carol", "lives in", "Oslo", "Carol lives in Oslo"))
}


def jid(fact: str) -> str:
    """The judge's key for a fact: its text (graphiti's uuids differ from run to run)."""
    return "gr-" + hashlib.sha256(fact.encode()).hexdigest()[:10]


def conflict_table(p: float = 0.0) -> dict[tuple[str, str], float]:
    """P(the stored fact stands) for (stored, new) pairs of one slot; other pairs are never asked."""
    return {(jid(a), jid(b)): p for a in SLOTS for b in SLOTS
            if a != b and SLOTS[a][:2] == SLOTS[b][:2]}


def fixture_judge(agent: str) -> FixtureJudge:
    """The default resolve_edge decision: greedy, a newer fact of the same slot always contradicts."""
    return FixtureJudge(conflict_table(0.0), seed=zlib.crc32(agent.encode()), temperature=0.0,
                        model="graphiti-resolve-edge-fixture")


def wobbling_judge(p: float = 0.5, seed: int = 0) -> Callable[[str], FixtureJudge]:
    """resolve_edge at temperature 1 (graphiti's default for this call): the same pair can be judged
    differently on each call."""
    def make(agent: str) -> FixtureJudge:
        return FixtureJudge(conflict_table(p), seed=seed * 7919 + zlib.crc32(agent.encode()), temperature=1.0,
                            model="graphiti-resolve-edge-wobbling")
    return make


def sloppy_judge(agent: str) -> FixtureJudge:
    """A resolve_edge that also calls facts of other slots contradicted (the reported "invalidation
    searched too widely"): a judge error, made in every order, not a race. The seed is written with
    the correct judge, so the error is the agents' own."""
    if agent == "setup":
        return fixture_judge(agent)
    table = conflict_table(0.0)
    table.update({(jid(a), jid(b)): 0.0 for a in SLOTS for b in SLOTS
                  if a != b and SLOTS[a][0] == SLOTS[b][0] and SLOTS[a][1] != SLOTS[b][1]})
    return FixtureJudge(table, seed=zlib.crc32(agent.encode()), temperature=0.0, model="graphiti-resolve-edge-sloppy")


def _judge_fact(fact: str) -> Fact:
    s, p, o = SLOTS.get(fact, ("?", "?", fact))
    return Fact(jid(fact), s, "graphiti:" + p.replace(" ", "_"), o, datetime(2026, 1, 1))


# -- the three stand-ins, through graphiti's own classes ------------------------------------------

_PROMPT: contextvars.ContextVar[str | None] = contextvars.ContextVar("toki_graphiti_prompt", default=None)


def _section(text: str, tag: str) -> str | None:
    m = re.search(rf"<{re.escape(tag)}>\s*(.*?)\s*</{re.escape(tag)}>", text, re.DOTALL)
    return m.group(1) if m else None


def _said(body: str | None) -> Said:
    hits = [k for k in EPISODES if body and k in body]
    if not hits:
        raise ConfigError(f"the extraction stand-in has no entry for the episode {body!r}",
                          fix="add it to toki.engines.graphiti_engine.EPISODES")
    return EPISODES[max(hits, key=len)]


def _make_llm_class():
    from graphiti_core.llm_client.client import LLMClient
    from graphiti_core.llm_client.config import LLMConfig, ModelSize

    class ScriptedLLM(LLMClient):
        """Answers graphiti's prompts by name; resolve_edge's decisions come from toki judges."""

        def __init__(self, judge_factory: Callable[[str], Any]):
            super().__init__(LLMConfig(api_key="offline", model="toki-scripted"), cache=False)
            self.judge_factory = judge_factory
            self.judges: dict[str, Any] = {}
            self.votes: dict[str, list[dict]] = {}
            self.prompts: dict[str, list[str]] = {}
            self._mu = threading.Lock()

        async def generate_response(self, messages, response_model=None, max_tokens=None,
                                    model_size=ModelSize.medium, group_id=None, prompt_name=None, **kw):
            token = _PROMPT.set(prompt_name)  # graphiti passes the name here but not to _generate_response
            try:
                return await super().generate_response(messages, response_model, max_tokens, model_size,
                                                       group_id, prompt_name, **kw)
            finally:
                _PROMPT.reset(token)

        async def _generate_response(self, messages, response_model=None, max_tokens=0,
                                     model_size=ModelSize.medium, **kw) -> dict[str, Any]:
            name = _PROMPT.get() or ""
            text = "\n".join(m.content for m in messages)
            who = _agent_name()
            with self._mu:
                self.prompts.setdefault(who, []).append(name)
            if name in ("extract_nodes.extract_text", "extract_nodes.extract_message"):
                body = _section(text, "TEXT") if name.endswith("text") else _section(text, "CURRENT MESSAGE")
                return {"extracted_entities": [{"name": n, "entity_type_id": 0} for n in _said(body).entities]}
            if name == "dedupe_nodes.nodes":
                ents, have = json.loads(_section(text, "ENTITIES")), json.loads(_section(text, "EXISTING ENTITIES"))
                out = []
                for e in ents:
                    m = [c["candidate_id"] for c in have if c["name"].lower() == e["name"].lower()]
                    out.append({"id": e["id"], "name": e["name"], "duplicate_candidate_id": m[0] if m else -1})
                return {"entity_resolutions": out}
            if name == "extract_edges.edge":
                said = _said(_section(text, "CURRENT_MESSAGE"))
                return {"edges": [{"source_entity_name": s, "target_entity_name": t, "relation_type": r, "fact": f,
                                   "valid_at": f"{day}T00:00:00Z", "invalid_at": None}
                                  for s, t, r, f, day in said.edges]}
            if name == "extract_edges.extract_timestamps":
                return {"valid_at": None, "invalid_at": None}
            if name == "dedupe_edges.resolve_edge":
                return self._resolve_edge(who, text)
            raise ConfigError(f"the scripted LLM has no answer for graphiti's prompt {name!r}",
                              fix="extend toki.engines.graphiti_engine.ScriptedLLM")

        def _resolve_edge(self, who: str, text: str) -> dict:
            existing = ast.literal_eval(_section(text, "EXISTING FACTS") or "[]")
            candidates = ast.literal_eval(_section(text, "FACT INVALIDATION CANDIDATES") or "[]")
            new = (_section(text, "NEW FACT") or "").strip()
            dup = [c["idx"] for c in existing if c["fact"] == new]
            contradicted = []
            with self._mu:
                judge = self.judges.get(who)
                if judge is None:
                    judge = self.judges[who] = self.judge_factory(who)
            for c in existing + candidates:
                old = c["fact"]
                if old == new or old not in SLOTS or new not in SLOTS:
                    continue
                # the judge is asked about a pair of one slot, or any pair its fixture lists (a judge
                # that reads contradictions too widely: sloppy_judge)
                if SLOTS[old][:2] != SLOTS[new][:2] and (jid(old), jid(new)) not in getattr(judge, "table", {}):
                    continue
                vote = judge.vote((_judge_fact(old), _judge_fact(new)))
                if vote.index == 1:
                    contradicted.append(c["idx"])
                with self._mu:
                    self.votes.setdefault(who, []).append(
                        {"stored": old, "new": new, "contradicted": vote.index == 1,
                         "read_set": sorted([jid(old), jid(new)]), "theta": judge.theta()})
            return {"duplicate_facts": dup, "contradicted_facts": sorted(set(contradicted))}

    return ScriptedLLM


def _make_embedder_class():
    from graphiti_core.embedder.client import EmbedderClient

    class HashEmbedder(EmbedderClient):
        """A bag of words hashed into DIM buckets, unit length: shared words give cosine overlap."""

        async def create(self, input_data):
            s = input_data if isinstance(input_data, str) else " ".join(map(str, input_data))
            v = [0.0] * DIM
            for tok in re.findall(r"[a-z0-9]+", s.lower()):
                v[int.from_bytes(hashlib.sha256(tok.encode()).digest()[:4], "big") % DIM] += 1.0
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            return [x / n for x in v]

        async def create_batch(self, input_data_list):
            return [await self.create(x) for x in input_data_list]

    return HashEmbedder


def _make_cross_encoder_class():
    from graphiti_core.cross_encoder.client import CrossEncoderClient

    class RankCrossEncoder(CrossEncoderClient):
        """Keeps the order graphiti's search produced (scores 1, 1/2, 1/3, ...)."""

        async def rank(self, query, passages):
            return [(p, 1.0 / (i + 1)) for i, p in enumerate(passages)]

    return RankCrossEncoder


def _agent_name() -> str:
    me = current_agent()
    return me[1].name if me is not None else "setup"


# -- interception: every driver query an agent awaits is a granted step ----------------------------

def _busy(e: BaseException) -> bool:
    return "Only one write transaction at a time" in str(e)


_WRITE = re.compile(r"\b(MERGE|CREATE|SET|DELETE|DETACH)\b", re.IGNORECASE)


def _detail(query: str, kwargs: dict) -> str:
    q = " ".join(query.split())
    verb = "write" if _WRITE.search(q) else "read"
    return f"{verb}: {q[:90]}"


def _instrument(driver, handle) -> None:
    """Wrap this KuzuDriver instance's execute_query (graphiti's only way to Kuzu) as steps."""
    orig = type(driver).execute_query.__get__(driver)  # not the instance attribute a copied driver inherits
    driver._toki_instrumented, driver._toki_handle = True, handle
    locks: dict[int, tuple[Any, asyncio.Lock]] = {}
    mu = threading.Lock()

    async def execute_query(cypher_query_, **kwargs):
        me = current_agent()
        if me is None:
            return await orig(cypher_query_, **kwargs)
        ctl = me[0]
        driver._toki_handle.ran_agents = True
        loop = asyncio.get_running_loop()
        with mu:
            entry = locks.get(id(loop))
            if entry is None or entry[0] is not loop:
                entry = locks[id(loop)] = (loop, asyncio.Lock())
        # one query of this agent at a time, in the order graphiti issued them: with the driver's
        # single query worker that is the order Kuzu runs them in anyway
        async with entry[1]:
            return await ctl.step_async("cypher", _detail(cypher_query_, kwargs),
                                        lambda: orig(cypher_query_, **kwargs), busy=_busy)

    driver.execute_query = execute_query


def _run(coro):
    """Run a coroutine to completion from synchronous code, even under a running loop."""
    out: dict[str, Any] = {}

    def main():
        try:
            out["v"] = asyncio.run(coro)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            out["e"] = e

    t = threading.Thread(target=main, name="toki-graphiti-sync")
    t.start()
    t.join()
    if "e" in out:
        raise out["e"]
    return out.get("v")


# -- the handle -----------------------------------------------------------------------------------

class _SharedDB:
    """One kuzu.Database per file in this process (Kuzu's rule), shared by the handles on it."""

    def __init__(self):
        self.mu = threading.Lock()
        self.open: dict[str, list] = {}  # path -> [driver, refcount]
        self.parked: tuple[str, Any] | None = None  # (path, driver) closed by the agents, kept for the read-back
        self.closing: threading.Thread | None = None  # a read-back database being closed (checkpointed)
        atexit.register(self.join)  # a Kuzu close cut short at interpreter exit can crash the process

    def join(self) -> None:
        t = self.closing
        if t is not None:
            t.join()


def _close_driver(driver) -> None:
    with contextlib.suppress(Exception):
        driver.client.close()
    with contextlib.suppress(Exception):
        driver.db.close()


@dataclass
class GraphitiHandle:
    engine: GraphitiEngine
    location: Path
    graphiti: Any
    driver: Any
    llm: Any
    owner: bool  # this handle created the driver (and the kuzu.Database)
    ran_agents: bool = False  # an agent's query went through this handle
    readback: bool = False  # reads back a run's database the agents' handles parked


class GraphitiEngine:
    def __init__(self, *, zep: bool = False, judge: Callable[[str], Any] | None = None):
        _require()
        self.zep = zep
        self.name = "zep" if zep else "graphiti"
        self.executed = "model" if zep else "real"
        # Why a verdict column has no scenario (the verdicts experiment prints it).
        self.abstains: dict[str, str] = {}
        self.judge_factory = judge or fixture_judge
        self._dbs = _SharedDB()
        self.scenarios = _scenarios(self)

    @property
    def system(self) -> str:
        """What the row stands for in verdict tables."""
        from importlib.metadata import version

        v = version("graphiti-core")
        return f"Zep CE (Graphiti {v} in server mode)" if self.zep else f"Graphiti {v} on Kuzu"

    @property
    def version(self) -> str:
        v = _version()
        return f"model of Zep CE graph_service over {v}" if self.zep else v

    @property
    def description(self) -> str:
        if self.zep:
            return ("Zep CE's graph write path, modelled as Graphiti's real add_episode run in server mode: one "
                    "Graphiti and one Kuzu connection per server worker, message episodes in the server's format")
        return ("Graphiti's real add_episode on embedded Kuzu, one Graphiti shared by concurrent calls; each Cypher "
                "statement is its own commit, no transaction spans the candidate reads and the MERGEs")

    # -- protocol --------------------------------------------------------------------------------
    def open(self, location: Path) -> GraphitiHandle:
        import kuzu
        from graphiti_core import Graphiti
        from graphiti_core.driver.kuzu_driver import KuzuDriver

        path = str(Path(location) / DB_FILE)
        readback = False
        with self._dbs.mu:
            parked, self._dbs.parked = self._dbs.parked, None
            if parked is not None and parked[0] == path and path not in self._dbs.open:
                self._dbs.open[path] = [parked[1], 0]  # the run's database, still open: read it back as is
                parked = None
        if parked is not None:
            _close_driver(parked[1])
        with self._dbs.mu:
            entry = self._dbs.open.get(path)
            if entry is not None and entry[1] == 0:  # re-adopting the parked driver
                entry[1] = 1
                driver, owner, readback = entry[0], True, True
            elif entry is None:
                fresh = not os.path.exists(path)
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)  # "the Kuzu backend is deprecated"
                    driver = KuzuDriver(db=path)
                driver._database = GROUP  # 0.31.2 leaves it unset
                if fresh:  # KuzuDriver's own build_indices_and_constraints does nothing
                    _run(driver.graph_ops.build_indices_and_constraints(driver))
                self._dbs.open[path] = [driver, 1]
                owner = True
            else:
                base = entry[0]
                entry[1] += 1
                # another server worker: its own connection (and query worker) on the same database
                driver = copy.copy(base)
                driver.client = kuzu.AsyncConnection(base.db, max_concurrent_queries=1)
                owner = False
        h = GraphitiHandle(self, Path(location), None, driver, None, owner, readback=readback)
        if not owner or not getattr(driver, "_toki_instrumented", False):
            _instrument(driver, h)
        else:
            driver._toki_handle = h
        h.llm = _make_llm_class()(self.judge_factory)
        h.graphiti = Graphiti(graph_driver=driver, llm_client=h.llm, embedder=_make_embedder_class()(),
                              cross_encoder=_make_cross_encoder_class()())
        return h

    def close(self, h: GraphitiHandle) -> None:
        path = str(h.location / DB_FILE)
        with self._dbs.mu:
            entry = self._dbs.open.get(path)
            if not h.owner:
                with contextlib.suppress(Exception):
                    h.driver.client.close()
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            del self._dbs.open[path]
            base = entry[0]
            if h.ran_agents:
                # Closing a Kuzu database checkpoints it (~0.2 s); the harness reopens the run's folder at
                # once to read the state, so keep it open for that read, which closes it for real.
                self._dbs.parked = (path, base)
                return
            if h.readback:
                # The harness deletes the run's folder right after the read-back: nothing reads this
                # file again, so its checkpoint may finish while the next run starts (one at a time).
                prev, self._dbs.closing = self._dbs.closing, threading.Thread(
                    target=_close_driver, args=(base,), name="toki-kuzu-close", daemon=True)
                if prev is not None:
                    prev.join()
                self._dbs.closing.start()
                return
        _close_driver(base)

    def state(self, h: GraphitiHandle) -> dict:
        return _run(_read_state(h.driver))

    # -- a trial as a memory history (toki.record.trial_history) -------------------------------
    def memory_history(self, scenario: str, outcome, returned: dict | None = None) -> dict | None:
        """The graph as slots (:func:`_graph_history`)."""
        sc = self.scenarios.get(scenario)
        plan = getattr(getattr(sc, "call", None), "plan", None)
        if not plan or not isinstance(outcome.state, dict) or "edges" not in outcome.state:
            return None
        return _graph_history(plan, getattr(sc.setup, "seeds", ()), outcome, returned or {})

    # -- what one agent does --------------------------------------------------------------------
    async def add(self, h: GraphitiHandle, agent: str, bodies: tuple[str, ...], group: str = GROUP) -> dict:
        from graphiti_core.nodes import EpisodeType

        for body in bodies:
            said = _said(body)
            when = datetime.fromisoformat(said.day).replace(tzinfo=UTC)
            if self.zep:  # graph_service /messages: one job per message, the server's body format
                await h.graphiti.add_episode(name=f"{agent}: {body}", episode_body=f"user(user): {body}",
                                             source_description="zep message", reference_time=when,
                                             source=EpisodeType.message, group_id=group)
            else:
                await h.graphiti.add_episode(name=f"{agent}: {body}", episode_body=body,
                                             source_description="toki", reference_time=when,
                                             source=EpisodeType.text, group_id=group)
        return {"votes": [{k: v[k] for k in ("stored", "new", "contradicted")}
                          for v in h.llm.votes.get(_agent_name(), [])]}


async def current_facts(h: GraphitiHandle) -> list[str]:
    """What a reader building an agent's context is told is true now: the group's edges through
    graphiti's own ``EntityEdge.get_by_group_ids``, those neither invalidated nor expired."""
    from graphiti_core.edges import EntityEdge

    edges = await EntityEdge.get_by_group_ids(h.driver, [GROUP])
    return sorted(e.fact for e in edges if e.invalid_at is None and e.expired_at is None)


def _day(v) -> str | None:
    if v is None:
        return None
    return v.date().isoformat() if isinstance(v, datetime) else str(v)[:10]


async def _read_state(driver) -> dict:
    eps, _, _ = await driver.execute_query("MATCH (e:Episodic) RETURN e.uuid AS uuid, e.name AS name, "
                                           "e.group_id AS group_id")
    names = {r["uuid"]: r["name"] for r in eps}
    ents, _, _ = await driver.execute_query("MATCH (n:Entity) RETURN n.name AS name, n.group_id AS group_id, "
                                            "n.summary AS summary")
    edges, _, _ = await driver.execute_query(
        "MATCH (a:Entity)-[:RELATES_TO]->(e:RelatesToNode_)-[:RELATES_TO]->(b:Entity) "
        "RETURN a.name AS src, e.fact AS fact, b.name AS dst, e.group_id AS group_id, e.valid_at AS valid_at, "
        "e.invalid_at AS invalid_at, e.expired_at AS expired_at, e.episodes AS episodes")
    return {
        "entities": sorted([r["name"], r["group_id"], r["summary"] or ""] for r in ents),
        "edges": sorted([r["src"], r["fact"], r["dst"], _day(r["valid_at"]), _day(r["invalid_at"]),
                         r["expired_at"] is not None, sorted(names.get(u, "?") for u in (r["episodes"] or [])),
                         r["group_id"]] for r in edges),
        "episodes": sorted([r["name"], r["group_id"]] for r in eps),
    }


# -- a trial as a memory history ------------------------------------------------------------------

def _fact_slot(fact: str) -> str:
    s, p, _ = SLOTS[fact]
    return f"{s}/{p}"


def _graph_history(plan: dict, seeds: tuple, outcome, returned: dict) -> dict | None:
    """A Graphiti trial as memory micro-ops. Slots: each (subject, predicate) of :data:`SLOTS`
    (single-valued, a claim the fact's text; current = neither invalidated nor expired); the
    edge's ``episodes`` list as ``cites/FACT``, Alice's summary lines as ``summary/Alice``, the
    episodes as ``episodes`` and each entity name as ``entity/NAME`` (all multi-valued, appended
    to). Who did what: an edge is created by the first episode its ``episodes`` list names (the
    seed's, else the first agent's in the scenario's order: two agents citing one new edge are
    not ordered by the state, and the other's op is a read of it); an agent citing an edge it
    did not create read it current and appended its episode. What it invalidated comes from what
    it returned, the judge's votes: a contradicted stored fact is retracted by the call, or, when
    the stored fact is newer, the call's own fact is (graphiti expires an older edge on arrival).
    An entity name stored once and mentioned by two agents was created by the first. The final
    reads: each fact slot's current edges, each cites list and the episodes (current reads: the
    state sorts them), and Alice's summary (a history read too: its lines are in the order they
    were appended). Not carried: an invalidated edge's end date (``invalid_at``), a value the
    format has no place for, and group ids."""
    st = outcome.state
    edges, entity_names = st["edges"], [e[0] for e in st["entities"]]
    agents_order = list(plan)

    def creator(edge) -> str:
        names = [n.split(": ", 1)[0] for n in edge[6]]
        if "setup" in names:
            return "setup"
        mine = [a for a in agents_order if a in names]
        return mine[0] if mine else "?"

    day = {f: d for said in EPISODES.values() for _, _, _, f, d in said.edges}
    seeded_entities = {e for b in seeds for e in EPISODES[b].entities}
    first_mention: dict[str, str] = {}
    for agent, bodies in plan.items():
        for body in bodies if bodies != ("current facts",) else ():
            for e in EPISODES[body].entities:
                first_mention.setdefault(e, agent)
    touched = {_fact_slot(f) for b in seeds for *_, f, _ in EPISODES[b].edges}
    setup: list = []
    for body in seeds:
        said = EPISODES[body]
        setup.append(["add", "episodes", f"setup: {body}"])
        setup += [["add", f"entity/{e}", e] for e in said.entities if e not in {m[2] for m in setup
                                                                                   if m[1] == f"entity/{e}"}]
        for _, _, _, f, _ in said.edges:
            setup += [["add", _fact_slot(f), f], ["add", f"cites/{f}", f"setup: {body}"]]
            if f.startswith("Alice "):
                setup.append(["add", "summary/Alice", f])
    agents: dict[str, list] = {}
    for agent, bodies in plan.items():
        done = agent in outcome.completed
        if bodies == ("current facts",):
            got = returned.get(agent) if done else None
            agents[agent] = [["current", "Alice/lives in",
                              None if got is None else sorted(f for f in got if _fact_slot(f) == "Alice/lives in")]]
            touched.add("Alice/lives in")
            continue
        res = returned.get(agent) if done else None
        votes = (res or {}).get("votes", []) if isinstance(res, dict) else []
        mops: list = []
        for body in bodies:
            name = f"{agent}: {body}"
            said = EPISODES[body]
            mops.append(["add", "episodes", name])
            for e in said.entities:
                if e in seeded_entities:
                    continue
                n = entity_names.count(e)
                if n >= 2 or first_mention.get(e) == agent or not done:
                    mops.append(["add", f"entity/{e}", e])
                else:
                    mops.append(["current", f"entity/{e}", [e] * n])
            for _, _, _, f, _ in said.edges:
                slot = _fact_slot(f)
                touched.add(slot)
                mine = [e for e in edges if e[1] == f and creator(e) == agent]
                for v in votes:
                    if v["new"] != f:
                        continue
                    mops.append(["decide", f"{slot}: {v['stored']} | {f}", sorted([v["stored"], f]),
                                 f if v["contradicted"] else v["stored"]])
                own_retract = False
                for v in votes:
                    if v["new"] == f and v["contradicted"]:
                        if day.get(v["stored"], "") > day.get(f, ""):
                            own_retract = True
                        else:
                            mops.append(["retract", _fact_slot(v["stored"]), v["stored"]])
                if mine or not done:
                    mops += [["add", slot, f] for _ in (mine or [None])]
                    if own_retract:
                        mops.append(["retract", slot, f])
                    if f.startswith("Alice "):
                        mops.append(["add", "summary/Alice", f])
                else:  # it found the fact's edge verbatim and cited it
                    mops.append(["current", slot, sorted(e[1] for e in edges if _fact_slot(e[1]) == slot and not e[4]
                                                         and not e[5] and e[1] == f)])
                mops.append(["add", f"cites/{f}", name])
        agents[agent] = mops
    final: list = []
    for slot in sorted(touched):
        final.append(["current", slot, sorted(e[1] for e in edges
                                             if _fact_slot(e[1]) == slot and not e[4] and not e[5])])
    facts = sorted({m[2] for ops in [setup, *agents.values()] for m in ops if m[0] == "add" and m[1] in touched})
    for f in facts:
        final.append(["current", f"cites/{f}", sorted(n for e in edges if e[1] == f for n in e[6])])
    final.append(["current", "episodes", sorted(n for n, _ in st["episodes"])])
    for e in sorted(set(first_mention) - seeded_entities):
        final.append(["current", f"entity/{e}", [e] * entity_names.count(e)])
    lines = next((x[2].split("\n") for x in st["entities"] if x[0] == "Alice"), [])
    lines = [ln for ln in lines if ln]
    final += [["current", "summary/Alice", sorted(lines)], ["history", "summary/Alice", lines]]
    return {"setup": setup, "agents": agents, "final": final,
            "multi_valued": ["cites/*", "summary/*", "episodes", "entity/*"]}


# -- detectors ------------------------------------------------------------------------------------

def _current(state, subject: str, predicate: str) -> list[list]:
    return [e for e in state["edges"] if not e[4] and not e[5] and SLOTS.get(e[1], ("", "", ""))[:2]
            == (subject, predicate)]


def double_current(subject: str = "Alice", predicate: str = "lives in") -> Detector:
    def check(state, errors):
        cur = _current(state, subject, predicate)
        if len(cur) < 2:
            return []
        return [(f"{len(cur)} current '{subject} {predicate}' facts {sorted(e[1] for e in cur)}: each add_episode "
                "read the candidates before the other's edge was written, so neither was judged against the "
                "other (a missed contradiction; serially the later fact invalidates the earlier)")]
    return Detector("double-supersede", check)


def older_survives(subject: str = "Alice", predicate: str = "lives in") -> Detector:
    def check(state, errors):
        cur = _current(state, subject, predicate)
        slot = [e for e in state["edges"] if SLOTS.get(e[1], ("", "", ""))[:2] == (subject, predicate)]
        out = []
        for e in cur:
            newer = sorted(x[1] for x in slot if x[3] and e[3] and x[3] > e[3])
            if newer:
                out.append(f"{e[1]!r} (valid from {e[3]}) is still current although {newer} is newer: the older "
                           "episode was ingested concurrently with the newer one and neither saw the other")
        return out
    return Detector("stale-current", check)


def lost_invalidation(subject: str = "Alice", predicate: str = "lives in") -> Detector:
    """An invalidated edge should end where the next fact of its slot begins (what every serial order does)."""
    def check(state, errors):
        slot = [e for e in state["edges"] if SLOTS.get(e[1], ("", "", ""))[:2] == (subject, predicate)]
        out = []
        for e in slot:
            if not e[4]:
                continue
            later = sorted(x[3] for x in slot if x[3] and e[3] and x[3] > e[3])
            if later and e[4] != later[0]:
                out.append(f"{e[1]!r} ends {e[4]}, but the next fact of its slot begins {later[0]}: the edge was "
                           "rewritten whole from a copy read before the other invalidation (a lost update)")
        return out
    return Detector("lost-update", check)


def lost_summary(entity: str = "Alice") -> Detector:
    def check(state, errors):
        ent = [x for x in state["entities"] if x[0] == entity]
        facts = sorted({e[1] for e in state["edges"] if e[0] == entity})
        out = []
        for x in ent:
            missing = [f for f in facts if f not in x[2]]
            if missing:
                out.append(f"{entity}'s summary does not mention {missing}: the entity was MERGEd whole from a copy "
                           "read before the other episode's summary update (a lost update)")
        return out
    return Detector("lost-update", check)


def lost_provenance(fact: str, episodes: int) -> Detector:
    def check(state, errors):
        edges = [e for e in state["edges"] if e[1] == fact]
        cited = sorted({n for e in edges for n in e[6]})
        if errors or len(cited) >= episodes:
            return []
        return [(f"the edge(s) {fact!r} cite {len(cited)} episode(s) {cited} although {episodes} episodes stated "
                 "it: an add_episode appended its episode to a stale copy of the edge's episodes list and MERGEd it "
                 "whole")]
    return Detector("lost-update", check)


def provenance_erased() -> list[Detector]:
    """N3 on Graphiti: every episode is cited by an edge of each fact it stated. A restatement's edge is a
    duplicate, dropped in favour of the stored edge, whose ``episodes`` list then carries the new
    episode (provenance added to the survivor); an invalidated edge keeps its own list. An episode
    no edge of its fact cites is a loser whose provenance nothing keeps. Checked on serial orders
    (design) and races alike."""
    def check(state, errors):
        out = []
        for name, _group in state["episodes"]:
            body = name.split(": ", 1)[-1].replace("user(user): ", "")
            for fact in (e[3] for e in _said(body).edges):
                edges = [e for e in state["edges"] if e[1] == fact]
                if edges and not any(name in e[6] for e in edges):
                    out.append(f"episode {name!r} stated {fact!r}, and no edge of that fact cites it: its "
                               "provenance was erased (the edge was MERGEd whole from a copy read before)")
        return out
    return [Detector("N3", check, always=True), Detector("N3", check)]


def told_two_residences(reader: str) -> Detector:
    """N2 on Graphiti: a reader told two current residences (or none): add_episode saves the new edge and
    then, in another statement, the invalidated old one."""
    def check(state, errors, observed):
        seen = (observed or {}).get(reader)
        if seen is None:
            return []
        mine = [f for f in seen if SLOTS.get(f, ("", "", ""))[:2] == ("Alice", "lives in")]
        return [] if len(mine) == 1 else [
            f"{reader} read Alice's current facts while an add_episode saved its edges and was told {mine or 'none'} "
            "(serially: Berlin, or Rome with Berlin invalidated)"]
    return Detector("N2", check, observes=True)


def duplicate_edges() -> Detector:
    def check(state, errors):
        seen: dict[tuple, int] = {}
        for e in state["edges"]:
            seen[(e[0], e[1], e[2])] = seen.get((e[0], e[1], e[2]), 0) + 1
        return [f"the edge {k[1]!r} is stored {n} times: both add_episode calls searched before either wrote it"
                for k, n in sorted(seen.items()) if n > 1]
    return Detector("duplicate-insert", check)


def duplicate_entities() -> Detector:
    def check(state, errors):
        names = [(x[0], x[1]) for x in state["entities"]]
        return [f"entity {n!r} (group {g}) exists {names.count((n, g))} times: both episodes looked it up before "
                "either MERGEd it, and each created its own node" for n, g in sorted(set(names))
                if names.count((n, g)) > 1]
    return Detector("duplicate-insert", check)


def rejudged() -> Detector:
    def check(state, errors, observed):
        by_pair: dict[tuple, set] = {}
        for agent, res in sorted((observed or {}).items()):
            for v in (res or {}).get("votes", []):
                by_pair.setdefault((v["stored"], v["new"]), set()).add((agent, v["contradicted"]))
        out = []
        for (old, new), votes in sorted(by_pair.items()):
            if len({c for _, c in votes}) > 1:
                said = ", ".join(f"{a}: {'contradicted' if c else 'not contradicted'}" for a, c in sorted(votes))
                out.append(f"resolve_edge judged ({old!r}, {new!r}) twice and disagreed ({said}); graphiti keeps no "
                           "judge log, so the same contradiction is decided anew by each concurrent call")
        return out
    return Detector("N1", check, observes=True)


def retired_other_slot() -> Detector:
    """A fact invalidated although no fact of its own slot is newer: the judge called it contradicted."""
    def check(state, errors):
        out = []
        for e in state["edges"]:
            if not e[4] or e[1] not in SLOTS:
                continue
            rivals = [x for x in state["edges"] if x[1] in SLOTS and SLOTS[x[1]][:2] == SLOTS[e[1]][:2] and x is not e]
            if not rivals:
                out.append(f"{e[1]!r} was retired (invalid from {e[4]}) although no fact of its slot replaced it: "
                           "resolve_edge called an unrelated fact contradicted (a judge error, in every order: "
                           "not a race)")
        return out
    return Detector("judge-error", check, always=True)


def wrong_group(groups: dict[str, str]) -> Detector:
    """``groups``: episode-name prefix -> the group its add_episode was called with."""
    def check(state, errors):
        out = []
        for name, g in state["episodes"]:
            want = groups.get(name.split(":")[0])
            if want is not None and g != want:
                out.append(f"episode {name!r} landed in group {g!r}, not {want!r}")
        for e in state["edges"]:
            for name in e[6]:
                want = groups.get(name.split(":")[0])
                if want is not None and e[7] != want:
                    out.append(f"edge {e[1]!r} from {name!r} landed in group {e[7]!r}, not {want!r}")
        return out
    return Detector("wrong-group", check)


# -- scenarios -------------------------------------------------------------------------------------

def _scenarios(engine: GraphitiEngine) -> dict[str, Scenario]:
    def seeded(*bodies):
        def setup(h):
            if bodies:
                _run(engine.add(h, "setup", bodies))
        setup.seeds = bodies  # for the trial's memory history
        return setup

    def calls(plan: dict[str, tuple], groups: dict[str, str] | None = None):
        def call(h, agent):
            if plan[agent] == ("current facts",):
                return current_facts(h)
            return engine.add(h, agent, plan[agent], (groups or {}).get(agent, GROUP))
        call.plan = plan
        return call

    shared = not engine.zep  # graphiti: one Graphiti serves concurrent calls; zep: one per server worker
    sc = [
        Scenario("contradicting-episodes",
                 "Alice lives in Berlin (seeded); two add_episode calls say she moved to Paris (March) and to Rome "
                 "(May). Serially the later fact invalidates the earlier and Berlin ends in March; concurrently "
                 "both new facts can stay current (missed contradiction), Berlin's invalid_at can come from the "
                 "later writer's stale copy, and Alice's summary can lose one fact",
                 ("A", "B"), calls({"A": ("Alice moved to Paris.",), "B": ("Alice moved to Rome.",)}),
                 seeded("Alice lives in Berlin."), shared,
                 (double_current(), lost_invalidation(), lost_summary(), duplicate_entities(), *provenance_erased()),
                 ("double-supersede", "lost-update", "N3")),
        Scenario("read-during-invalidation",
                 "Alice lives in Berlin (seeded); agent A's add_episode says she moved to Rome while agent R reads "
                 "the group's current facts (EntityEdge.get_by_group_ids). add_episode saves the new edge, then "
                 "the invalidated Berlin edge, each its own statement: between them R is told two residences",
                 ("A", "R"), calls({"A": ("Alice moved to Rome.",), "R": ("current facts",)}),
                 seeded("Alice lives in Berlin."), shared, (told_two_residences("R"),), ("N2",), observe=True),
        Scenario("restated-fact",
                 "Alice lives in Berlin (seeded); two episodes restate it at once. Serially the edge's episodes "
                 "list cites all three episodes; concurrently one append is lost (the edge is MERGEd whole from a "
                 "stale copy), or neither sees the other's edge",
                 ("A", "B"), calls({"A": ("Alice still lives in Berlin.",), "B": ("Alice still lives in Berlin.",)}),
                 seeded("Alice lives in Berlin."), shared,
                 (lost_provenance(BERLIN_F, 3), duplicate_edges(), duplicate_entities(), lost_summary(),
                  *provenance_erased()), ("lost-update", "N3")),
        Scenario("new-entity-twice",
                 "Alice works at Acme (seeded); two episodes both introduce Bob. Serially the second finds Bob; "
                 "concurrently both look him up before either writes him and Bob exists twice",
                 ("A", "B"), calls({"A": ("Alice met Bob.",), "B": ("Bob plays chess.",)}),
                 seeded("Alice works at Acme."), shared, (duplicate_entities(),), ("duplicate-insert",)),
        Scenario("out-of-order-episodes",
                 "(reported race) Alice works at Acme (seeded); the newer episode 'moved to Rome' (May) and the "
                 "older 'lives in Berlin' (January) are ingested at once. Serially, in either order, Rome is current "
                 "and Berlin ends in May (graphiti expires an older edge on arrival); concurrently the older fact "
                 "can survive the newer one",
                 ("A", "B"), calls({"A": ("Alice moved to Rome.",), "B": ("Alice lives in Berlin.",)}),
                 seeded("Alice works at Acme."), shared,
                 (older_survives(), double_current(), lost_summary()), ("stale-current",)),
        Scenario("groups-share-driver",
                 "(reported race, graphiti #1676) two add_episode calls for different group ids on one Graphiti: "
                 "before 0.31 a call reassigned the shared driver to its group's database mid-flight, so the other's "
                 "writes landed in the wrong graph. 0.31.2 scopes the driver per request; on Kuzu there is one "
                 "database and clone() returns the same driver, so only group_id labels can go wrong",
                 ("A", "B"), calls({"A": ("Alice moved to Rome.",), "B": ("Carol lives in Oslo.",)},
                                   {"A": "alice", "B": "carol"}),
                 seeded(), shared, (wrong_group({"A": "alice", "B": "carol"}), duplicate_entities()), ("wrong-group",)),
        Scenario("wide-invalidation",
                 "(reported: invalidation searched too widely and retired facts that did not contradict) Alice lives "
                 "in Berlin and works at Acme (seeded); one episode says she moved to Rome. graphiti lists the whole "
                 "group's facts as invalidation candidates; a correct judge retires Berlin only, a sloppy one "
                 "(engine option judge=sloppy_judge) also retires Acme, serially too: a judge failure, not a race",
                 ("A",), calls({"A": ("Alice moved to Rome.",)}),
                 seeded("Alice lives in Berlin.", "Alice works at Acme."), shared, (retired_other_slot(),),
                 ("judge-error",)),
        Scenario("rejudge",
                 "(reported race: a contradiction caught in one run out of nine) Alice lives in Berlin (seeded); two "
                 "episodes say she moved to Rome. Serially the second finds Rome's edge verbatim and asks no LLM; "
                 "concurrently both ask resolve_edge about (Berlin, Rome). With a temperature-1 judge (engine option "
                 "judge=wobbling_judge()) the answers can differ: N1, and no judge log",
                 ("A", "B"), calls({"A": ("Alice moved to Rome.",), "B": ("Alice moved to Rome.",)}),
                 seeded("Alice lives in Berlin."), shared,
                 (rejudged(), duplicate_edges(), lost_provenance(ROME_F, 2), lost_summary()), ("N1", "duplicate-insert"),
                 observe=True),
    ]
    return {s.name: s for s in sc}


def graphiti() -> GraphitiEngine:
    return GraphitiEngine()


def zep() -> GraphitiEngine:
    return GraphitiEngine(zep=True)


def graphiti_sloppy() -> GraphitiEngine:
    """Graphiti whose resolve_edge also retires facts of other slots (a judge error)."""
    return GraphitiEngine(judge=sloppy_judge)


def graphiti_rejudge(p: float = 0.5, seed: int = 0) -> GraphitiEngine:
    """Graphiti with resolve_edge at temperature 1 (its default for the call): for N1."""
    return GraphitiEngine(judge=wobbling_judge(p, seed))


def zep_rejudge(p: float = 0.5, seed: int = 0) -> GraphitiEngine:
    """The Zep CE model with resolve_edge at temperature 1: for N1."""
    return GraphitiEngine(zep=True, judge=wobbling_judge(p, seed))
