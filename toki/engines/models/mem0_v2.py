"""mem0 v2 (PyPI ``mem0ai`` 1.0.x), a faithful model of its ADD/UPDATE/DELETE/NONE write path.

toki runs the real ``mem0ai`` 2.x elsewhere; 2.x is ADD-only, and the 1.0.x judge path (docs/tables/verdicts.md
"mem0 v2") is not installed here, so this module models it; executed = "model". Read on
2026-12-01 from stored copies: the mem0ai/mem0 ``mem0/memory/main.py`` in the index is 2.x, so the
1.0.x functions were read from codeflash-ai/mem0@1d50fe9 ``mem0/memory/main.py`` (a fork that tracks
mem0ai/mem0 1.0.x; several other forks agree on these functions), and the vector store from
mem0ai/mem0@033b104 ``mem0/vector_stores/qdrant.py`` (``update`` upserts a ``PointStruct``; ``get``
returns None for a missing id):

- ``Memory._add_to_vector_store``: one fact-extraction LLM call; then per fact ``embed`` and
  ``vector_store.search(query, vectors, limit=5, filters)``; the retrieved memories are deduplicated
  by id and their ids replaced by "0", "1", ... (``temp_uuid_mapping``, against UUID
  hallucination); one update LLM call (``get_update_memory_messages``, temperature 0.1 in the
  default OpenAI config, no seed, nothing logged) returns ``{"memory": [{"id", "text", "event",
  "old_memory"}]}`` with event ADD / UPDATE / DELETE / NONE; each action is applied in turn, and
  an exception in one action is logged ("Error processing memory action") and skipped;
- ``_create_memory``: ``uuid4`` id, ``vector_store.insert``, then ``db.add_history(id, None, data,
  "ADD")``;
- ``_update_memory``: ``vector_store.get`` (the old value), ``vector_store.update`` (the default
  Qdrant store upserts the point: id, vector, payload), then ``db.add_history(id, prev, data,
  "UPDATE")``;
- ``_delete_memory``: ``vector_store.get``, ``vector_store.delete`` (hard delete), then
  ``db.add_history(id, prev, None, "DELETE", is_deleted=1)``;
- ``mem0/memory/storage.py`` ``SQLiteManager.add_history``: one INSERT into ``history`` in its
  own SQLite file (``history_db_path``) and commit: not in the vector store's transaction.

No lock or transaction spans the search, the LLM call and the writes.

What the model keeps: the vector store is a SQLite file (``vectors.db``, one autocommit statement
per store call, as Qdrant's local mode persists each call) and the history is another
(``history.db``). Stand-ins, all deterministic: the extraction LLM returns the message as the one
fact; the embedder is a hashed bag of words; ids are hashes of (agent, call number, text) in place of
``uuid4``; the update LLM is the table ``RELATIONS`` (which stored memory a new fact duplicates,
refines or contradicts, and how the prompt's examples resolve it), and for a contradiction which
fact stands comes from a :mod:`toki.judges` judge: by default a fixture at mem0's temperature 0.1
in which the new fact always wins (p = 0 stays 0 at any temperature, so runs are reproducible);
the scenario ``rejudge`` asks a temperature-1 fixture with p = 0.5 instead (an evidence-tied pair;
p = 0.5 stays 0.5 at 0.1 too), so N1 is measured through the model's decision code. Simpler than
mem0: no graph store, no ``created_at``/``updated_at`` (wall-clock), no actor/role metadata, no
procedural memory, one user, and the whole update LLM answer is decided per fact.

What the harness finds in it (``toki certify --engine mem0-v2``): concurrent UPDATEs of one memory
lose one (two history rows from the same old value, or an update decided on a value that changed
before its upsert); an UPDATE racing a DELETE resurrects the deleted memory, or fails and mem0
drops the fact, or the DELETE removes a refinement it never saw; duplicate ADDs; both of two
contradicting facts current; history rows out of the store's order (the history write is a second
database call). By design, in serial runs: N3 (UPDATE and DELETE destroy the old memory; the history
keeps its text but not what replaced it or why), an older fact replacing a newer one (arrival
order), N1 with a wobbling judge, and the reported "love then hate leaves an empty store" as a judge
failure.
"""

from __future__ import annotations

import json
from pathlib import Path

from toki.harness.engine import Detector, Scenario
from toki.engines.models import (
    JudgeFactory,
    ask_judge,
    connect,
    cosine,
    embed,
    greedy_judge,
    rejudged,
    stable_id,
    wobbling_judge,
)
from toki.errors import ConfigError

UPSTREAM = "mem0ai/mem0"
VERSION = ("model of mem0ai/mem0 1.0.x: mem0/memory/main.py (Memory._add_to_vector_store, _create_memory, "
           "_update_memory, _delete_memory) as in codeflash-ai/mem0@1d50fe9, mem0/vector_stores/qdrant.py "
           "(update = upsert) @033b104, mem0/memory/storage.py (SQLiteManager.add_history), read 2026-12-01; "
           "toki model 1")
