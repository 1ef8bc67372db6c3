"""A small SQLite engine for CI gates (baselines, time budgets, the workflows in docs/ci.md).

Three scenarios, each agent on its own autocommitting connection to one file:

- ``counter``: read ``n``, write ``n + 1`` in two statements: two agents lose an update. The
  *known race* a team accepts in its baseline.
- ``notes``: each agent adds a note. Release 1.0 inserts a row (one statement: no race); release
  1.1 (:func:`planted`) keeps the notes as one JSON list it reads and writes back, so two agents
  lose a note: the *new race* a baseline must not let through.
- ``audit``: each agent overwrites the status; no history of the old value is kept in any order:
  a property of the design (``always=True``), reported apart from races.

``gate-notes`` is the engine's name in both releases, so one baseline serves both. :func:`slow`
(``gate-notes-slow``) has one scenario, ``slow``: two agents insert twelve rows each, no race;
few serial orders, but thousands of interleavings within 3 preemptions and more random tapes
than a test can run: a search no time budget of seconds lets finish.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from toki.harness import Detector, Scenario

AGENTS = ("A", "B")
ROWS = 12  # inserted by each agent of the slow scenario


def _lost_update(state, errors) -> list[str]:
    want = len(AGENTS) - len(errors)
    return [f"counter is {state['counter']} after {want} increments"] if state["counter"] < want else []


def _lost_note(state, errors) -> list[str]:
    missing = sorted(set(AGENTS) - set(errors) - set(state["notes"]))
    return [f"the note of agent {a} is lost" for a in missing]


def _no_history(state, errors) -> list[str]:
    return ["the status keeps no history of its earlier values"] if state["status"] != "new" else []


class GateNotes:
    name, executed = "gate-notes", "real"

    def __init__(self, planted: bool = False, slow: bool = False):
        self.planted = planted
        self.version = "1.1" if planted else "1.0"
        scenarios = {
            "counter": Scenario("counter", "two agents add one to the counter", AGENTS, self.increment,
                                setup=self.seed, detectors=(Detector("lost-update", _lost_update),)),
            "notes": Scenario("notes", "two agents each add a note", AGENTS, self.add_note, setup=self.seed,
                              detectors=(Detector("lost-note", _lost_note),)),
            "audit": Scenario("audit", "two agents overwrite the status", AGENTS, self.set_status, setup=self.seed,
                              detectors=(Detector("no-history", _no_history, always=True),)),
            "slow": Scenario("slow", "two agents insert twelve rows each", AGENTS, self.insert_many,
                             setup=self.seed, detectors=(Detector("lost-row", self._lost_rows),)),
        }
        if slow:
            self.name = "gate-notes-slow"
        self.scenarios = {k: v for k, v in scenarios.items() if (k == "slow") == slow}

    def open(self, location: Path):
        conn = sqlite3.connect(Path(location) / "gate.db", isolation_level=None)
        conn.execute("create table if not exists kv (k text primary key, v text)")
        conn.execute("create table if not exists notes (agent text)")
        conn.execute("create table if not exists rows (agent text, i int)")
        return conn

    def close(self, conn) -> None:
        conn.close()

    def seed(self, conn) -> None:
        conn.executemany("insert into kv values (?, ?)", [("counter", "0"), ("notes", "[]"), ("status", "new")])

    def state(self, conn):
        kv = dict(conn.execute("select k, v from kv"))
        notes = json.loads(kv["notes"]) + [r[0] for r in conn.execute("select agent from notes")]
        return {"counter": int(kv["counter"]), "notes": sorted(notes), "status": kv["status"],
                "rows": conn.execute("select count(*) from rows").fetchone()[0]}

    def increment(self, conn, agent: str) -> None:
        n = int(conn.execute("select v from kv where k = 'counter'").fetchone()[0])
        conn.execute("update kv set v = ? where k = 'counter'", (str(n + 1),))

    def add_note(self, conn, agent: str) -> None:
        if not self.planted:
            conn.execute("insert into notes values (?)", (agent,))
            return
        notes = json.loads(conn.execute("select v from kv where k = 'notes'").fetchone()[0])
        conn.execute("update kv set v = ? where k = 'notes'", (json.dumps(notes + [agent]),))

    def set_status(self, conn, agent: str) -> None:
        conn.execute("update kv set v = ? where k = 'status'", (f"set by {agent}",))

    def insert_many(self, conn, agent: str) -> None:
        for i in range(ROWS):
            conn.execute("insert into rows values (?, ?)", (agent, i))

    def _lost_rows(self, state, errors) -> list[str]:
        want = ROWS * (len(AGENTS) - len(errors))
        return [f"{state['rows']} rows after {want} inserts"] if state["rows"] < want else []


def released() -> GateNotes:
    """Release 1.0: the counter's race, known and accepted."""
    return GateNotes()


def planted() -> GateNotes:
    """Release 1.1: the same, plus a new race in ``notes``."""
    return GateNotes(planted=True)


def slow() -> GateNotes:
    """One race-free scenario whose search takes minutes."""
    return GateNotes(slow=True)
