"""Bounded-exhaustive search (toki.harness.explore): the bound, the verdicts, and the soundness of
the partial-order reduction (the reduced search reaches every outcome the full one does)."""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path

import pytest

from tests import toy_engine
from toki.engines.registry import load_engine
from toki.errors import ConfigError
from toki.harness import InstrumentedLock, Scenario
from toki.harness.controller import Unverifiable
from toki.harness.explore import NOTHING, ExploringChooser, _Tree, explore
from toki.harness.trial import TrialRunner


class _Recording(TrialRunner):
    """Keeps the grant sequence of every trial."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen: list[tuple[str, ...]] = []

    def trial(self, chooser):
        r = super().trial(chooser)
        self.seen.append(tuple(r.trace.grants))
        return r


@pytest.mark.parametrize("reduce", [False, True])
def test_bound_zero_runs_exactly_the_serial_orders(reduce):
    runs = []
    with _Recording(toy_engine.counter(), "increment") as tr:
        res = explore(tr, bound=0, reduce=reduce, stop_at_first=False, on_run=lambda n, hit: runs.append((n, hit)))
        serial = {tuple(t.grants) for _, t, _ in tr.serial_runs}
    assert res.complete and res.explored == len(set(tr.seen)) == 2 and runs == [(1, False), (2, False)]
    assert set(tr.seen) == serial


def test_the_racy_counter_loses_an_update_within_one_preemption_and_the_fixed_one_is_certified():
    with TrialRunner(toy_engine.counter(), "increment") as tr:
        found = explore(tr, bound=1)
        narrowed = explore(tr, bound=1, want=lambda r: False)
    assert found.admits and not found.complete
    assert any(a.anomaly == "lost-update" for a in found.found.anomalies)
    assert narrowed.found is None and narrowed.complete  # every anomaly was unwanted: the space was exhausted
    with TrialRunner(toy_engine.counter_locked(), "increment") as tr:
        fixed = explore(tr, bound=2)
    assert fixed.complete and fixed.found is None and fixed.explored > 1


def test_counts_are_reported_and_a_cut_search_is_not_complete():
    with TrialRunner(toy_engine.notes(), "append") as tr:
        full = explore(tr, bound=2, reduce=False, stop_at_first=False)
        reduced = explore(tr, bound=2, stop_at_first=False)
        cut = explore(tr, bound=2, stop_at_first=False, max_runs=3)
    assert full.pruned == 0 and reduced.pruned > 0 and reduced.explored < full.explored
    assert cut.explored == 3 and not cut.complete and full.complete and reduced.complete
    with TrialRunner(toy_engine.notes(), "append") as tr, pytest.raises(ConfigError):
        explore(tr, bound=-1)


class _Flaky(toy_engine.Counter):
    """Agent A makes an extra read on every other call: the same grants no longer repeat a run."""

    def __init__(self):
        super().__init__()
        self.calls = itertools.count()

    def increment(self, conn, agent):
        if agent == "A" and next(self.calls) % 2:
            conn.execute("select 1")
        super().increment(conn, agent)


def test_a_run_that_the_same_grants_do_not_repeat_is_unverifiable():
    with TrialRunner(_Flaky(), "increment") as tr:
        with pytest.raises(Unverifiable, match="same grants gave a different run"):
            explore(tr, bound=2, stop_at_first=False)
    # A run may also end before the decisions it was to follow (an agent that no longer calls).
    tree = _Tree(bound=1, reduce=True)
    tree.path.append(tree.next_node(False, ("A", "B"), None, {"A": NOTHING, "B": NOTHING}))
    with pytest.raises(Unverifiable, match="ended after 0 decisions"):
        ExploringChooser(tree).check_followed()


# -- soundness of the reduction --------------------------------------------------------------

class _Tally:
    """A writes two rows into `items`, a trigger counts them into `tally`, R reads the tally twice.
    A's inserts and R's reads name disjoint tables, yet they do not commute: reading between the
    inserts sees 1, which no serial order shows."""

    name, version, executed = "toy-tally", "1.0", "model"

    def __init__(self):
        self.scenarios = {"read-tally": Scenario("read-tally", "A adds two items while R reads the tally twice",
                                                 ("R", "A"), self.call, setup=self.setup, observe=True)}

    def open(self, location):
        return sqlite3.connect(Path(location) / "db.sqlite", isolation_level=None)

    def setup(self, c):
        c.executescript("create table items (x int); create table tally (n int); insert into tally values (0);"
                        "create trigger counted after insert on items begin update tally set n = n + 1; end;")

    def close(self, c):
        c.close()

    def state(self, c):
        return [r[0] for r in c.execute("select n from tally")]

    def call(self, c, agent):
        if agent == "A":
            c.execute("insert into items values (1)")
            c.execute("insert into items values (2)")
            return None
        return [c.execute("select n from tally").fetchone()[0] for _ in range(2)]


class _Sqlite:
    """Small SQLite programs for the rules a footprint reads (a file of its own, its write lock and
    its data, a commit giving the lock back, a busy call as a read). ``program``:

    - ``deferred``: two agents add one in ``BEGIN; SELECT; UPDATE; COMMIT`` (both may read, then
      neither can write: SQLite's busy deadlock, one agent gets the error);
    - ``two-files``: A and B each add one in a file of their own, R reads both files twice;
    - ``attached``: A writes b.db through ``ATTACH``, B writes b.db directly, R reads b.db twice;
    - ``cascade``: A deletes a parent row whose children a foreign key deletes with it, R counts
      the children twice (the delete names no child table)."""

    version, executed = "1.0", "model"

    def __init__(self, program: str):
        self.name, self.program = f"toy-sqlite-{program}", program
        agents = {"deferred": ("A", "B")}.get(program, ("A", "B", "R") if program != "cascade" else ("A", "R"))
        self.scenarios = {program: Scenario(program, f"SQLite: {program}", agents, self.call, setup=self.setup,
                                            observe=True)}

    def open(self, location):
        return Path(location)

    def close(self, folder):
        pass

    def _db(self, folder, name="a.db"):
        c = sqlite3.connect(folder / name, isolation_level=None)
        if self.program == "cascade":
            c.execute("pragma foreign_keys = on")
        return c

    def setup(self, folder):
        for name in ("a.db", "b.db"):
            c = sqlite3.connect(folder / name, isolation_level=None)
            c.executescript("create table n (id int primary key, v int); insert into n values (1, 0);"
                            "create table parent (id int primary key);"
                            "create table child (id int, p int references parent(id) on delete cascade);"
                            "insert into parent values (1); insert into child values (1, 1), (2, 1);")
            c.close()

    def state(self, folder):
        out = []
        for name in ("a.db", "b.db"):
            c = sqlite3.connect(folder / name)
            out.append([c.execute("select v from n").fetchone()[0], c.execute("select count(*) from child").fetchone()[0]])
            c.close()
        return out

    def call(self, folder, agent):
        p = self.program
        if p == "deferred":
            c = self._db(folder)
            try:
                c.execute("begin")
                (v,) = c.execute("select v from n where id = 1").fetchone()
                c.execute("update n set v = ? where id = 1", (v + 1,))
                c.execute("commit")
            finally:
                c.close()
            return None
        if agent == "R":
            name = "b.db" if p == "attached" else "a.db"
            c = self._db(folder, name)
            try:
                if p == "cascade":
                    return [c.execute("select count(*) from child").fetchone()[0] for _ in range(2)]
                if p == "two-files":
                    d = self._db(folder, "b.db")
                    try:
                        return [(c.execute("select v from n").fetchone()[0], d.execute("select v from n").fetchone()[0])
                                for _ in range(2)]
                    finally:
                        d.close()
                return [c.execute("select v from n").fetchone()[0] for _ in range(2)]
            finally:
                c.close()
        if p == "cascade":
            c = self._db(folder)
            try:
                c.execute("delete from parent where id = 1")
            finally:
                c.close()
            return None
        name = "b.db" if p == "two-files" and agent == "B" else "a.db"
        c = self._db(folder, "b.db" if p == "attached" and agent == "B" else name)
        try:
            if p == "attached" and agent == "A":
                c.execute("attach database ? as other", (str(folder / "b.db"),))
                c.execute("update other.n set v = v + 1 where id = 1")
                c.execute("update other.n set v = v + 10 where id = 1")
            else:
                c.execute("update n set v = v + 1 where id = 1")
                c.execute("update n set v = v + 10 where id = 1")
        finally:
            c.close()
        return None


def _sqlite(program):
    return lambda: _Sqlite(program)


_runs = itertools.count()


class _Log:
    """Two agents append to one JSON list under one lock, each then touching a file of its own (a
    step after the release, for the reduction to move the other agent's steps around).
    ``per_run``: the lock's name changes from run to run, as an engine naming its lock after id()
    does; it is still one lock."""

    version, executed = "1.0", "model"

    def __init__(self, per_run: bool):
        self.name, self.per_run = f"toy-log-{per_run}", per_run
        self.scenarios = {"append": Scenario("append", "two agents append under one lock", ("A", "B"), self.append,
                                             setup=lambda h: h["path"].write_text("[]"), shared=True)}

    def open(self, location):
        return {"path": Path(location) / "log.json"}

    def prepare(self, h, controller):
        h["lock"] = InstrumentedLock(f"log lock #{next(_runs) if self.per_run else 0}")

    def close(self, h):
        pass

    def state(self, h):
        return json.loads(h["path"].read_text())

    def append(self, h, agent):
        with h["lock"]:
            with open(h["path"]) as f:
                log = json.load(f)
            with open(h["path"], "w") as f:
                json.dump(log + [agent], f)
        with open(h["path"].with_name(agent), "a") as f:
            f.write("done")


def _module(spec):
    return lambda: load_engine(None, spec)


def _three_notes():
    eng = toy_engine.notes()
    s = eng.scenarios["append"]
    eng.scenarios = {"append": Scenario("append", "three agents append a note", ("A", "B", "C"), s.call, setup=s.setup)}
    return eng


SMALL = [
    ("counter", _module("tests.toy_engine:counter"), "increment", 3),
    ("counter-locked", _module("tests.toy_engine:counter_locked"), "increment", 3),
    ("notes K=1", toy_engine.notes, "append", 1),  # plain sleep sets, blind to the bound, lose 2 of 5 outcomes here
    ("notes K=3", toy_engine.notes, "append", 3),
    ("notes, three agents", _three_notes, "append", 2),
    ("tinydb racy", _module("tests.plugins.tinydb_counter:racy"), "increment", 3),
    ("tinydb locked", _module("tests.plugins.tinydb_counter:locked"), "increment", 2),
    ("sqlitedict racy", _module("tests.plugins.sqlitedict_counter:racy"), "increment", 2),
    ("sqlitedict locked", _module("tests.plugins.sqlitedict_counter:locked"), "increment", 2),
    ("atommem add-add", lambda: load_engine("atommem"), "add-add", 2),
    ("atommem profile-batch-vs-add", lambda: load_engine("atommem"), "profile-batch-vs-add", 2),
    ("atommem-atomic add-add", lambda: load_engine("atommem-atomic"), "add-add", 2),
    ("trigger", _Tally, "read-tally", 2),  # a table-by-table footprint loses the read between the inserts
    ("sqlite deferred", _sqlite("deferred"), "deferred", 2),
    ("sqlite two files", _sqlite("two-files"), "two-files", 2),
    ("sqlite attached", _sqlite("attached"), "attached", 2),
    ("sqlite cascade", _sqlite("cascade"), "cascade", 2),
    ("sqlite counter, BEGIN IMMEDIATE", _module("benchmarks.frontrun_programs.sqlite_counter:fixed"), "increment", 3),
    ("sqlite counter, three agents", _module("benchmarks.frontrun_programs.sqlite_counter:racy3"), "increment", 2),
    ("sqlite counter, BEGIN IMMEDIATE, three agents", _module("benchmarks.frontrun_programs.sqlite_counter:fixed3"),
     "increment", 2),
]


def _cases(rows, slow=()):
    """Parameters named by their label; the labels in ``slow`` run in the slow tier."""
    return [pytest.param(*r, id=r[0], marks=pytest.mark.slow if r[0] in slow else ()) for r in rows]


def _everything(make, scenario: str, bound: int, reduce: bool = True, dpor: bool = True, probe: bool = False):
    with TrialRunner(make(), scenario) as tr:
        return explore(tr, bound=bound, reduce=reduce, stop_at_first=False, dpor=dpor, probe=probe)


def _both(make, scenario: str, bound: int):
    return _everything(make, scenario, bound, reduce=False), _everything(make, scenario, bound)


@pytest.mark.parametrize("label,make,scenario,bound", _cases(SMALL, slow={
    "notes K=3", "tinydb locked", "notes, three agents", "tinydb racy", "sqlitedict racy", "sqlitedict locked", "atommem add-add",
    "atommem profile-batch-vs-add", "atommem-atomic add-add", "sqlite counter, three agents",
    "sqlite counter, BEGIN IMMEDIATE, three agents", "sqlite attached", "sqlite two files", "sqlite deferred"}))
def test_the_reduced_search_reaches_every_outcome_of_the_full_one(label, make, scenario, bound):
    """DPOR (with its races-first probes) and sleep sets alone each reach exactly the outcomes of
    the full search, in no more runs."""
    full, reduced = _both(make, scenario, bound)
    sleep = _everything(make, scenario, bound, dpor=False)
    probed = _everything(make, scenario, bound, probe=True)
    assert full.complete and reduced.complete and sleep.complete and probed.complete
    assert reduced.outcomes == full.outcomes == sleep.outcomes == probed.outcomes
    assert reduced.explored <= sleep.explored <= full.explored


@pytest.mark.slow
def test_a_lock_renamed_in_every_run_is_still_one_lock_to_the_reduction():
    fixed = _everything(lambda: _Log(per_run=False), "append", 3)
    renamed = _everything(lambda: _Log(per_run=True), "append", 3)
    assert renamed.explored == fixed.explored and renamed.outcomes == fixed.outcomes


@pytest.mark.slow
def test_sodamem_delete_vs_supersede_reduced_reaches_every_outcome():
    pytest.importorskip("sodamem")
    full, reduced = _both(lambda: load_engine("sodamem"), "delete-vs-supersede", 2)
    assert full.complete and reduced.complete and reduced.outcomes == full.outcomes
    assert reduced.explored < full.explored


# -- sharding: the parts of n shards add up to the unsharded search ----------------------------

SHARDED = [
    ("notes K=2", toy_engine.notes, "append", 2),
    ("notes K=3", toy_engine.notes, "append", 3),
    ("notes, three agents", _three_notes, "append", 2),
    ("atommem-atomic add-search-vs-add", lambda: load_engine("atommem-atomic"), "add-search-vs-add", 2),
    ("tinydb locked", _module("tests.plugins.tinydb_counter:locked"), "increment", 2),
]


@pytest.mark.parametrize("label,make,scenario,bound", _cases(SHARDED, slow={
    "notes K=3", "notes, three agents", "atommem-atomic add-search-vs-add", "tinydb locked"}))
def test_the_shards_of_a_tree_add_up_to_the_unsharded_search(label, make, scenario, bound):
    """Shards search the sleep-set tree (DPOR's has no parts known beforehand): their counts add
    up to one process's sleep-set search."""
    whole = _everything(make, scenario, bound, dpor=False)
    for n in (2, 3):
        parts = []
        for i in range(n):
            with TrialRunner(make(), scenario) as tr:
                parts.append(explore(tr, bound=bound, stop_at_first=False, shard=(i, n)))
        assert all(p.complete for p in parts)
        assert sum(p.explored for p in parts) == whole.explored, (n, [p.explored for p in parts])
        assert sum(p.pruned for p in parts) == whole.pruned
        assert set().union(*(p.outcomes for p in parts)) == whole.outcomes
        assert all(p.explored > 0 for p in parts)  # every shard has work: the split is not one part


def test_a_shard_that_does_not_exist_is_bad_input():
    with TrialRunner(toy_engine.counter(), "increment") as tr, pytest.raises(ConfigError, match="shard 2 of 2"):
        explore(tr, bound=1, shard=(2, 2))


@pytest.mark.slow  # about 10 s; the fast tier keeps the mechanism in a smaller test
def test_a_racy_counter_is_found_by_some_shard_and_the_merged_verdict_names_the_lowest_level():
    from toki.harness.search import exhaustive_part, exhaustive_verdict, first_hit

    parts = []
    for i in range(3):
        with TrialRunner(toy_engine.counter(), "increment") as tr:
            part = exhaustive_part(tr, bound=2, shard=(i, 3))
            part.pop("found")
            parts.append(part)
    doc, hit = exhaustive_verdict(2, parts), first_hit(parts)
    assert hit is not None and hit["level"] == 1 and not doc["complete"] and doc["shards"] == 3
    assert doc["explored"] == sum(p["explored"] for p in parts)


@pytest.mark.slow
@pytest.mark.db
def test_an_exhaustive_search_over_postgresql_row_lock_waits_repeats_itself():
    """B's SELECT ... FOR UPDATE waits for A's row lock; A's commit ends the wait. Whether B is
    eligible at the next decision used to depend on how soon its thread woke (the same grants then
    offered different agents: unverifiable one run in three, and 50 or 51 interleavings when
    complete). The controller now asks the observer after every completed call."""
    from toki.harness.engine import connect_database

    counts = []
    for _ in range(3):
        eng = load_engine(None, "tests.plugins.sqlalchemy_accounts:for_update")
        connect_database(eng, None)
        with TrialRunner(eng, next(iter(eng.scenarios))) as tr:
            res = explore(tr, bound=2, stop_at_first=False)
        assert res.complete and res.found is None
        counts.append((res.explored, res.pruned))
    assert len(set(counts)) == 1, counts


CERTIFIED = [  # complete at their bound, no anomaly: iterative bounding walks every bound
    ("counter-locked", _module("tests.toy_engine:counter_locked"), "increment", 3),
    ("atommem-atomic add-search-vs-add", lambda: load_engine("atommem-atomic"), "add-search-vs-add", 2),
    ("tinydb locked", _module("tests.plugins.tinydb_counter:locked"), "increment", 2),
    ("letta rejudge", lambda: load_engine("letta"), "rejudge", 2),
    ("mem0 1.0.x rejudge", lambda: load_engine("mem0-v2"), "rejudge", 2),
]


@pytest.mark.parametrize("label,make,scenario,bound", _cases(CERTIFIED, slow={
    "tinydb locked", "atommem-atomic add-search-vs-add", "letta rejudge", "mem0 1.0.x rejudge"}))
def test_iterative_bounds_execute_each_interleaving_once_and_count_it_once(label, make, scenario, bound):
    """K = 0, 1, .., bound walk the lower bounds' runs from a record: the interleavings executed
    are all distinct, they are as many as one search at the top bound runs, and so are the counts,
    in one process and summed over shards."""
    from toki.harness.search import exhaustive_part

    whole = _everything(make, scenario, bound, probe=True)
    assert whole.complete and not whole.hits
    with _Recording(make(), scenario) as tr:
        part = exhaustive_part(tr, bound=bound)
    assert part["complete"] and part["found"] is None
    assert len(tr.seen) == len(set(tr.seen)) == part["explored"] == whole.explored
    assert part["pruned"] == whole.pruned
    shards = []
    for i in range(2):
        with TrialRunner(make(), scenario) as tr:
            shards.append(exhaustive_part(tr, bound=bound, shard=(i, 2)))
    sleep = _everything(make, scenario, bound, dpor=False)  # what shards search
    assert sum(p["explored"] for p in shards) == sleep.explored
    assert sum(p["pruned"] for p in shards) == sleep.pruned
    assert whole.explored <= sleep.explored


def test_the_run_that_reverses_the_first_runs_race_finds_the_racy_counter():
    """Bounding starts at one preemption (the serial orders are the reference outcomes, never an
    anomaly): the first run is serial, DPOR reverses its race (A's write before B's read), and the
    second run loses the update: two interleavings, none executed twice."""
    from toki.harness.search import exhaustive_part

    with _Recording(toy_engine.counter(), "increment") as tr:
        part = exhaustive_part(tr, bound=2)
    assert part["found"] is not None and part["level"] == 1
    assert part["explored"] == len(tr.seen) == len(set(tr.seen)) == 2


# -- soundness on generated programs -------------------------------------------------------------

class _Files:
    """A generated program: each agent reads and appends to files in a given order, optionally
    under one shared lock; what each read saw is part of the outcome."""

    version, executed = "1.0", "model"

    def __init__(self, programs: dict[str, tuple[bool, tuple[tuple[str, str], ...]]]):
        self.name, self.programs = "toy-files", programs
        self.scenarios = {"ops": Scenario("ops", "generated file operations", tuple(programs), self.call,
                                          setup=self.setup, shared=True, observe=True)}

    def open(self, location):
        return {"folder": Path(location)}

    def prepare(self, h, controller):
        h["lock"] = InstrumentedLock("files lock")

    def close(self, h):
        pass

    def setup(self, h):
        for name in ("x", "y"):
            (h["folder"] / name).write_text("")

    def state(self, h):
        return {name: (h["folder"] / name).read_text() for name in ("x", "y")}

    def call(self, h, agent):
        locked, ops = self.programs[agent]
        if locked:
            with h["lock"]:
                return self._ops(h, agent, ops)
        return self._ops(h, agent, ops)

    def _ops(self, h, agent, ops):
        seen = []
        for op, name in ops:
            if op == "r":
                with open(h["folder"] / name) as f:
                    seen.append(f.read())
            else:
                with open(h["folder"] / name, "a") as f:
                    f.write(agent)
        return seen


@pytest.mark.slow
def test_dpor_reaches_every_outcome_of_the_full_search_on_generated_programs():
    """Two or three agents, each one to three reads and appends over two files, some under a
    shared lock: at every bound up to 2, DPOR with and without its probes reaches exactly the
    outcomes of the full search (the property the hand-written programs above check, on programs
    nobody chose)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    op = st.tuples(st.sampled_from("rw"), st.sampled_from("xy"))
    agent = st.tuples(st.booleans(), st.lists(op, min_size=1, max_size=3).map(tuple))
    programs = st.lists(agent, min_size=2, max_size=3).map(lambda ps: dict(zip("ABC", ps)))

    # 15 programs (derandomized: the same ones every run) at about 3 s each; 25 took 86 s of CI
    @settings(max_examples=15, deadline=None, database=None, derandomize=True)
    @given(programs, st.integers(0, 2))
    def check(progs, bound):
        full = _everything(lambda: _Files(progs), "ops", bound, reduce=False)
        for kw in ({}, {"probe": True}):
            reduced = _everything(lambda: _Files(progs), "ops", bound, **kw)
            assert reduced.complete and reduced.outcomes == full.outcomes, (progs, bound, kw)
            assert reduced.explored <= full.explored

    check()