TEMPERATURE = 0.1  # mem0's default LLM config
SEARCH_LIMIT = 5
USER = "alice"

TEA, GREEN, MILK = "Alice likes tea.", "Alice likes green tea.", "Alice likes tea with milk."
BOTH, NOTEA, DOG = "Alice likes green tea with milk.", "Alice no longer drinks tea.", "Alice has a dog."
LOVE, HATE = "I love Chinese food.", "I hate Chinese food."
PARIS, ROME = "Alice lives in Paris.", "Alice lives in Rome."
ACME, GLOBEX, INITECH = "Alice works at Acme.", "Alice works at Globex.", "Alice works at Initech."

# When each fact happened (mem0 1.0.x stores no event time; the detector of ingestion order uses it).
EVENT_DAY = {PARIS: "2026-03-01", ROME: "2026-05-01", LOVE: "2026-01-01", HATE: "2026-02-01"}

# The update LLM's reading of (stored memory, new fact): ("update", merged text) refines the stored
# memory in place; ("contradiction", style) asks the judge which stands and, when the new fact wins,
# resolves it as the prompt's examples do: "update" in place, "delete" the old one only (the
# prompt's DELETE example "Dislikes cheese pizza" deletes "Loves cheese pizza" and adds nothing),
# or "delete-add". Identical texts are duplicates (NONE).
RELATIONS: dict[tuple[str, str], tuple[str, str]] = {
    (TEA, GREEN): ("update", GREEN), (TEA, MILK): ("update", MILK),
    (GREEN, MILK): ("update", BOTH), (MILK, GREEN): ("update", BOTH),
    (BOTH, GREEN): ("duplicate", ""), (BOTH, MILK): ("duplicate", ""),
    (TEA, NOTEA): ("contradiction", "delete-add"), (GREEN, NOTEA): ("contradiction", "delete-add"),
    (MILK, NOTEA): ("contradiction", "delete-add"), (BOTH, NOTEA): ("contradiction", "delete-add"),
    (NOTEA, GREEN): ("contradiction", "update"), (NOTEA, MILK): ("contradiction", "update"),
    (LOVE, HATE): ("contradiction", "delete"), (HATE, LOVE): ("contradiction", "delete"),
    (PARIS, ROME): ("contradiction", "update"), (ROME, PARIS): ("contradiction", "update"),
    # A change of employer, resolved as the prompt's DELETE instruction says ("if the retrieved facts
    # contradict the memory, delete it") with the new fact added: DELETE, then ADD.
    **{(a, b): ("contradiction", "delete-add") for a in (ACME, GLOBEX, INITECH) for b in (ACME, GLOBEX, INITECH)
       if a != b},
}
CONTRADICTIONS = [k for k, v in RELATIONS.items() if v[0] == "contradiction"]


def mem0_judge() -> JudgeFactory:
    return greedy_judge(CONTRADICTIONS, "mem0-update-fixture", temperature=TEMPERATURE)


def mem0_wobbling_judge(p: float = 0.5, seed: int = 0) -> JudgeFactory:
    return wobbling_judge(CONTRADICTIONS, "mem0-update-wobbling", p=p, seed=seed)


# -- storage: the vector store (Qdrant's calls) and the history database -------------------------

class VectorStore:
    def __init__(self, path: Path):
        self.conn = connect(path)
        self.conn.execute("CREATE TABLE IF NOT EXISTS memories (id TEXT PRIMARY KEY, data TEXT NOT NULL, "
                          "hash TEXT, user_id TEXT, vector TEXT)")

    def insert(self, mid: str, vector: list[float], payload: dict) -> None:
        self.conn.execute("INSERT INTO memories VALUES (?, ?, ?, ?, ?)",
                          (mid, payload["data"], payload["hash"], payload["user_id"], json.dumps(vector)))

    def search(self, vector: list[float], limit: int, user_id: str) -> list[tuple[str, str]]:
        rows = self.conn.execute("SELECT id, data, vector FROM memories WHERE user_id = ?", (user_id,)).fetchall()
        ranked = sorted(rows, key=lambda r: (-cosine(vector, json.loads(r[2])), r[0]))
        return [(r[0], r[1]) for r in ranked[:limit]]

    def get(self, mid: str) -> dict | None:
        row = self.conn.execute("SELECT data, hash, user_id FROM memories WHERE id = ?", (mid,)).fetchone()
        return None if row is None else {"data": row[0], "hash": row[1], "user_id": row[2]}

    def update(self, mid: str, vector: list[float], payload: dict) -> None:
        # Qdrant's update is an upsert of the whole point: it writes whatever the caller holds.
        self.conn.execute("INSERT OR REPLACE INTO memories VALUES (?, ?, ?, ?, ?)",
                          (mid, payload["data"], payload["hash"], payload["user_id"], json.dumps(vector)))

    def delete(self, mid: str) -> None:
        self.conn.execute("DELETE FROM memories WHERE id = ?", (mid,))

    def list(self) -> list[tuple[str, str]]:
        return self.conn.execute("SELECT id, data FROM memories ORDER BY id").fetchall()


