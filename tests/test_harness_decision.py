"""The controller's decision is a pure function of the agents' states (toki.harness.decision),
tested here without threads: a table of states and the decision each gives.

- nobody is asked while an agent is still starting up or running; with every agent done the run
  finishes; a database wait not confirmed since the last completed call is settled first;
- a start is granted as no choice when the chooser forces starts, else chosen like any step;
- among the eligible agents the chooser chooses; an agent held back by a lock is not eligible
  (and is reported held), nor is one answered SQLITE_BUSY since the last completed call;
- with nobody eligible: a sleep ends first, then a SQLite deadlock's victim gets SQLITE_BUSY
  (never a patient file lock), a database wait is left to the database, a timed wait runs out,
  a wait a thread outside the agents may end is left to it, a lock held by a foreign thread is
  unverifiable, and anything else is a hang naming every agent's call;
- a chooser that raises (a replay that diverged) fails the decision.
"""

from __future__ import annotations

import pytest

from toki.harness.controller import ReplayChooser, ReplayDiverged, SerialChooser
from toki.harness.decision import Action, AgentState, AgentView, Decision, decide, eligible

N, W, R, B, D = AgentState.NEW, AgentState.WAITING, AgentState.RUNNING, AgentState.BLOCKED_DB, AgentState.DONE


class Asked:
    """A chooser that records what it was asked: the first eligible agent, the last blocked one."""

    def __init__(self, forces_starts=True, sleeps_yield=True):
        self.forces_starts, self.sleeps_yield, self.calls = forces_starts, sleeps_yield, []

    def choose(self, eligible, last):
        self.calls.append(("choose", tuple(eligible), last))
        return eligible[0]

    def victim(self, blocked):
        self.calls.append(("victim", tuple(blocked)))
        return blocked[-1]

    def forced(self, agent):
        self.calls.append(("forced", agent))


def v(name, state=W, **kw) -> AgentView:
    return AgentView(name, state, detail=f"{name}'s call", **kw)


HELD = {"waits": True, "free": False}
TABLE = [
    # (agents, progress, last, expected decision, expected chooser calls)
    ([v("A", N), v("B")], 0, None, Decision(Action.NONE), []),
    ([v("A", R), v("B")], 0, None, Decision(Action.NONE), []),
    ([v("A", D), v("B", D)], 3, "A", Decision(Action.FINISH), []),
    ([v("A", B, confirmed_at=2), v("B")], 3, "B", Decision(Action.SETTLE), []),
    ([v("A", starting=True), v("B", starting=True)], 0, None, Decision(Action.GRANT, "A", forced=True),
     [("forced", "A")]),
    ([v("A"), v("B")], 1, "B", Decision(Action.GRANT, "A"), [("choose", ("A", "B"), "B")]),
    ([v("A", **HELD), v("B")], 1, "A", Decision(Action.GRANT, "B", held=("A",)), [("choose", ("B",), "A")]),
    ([v("A", busy_at=1), v("B")], 1, "A", Decision(Action.GRANT, "B"), [("choose", ("B",), "A")]),
    ([v("A", busy_at=1), v("B", D)], 2, "B", Decision(Action.GRANT, "A"), [("choose", ("A",), "B")]),
    ([v("A", B, confirmed_at=4), v("B")], 4, "A", Decision(Action.GRANT, "B"), [("choose", ("B",), "A")]),
    # nobody eligible
    ([v("A", sleep=True, **HELD), v("B", busy_at=2)], 2, "B", Decision(Action.GRANT, "A", held=("A",)),
     [("victim", ("A",))]),
    ([v("A", busy_at=2), v("B", busy_at=2)], 2, "B", Decision(Action.GRANT, "B", deliver_busy=True),
     [("victim", ("A", "B"))]),
    ([v("A", busy_at=2, patient=True), v("B", busy_at=2)], 2, "B", Decision(Action.GRANT, "B", deliver_busy=True),
     [("victim", ("B",))]),
    ([v("A", B, confirmed_at=2), v("B", **HELD)], 2, "A", Decision(Action.NONE, held=("B",)), []),
    ([v("A", times_out=True, **HELD), v("B", **HELD)], 2, "A", Decision(Action.GRANT, "A", held=("A", "B")),
     [("victim", ("A",))]),
    ([v("A", external=True, **HELD), v("B", **HELD)], 2, "A", Decision(Action.NONE, held=("A", "B")), []),
    ([v("A", foreign="Lock created at x.py:1", **HELD), v("B", **HELD)], 2, "A",
     Decision(Action.UNVERIFIABLE, "A", lock="Lock created at x.py:1", held=("A", "B")), []),
    ([v("A", **HELD), v("B", **HELD), v("C", D)], 2, "A",
     Decision(Action.HUNG, waits="A waits for A's call; B waits for B's call", held=("A", "B")), []),
]


