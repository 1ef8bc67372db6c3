"""MIRIX's memory agents, a faithful model of how its semantic memory is updated.

MIRIX (Mirix-AI/MIRIX) runs a meta agent that triggers up to six memory agents (core, episodic,
semantic, procedural, resource, knowledge vault) in parallel; toki does not run its server here,
so this module models the semantic memory agent's write path; executed = "model". Read on
2026-12-01 from the stored copy of Mirix-AI/MIRIX:

- ``mirix/functions/function_sets/memory_tools.py`` @76741d9: ``trigger_memory_update`` runs the
  chosen memory agents in a ``ThreadPoolExecutor``, each told to "update the memory directly
  according to the memory in the system prompt" (the memories retrieved when its step starts); ``semantic_memory_insert`` lists the items
  (``list_semantic_items``, up to 1000), skips an item whose name, summary and details equal a
  listed one, else ``insert_semantic_item``; ``semantic_memory_update(old_semantic_item_ids,
  new_items)`` calls ``delete_semantic_item_by_id`` for every old id, then ``insert_semantic_item``
  for every new item - each call its own session and commit, so an update is not atomic;
- ``mirix/services/semantic_memory_manager.py``: ``delete_semantic_item_by_id`` reads the item
  (``SemanticMemoryItem.read``; ``NoResultFound`` when it is gone) and ``hard_delete``s it; no
  history table is written.

A memory agent's step: its context is built from the listed items when the step starts; the LLM
picks ``semantic_memory_insert`` for a new topic or ``semantic_memory_update`` for an item of the
same name whose summary it should replace (a contradiction: which fact stands comes from a
:mod:`toki.judges` judge; default: the new fact wins). A tool that raises goes back to the LLM as a
failed function call: the agent's call returns normally (the model returns the error text).

Storage: a SQLite file ``mirix.db`` with one table ``semantic_memory``; each manager call is its own
autocommit statement (SQLAlchemy's DELETE of a row already gone warns and goes on, as here).
Judges: by default the new fact always wins a contradiction; the scenario ``rejudge`` asks a
temperature-1 fixture with p = 0.5, to measure N1. Simpler than MIRIX: one memory type (semantic),
no embeddings, tree paths, filter tags, caches or messages; item ids are hashes of (agent, call
number, name) in place of random ids; the meta agent's routing is the scenario's choice of agents:
two agents of a scenario are two semantic memory agent runs at once (two messages absorbed
concurrently, each triggering its memory agents), or a memory agent and a reader.

What the harness finds in it (``toki certify --engine mirix``): two concurrent updates of one item
both delete it and both insert (two latest versions), or the second's delete finds it gone and its
fact is lost to a failed function call; two concurrent inserts of one item (the duplicate check is
a list read before either insert); a reader between an update's delete and insert sees the slot
empty (N2). By design: N3 (hard delete, no history) and N1 with a wobbling judge.
"""

from __future__ import annotations

from pathlib import Path

from toki.harness.engine import Detector, Scenario
from toki.engines.models import (
    JudgeFactory,
    ask_judge,
    connect,
    greedy_judge,
    rejudged,
    stable_id,
    wobbling_judge,
)
from toki.errors import ConfigError

VERSION = ("model of Mirix-AI/MIRIX@76741d9 mirix/functions/function_sets/memory_tools.py (semantic_memory_insert, "
           "semantic_memory_update, trigger_memory_update), mirix/services/semantic_memory_manager.py "
           "(delete_semantic_item_by_id, insert_semantic_item), read 2026-12-01; toki model 1")

RESIDENCE = "Alice residence"
BERLIN, PARIS, ROME = "Alice lives in Berlin.", "Alice lives in Paris.", "Alice lives in Rome."
PET, DOG = "Alice pet", "Alice has a dog."
CONTRADICTS = [(a, b) for a in (BERLIN, PARIS, ROME) for b in (BERLIN, PARIS, ROME) if a != b]


class NoResultFound(LookupError):
    """MIRIX's ``NoResultFound``: the item to delete is gone."""


def mirix_judge() -> JudgeFactory:
    return greedy_judge(CONTRADICTS, "mirix-semantic-fixture")


def mirix_wobbling_judge(p: float = 0.5, seed: int = 0) -> JudgeFactory:
    return wobbling_judge(CONTRADICTS, "mirix-semantic-wobbling", p=p, seed=seed)