class History:
    def __init__(self, path: Path):
        self.conn = connect(path)
        self.conn.execute("CREATE TABLE IF NOT EXISTS history (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                          "memory_id TEXT, old_memory TEXT, new_memory TEXT, event TEXT, is_deleted INTEGER)")

    def add_history(self, mid: str, old: str | None, new: str | None, event: str, is_deleted: int = 0) -> None:
        self.conn.execute("BEGIN")
        self.conn.execute("INSERT INTO history (memory_id, old_memory, new_memory, event, is_deleted) "
                          "VALUES (?, ?, ?, ?, ?)", (mid, old, new, event, is_deleted))
        self.conn.execute("COMMIT")

    def all(self) -> list[tuple]:
        return self.conn.execute("SELECT memory_id, event, old_memory, new_memory FROM history ORDER BY seq").fetchall()


class Mem0Handle:
    """One ``Memory`` instance: its vector store client, its history database, its LLM clients."""

    def __init__(self, model: Mem0V2Model, location: Path):
        self.model = model
        self.vs = VectorStore(Path(location) / "vectors.db")
        self.db = History(Path(location) / "history.db")
        self.agent: str | None = None
        self.judge = None
        self.calls = 0

    def bind(self, agent: str, factory: JudgeFactory) -> None:
        if (self.agent, getattr(self, "_factory", None)) != (agent, factory):
            self.agent, self._factory, self.judge = agent, factory, factory(agent)

    def close(self) -> None:
        self.vs.conn.close()
        self.db.conn.close()


# -- mem0/memory/main.py ----------------------------------------------------------------------------

def update_llm(h: Mem0Handle, old_memory: list[dict], facts: list[str], votes: list[dict]) -> list[dict]:
    """The update LLM's JSON answer (stand-in: RELATIONS plus a judge vote per contradiction)."""
    out: list[dict] = []
    used: set[str] = set()
    for fact in facts:
        rel = [(m, RELATIONS.get((m["text"], fact), ("duplicate", "") if m["text"] == fact else None))
               for m in old_memory if m["id"] not in used]
        rel = [(m, r) for m, r in rel if r is not None]
        dup = next((m for m, r in rel if r[0] == "duplicate"), None)
        upd = next(((m, r) for m, r in rel if r[0] == "update"), None)
        con = next(((m, r) for m, r in rel if r[0] == "contradiction"), None)
        if dup is not None:
            out.append({"id": dup["id"], "text": dup["text"], "event": "NONE"})
            used.add(dup["id"])
        elif upd is not None:
            m, (_, merged) = upd
            out.append({"id": m["id"], "text": merged, "event": "UPDATE", "old_memory": m["text"]})
            used.add(m["id"])
        elif con is not None:
            m, (_, style) = con
            used.add(m["id"])
            if not ask_judge(h.judge, m["text"], fact, votes):
                out.append({"id": m["id"], "text": m["text"], "event": "NONE"})
            elif style == "update":
                out.append({"id": m["id"], "text": fact, "event": "UPDATE", "old_memory": m["text"]})
            else:
                out.append({"id": m["id"], "text": m["text"], "event": "DELETE"})
                if style == "delete-add":
                    out.append({"id": str(len(old_memory) + len(out)), "text": fact, "event": "ADD"})
        else:
            out.append({"id": str(len(old_memory) + len(out)), "text": fact, "event": "ADD"})
    return out


def _payload(data: str) -> dict:
    import hashlib
    return {"data": data, "hash": hashlib.md5(data.encode()).hexdigest(), "user_id": USER}


def _create_memory(h: Mem0Handle, data: str, embeddings: dict) -> str:
    h.calls += 1
    mid = stable_id("m-", h.agent or "", str(h.calls), data)
    vec = embeddings.get(data) or embed(data)
    h.vs.insert(mid, vec, _payload(data))
    h.db.add_history(mid, None, data, "ADD")
    return mid


def _update_memory(h: Mem0Handle, mid: str, data: str, embeddings: dict) -> str:
    existing = h.vs.get(mid)
    prev = existing["data"]  # a memory deleted meanwhile: TypeError, logged and skipped by the caller
    vec = embeddings.get(data) or embed(data)
    h.vs.update(mid, vec, _payload(data))
    h.db.add_history(mid, prev, data, "UPDATE")
    return mid


def _delete_memory(h: Mem0Handle, mid: str) -> str:
    existing = h.vs.get(mid)
    prev = existing["data"]
    h.vs.delete(mid)
    h.db.add_history(mid, prev, None, "DELETE", is_deleted=1)
    return mid