@pytest.mark.parametrize("agents, progress, last, expected, calls", TABLE)
def test_the_decision_for_each_state(agents, progress, last, expected, calls):
    chooser = Asked()
    assert decide(agents, progress, last, chooser) == expected
    assert chooser.calls == calls


def test_without_forced_starts_a_start_is_chosen_like_any_step():
    chooser = Asked(forces_starts=False)
    d = decide([v("A", starting=True), v("B", starting=True)], 0, None, chooser)
    assert d == Decision(Action.GRANT, "A") and chooser.calls == [("choose", ("A", "B"), None)]
    serial = decide([v("A", starting=True), v("B", starting=True)], 0, None, SerialChooser(["B", "A"]))
    assert serial == Decision(Action.GRANT, "B")


def test_a_serial_run_does_not_wait_out_a_sleep():
    """A serial execution has no other agent to run: there a sleep only passes time."""
    sleeping = v("A", sleep=True, **HELD)
    assert eligible(sleeping, 0, sleeps_yield=True) is None  # held back until another agent moves
    assert eligible(sleeping, 0, sleeps_yield=False) is True
    assert decide([sleeping, v("B")], 0, "A", Asked(sleeps_yield=False)).agent == "A"


def test_a_chooser_that_raises_fails_the_decision():
    d = decide([v("A"), v("B")], 0, None, ReplayChooser(["C"]))
    assert d.action == Action.FAIL and isinstance(d.error, ReplayDiverged)


def test_deciding_changes_nothing_it_reads():
    agents = [v("A", **HELD), v("B", busy_at=0)]
    before = list(agents)
    for _ in range(3):
        assert decide(agents, 1, "A", Asked()) == Decision(Action.GRANT, "B", held=("A",))
    assert agents == before


def test_the_thread_to_agent_binding_is_written_in_one_place():
    """Only ``controller.act_for`` assigns the calling thread's agent; everyone else calls it (or
    ``acting_for``, ``uncontrolled``) and reads it through ``current_agent``."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "toki"
    writes = []

    def binding(t) -> bool:  # _local.agent or x._local.agent
        return isinstance(t, ast.Attribute) and t.attr == "agent" and (
            (isinstance(t.value, ast.Name) and t.value.id == "_local")
            or (isinstance(t.value, ast.Attribute) and t.value.attr == "_local"))

    def visit(node, where: str, path: Path) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            if isinstance(child, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                if any(binding(sub) for t in targets for sub in ast.walk(t)):
                    writes.append((path.relative_to(root).as_posix(), where))
            visit(child, inner, path)

    for path in root.rglob("*.py"):
        visit(ast.parse(path.read_text()), "<module>", path)
    assert sorted(set(writes)) == [("harness/controller.py", "act_for")], writes


def test_acting_for_a_block_restores_the_binding_it_found():
    from toki.harness.controller import Controller, acting_for, current_agent, uncontrolled

    ctl = Controller(SerialChooser([]))
    assert current_agent() is None
    with acting_for(ctl, "agent A"):
        assert current_agent() == (ctl, "agent A")
        with uncontrolled():
            assert current_agent() is None
        with acting_for(None):
            assert current_agent() is None
        assert current_agent() == (ctl, "agent A")
    assert current_agent() is None