class MirixHandle:
    def __init__(self, model: MirixModel, location: Path):
        self.model = model
        self.conn = connect(Path(location) / "mirix.db")
        self.conn.execute("CREATE TABLE IF NOT EXISTS semantic_memory (id TEXT PRIMARY KEY, name TEXT NOT NULL, "
                          "summary TEXT NOT NULL, details TEXT NOT NULL DEFAULT '', source TEXT NOT NULL DEFAULT '')")
        self.agent: str | None = None
        self.judge = None
        self.calls = 0

    def bind(self, agent: str, factory: JudgeFactory) -> None:
        if (self.agent, getattr(self, "_factory", None)) != (agent, factory):
            self.agent, self._factory, self.judge = agent, factory, factory(agent)


# -- mirix/services/semantic_memory_manager.py ------------------------------------------------------

def list_semantic_items(h: MirixHandle, name: str | None = None) -> list[dict]:
    if name is None:
        rows = h.conn.execute("SELECT id, name, summary FROM semantic_memory ORDER BY id LIMIT 1000").fetchall()
    else:
        rows = h.conn.execute("SELECT id, name, summary FROM semantic_memory WHERE name = ? ORDER BY id",
                              (name,)).fetchall()
    return [{"id": i, "name": n, "summary": s} for i, n, s in rows]


def insert_semantic_item(h: MirixHandle, name: str, summary: str) -> str:
    h.calls += 1
    iid = stable_id("sem-", h.agent or "", str(h.calls), name, summary)
    h.conn.execute("INSERT INTO semantic_memory (id, name, summary, source) VALUES (?, ?, ?, ?)",
                   (iid, name, summary, h.agent or ""))
    return iid


def delete_semantic_item_by_id(h: MirixHandle, iid: str) -> None:
    row = h.conn.execute("SELECT id FROM semantic_memory WHERE id = ?", (iid,)).fetchone()
    if row is None:
        raise NoResultFound(f"Semantic memory item with id {iid} not found.")
    h.conn.execute("DELETE FROM semantic_memory WHERE id = ?", (iid,))  # hard delete, no history


# -- mirix/functions/function_sets/memory_tools.py ----------------------------------------------------

def semantic_memory_insert(h: MirixHandle, items: list[dict]) -> str:
    inserted = skipped = 0
    for item in items:
        existing = list_semantic_items(h)
        if any(e["name"] == item["name"] and e["summary"] == item["summary"] for e in existing):
            skipped += 1
            continue
        insert_semantic_item(h, item["name"], item["summary"])
        inserted += 1
    return f"Inserted {inserted} new semantic item(s). Skipped {skipped} duplicate(s)."


def semantic_memory_update(h: MirixHandle, old_ids: list[str], new_items: list[dict]) -> str:
    for old in old_ids:
        delete_semantic_item_by_id(h, old)
    new_ids = [insert_semantic_item(h, it["name"], it["summary"]) for it in new_items]
    return f"Semantic memory with the following ids have been deleted: {old_ids}. New items: {len(new_ids)}"


def memory_agent_step(h: MirixHandle, name: str, summary: str, votes: list[dict]) -> str:
    """One semantic memory agent step: context from the listed items, one tool call."""
    context = list_semantic_items(h)
    same = [e for e in context if e["name"] == name]
    try:
        if not same or any(e["summary"] == summary for e in same):
            return semantic_memory_insert(h, [{"name": name, "summary": summary}])
        old = same[0]
        if (old["summary"], summary) in CONTRADICTS and not ask_judge(h.judge, old["summary"], summary, votes):
            return "no change"
        return semantic_memory_update(h, [e["id"] for e in same], [{"name": name, "summary": summary}])
    except NoResultFound as e:  # a failed function call goes back to the LLM
        return f"function call failed: NoResultFound: {e}"