def add(h: Mem0Handle, message: str) -> dict:
    """``Memory.add(message, user_id=...)`` with ``infer=True``: ``_add_to_vector_store``."""
    facts = [message]  # the extraction LLM's "facts" (stand-in: the message is one fact)
    embeddings: dict[str, list[float]] = {}
    retrieved: list[dict] = []
    for fact in facts:
        embeddings[fact] = embed(fact)
        for mid, data in h.vs.search(embeddings[fact], SEARCH_LIMIT, USER):
            retrieved.append({"id": mid, "text": data})
    unique = list({m["id"]: m for m in retrieved}.values())
    temp_uuid_mapping = {}
    for idx, m in enumerate(unique):
        temp_uuid_mapping[str(idx)] = m["id"]
        unique[idx] = {"id": str(idx), "text": m["text"]}
    votes: list[dict] = []
    actions = update_llm(h, unique, facts, votes) if facts else []
    returned, errors = [], []
    for resp in actions:
        try:
            event = resp["event"]
            if event == "ADD":
                mid = _create_memory(h, resp["text"], embeddings)
                returned.append({"id": mid, "memory": resp["text"], "event": "ADD"})
            elif event == "UPDATE":
                mid = _update_memory(h, temp_uuid_mapping[resp["id"]], resp["text"], embeddings)
                returned.append({"id": mid, "memory": resp["text"], "event": "UPDATE",
                                 "previous_memory": resp.get("old_memory")})
            elif event == "DELETE":
                mid = _delete_memory(h, temp_uuid_mapping[resp["id"]])
                returned.append({"id": mid, "memory": resp["text"], "event": "DELETE"})
        except Exception as e:  # noqa: BLE001 - mem0: logger.error("Error processing memory action ...") and go on
            errors.append(f"{resp['event']} {resp['text']!r}: {type(e).__name__}")
    return {"results": returned, "votes": votes, "errors": errors}


# -- the engine ------------------------------------------------------------------------------------

class Mem0V2Model:
    name = "mem0-v2"
    executed = "model"
    version = VERSION
    system = "mem0 1.0.x"  # what the row stands for (verdict tables)

    def __init__(self, *, judge: JudgeFactory | None = None, rejudge_judge: JudgeFactory | None = None):
        # "rejudge" measures N1, so it asks a judge that can change its mind (temperature 1, p = 0.5)
        self.rejudge_judge = rejudge_judge or mem0_wobbling_judge()
        self.judge_factory = judge or mem0_judge()
        self.scenarios = _scenarios(self)

    @property
    def description(self) -> str:
        return ("a model of mem0 1.0.x: per fact a top-5 search, one update LLM call (ADD/UPDATE/DELETE/NONE, "
                "temperature 0.1), in-place upsert, hard delete, a history table in another SQLite file; no lock "
                "or transaction from search to write")

    def open(self, location: Path) -> Mem0Handle:
        return Mem0Handle(self, Path(location))

    def close(self, h: Mem0Handle) -> None:
        h.close()

    def state(self, h: Mem0Handle) -> dict:
        hist: dict[str, list] = {}
        for mid, event, old, new in h.db.all():
            hist.setdefault(mid, []).append([event, old, new])
        return {"memories": [list(r) for r in h.vs.list()],
                "history": [[mid, rows] for mid, rows in sorted(hist.items())]}

    # -- a trial as a memory history (toki.record.trial_history) -------------------------------
    def memory_history(self, scenario: str, outcome, returned: dict | None = None) -> dict | None:
        """See :func:`history_spec` (the model returns the actions that raised, as ``errors``)."""
        sc = self.scenarios.get(scenario)
        plan = getattr(getattr(sc, "call", None), "plan", None)
        if not plan or not isinstance(outcome.state, dict) or "memories" not in outcome.state:
            return None
        return history_spec(plan, getattr(sc.setup, "texts", ()) if sc.setup else (), outcome, returned or {},
                            errors_returned=True)

    def run_plan(self, h: Mem0Handle, agent: str, plan: tuple, judge: JudgeFactory | None = None) -> dict:
        h.bind(agent, judge or self.judge_factory)
        results, votes, errors = [], [], []
        for op, *args in plan:
            if op == "search":  # Memory.search: embed the query, one vector-store search
                results.append(sorted(text for _, text in h.vs.search(embed(args[0]), SEARCH_LIMIT, USER)))
                continue
            if op != "add":
                raise ConfigError(f"unknown mem0 call {op!r}", fix="use add or search")
            r = add(h, args[0])
            results.append(r["results"])
            votes.extend(r["votes"])
            errors.extend(r["errors"])
        return {"results": results, "votes": votes, "errors": errors}


# -- a trial as a memory history ----------------------------------------------------------------------

# Which belief each text is about: the texts of one topic refine or contradict each other (RELATIONS).
TOPICS = {**{t: "alice/tea" for t in (TEA, GREEN, MILK, BOTH, NOTEA)},
          **{t: "alice/employer" for t in (ACME, GLOBEX, INITECH)},
          PARIS: "alice/residence", ROME: "alice/residence", LOVE: "me/chinese food", HATE: "me/chinese food",
          DOG: "alice/pet"}


