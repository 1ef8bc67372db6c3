"""Letta's core-memory blocks, a faithful model of how an agent step writes a block.

Letta (PyPI ``letta``) is a server with PostgreSQL or SQLite behind SQLAlchemy's async ORM and an
LLM loop; toki does not run the server here, so this module models the write path of a memory
block; executed = "model". Read on 2026-12-01 from the stored copies of the public code:

- letta-ai/letta ``letta/services/tool_executor/core_tool_executor.py`` @0f6f52c,
  ``LettaCoreToolExecutor.core_memory_append`` / ``core_memory_replace`` / ``memory_rethink``: the
  tool edits ``agent_state.memory`` - the blocks loaded when the step started - and calls
  ``agent_manager.update_memory_if_changed_async(agent_id, new_memory)``;
- letta-ai/letta ``letta/services/agent_manager.py`` @45ac204,
  ``AgentManager.update_memory_if_changed_async``: re-reads the agent with its blocks, and when the
  new memory's compiled text is not in the system message, for every label whose value in the
  new memory differs from the value just read calls ``block_manager.update_block_async`` with the
  new memory's value ("# update the blocks (LRW) in the DB"), then reads the blocks again;
- letta-ai/letta ``letta/services/block_manager.py`` @0fb8d32, ``BlockManager.update_block_async``:
  in one session ``BlockModel.read_async`` (a SELECT), set the value, flush, commit;
- ``letta/orm/block.py`` (read from the fork oculairmedia/letta@21e8809; the upstream file is not
  in the stored index): ``version`` with ``__mapper_args__ = {"version_id_col": version}``, so the
  flush is ``UPDATE block SET value=?, version=? WHERE id=? AND version=?`` and a row count of 0
  raises SQLAlchemy's ``StaleDataError`` - the optimistic check spans the read in
  ``update_block_async`` and the flush, not the LLM step that computed the value.

What the model does per step: load the agent's blocks (one SELECT); the LLM stand-in picks the tool
call from the loaded copy; ``update_memory_if_changed_async`` as above on SQLite (``letta.db``):
SELECT the agent's blocks, then per changed label ``SELECT value, version`` (autocommit, as
pysqlite runs a SELECT outside a transaction), ``BEGIN``, ``UPDATE ... WHERE version = ?``, and on
0 rows ``ROLLBACK`` and :class:`BlockVersionConflict` (the model of ``StaleDataError``; a
:class:`toki.errors.WriteRefused`, so the harness counts the call as a clean abort: nothing it
wrote stays), else ``COMMIT``; then SELECT the blocks again. A heartbeat runs a second step that
loads the blocks afresh.

Where the model is simpler: no messages, tools, system-prompt rebuild or block history tables;
the "is the compiled memory in the system message" test is "does the new memory differ from the
memory loaded at step start" (the system message is rebuilt from it at step start); in Letta a
tool error goes back to the LLM, which may retry in a later step - the model ends the call with the
conflict instead. The LLM stand-in: "remember" appends a line, unless a stored line contradicts it
(``CONTRADICTS``) and the :mod:`toki.judges` judge lets the new fact win, which replaces the line
(default judge: the new fact always wins; the scenario ``rejudge`` asks a temperature-1 fixture
with p = 0.5, to measure N1); "rethink" rewrites the whole block as one consolidated line; "ask"
answers with the stored line on the topic; "note" appends to the agent's own block.

What the harness finds in it (``toki certify --engine letta``): when two flushes of one block
overlap, the later one fails with the conflict (the reported behaviour: detected, a clean abort);
when only the LLM steps overlap, the later flush reads the new version and overwrites the other
agent's edit (lost update, not detected); an agent that never edited a shared block writes back its
step-start copy of it over a concurrent change (``update_memory_if_changed_async`` compares with a
fresh read); a consolidation (``memory_rethink``) erases a line added meanwhile, or is erased; a
multi-step call answers from the old value and then the new (stale read, N2). By design: N3 (a
replaced line leaves no trace) and N1 with a wobbling judge.
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
    wobbling_judge,
)
from toki.errors import ConfigError, WriteRefused

VERSION = ("model of letta-ai/letta@0f6f52c core_tool_executor.py (core_memory_append/replace, memory_rethink), "
           "@45ac204 agent_manager.py (update_memory_if_changed_async), @0fb8d32 block_manager.py (update_block_async), "
           "orm/block.py version_id_col (oculairmedia/letta@21e8809), read 2026-12-01; toki model 1")

BERLIN, PARIS, ROME = "Alice lives in Berlin.", "Alice lives in Paris.", "Alice lives in Rome."
CAT, VIOLIN = "Alice has a cat.", "Alice plays the violin."
CONTRADICTS = [(a, b) for a in (BERLIN, PARIS, ROME) for b in (BERLIN, PARIS, ROME) if a != b]


class BlockVersionConflict(WriteRefused):
    """SQLAlchemy's ``StaleDataError`` on the block's ``version_id_col``: the flush matched 0 rows."""


def letta_judge() -> JudgeFactory:
    return greedy_judge(CONTRADICTS, "letta-edit-fixture")


def letta_wobbling_judge(p: float = 0.5, seed: int = 0) -> JudgeFactory:
    return wobbling_judge(CONTRADICTS, "letta-edit-wobbling", p=p, seed=seed)


class LettaHandle:
    def __init__(self, model: LettaModel, location: Path):
        self.model = model
        self.conn = connect(Path(location) / "letta.db")
        self.conn.execute("CREATE TABLE IF NOT EXISTS block (id TEXT PRIMARY KEY, label TEXT NOT NULL, "
                          "value TEXT NOT NULL, version INTEGER NOT NULL DEFAULT 1)")
        self.conn.execute("CREATE TABLE IF NOT EXISTS blocks_agents (agent_id TEXT, block_id TEXT, label TEXT, "
                          "PRIMARY KEY (agent_id, label))")
        self.agent: str | None = None
        self.judge = None

    def bind(self, agent: str, factory: JudgeFactory) -> None:
        if (self.agent, getattr(self, "_factory", None)) != (agent, factory):
            self.agent, self._factory, self.judge = agent, factory, factory(agent)


# -- the server's managers ------------------------------------------------------------------------

def load_memory(h: LettaHandle, agent_id: str) -> dict[str, tuple[str, str]]:
    """``get_agent_by_id_async(include_relationships=["memory"])``: label -> (block id, value)."""
    rows = h.conn.execute("SELECT ba.label, b.id, b.value FROM blocks_agents ba JOIN block b ON b.id = ba.block_id "
                          "WHERE ba.agent_id = ? ORDER BY ba.label", (agent_id,)).fetchall()
    return {label: (bid, value) for label, bid, value in rows}


def update_block(h: LettaHandle, block_id: str, value: str) -> None:
    """``BlockManager.update_block_async``: read, set, flush with the version check, commit."""
    row = h.conn.execute("SELECT value, version FROM block WHERE id = ?", (block_id,)).fetchone()
    version = row[1]
    h.conn.execute("BEGIN")
    cur = h.conn.execute("UPDATE block SET value = ?, version = ? WHERE id = ? AND version = ?",
                         (value, version + 1, block_id, version))
    if cur.rowcount != 1:
        h.conn.execute("ROLLBACK")
        raise BlockVersionConflict(f"UPDATE statement on table 'block' expected to update 1 row(s); "
                                   f"{cur.rowcount} were matched (block {block_id}, version {version})",
                                   fix="Letta reports the conflict to the LLM as a tool error; retry the step")
    h.conn.execute("COMMIT")


def update_memory_if_changed(h: LettaHandle, agent_id: str, new_memory: dict[str, str],
                             loaded: dict[str, tuple[str, str]]) -> dict[str, str]:
    """``AgentManager.update_memory_if_changed_async``: last writer wins per changed label."""
    if new_memory == {k: v for k, (_, v) in loaded.items()}:
        return new_memory
    fresh = load_memory(h, agent_id)
    for label in sorted(fresh):
        block_id, current = fresh[label]
        if new_memory[label] != current:
            update_block(h, block_id, new_memory[label])
    return {k: v for k, (_, v) in load_memory(h, agent_id).items()}


def create_block(h: LettaHandle, block_id: str, label: str, value: str, agents: tuple[str, ...]) -> None:
    h.conn.execute("INSERT INTO block (id, label, value) VALUES (?, ?, ?)", (block_id, label, value))
    for a in agents:
        h.conn.execute("INSERT INTO blocks_agents VALUES (?, ?, ?)", (a, block_id, label))


# -- one agent step ---------------------------------------------------------------------------------

def step(h: LettaHandle, agent_id: str, message: tuple, votes: list[dict]) -> dict:
    loaded = load_memory(h, agent_id)  # the blocks as the step starts (compiled into the system prompt)
    memory = {k: v for k, (_, v) in loaded.items()}
    op, label, arg = message
    reply = None
    if op == "remember":  # core_memory_replace over a contradicted line, else core_memory_append
        lines = memory[label].split("\n")
        hit = next((ln for ln in lines if (ln, arg) in CONTRADICTS), None)
        if hit is not None:
            if ask_judge(h.judge, hit, arg, votes):
                memory[label] = memory[label].replace(hit, arg)
        elif arg not in lines:
            memory[label] = memory[label] + "\n" + arg
    elif op == "note":  # core_memory_append to the agent's own block
        memory[label] = memory[label] + "\n" + arg
    elif op == "rethink":  # memory_rethink: the whole block rewritten from the loaded copy
        memory[label] = "Summary: " + " ".join(ln for ln in memory[label].split("\n") if ln)
    elif op == "ask":  # send_message from the in-context memory, no tool edit
        reply = next((ln for ln in memory[label].split("\n") if arg in ln), None)
    else:
        raise ConfigError(f"unknown Letta message {op!r}", fix="use remember, note, rethink or ask")
    after = update_memory_if_changed(h, agent_id, memory, loaded)
    return {"reply": reply, "memory": after}


class LettaModel:
    name = "letta"
    executed = "model"
    version = VERSION
    system = "Letta @0f6f52c"  # what the row stands for (verdict tables)

    def __init__(self, *, judge: JudgeFactory | None = None, rejudge_judge: JudgeFactory | None = None):
        # "rejudge" measures N1, so it asks a judge that can change its mind (temperature 1, p = 0.5)
        self.rejudge_judge = rejudge_judge or letta_wobbling_judge()
        self.judge_factory = judge or letta_judge()
        self.scenarios = _scenarios(self)

    @property
    def description(self) -> str:
        return ("a model of Letta's memory blocks: the step loads the blocks, the LLM edits its copy, the flush "
                "writes every label that differs from a fresh read (last writer wins) with an optimistic version "
                "check spanning only the final read and flush")

    def open(self, location: Path) -> LettaHandle:
        return LettaHandle(self, Path(location))

    def close(self, h: LettaHandle) -> None:
        h.conn.close()

    def state(self, h: LettaHandle) -> dict:
        rows = h.conn.execute("SELECT label, value FROM block ORDER BY label").fetchall()
        return {"blocks": [list(r) for r in rows]}

    # -- a trial as a memory history (toki.record.trial_history) -------------------------------
    def memory_history(self, scenario: str, outcome, returned: dict | None = None) -> dict | None:
        """A block's lines as beliefs: Alice's residence lines (Berlin, Paris, Rome contradict
        each other) one single-valued slot ``human/residence``, every other line a slot of its own
        (``human/Alice has a cat.``, ``notes/Notes:``), a claim the line. What each step did comes
        from what the call returned and its plan: a replace's vote names the line it read
        (``stored``), which it retracted when the new fact won; an append read no such line and
        added it (the line already there: it read it); a note added its line; a rethink read every
        line the consolidated text names, retracted them and added the summary; an ask read the
        line it answered with. Every vote is a ``decide`` over (stored, new). A flush writes the
        whole block from the step-start copy (last writer wins), so a line an acknowledged step
        added that the block no longer holds was written over by the other agent's flush: a read
        and a retract in that agent's op. The final reads are the blocks' lines, current reads
        only: a block keeps only its latest value.

        None for ``duplicate-remember`` (two steps append one line, and a step that found the line
        already there returns what an append returns: the block's value, which holds the line
        either way), for a rethink whose re-read after its flush no longer shows its summary (the
        other agent flushed in between: what it wrote is not returned), for a return these rules
        do not explain, and when a dropped line cannot be
        put on one other writer. A call refused by the version check (a clean abort) wrote
        nothing."""
        sc = self.scenarios.get(scenario)
        plan = getattr(getattr(sc, "call", None), "plan", None)
        if not plan or not isinstance(outcome.state, dict) or "blocks" not in outcome.state:
            return None
        returned = returned or {}
        appended = [arg for steps in plan.values() for op, _, arg in steps if op == "remember" and arg not in RESIDENCES]
        if len(appended) != len(set(appended)):
            return None  # two steps append one line: whether the second found it there is not returned
        blocks = list(getattr(sc.setup, "blocks", ()))
        seed = [(label, ln) for _, label, value, _ in blocks for ln in value.split("\n") if ln]
        agents: dict[str, list] = {}
        for agent, steps in plan.items():
            got = returned.get(agent) if agent in outcome.completed else None
            if not isinstance(got, dict):  # refused or failed: its planned lines, nothing read
                agents[agent] = [["add", _line_slot(label, arg), arg] for op, label, arg in steps
                                 if op in ("remember", "note")]
                continue
            votes = list(got.get("votes", []))
            mops: list = []
            for (op, label, arg), res in zip(steps, got.get("steps", [])):
                mine = _step_mops(op, label, arg, res, votes)
                if mine is None:
                    return None
                mops += mine
            if votes:
                return None
            agents[agent] = mops
        held = [(label, ln) for label, value in outcome.state["blocks"] for ln in value.split("\n") if ln]
        writers = [a for a in agents if a in outcome.completed and any(m[0] == "add" for m in agents[a])]
        for agent in writers:
            for m in [m for m in agents[agent] if m[0] == "add"]:
                label = m[1].split("/", 1)[0]
                if (label, m[2]) in held or any(x[0] == "retract" and x[2] == m[2]
                                                for ops in agents.values() for x in ops):
                    continue
                others = [b for b in writers if b != agent]
                if len(others) != 1:
                    return None
                # the other flush was the last write of the block, from its step-start copy: what
                # it loaded of the slot is what the block holds of it
                agents[others[0]] += [["current", m[1], sorted(ln for lb, ln in held if _line_slot(lb, ln) == m[1])],
                                      ["retract", m[1], m[2]]]
        slots = sorted({_line_slot(lb, ln) for lb, ln in seed + held}
                       | {m[1] for ops in agents.values() for m in ops if m[0] != "decide"})
        final = [["current", sl, sorted(ln for lb, ln in held if _line_slot(lb, ln) == sl)] for sl in slots]
        return {"setup": [["add", _line_slot(lb, ln), ln] for lb, ln in seed], "agents": agents, "final": final}

    def run_plan(self, h: LettaHandle, agent: str, plan: tuple, judge: JudgeFactory | None = None) -> dict:
        """One user message to agent ``agent``: its steps (a heartbeat runs another step)."""
        h.bind(agent, judge or self.judge_factory)
        votes: list[dict] = []
        steps = [step(h, agent, m, votes) for m in plan]
        return {"steps": steps, "votes": votes}


# -- a trial as a memory history -------------------------------------------------------------------

RESIDENCES = (BERLIN, PARIS, ROME)


def _line_slot(label: str, line: str) -> str:
    return f"{label}/residence" if line in RESIDENCES else f"{label}/{line}"


def _step_mops(op: str, label: str, arg: str, res: dict, votes: list[dict]) -> list | None:
    """One step as micro-ops (see LettaModel.memory_history); takes its vote from ``votes``."""
    after = [ln for ln in (res.get("memory") or {}).get(label, "").split("\n") if ln]
    if op == "ask":
        return [["current", f"{label}/residence", [res["reply"]] if res.get("reply") else []]]
    if op == "note":
        return [["current", _line_slot(label, arg), []], ["add", _line_slot(label, arg), arg]]
    if op == "rethink":
        summary = next((ln for ln in after if ln.startswith("Summary: ")), None)
        if summary is None:
            return None  # the block's re-read after the flush no longer shows it: not stated here
        read = [ln for ln in (BERLIN, PARIS, ROME, CAT, VIOLIN) if ln in summary]
        out: list = [["current", _line_slot(label, ln), [ln]] for ln in read]
        return out + [["retract", _line_slot(label, ln), ln] for ln in read] + [["add", f"{label}/{summary}", summary]]
    if op != "remember":
        return None
    slot = _line_slot(label, arg)
    if votes and votes[0]["new"] == arg:
        v = votes.pop(0)
        out = [["decide", f"{label}: {v['stored']} | {arg}", sorted([v["stored"], arg]),
                arg if v["new_wins"] else v["stored"]], ["current", slot, [v["stored"]]]]
        return out + ([["retract", slot, v["stored"]], ["add", slot, arg]] if v["new_wins"] else [])
    if arg in RESIDENCES:
        # a residence is replaced in place, so the block always holds one: a step that asked no
        # judge found its own line there (no hit but itself)
        return [["current", slot, [arg]]]
    # an append (the caller declines the scenarios where another step adds the same line: a step
    # that found its line already there returns just what an append does)
    return [["current", slot, []], ["add", slot, arg]]


# -- detectors ---------------------------------------------------------------------------------------

def _block(state, label: str) -> str:
    return next((v for lb, v in state["blocks"] if lb == label), "")


def lines_lost(label: str, *texts: str) -> Detector:
    def check(state, errors):
        if errors:
            return []  # a conflict aborted a writer: its line was never written (detected, not lost)
        have = _block(state, label)
        return [f"{t!r} is not in block {label!r} although its step returned: another agent's last-writer-wins "
                "flush wrote a value computed from the block as it was loaded at that agent's step start, and the "
                "version check (read and flush only) passed" for t in texts if t not in have]
    return Detector("lost-update", check)


def rethink_lost(label: str) -> Detector:
    def check(state, errors):
        if errors or "Summary:" in _block(state, label):
            return []
        return [(f"the consolidated block {label!r} is gone although the rethink returned: the other agent flushed its "
                "step-start copy over it (last writer wins; the version check passed because it read the new version)")]
    return Detector("lost-update", check)


def stale_within_call(agent: str) -> Detector:
    def check(state, errors, observed):
        res = (observed or {}).get(agent)
        if not res:
            return []
        replies = [s["reply"] for s in res["steps"]]
        if len(set(replies)) > 1:
            return [(f"agent {agent}'s call answered {replies[0]!r} in its first step and {replies[-1]!r} in its "
                    "heartbeat step: the shared block changed during the call and the change was not seen until the "
                    "next step (a stale read)")]
        return []
    return Detector("N2", check, observes=True)


def reverted(label: str, old: str, new: str) -> Detector:
    def check(state, errors):
        have = _block(state, label)
        if old in have and new not in have and not errors:
            return [(f"block {label!r} says {old!r} again: an agent that never edited it flushed its step-start copy "
                    f"over the concurrent change to {new!r} (update_memory_if_changed compares the new memory with a "
                    "fresh read and writes every label that differs)")]
        return []
    return Detector("lost-update", check)


def replaced_without_trace(label: str, old: str) -> Detector:
    def check(state, errors):
        have = _block(state, label)
        return ([(f"{old!r} was overwritten in block {label!r}: the block keeps only its latest value (block history "
                 "is written only by explicit checkpoints), so the replaced fact leaves no trace")]
                if old not in have else [])
    return Detector("N3", check, always=True)


def superseded_twice(label: str, old: str) -> Detector:
    """Both agents replaced ``old`` (each judged against it) and both calls returned: one replacement was
    written over by the other with no trace (serially the second replaces the first's line)."""
    def check(state, errors, observed):
        by = sorted(a for a, res in (observed or {}).items() if a not in errors and isinstance(res, dict)
                    and any(v["stored"] == old and v["new_wins"] for v in res.get("votes", [])))
        if len(by) < 2:
            return []
        return [f"agents {', '.join(by)} each replaced {old!r} in block {label!r} from their step-start copies and "
                f"both flushes passed the version check; the block says {_block(state, label)!r}: the other "
                "replacement is lost without trace"]
    return Detector("double-supersede", check, observes=True)


def line_twice(label: str) -> Detector:
    def check(state, errors):
        lines = [ln for ln in _block(state, label).split("\n") if ln]
        return [f"{ln!r} is in block {label!r} {lines.count(ln)} times" for ln in sorted(set(lines))
                if lines.count(ln) > 1]
    return Detector("duplicate-insert", check)


# -- scenarios ----------------------------------------------------------------------------------------

def _scenarios(engine: LettaModel) -> dict[str, Scenario]:
    def setup_blocks(*blocks):
        def setup(h):
            for bid, label, value, agents in blocks:
                create_block(h, bid, label, value, agents)
        setup.blocks = blocks  # the seed, for the trial's memory history
        return setup

    def calls(plan: dict[str, tuple], judge: JudgeFactory | None = None):
        def call(h, agent):
            return engine.run_plan(h, agent, plan[agent], judge)
        call.plan = plan  # what each agent says, for the trial's memory history
        return call

    shared = ("block-human", "human", BERLIN, ("A", "B", "C", "S"))
    sc = [
        Scenario("two-writers-one-block",
                 "the reported Letta race 'two writers to one block get a conflict error from its version check (P4 "
                 "detected, not lost)': agents A and B share block 'human' and each remembers a fact (append). When "
                 "their flushes overlap, the later UPDATE ... WHERE version = v matches 0 rows and the call fails "
                 "with BlockVersionConflict (StaleDataError; a clean abort): reproduced. When only their LLM steps "
                 "overlap, the later flush reads the new version and writes its stale copy: the other fact is lost "
                 "silently (beyond the report)",
                 ("A", "B"), calls({"A": (("remember", "human", CAT),), "B": (("remember", "human", VIOLIN),)}),
                 setup_blocks(shared), False, (lines_lost("human", CAT, VIOLIN),), ("lost-update",)),
        Scenario("shared-block-stale-read",
                 "the reported Letta race 'a shared block change is not seen until the agent's next step (stale "
                 "read)': agent A answers 'where does Alice live?' and takes a heartbeat step, while agent S "
                 "remembers that Alice moved to Rome in the shared block 'human'",
                 ("A", "S"), calls({"A": (("ask", "human", "lives"), ("ask", "human", "lives")),
                                    "S": (("remember", "human", ROME),)}),
                 setup_blocks(shared), False, (stale_within_call("A"),), ("N2",), observe=True),
        Scenario("stale-write-back",
                 "agent A appends a note to its own block 'notes' while agent S replaces Berlin by Rome in the shared "
                 "block 'human': A's flush compares its whole step-start memory with a fresh read and writes back "
                 "the stale 'human' too, undoing S's change (found in the model; not among the reported races)",
                 ("A", "S"), calls({"A": (("note", "notes", "Asked about the move."),),
                                    "S": (("remember", "human", ROME),)}),
                 setup_blocks(shared, ("block-notes", "notes", "Notes:", ("A",))), False,
                 (reverted("human", BERLIN, ROME),), ("lost-update",)),
        Scenario("consolidation-overwrites",
                 "the reported race 'a long LLM consolidation writes back over memories added meanwhile (P4)' "
                 "(LangMem and others), on Letta: a sleep-time agent C rethinks the shared block (memory_rethink "
                 "from its step-start copy) while agent A remembers a new fact in it; C's flush erases A's line, or "
                 "A's flush erases C's consolidation",
                 ("C", "A"), calls({"C": (("rethink", "human", ""),), "A": (("remember", "human", CAT),)}),
                 setup_blocks(shared), False, (lines_lost("human", CAT), rethink_lost("human")), ("lost-update",)),
        Scenario("remember-overwrites",
                 "one agent remembers that Alice moved to Rome: core_memory_replace rewrites the line in place, and "
                 "the block keeps only its latest value (N3 by design, in a serial run)",
                 ("S",), calls({"S": (("remember", "human", ROME),)}), setup_blocks(shared), False,
                 (replaced_without_trace("human", BERLIN),), ("N3",)),
        Scenario("double-supersede",
                 "agents A and B share block 'human' (Alice lives in Berlin) and remember that she moved, to Rome "
                 "and to Paris: each replaces the Berlin line in its step-start copy (core_memory_replace). "
                 "Serially the second replaces the first's line; when the flushes overlap the version check "
                 "refuses one (a clean abort); when only the LLM steps overlap both flushes pass",
                 ("A", "B"), calls({"A": (("remember", "human", ROME),), "B": (("remember", "human", PARIS),)}),
                 setup_blocks(shared), False, (superseded_twice("human", BERLIN),), ("double-supersede",),
                 observe=True),
        Scenario("duplicate-remember",
                 "agents A and B share block 'human' and both remember 'Alice has a cat' (core_memory_append "
                 "unless the line is already there): can the block end up holding the line twice? Each flush "
                 "writes the whole block value, compared with a fresh read",
                 ("A", "B"), calls({"A": (("remember", "human", CAT),), "B": (("remember", "human", CAT),)}),
                 setup_blocks(shared), False, (line_twice("human"),), ("duplicate-insert",)),
        Scenario("rejudge",
                 "two agents remember that Alice moved to Rome; each asks its LLM whether the stored 'lives in "
                 "Berlin' should be replaced. With the temperature-1 fixture this scenario uses, the two answers "
                 "can differ and nothing logs the first: N1",
                 ("A", "B"), calls({"A": (("remember", "human", ROME),), "B": (("remember", "human", ROME),)},
                                   engine.rejudge_judge),
                 setup_blocks(shared), False, (rejudged(),), ("N1",), observe=True),
    ]
    return {s.name: s for s in sc}


def letta() -> LettaModel:
    return LettaModel()