class MirixModel:
    name = "mirix"
    executed = "model"
    version = VERSION
    system = "MIRIX @76741d9"  # what the row stands for (verdict tables)

    def __init__(self, *, judge: JudgeFactory | None = None, rejudge_judge: JudgeFactory | None = None):
        # "rejudge" measures N1, so it asks a judge that can change its mind (temperature 1, p = 0.5)
        self.rejudge_judge = rejudge_judge or mirix_wobbling_judge()
        self.judge_factory = judge or mirix_judge()
        self.scenarios = _scenarios(self)

    @property
    def description(self) -> str:
        return ("a model of MIRIX's semantic memory agent: parallel memory agents, insert after a duplicate check on "
                "a list, update = delete the old ids then insert (separate commits), hard delete, no history")

    def open(self, location: Path) -> MirixHandle:
        return MirixHandle(self, Path(location))

    def close(self, h: MirixHandle) -> None:
        h.conn.close()

    def state(self, h: MirixHandle) -> dict:
        rows = h.conn.execute("SELECT name, summary FROM semantic_memory ORDER BY name, summary").fetchall()
        return {"semantic": [list(r) for r in rows]}

    # -- a trial as a memory history (toki.record.trial_history) -------------------------------
    def memory_history(self, scenario: str, outcome, returned: dict | None = None) -> dict | None:
        """Each item name as a single-valued slot (``Alice residence``, ``Alice pet``), a claim an
        item's summary. The state holds (name, summary) rows only; what each step did comes from
        what it returned: the tool's message (inserted, skipped, deleted and inserted, no change)
        and the judge's votes, whose ``stored`` is the summary the step's list read showed. The
        final reads are current reads only: MIRIX hard-deletes and keeps no history.

        None (no history) for a run in which an update found its item gone (NoResultFound): its
        delete read one item by id and saw it missing, which says nothing of what else the slot
        held then, and a ``current`` read must list the whole slot."""
        sc = self.scenarios.get(scenario)
        plan = getattr(getattr(sc, "call", None), "plan", None)
        if not plan or not isinstance(outcome.state, dict) or "semantic" not in outcome.state:
            return None
        returned = returned or {}
        agents: dict[str, list] = {}
        for agent, steps in plan.items():
            got = returned.get(agent) if agent in outcome.completed else None
            if not isinstance(got, dict):  # it did not return: its planned writes, no read
                agents[agent] = [["add", name, summary] for op, name, summary in
                                 ((s[0], s[1], s[2] if len(s) > 2 else None) for s in steps) if op == "remember"]
                continue
            votes = list(got.get("votes", []))
            mops: list = []
            for (op, *args), res in zip(steps, got.get("results", [])):
                if op == "search":
                    mops.append(["current", args[0], sorted(res)])
                    continue
                name, summary = args
                mine = _step_mops(name, summary, res, votes)
                if mine is None:
                    return None
                mops += mine
            agents[agent] = mops
        seed = list(getattr(sc.setup, "items", ()))
        slots = sorted({n for n, _ in seed} | {s[1] for steps in plan.values() for s in steps})
        final = [["current", n, sorted(s for m, s in outcome.state["semantic"] if m == n)] for n in slots]
        return {"setup": [["add", n, s] for n, s in seed], "agents": agents, "final": final}

    def run_plan(self, h: MirixHandle, agent: str, plan: tuple, judge: JudgeFactory | None = None) -> dict:
        h.bind(agent, judge or self.judge_factory)
        votes: list[dict] = []
        out = []
        for op, *args in plan:
            if op == "remember":
                out.append(memory_agent_step(h, args[0], args[1], votes))
            elif op == "search":
                out.append([e["summary"] for e in list_semantic_items(h, args[0])])
            else:
                raise ConfigError(f"unknown MIRIX call {op!r}", fix="use remember or search")
        return {"results": out, "votes": votes}


def _step_mops(name: str, summary: str, res: str, votes: list[dict]) -> list | None:
    """One memory agent step as micro-ops, from the tool's message and the votes (taken in
    order: only an update or a "no change" asked the judge). An update deleted the listed item of
    the name (each scenario seeds one) and inserted its own: it read the judged summary current,
    retracted it, added its own; an insert read no item of the name; a skipped insert read its own
    summary current (what the insert's list showed: the step's earlier list is not in the
    message); "no change" read the stored summary, which the judge kept. A vote is a ``decide``
    over (stored, new)."""
    if res.startswith("function call failed"):
        return None
    if res.startswith("Semantic memory with the following ids have been deleted") or res == "no change":
        if not votes or votes[0]["new"] != summary:
            return None  # an update the judge was not asked about: no scenario does that
        v = votes.pop(0)
        out = [["decide", f"{name}: {v['stored']} | {summary}", sorted([v["stored"], summary]),
                summary if v["new_wins"] else v["stored"]], ["current", name, [v["stored"]]]]
        return out + ([["retract", name, v["stored"]], ["add", name, summary]] if v["new_wins"] else [])
    if res.startswith("Inserted 1 "):
        return [["current", name, []], ["add", name, summary]]
    if res.startswith("Inserted 0 ") and "Skipped 1 " in res:
        return [["current", name, [summary]]]
    return None


# -- detectors ---------------------------------------------------------------------------------------

def _summaries(state, name: str) -> list[str]:
    return [s for n, s in state["semantic"] if n == name]


def two_current(name: str) -> Detector:
    def check(state, errors):
        cur = _summaries(state, name)
        return ([(f"{name!r} has {len(cur)} current items {cur}: both memory agents deleted the old item and each "
                 "inserted its own replacement (two latest versions)")] if len(cur) > 1 else [])
    return Detector("double-supersede", check)


def slot_lost(name: str) -> Detector:
    def check(state, errors, observed):
        cur = _summaries(state, name)
        failed = [a for a, r in sorted((observed or {}).items())
                  if any(isinstance(x, str) and x.startswith("function call failed") for x in r["results"])]
        out = []
        for a in failed:
            out.append(f"agent {a}'s update failed with NoResultFound (another agent deleted the item between "
                       f"{a}'s read and its delete) and went back to the LLM as a failed call: its fact is lost "
                       f"({name!r} is {cur})")
        if not cur:
            out.append(f"{name!r} has no item: an update deleted it and no insert followed")
        return out
    return Detector("lost-update", check, observes=True)