SEARCH_TOPICS = {"Where does Alice work?": "alice/employer"}


def _add_mops(message: str, actions: list[dict], votes: list[dict], failed: list) -> list | None:
    """One add() as micro-ops, from the actions it returned and its votes (the update LLM's
    reading of the memories the search showed it). An UPDATE read its ``previous_memory``,
    retracted it and added its text; a DELETE read the memory's text and retracted it; an ADD
    with nothing deleted read the topic empty (every two texts of a topic in these scenarios are
    related, so a memory shown would have been updated, deleted or kept); a NONE returns
    nothing: with a vote, the judge kept the stored text (read), without one the message was
    stored already (read). Every vote is a ``decide`` over (stored, new). None when an action
    raised (``failed``, or a vote the new fact won with no action on the stored text: mem0
    1.0.11 does not return an action that raised): its read of one memory by id (gone) says
    nothing of the rest."""
    if failed:
        return None
    slot = TOPICS.get(message)
    if slot is None or any(TOPICS.get(a["memory"]) != slot for a in actions):
        return None
    out: list = [["decide", f"{slot}: {v['stored']} | {v['new']}", sorted([v["stored"], v["new"]]),
                  v["new"] if v["new_wins"] else v["stored"]] for v in votes]
    done = {a.get("previous_memory") or a["memory"] for a in actions if a["event"] in ("UPDATE", "DELETE")}
    if any(v["new_wins"] and v["stored"] not in done for v in votes):
        return None  # the judge let the new fact win and no action replaced the stored one: it raised
    kept = [v["stored"] for v in votes if not v["new_wins"]]
    if not actions:
        return out + [["current", slot, kept or [message]]]
    reads = [a.get("previous_memory") or a["memory"] for a in actions if a["event"] in ("UPDATE", "DELETE")]
    out.append(["current", slot, sorted(reads)])
    for a in actions:
        if a["event"] == "UPDATE":
            out += [["retract", slot, a["previous_memory"]], ["add", slot, a["memory"]]]
        elif a["event"] == "DELETE":
            out.append(["retract", slot, a["memory"]])
        elif a["event"] == "ADD":
            out.append(["add", slot, a["memory"]])
        else:
            return None
    return out


def history_spec(plan: dict, seed, outcome, returned: dict, *, errors_returned: bool) -> dict | None:
    """mem0 1.0.x's trial as memory micro-ops (this model and the real mem0 1.0.11 engine): each
    topic (TOPICS) a single-valued slot, a claim a memory's text. The state names memories by id
    or by the text they were added with, and keeps each memory's history rows in another
    database (ordered per memory, with no order across memories): the final reads are current
    reads of each topic. A search is a current read of the topic it asks about.

    ``errors_returned``: whether add() reports the actions that raised (the model does; mem0
    1.0.11 only logs them). Where it does not, an add that returned no action and asked no judge
    may have been a NONE (its text stored already) or an UPDATE that raised: None."""
    agents: dict[str, list] = {}
    slots = {TOPICS[t] for t in seed if t in TOPICS}
    for agent, steps in plan.items():
        got = returned.get(agent) if agent in outcome.completed else None
        if not isinstance(got, dict):
            agents[agent] = [["add", TOPICS[a[0]], a[0]] for op, *a in steps if op == "add" and a[0] in TOPICS]
            continue
        votes, errors = list(got.get("votes", [])), list(got.get("errors", []))
        mops: list = []
        for (op, *args), res in zip(steps, got.get("results", [])):
            if op == "search":
                topic = SEARCH_TOPICS.get(args[0])
                if topic is None or any(TOPICS.get(t) != topic for t in res):
                    return None  # the top 5 of the user's memories: these scenarios hold no other topic's
                mops.append(["current", topic, sorted(res)])
                continue
            mine = [v for v in votes if v["new"] == args[0]]
            if not res and not mine and not errors_returned:
                return None
            add = _add_mops(args[0], res, mine, errors)
            if add is None:
                return None
            mops += add
        agents[agent] = mops
        slots |= {m[1] for m in mops if m[0] != "decide"}
    texts = [m[1] for m in outcome.state["memories"]]
    if any(t not in TOPICS for t in texts):
        return None
    slots |= {TOPICS[t] for t in texts}
    final = [["current", sl, sorted(t for t in texts if TOPICS[t] == sl)] for sl in sorted(slots)]
    return {"setup": [["add", TOPICS[t], t] for t in seed], "agents": agents, "final": final}


# -- detectors ---------------------------------------------------------------------------------------

def _texts(state) -> list[str]:
    return [m[1] for m in state["memories"]]


def _history(state) -> dict[str, list]:
    return {mid: rows for mid, rows in state["history"]}


def updates_from_same_value() -> Detector:
    def check(state, errors):
        out = []
        for mid, rows in sorted(_history(state).items()):
            olds = [r[1] for r in rows if r[0] == "UPDATE"]
            for old in sorted(set(olds)):
                news = [r[2] for r in rows if r[0] == "UPDATE" and r[1] == old]
                if olds.count(old) > 1 and len(set(news)) > 1:
                    out.append(f"memory {mid} was updated {olds.count(old)} times from the same old value {old!r} "
                               f"(to {news}): each writer read it before the other wrote, and the later upsert "
                               "overwrote the earlier update without seeing it")
        return out
    return Detector("lost-update", check)


def written_then_lost(*texts: str) -> Detector:
    def check(state, errors):
        have = set(_texts(state))
        seen = {r[2] for _, rows in state["history"] for r in rows}
        return [f"{t!r} was never stored although its add() returned: its UPDATE found the memory deleted, and "
                "mem0 logs the error and drops the action" for t in texts if t not in have and t not in seen]
    return Detector("lost-update", check)


def decided_on_stale_value() -> Detector:
    """An UPDATE or DELETE decided on one value (what the search returned) and overwrote another."""
    def check(state, errors, observed):
        from collections import Counter

        rows = Counter((mid, r[0], r[1], r[2]) for mid, rs in state["history"] for r in rs)
        out = []
        for agent, res in sorted((observed or {}).items()):
            for call in res.get("results", []):
                for r in call:
                    key = (r["id"], r["event"], r.get("previous_memory", r["memory"]),
                           r["memory"] if r["event"] == "UPDATE" else None)
                    if r["event"] in ("UPDATE", "DELETE") and rows[key] > 0:
                        rows[key] -= 1
                        continue
                    if r["event"] == "UPDATE":
                        olds = sorted(o for (m, e, o, n), c in rows.items()
                                      if c > 0 and m == r["id"] and e == "UPDATE" and n == r["memory"])
                        if olds and olds[0] == r["memory"]:
                            continue  # it overwrote the same value: nothing lost
                        out.append(f"agent {agent}'s update LLM rewrote {r['previous_memory']!r} as {r['memory']!r}, "
                                   f"but the memory held {olds[0] if olds else None!r} when the upsert overwrote it: "
                                   "that value is lost (no lock from search to write)")
                    if r["event"] == "DELETE":
                        olds = sorted(o for (m, e, o, n), c in rows.items() if c > 0 and m == r["id"] and e == "DELETE")
                        out.append(f"agent {agent}'s update LLM deleted {r['memory']!r}, but the memory held "
                                   f"{olds[0] if olds else None!r} when it was deleted: a concurrent update was "
                                   "destroyed unseen (no lock from search to write)")
        return out
    return Detector("lost-update", check, observes=True)


def judged_twice() -> Detector:
    def check(state, errors, observed):
        seen: dict[tuple, list[str]] = {}
        for agent, res in sorted((observed or {}).items()):
            for v in res.get("votes", []):
                seen.setdefault((v["stored"], v["new"]), []).append(agent)
        return [f"the contradiction ({a!r}, {b!r}) went to the update LLM from {', '.join(who)}: each searched before "
                "the other wrote (serially the second finds the first's result); with no judge log the answers need "
                "not agree" for (a, b), who in sorted(seen.items()) if len(who) > 1]
    return Detector("rejudged", check, observes=True)


def history_out_of_order() -> Detector:
    """The history row is written after the store call, in another database: others act in between."""
    def check(state, errors):
        out = []
        for mid, rows in sorted(_history(state).items()):
            for i, (event, old, new) in enumerate(rows):
                if i == 0 and event != "ADD":
                    out.append(f"memory {mid}'s history starts with {event} ({old!r} -> {new!r}), before the ADD that "
                               "created it: another add() found and changed the memory between its insert and its "
                               "history row (the history is not in the vector store's transaction)")
                elif i > 0 and old != rows[i - 1][2] and not (event == "UPDATE" and ("UPDATE", old) in
                                                                 [(r[0], r[1]) for r in rows[:i]]):
                    out.append(f"memory {mid}'s history row {event} ({old!r} -> {new!r}) does not follow the row before "
                               f"it ({rows[i - 1][0]} -> {rows[i - 1][2]!r}): the history's order is not the store's")
        return out
    return Detector("non-atomic-history", check)


def update_after_delete() -> Detector:
    def check(state, errors):
        out = []
        have = {m[0] for m in state["memories"]}
        for mid, rows in sorted(_history(state).items()):
            events = [r[0] for r in rows]
            if "DELETE" in events and "UPDATE" in events[events.index("DELETE"):]:
                out.append(f"memory {mid} was updated after it was deleted: the update read it before the delete "
                           "and upserted it after, so history says DELETE then UPDATE"
                           + (" and the deleted memory is back in the store" if mid in have else ""))
        return out
    return Detector("lost-update", check)