def duplicate_items() -> Detector:
    def check(state, errors):
        rows = [tuple(r) for r in state["semantic"]]
        return [f"{list(r)} is stored {rows.count(r)} times: both agents listed the items before either inserted"
                for r in sorted(set(rows)) if rows.count(r) > 1]
    return Detector("duplicate-insert", check)


def empty_read(reader: str, name: str) -> Detector:
    def check(state, errors, observed):
        res = (observed or {}).get(reader)
        if res and res["results"] and res["results"][0] == []:
            return [(f"reader {reader} found no {name!r} item: it read between the update's delete and its insert "
                    "(delete-then-insert is not atomic)")]
        return []
    return Detector("N2", check, observes=True)


def hard_deleted(name: str, old: str) -> Detector:
    def check(state, errors):
        return ([(f"{old!r} ({name!r}) was hard-deleted by an update: MIRIX keeps no history, so the replaced fact "
                 "leaves no trace")] if old not in _summaries(state, name) else [])
    return Detector("N3", check, always=True)


# -- scenarios ----------------------------------------------------------------------------------------

def _scenarios(engine: MirixModel) -> dict[str, Scenario]:
    def seeded(*items):
        def setup(h):
            h.agent = "setup"
            for name, summary in items:
                insert_semantic_item(h, name, summary)
        setup.items = items  # the seed, for the trial's memory history
        return setup

    def calls(plan: dict[str, tuple], judge: JudgeFactory | None = None):
        def call(h, agent):
            return engine.run_plan(h, agent, plan[agent], judge)
        call.plan = plan  # what each agent does, for the trial's memory history
        return call

    races = (two_current(RESIDENCE), slot_lost(RESIDENCE))
    sc = [
        Scenario("concurrent-update",
                 "two memory agents, run in parallel, each replace 'Alice lives in Berlin' (Paris, Rome); also the "
                 "reported race 'two concurrent \"remember\" calls both replace one memory, leaving two latest "
                 "versions (A5B)' (LangMem and others). Serially the second replaces the first's item; "
                 "concurrently both delete the old id (the second DELETE matches nothing) and both insert, or the "
                 "second's read finds the item gone and its update fails back to the LLM (lost)",
                 ("A", "B"), calls({"A": (("remember", RESIDENCE, PARIS),), "B": (("remember", RESIDENCE, ROME),)}),
                 seeded((RESIDENCE, BERLIN)), False, races, ("double-supersede", "lost-update"), observe=True),
        Scenario("duplicate-insert",
                 "two memory agents insert the same new item ('Alice has a dog'): the duplicate check lists the "
                 "items before either inserts, so both insert",
                 ("A", "B"), calls({"A": (("remember", PET, DOG),), "B": (("remember", PET, DOG),)}),
                 seeded((RESIDENCE, BERLIN)), False, (duplicate_items(),), ("duplicate-insert",)),
        Scenario("reader-mid-update",
                 "a reader searches Alice's residence while a memory agent replaces Berlin by Paris: between the "
                 "update's delete and its insert the slot is empty",
                 ("R", "W"), calls({"R": (("search", RESIDENCE),), "W": (("remember", RESIDENCE, PARIS),)}),
                 seeded((RESIDENCE, BERLIN)), False, (empty_read("R", RESIDENCE),), ("N2",), observe=True),
        Scenario("update-hard-deletes",
                 "one memory agent replaces 'Alice lives in Berlin' by Paris: the old item is hard-deleted and MIRIX "
                 "keeps no history (N3 by design, in a serial run)",
                 ("W",), calls({"W": (("remember", RESIDENCE, PARIS),)}), seeded((RESIDENCE, BERLIN)), False,
                 (hard_deleted(RESIDENCE, BERLIN),), ("N3",)),
        Scenario("rejudge",
                 "two memory agents are told Alice lives in Rome; each asks its LLM whether the stored Berlin item "
                 "should be replaced. With the temperature-1 fixture this scenario uses, the answers can differ and "
                 "nothing logs the first: N1",
                 ("A", "B"), calls({"A": (("remember", RESIDENCE, ROME),), "B": (("remember", RESIDENCE, ROME),)},
                                   engine.rejudge_judge),
                 seeded((RESIDENCE, BERLIN)), False, (rejudged(),) + races, ("N1",), observe=True),
    ]
    return {s.name: s for s in sc}


def mirix() -> MirixModel:
    return MirixModel()