def duplicates() -> Detector:
    def check(state, errors):
        ts = _texts(state)
        return [f"{t!r} is stored {ts.count(t)} times: both add() calls searched before either inserted, and the "
                "update LLM answered ADD to each" for t in sorted(set(ts)) if ts.count(t) > 1]
    return Detector("duplicate-insert", check)


def contradicting_current() -> Detector:
    def check(state, errors):
        ts = set(_texts(state))
        return [f"{a!r} and {b!r} are both current: each add() searched before the other inserted"
                for a, b in CONTRADICTIONS if a < b and a in ts and b in ts]
    return Detector("double-current", check)


def employers_current() -> Detector:
    """Two current employers: both agents deleted the one they read and each added its own."""
    def check(state, errors):
        cur = sorted(t for t in _texts(state) if t in (ACME, GLOBEX, INITECH))
        return [f"{cur} are all current: each add() read {ACME!r}, deleted it and added its own fact (serially "
                "the second deletes the first's)"] if len(cur) > 1 else []
    return Detector("double-supersede", check)


def told_mid_replace(reader: str) -> Detector:
    """N2 on mem0 1.0.x: a search between the DELETE and the ADD of one replacement."""
    def check(state, errors, observed):
        res = (observed or {}).get(reader)
        if not res:
            return []
        seen = [t for t in res["results"][0] if t in (ACME, GLOBEX, INITECH)]
        if len(seen) != 1:
            return [f"{reader} searched where Alice works while another add() replaced it and was told {seen or 'nothing'} "
                    "(serially it is told the old employer or the new one): the DELETE and the ADD are two "
                    "vector-store calls"]
        return []
    return Detector("N2", check, observes=True)


def destroyed_without_audit() -> Detector:
    """N3 by design: DELETE hard-deletes and UPDATE overwrites in place; the loser leaves the store."""
    def check(state, errors):
        have = set(_texts(state))
        out = []
        for mid, rows in sorted(_history(state).items()):
            for event, old, new in rows:
                if event in ("UPDATE", "DELETE") and old is not None and old not in have and old != new:
                    out.append(f"{old!r} (memory {mid}) was destroyed by {event}: no query of the store returns it "
                               "any more, and no record says which fact or LLM answer replaced it (the history row "
                               "keeps the old text only, written outside the store's transaction)")
        return out
    return Detector("N3", check, always=True)


def judge_dropped(new: str, old: str) -> Detector:
    """The reported "I love / I hate Chinese food leaves an empty store": a judge failure, not a race."""
    def check(state, errors):
        have = set(_texts(state))
        mentioned = {r[2] for _, rows in state["history"] for r in rows} | {r[1] for _, rows in state["history"]
                                                                             for r in rows}
        if new not in have and new not in mentioned and old not in have:
            return [(f"judge failure, not a race: the update LLM answered DELETE for {old!r} and no ADD for {new!r}, "
                    "so the store holds neither; it happens in a serial run (the prompt's own DELETE example "
                    "teaches it) and no audit records the dropped fact")]
        return []
    return Detector("judge-failure", check, always=True)


def ingestion_order() -> Detector:
    """An older fact replaced a newer one because mem0 orders by arrival, not event time (by design)."""
    def check(state, errors):
        out = []
        for mid, rows in sorted(_history(state).items()):
            for event, old, new in rows:
                if event == "UPDATE" and old in EVENT_DAY and new in EVENT_DAY and EVENT_DAY[new] < EVENT_DAY[old]:
                    out.append(f"memory {mid}: {new!r} (happened {EVENT_DAY[new]}) replaced {old!r} (happened "
                               f"{EVENT_DAY[old]}): mem0 orders by ingestion, not event time")
        return out
    return Detector("ingestion-order", check, always=True)


# -- scenarios ----------------------------------------------------------------------------------------

def _scenarios(engine: Mem0V2Model) -> dict[str, Scenario]:
    def seeded(*texts):
        def setup(h):
            engine.run_plan(h, "setup", tuple(("add", t) for t in texts))
        setup.texts = texts  # the seed, for the trial's memory history
        return setup

    def calls(plan: dict[str, tuple], judge: JudgeFactory | None = None):
        def call(h, agent):
            return engine.run_plan(h, agent, plan[agent], judge)
        call.plan = plan  # what each agent says, for the trial's memory history
        return call

    sc = [
        Scenario("concurrent-update",
                 "two add() calls refine one stored memory ('Alice likes tea') with 'green tea' and 'tea with milk'. "
                 "Serially the second merges into 'green tea with milk'; concurrently both read 'tea' and both "
                 "UPDATE it, the later upsert overwriting the earlier (lost update). Also the reported LangMem-style "
                 "race 'a blind put overwrites a concurrent writer's record and destroys the loser (P4 and N3)': "
                 "Qdrant's update is a blind upsert of what the writer read",
                 ("A", "B"), calls({"A": (("add", GREEN),), "B": (("add", MILK),)}), seeded(TEA), False,
                 (updates_from_same_value(), decided_on_stale_value(), history_out_of_order()),
                 ("lost-update", "non-atomic-history"), observe=True),
        Scenario("delete-vs-update",
                 "one add() contradicts 'Alice likes tea' ('no longer drinks tea': DELETE it, ADD the new fact) while "
                 "another refines it ('green tea': UPDATE). The UPDATE can read the memory before the DELETE and "
                 "upsert it after (a deleted memory comes back; history says DELETE then UPDATE), read it after "
                 "the DELETE and fail (mem0 logs the error and drops the fact), or the DELETE can remove the "
                 "refined memory it never saw",
                 ("A", "B"), calls({"A": (("add", NOTEA),), "B": (("add", GREEN),)}), seeded(TEA), False,
                 (update_after_delete(), written_then_lost(GREEN), decided_on_stale_value(), contradicting_current(),
                  history_out_of_order()), ("lost-update", "double-current", "non-atomic-history"), observe=True),
        Scenario("duplicate-add",
                 "the reported mem0 race 'two concurrent add of the same text both pass the duplicate check on a "
                 "stale snapshot and both insert': two add() calls of a new fact ('Alice has a dog'); serially the "
                 "second is a duplicate (NONE); concurrently both search before either inserts and both ADD",
                 ("A", "B"), calls({"A": (("add", DOG),), "B": (("add", DOG),)}), seeded(TEA), False,
                 (duplicates(), history_out_of_order()), ("duplicate-insert",)),
        Scenario("double-supersede",
                 "'Alice works at Acme' is stored; two add() calls say she works at Globex and at Initech. The "
                 "update LLM resolves a change of employer as the prompt's DELETE instruction says: DELETE the "
                 "contradicted memory, ADD the new fact. Serially the second deletes the first's; concurrently "
                 "both search before either writes, both delete Acme and both add",
                 ("A", "B"), calls({"A": (("add", GLOBEX),), "B": (("add", INITECH),)}), seeded(ACME), False,
                 (employers_current(), history_out_of_order()), ("double-supersede",)),
        Scenario("search-during-replace",
                 "agent R asks where Alice works (Memory.search) while agent A's add() replaces Acme by Globex "
                 "(DELETE, then ADD: two vector-store calls)",
                 ("A", "R"), calls({"A": (("add", GLOBEX),), "R": (("search", "Where does Alice work?"),)}),
                 seeded(ACME), False, (told_mid_replace("R"),), ("N2",), observe=True),
        Scenario("update-overwrites",
                 "one add() refines 'Alice likes tea' into 'Alice likes green tea': UPDATE overwrites the memory in "
                 "place (N3 by design, in a serial run)",
                 ("U",), calls({"U": (("add", GREEN),)}), seeded(TEA), False, (destroyed_without_audit(),), ("N3",)),
        Scenario("love-then-hate",
                 "the reported 'I love Chinese food' then 'I hate Chinese food' leaves an empty store: one agent adds "
                 "'I hate Chinese food' over the stored 'I love Chinese food'; the update LLM, following its "
                 "prompt's DELETE example, deletes the old memory and adds nothing. A judge failure, not a race "
                 "(one agent: no interleaving to search), with no audit (N3)",
                 ("U",), calls({"U": (("add", HATE),)}), seeded(LOVE), False,
                 (judge_dropped(HATE, LOVE), destroyed_without_audit()), ("judge-failure", "N3")),
        Scenario("rejudge",
                 "two add() calls of the same contradiction ('Alice lives in Rome' over 'Paris'), judged by the "
                 "temperature-1 fixture this scenario uses (p = 0.5: an evidence-tied pair, which stays 0.5 at mem0's "
                 "0.1 too): serially the second sees a duplicate and asks nothing, or re-asks when the first kept "
                 "Paris; concurrently both ask. The answers can differ and no judge log pins the first: N1",
                 ("A", "B"), calls({"A": (("add", ROME),), "B": (("add", ROME),)}, engine.rejudge_judge),
                 seeded(PARIS), False,
                 (rejudged(), judged_twice(), updates_from_same_value(), decided_on_stale_value(),
                  history_out_of_order()), ("N1",), observe=True),
        Scenario("ingestion-order",
                 "the reported 'order by ingestion instead of event time lets an older fact replace a newer one' "
                 "(LangMem and others): 'Alice lives in Rome' (happened 2026-05) and the older 'Alice lives in Paris' "
                 "(2026-03) are added by two agents; whichever arrives last UPDATEs the other in place, so in the "
                 "order Rome-then-Paris the older fact wins (by design, serial too); concurrently both ADD and both "
                 "stay current",
                 ("A", "B"), calls({"A": (("add", ROME),), "B": (("add", PARIS),)}), None, False,
                 (contradicting_current(), history_out_of_order(), ingestion_order()),
                 ("ingestion-order", "double-current", "non-atomic-history")),
    ]
    return {s.name: s for s in sc}


def mem0_v2() -> Mem0V2Model:
    return Mem0V2Model()
