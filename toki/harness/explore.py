"""Bounded-exhaustive search of a scenario's interleavings: a certificate within a bound, not a sample.

The tree and its reduction (this module); the strategy that walks it bound by bound and cuts it
into shards is :class:`toki.harness.strategies.Exhaustive`.

Every interleaving of the agents with at most ``bound`` (K) *preemptions* is covered (run, or
equivalent to one run), by stateless model checking: each schedule re-executes the scenario from fresh storage
(:meth:`~toki.harness.trial.TrialRunner.trial`), following a prefix of decisions and then a
default (go on with the agent that ran last, else the first eligible one). A preemption is a
switch away from an agent that could have gone on; a switch when it finished or cannot step is
free, and so is choosing a victim (SQLite's busy deadlock, a timed wait running out). Starting
an agent is a decision like any other, so K=0 runs exactly the serial orders.

Partial-order reduction (``dpor``, the default): one run per class of equivalent interleavings.
Dependence is read from each step's footprint, which the interception module that made the step
attached (:mod:`.steps`; :func:`footprint`), and is conservative. A new decision starts with one
branch, the default; after every run the races it shows (:func:`races`) add the branches that
reverse them (DPOR, Flanagan and Godefroid), so a decision whose alternatives commute with what
was run is never branched at all. Sleep sets (Godefroid) stay: after the subtree of step ``t``
has been explored at a decision, a sibling subtree need not run ``t`` again until a step
dependent on ``t`` has run. A run whose every branch within the bound sleeps at some decision
goes on by default (a run cannot be stopped half-way): it is *redundant*, counted apart from
``explored``.

DPOR, sleep sets and a preemption bound do not combine naively (Coons, Musuvathi and McKinley,
"Bounded partial-order reduction", OOPSLA 2013): the run that reverses a race, or the equivalent
run with a sleeping step moved forward, may need more preemptions than the bound allows, and
then nobody covers it. So a race also adds its branch where the earlier step's block began
(:func:`races`), and a sleeping step is skipped only when its equivalent run provably costs no
more preemptions than the one skipped (:meth:`_Node.asleep`); otherwise it is run although it
sleeps. ``reduce=False`` runs every interleaving within the bound; ``dpor=False`` sleep sets
alone, branching every decision to every agent (the tree shards cut, below).

Races first (``probe``): after the first run, the windows it shows (a read then a write of what
it read, two writes a reader must not split) are tried before the tree's next branch, one
preemption each (:func:`probes`). They are extra runs, recorded so that the tree walks a probe
it comes to instead of running it again: they change the order in which a race is found, never
what a complete search covers.

Sharding (``shard=(i, n)``, sleep sets only: DPOR's branches come from races in runs anywhere
below a decision, so its tree has no parts known beforehand): a run that takes a new branch at
a decision some earlier run made is that run's *child*; the first run has none, its children are
generation 1, theirs generation 2. Each run of a generation below :data:`SPLIT_GENERATION` is a
*part* by itself, and so is each run of that generation together with all its descendants.
Parts are numbered in the depth-first order every shard walks, and part ``j`` is shard ``j %
n``'s. Every shard runs the runs above the split (each counted by its part's owner only: they
show the way to the parts below), passes over the other shards' parts by marking their first
branch as taken without running it (a sleep set reads only which branches were taken, not what
they found), and explores its own in full. So the ``n`` shards' runs and prunings add up to
exactly those of one unsharded sleep-set search, whatever ``n``. Splitting by generation rather
than by depth keeps the parts comparable: most runs of a deep tree differ from the first run
only far down its path, and a cut at a fixed depth leaves them all in one part.

The reduction assumes what the harness already does: the Python code an agent runs between two
storage calls shares memory with other agents only under the locks, conditions and queues the
harness instruments, and looks at none of them without a step (``acquire(blocking=False)`` on a
held lock, ``Event.is_set``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from toki.errors import ConfigError
from toki.harness.controller import Chooser, StepRecord, Unverifiable, context_switches
from toki.harness.locks import InstrumentedLock
from toki.harness.loop import OutOfTime, Runs
from toki.harness.steps import ANYTHING, NOTHING, Footprint  # noqa: F401 - NOTHING: callers take it from here
from toki.harness.trial import TrialResult, TrialRunner


# -- what a step touches -----------------------------------------------------------------------

def footprint(step: StepRecord | None) -> Footprint:
    """What the step may touch, as the interception module that made it said
    (:class:`~toki.harness.steps.Footprint`); a step made without one (a plug-in's own), or no
    step, touches anything. Waits, hand-overs to a worker and resumes after a database wait are
    enabled by code between steps (a notify, a set flag, a worker going idle), which no footprint
    shows: they are made touching anything."""
    if step is None or step.touches is None:
        return ANYTHING
    return step.touches


def dependent(a: Footprint, b: Footprint) -> bool:
    """May the two steps (of different agents) fail to commute? (:meth:`Footprint.conflicts`)"""
    return a.conflicts(b)


# -- races (DPOR) ------------------------------------------------------------------------------

def races(events: list[tuple[str, Footprint]]) -> list[tuple[int, str, int]]:
    """The reversals a run's races call for, as ``(i, p, b)``: agent ``p`` is to be a branch at
    decision ``i`` (every eligible agent where ``p`` cannot step) and at ``b``, where the block
    of steps holding step ``i`` began.

    DPOR (Flanagan and Godefroid, POPL 2005) over the run's steps ``events`` (agent, footprint)
    in grant order, its races as source-DPOR defines them (Abdulla, Aronis, Jonsson and Sagonas,
    POPL 2014). Happens-before is the order of one agent's steps and of dependent steps of
    different agents; steps ``e`` and ``e'`` race when they are dependent, of different agents,
    and nothing happens between them in happens-before. Reversing the race needs ``e'``'s agent
    ``p`` at ``e``'s decision. A lock taken (or tried) after another agent gave it back races with
    that agent's taking of it, not with the giving back (which it could not have preceded): DPOR's
    treatment of a mutex.

    Under a preemption bound the reversal may cost a preemption the bound does not allow where
    ``e`` ran and none where the block of ``e``'s agent began: bounded partial-order reduction
    (Coons, Musuvathi and McKinley, OOPSLA 2013) makes ``p`` a branch there too, and adds ``p``
    even where a branch is already one of the reversal's possible first agents. Source-DPOR's
    shortcut (one of those first agents suffices) is not sound under a bound: with it, a run
    that reads two SQLite files while two others write them lost an outcome the full search
    reaches (tests/test_harness_explore.py, "sqlite two files")."""
    out: list[tuple[int, str, int]] = []
    clocks: list[dict[str, int]] = []  # per step: for each agent, its last step that happens before (or is) it

    def before(i: int, k: int) -> bool:  # step i happens before step k (i < k)
        return clocks[k].get(events[i][0], -1) >= i

    def reversal(i: int, j: int) -> None:
        block = i
        while block > 0 and events[block - 1][0] == events[i][0]:
            block -= 1
        out.append((i, events[j][0], block))

    last_of: dict[str, int] = {}
    for j, (p, fp) in enumerate(events):
        preds = [i for i in range(j) if events[i][0] != p and _dependent(events[i][1], fp)]
        own = last_of.get(p)
        everything = preds + ([own] if own is not None else [])
        clock: dict[str, int] = {}
        for d in everything:
            for a, k in clocks[d].items():
                if clock.get(a, -1) < k:
                    clock[a] = k
        clock[p] = j
        clocks.append(clock)
        last_of[p] = j
        for i in preds:
            if any(d != i and before(i, d) for d in everything):
                continue  # something between them: not the nearest race
            if events[i][1].reversible(fp):
                reversal(i, j)
        # A lock taken (or tried) after another agent gave it back: the race to reverse is with
        # that agent's taking of it, which the giving back separates from this step.
        for i in reversed(preds):
            fi = events[i][1]
            if fi.releases and not fi.reversible(fp):
                taken = next((k for k in range(i - 1, -1, -1) if events[k][0] == events[i][0]
                              and events[k][1].writes & fi.releases), None)
                if taken is not None:
                    reversal(taken, j)
                break
    return out


def probes(events: list[tuple[str, Footprint]]) -> list[tuple[int, str]]:
    """Where a race is likeliest, from one run's steps: ``(i, b)``, preempt the agent of step
    ``i`` right after it and let agent ``b`` run to its end.

    Step ``i`` and a later step ``j`` of the same agent touch the same thing, with no step of that
    agent touching it in between, one of them writes it or both read it (a read-modify-write, a
    check-then-insert, two writes a reader must not split, two reads a writer must not split),
    and a step of ``b`` after ``j`` conflicts with one of them: ``b`` run inside the window is
    the lost update, the double insert, the torn read. "The same thing" is the footprints'
    resources and, where both steps name tables, a table both name (a hint: probes are extra
    runs, never a reason to skip one). Read-then-write windows first, each kind in the order the
    windows open."""
    found: dict[tuple[int, str], int] = {}
    for j, (a, fj) in enumerate(events):
        if not (fj.reads or fj.writes):
            continue
        for i in range(j - 1, -1, -1):
            ai, fi = events[i]
            if ai != a or not _same_thing(fi, fj):
                continue
            # a read, then a write of what it read, first: the lost update, the check-then-insert
            rank = 0 if fi.reads and not fi.writes and fj.writes else 1
            for b in dict.fromkeys(e[0] for e in events[j + 1:] if e[0] != a):
                if any(e[0] == b and (_dependent(fi, e[1]) or _dependent(fj, e[1])) and _same_thing(fi, e[1])
                       for e in events[j + 1:]):
                    found[(i, b)] = min(rank, found.get((i, b), rank))
            break
    return sorted(found, key=lambda k: (found[k], k))


def _same_thing(a: Footprint, b: Footprint) -> bool:
    """Do the two steps touch a common resource (reading or writing it), and a common table
    where both name tables?"""
    return Footprint(writes=a.reads | a.writes).conflicts(Footprint(reads=b.reads | b.writes)) and (
        not a.tables or not b.tables or bool(a.tables & b.tables))


@functools.lru_cache(maxsize=65536)  # every run of a search compares the same footprints again
def _dependent(a: Footprint, b: Footprint) -> bool:
    return a.conflicts(b)


# -- the decision tree -------------------------------------------------------------------------

@dataclass(frozen=True)
class _Sleeper:
    """A step whose subtree was explored at an earlier decision. ``cost`` bounds the preemptions
    of the equivalent run that took it there, up to the current decision; ``prev`` is that run's
    last agent."""

    step: Footprint
    cost: int
    prev: str


@dataclass
class _Node:
    """One decision on the current path."""

    victim: bool  # every agent blocked: who gets the error (or whose timed wait runs out)
    eligible: tuple[str, ...]
    last: str | None
    steps: dict[str, Footprint]
    pre: int  # preemptions before this decision
    sleep: dict[str, _Sleeper]
    done: list[str] = field(default_factory=list)  # branches taken here, the current one last
    # The agents to branch to here (DPOR: the first run's choice, then what races in later runs
    # add); None: every eligible agent (a search without DPOR, a victim's decision).
    backtrack: set[str] | None = None

    def cost(self, agent: str) -> int:
        return int(not self.victim and self.last in self.eligible and agent != self.last)

    def asleep(self, agent: str) -> bool:
        # The skipped run continues after `agent` from its own last agent; the equivalent one from
        # the sleeper's: their next switch may differ by one preemption, hence the + 1.
        s = self.sleep.get(agent)
        return s is not None and s.cost + 1 <= self.pre + self.cost(agent)

    def within(self, agent: str, bound: int) -> bool:
        return self.pre + self.cost(agent) <= bound

    def default(self) -> list[str]:
        first = self.last if self.last in self.eligible else self.eligible[0]
        return [first] + [a for a in self.eligible if a != first]

    def options(self, bound: int, first: bool = False) -> list[str]:
        """The branches still to take here; ``first``: the candidates for the first one (the
        backtrack set starts with it)."""
        wanted = None if first else self.backtrack
        return [a for a in self.default() if a not in self.done and (wanted is None or a in wanted)
                and self.within(a, bound) and not self.asleep(a)]

    def want(self, agent: str) -> None:
        """Branch to ``agent`` here too (every eligible agent when it cannot run here)."""
        if self.backtrack is None:
            return
        if agent in self.eligible:
            self.backtrack.add(agent)
        else:
            self.backtrack.update(self.eligible)

    def child_sleep(self) -> dict[str, _Sleeper]:
        """The sleep set after the current branch: what slept here or was explored before it, as
        long as it commutes with the branch taken."""
        if self.victim:
            return {}
        taken = self.done[-1]
        here = self.steps[taken]
        before = {a: _Sleeper(self.steps[a], self.pre + self.cost(a), a) for a in self.done[:-1]}
        return {a: _Sleeper(s.step, s.cost + (taken != s.prev), taken)
                for a, s in {**self.sleep, **before}.items() if a != taken and not dependent(s.step, here)}


SPLIT_GENERATION = 2  # runs of this generation begin the parts that shards divide


class _Tree:
    """The current path of the depth-first search, extended by each run past its prefix.

    With ``shard=(i, n)`` the tree walks only shard ``i``'s parts (see the module's notes);
    ``counting`` says whether the run about to be made is this shard's to count."""

    def __init__(self, bound: int, reduce: bool, shard: tuple[int, int] = (0, 1), split: int | None = None,
                 dpor: bool = False):
        self.bound, self.reduce = bound, reduce
        self.index, self.shards = shard
        # DPOR adds branches from the races of runs anywhere below a decision: no part of its tree
        # is known beforehand, so a shard searches with sleep sets alone (strategies.Exhaustive)
        self.dpor = dpor and reduce and self.shards == 1
        if not 0 <= self.index < self.shards:
            raise ConfigError(f"shard {self.index} of {self.shards} does not exist",
                              fix="number shards 0 .. n-1 for n at least 1")
        self.split = SPLIT_GENERATION if split is None else split
        self.path: list[_Node] = []
        self.pruned = 0
        self.parts = 0
        self.counting = self.shards == 1 or self._mine()  # the first run is a part of generation 0

    def next_node(self, victim: bool, eligible: tuple[str, ...], last: str | None,
                  steps: dict[str, Footprint]) -> _Node:
        parent = self.path[-1] if self.path else None
        pre = parent.pre + parent.cost(parent.done[-1]) if parent else 0
        # a victim gets an error, not its pending step: no sleeping step is that
        sleep = parent.child_sleep() if parent and self.reduce and not victim else {}
        node = _Node(victim, eligible, last, steps, pre, sleep, backtrack=set() if self.dpor and not victim else None)
        if self.counting:  # a decision made by a run every shard makes is counted by the run's owner
            self.pruned += sum(1 for a in eligible if node.within(a, self.bound) and node.asleep(a))
        return node

    def analyse(self, log: list[tuple], busy: set[int] = frozenset()) -> None:
        """DPOR: read the races of the run just made (or walked) along the current path, and make
        each one's reversal a branch (see :func:`races`). A call answered busy (``busy``: its
        decisions) changed nothing: it only read what it found taken."""
        if not self.dpor:
            return
        path = self.path
        events = [(choice, ANYTHING if victim or steps is None else
                   steps[choice].as_read() if n in busy else steps[choice])
                  for n, (victim, _eligible, _last, steps, choice) in enumerate(log[:len(path)])]
        for i, p, block in races(events):
            path[i].want(p)
            path[block].want(p)

    def _mine(self) -> bool:
        self.parts += 1
        return (self.parts - 1) % self.shards == self.index

    def backtrack(self) -> bool:
        """Take the deepest decision's next branch, passing over other shards' parts; False when
        every branch was taken."""
        while self.path:
            node = self.path[-1]
            options = node.options(self.bound)
            if not options:
                self.path.pop()
                continue
            node.done.append(options[0])
            if self.shards == 1:
                return True
            generation = sum(1 for n in self.path if len(n.done) > 1)  # new branches on the path
            if generation > self.split:
                return True  # inside a part of ours: others' parts are never entered
            self.counting = self._mine()
            if generation < self.split or self.counting:
                return True
        return False


class ExploringChooser(Chooser):
    """Follows the tree's current path, then extends it with default decisions.

    A decision where every branch within the bound sleeps ends the path: the run goes on by
    default, unrecorded (it repeats an equivalent run; a run cannot be stopped half-way)."""

    forces_starts = False  # the start order is part of the schedule

    def __init__(self, tree: _Tree):
        self.tree, self.pos, self.ended = tree, 0, False
        self.preemptions = 0  # of the whole run: the path's and the default tail's (which costs none)
        self.log: list[tuple] = []  # every decision: (victim, eligible, last, steps, choice)
        self.busy: set[int] = set()  # the decisions whose call was answered busy (known once the run is over)
        self._ctl = None
        # The tree compares steps recorded in different runs, but a lock's name may differ between
        # runs and two locks may share one (an engine names its lock after id() % 1000). So a lock is
        # known by the order in which this run first met the object, which every run following the
        # same decisions repeats; the objects are kept so that no id is reused during the run.
        self._locks: dict[int, tuple[object, str]] = {}
        self._files: dict[str, str] = {}

    def bind(self, controller) -> None:
        self._ctl = controller

    def choose(self, eligible, last):
        return self._decide(False, tuple(eligible), last)

    def victim(self, blocked):
        return self._decide(True, tuple(blocked), None)

    def _decide(self, victim: bool, eligible: tuple[str, ...], last: str | None) -> str:
        steps = None if self.ended else self._steps(victim, eligible)
        choice = self.decide(victim, eligible, last, steps)
        self.log.append((victim, eligible, last, steps, choice))
        return choice

    def decide(self, victim: bool, eligible: tuple[str, ...], last: str | None,
               steps: dict[str, Footprint] | None) -> str:
        """One decision, given what each eligible agent is about to do (recorded in an earlier
        run of the same decisions, when :class:`Memo` replays it)."""
        path = self.tree.path
        if self.ended:
            return last if last in eligible else eligible[0]
        if self.pos < len(path):
            node = path[self.pos]
            choice = self._follow(node, victim, eligible, steps)
            self.preemptions += node.cost(choice)
            return choice
        node = self.tree.next_node(victim, eligible, last, steps)
        options = node.options(self.tree.bound, first=True)
        if not options:
            self.ended = True
            return node.default()[0]
        node.want(options[0])
        node.done.append(options[0])
        path.append(node)
        self.pos += 1
        self.preemptions += node.cost(options[0])
        return options[0]

    def _follow(self, node: _Node, victim: bool, eligible: tuple[str, ...], steps: dict[str, Footprint]) -> str:
        if (node.victim, node.eligible, node.steps) != (victim, eligible, steps):
            raise Unverifiable(
                f"decision {self.pos} of a re-executed schedule offered {_offer(eligible, steps)} where the first "
                f"execution offered {_offer(node.eligible, node.steps)}: the same grants gave a different run",
                fix=_NONDETERMINISTIC)
        self.pos += 1
        return node.done[-1]

    def check_followed(self) -> None:
        """The run made every decision of the path it was to follow (a run that ends sooner
        diverged without a decision to show it)."""
        if self.pos < len(self.tree.path):
            raise Unverifiable(
                f"a re-executed schedule ended after {self.pos} decisions where the first execution made "
                f"{len(self.tree.path)} or more: the same grants gave a different run", fix=_NONDETERMINISTIC)

    def _steps(self, victim: bool, eligible: tuple[str, ...]) -> dict[str, Footprint]:
        if victim:
            return {a: ANYTHING for a in eligible}
        return {a: self._stable(a, footprint(self._ctl.pending_step(a))) for a in eligible}

    def _stable(self, agent: str, fp: Footprint) -> Footprint:
        if any(r[:1] == ("sql",) and len(r) > 1 for r in fp.reads | fp.writes | fp.releases):
            # a SQLite file is known by the order in which this run first met it: every run has a
            # folder of its own, and the same decisions meet the same files in the same order
            fp = fp.aliased("sql", lambda path: self._files.setdefault(path, f"db {len(self._files)}"))
        if fp.space != "lock":
            return fp
        obj = self._ctl.pending_lock(agent)
        if not isinstance(obj, InstrumentedLock):
            return fp  # a semaphore: its name is where it was created, the same in every run
        _, alias = self._locks.setdefault(id(obj), (obj, f"lock {len(self._locks)}"))
        return fp.renamed("lock", alias)


class ProbeChooser(ExploringChooser):
    """A probe (:func:`probes`): the decisions ``prefix`` of a run made before, then agent ``b``
    whenever it can step, then on by default. Its decisions are logged as a tree's run's are, so
    a record (:class:`Memo`) keeps it and the tree walks it rather than running it again."""

    def __init__(self, prefix: list[str], b: str, bound: int):
        super().__init__(_Tree(bound=bound, reduce=False))
        self.prefix, self.b, self.bound = prefix, b, bound

    def decide(self, victim, eligible, last, steps):
        def cost(agent: str) -> int:
            return int(not victim and last in eligible and agent != last)

        n = len(self.log)
        if n < len(self.prefix) and self.prefix[n] in eligible:
            choice = self.prefix[n]
        elif self.b in eligible and not victim and self.preemptions + cost(self.b) <= self.bound:
            choice = self.b
        else:  # (b blocked, then free again while another runs: going back to it may cost too much)
            choice = last if last in eligible else eligible[0]
        self.preemptions += cost(choice)
        return choice


class Memo:
    """The runs of the lower bounds, as a tree of their decisions, so that iterative context
    bounding does not execute them again at the next bound: the depth-first search at bound
    K + 1 walks every run of bound K to find the branches off it, and a walk through a recorded
    run only needs what each decision saw (the same grants give the same run, which every
    re-execution checks, so the record stands for the run). A run that leaves the record (a
    decision the record has no branch for) is executed for real."""

    def __init__(self):
        self.root: dict = {}
        self.recording = True  # off for the last bound: no later bound walks its runs
        self._logs: list[tuple[list[tuple], list[int]]] = []  # (decisions, the busy ones)

    # A record travels to the processes that search the next bound's shards as its runs' decision
    # lists: the tree itself nests two dicts per decision, deeper than pickle's recursion allows
    # for a long run.
    def __getstate__(self) -> dict:
        return {"logs": self._logs}

    def __setstate__(self, state: dict) -> None:
        self.__init__()
        for log, busy in state["logs"]:
            self.add(log, set(busy))

    def add(self, log: list[tuple], busy: set[int] = frozenset()) -> None:
        self._logs.append((log, sorted(busy)))
        node = self.root
        for n, (victim, eligible, last, steps, choice) in enumerate(log):
            seen = node.get("saw")
            if seen is None or (seen[3] is None and steps is not None):
                node["saw"] = (victim, eligible, last, steps)
            elif seen[:3] != (victim, eligible, last) or (steps is not None and seen[3] != steps):
                raise Unverifiable("two executions of the same decisions offered different steps: the same grants "
                                   "gave a different run", fix=_NONDETERMINISTIC)
            node = node.setdefault("next", {}).setdefault(choice, {})
            if n in busy:
                node["busy"] = True
        node["end"] = True

    def replay(self, chooser: "ExploringChooser") -> bool:
        """Make ``chooser``'s decisions from the record, as a run would; False (the tree as it was)
        when the run leaves the record and must be executed."""
        tree = chooser.tree
        # deciding only follows the path's nodes and appends new ones (counting their prunings)
        depth, pruned = len(tree.path), tree.pruned
        node = self.root
        while not node.get("end"):
            seen = node.get("saw")
            if seen is None or (seen[3] is None and not chooser.ended):
                break  # recorded past where its run stopped looking: no footprints to decide on
            choice = chooser.decide(*seen)
            chooser.log.append((*seen, choice))
            node = node.get("next", {}).get(choice)
            if node is None:
                break
            if node.get("busy"):
                chooser.busy.add(len(chooser.log) - 1)
        else:
            return True
        del tree.path[depth:]
        tree.pruned = pruned
        chooser.pos, chooser.ended, chooser.preemptions, chooser.log, chooser.busy = 0, False, 0, [], set()
        return False


_NONDETERMINISTIC = ("the run depends on something the harness does not control (time, randomness, a thread of "
                     "the engine's own); an exhaustive search needs runs that the same grants repeat")


def _offer(eligible: tuple[str, ...], steps: dict[str, Footprint]) -> str:
    return ", ".join(f"{a} ({steps[a].space or 'start'})" for a in eligible)


# -- the search --------------------------------------------------------------------------------

@dataclass
class ExploreResult:
    found: TrialResult | None  # the first anomalous run (not serializable), or None
    explored: int  # runs executed, one per class of equivalent interleavings
    pruned: int  # branches within the bound skipped as equivalent to explored ones
    complete: bool  # every interleaving within the bound was covered
    bound: int
    elapsed_s: float
    outcomes: set[str] = field(default_factory=set)  # outcome keys reached
    hits: int = 0  # anomalous runs (more than one only when the search goes on past the first)
    anomalous: set[str] = field(default_factory=set)  # outcome keys of the anomalous runs
    out_of_time: bool = False  # ``time_limit_s`` or ``deadline`` ended the search
    redundant: int = 0  # runs executed that turned out equivalent to one explored (not in ``explored``)
    probes: int = 0  # of ``explored``: runs made first where the first run showed a race likeliest

    @property
    def admits(self) -> bool:
        return self.found is not None


def _judged(res: ExploreResult, r: TrialResult, hit: bool, on_run) -> None:
    """Count a run made (a tree's or a probe's) into ``res``."""
    res.outcomes.add(r.outcome.key)
    if on_run is not None:
        on_run(res.explored, hit)
    if hit:
        res.hits += 1
        res.anomalous.add(r.outcome.key)
        # going on past the first, the witness is the run with the fewest switches
        if res.found is None or context_switches(r.trace) < context_switches(res.found.trace):
            res.found = r


def explore(runner: TrialRunner, *, bound: int, reduce: bool = True, stop_at_first: bool = True,
            max_runs: int | None = None, time_limit_s: float | None = None,
            want: Callable[[TrialResult], bool] | None = None,
            on_run: Callable[[int, bool], None] | None = None, shard: tuple[int, int] = (0, 1),
            memo: Memo | None = None, count_below: bool = True, deadline: float | None = None,
            dpor: bool = True, probe: bool = False) -> ExploreResult:
    """Run every interleaving with at most ``bound`` preemptions (with ``reduce``, skipping those
    equivalent to one already run) until an anomaly ``want`` accepts is found (``stop_at_first``),
    ``max_runs`` runs, ``time_limit_s`` seconds or the ``deadline`` (a :func:`time.monotonic` time;
    either sets ``out_of_time``). ``on_run(runs so far, anomalous)`` follows each run, as
    :func:`~toki.harness.search.search`'s ``on_trial``. ``shard=(i, n)`` explores shard ``i``'s
    parts of the tree only; the ``n`` shards' counts add up to the unsharded search's.

    Iterative context bounding calls this once per bound with one ``memo``: a run recorded there
    (a lower bound's) is walked, not executed, and neither counted nor judged again; each new
    run is recorded. ``count_below=False`` counts only the runs with exactly ``bound``
    preemptions (those with fewer belong to a lower bound's count), so that the bounds' counts
    add up to distinct interleavings, in every shard alike."""
    if bound < 0:
        raise ConfigError(f"bound {bound} must be at least 0", fix="pass 0 for the serial orders, 2 or 3 to search")
    t0 = time.perf_counter()
    runner.serial_outcomes()
    tree = _Tree(bound, reduce, shard, dpor=dpor)
    res = ExploreResult(None, 0, 0, False, bound, 0.0)
    if time_limit_s is not None:
        deadline = min(time.monotonic() + time_limit_s, deadline if deadline is not None else float("inf"))
    runs = Runs(runner, want=want, deadline=deadline)
    todo: list[tuple[list[str], str]] | None = [] if probe and bound > 0 and tree.dpor else None
    if todo is not None and memo is None:
        memo = Memo()  # so that the tree walks a probe it comes to instead of running it again
    while not (max_runs is not None and res.explored + res.redundant >= max_runs):
        if todo:  # races first: the probes the first run showed, before the tree's next branch
            prefix, b = todo.pop(0)
            chooser = ProbeChooser(prefix, b, bound)
            try:
                r, hit = runs.trial(chooser)
            except OutOfTime:
                res.out_of_time = True
                break
            memo.add(chooser.log, set(chooser._ctl.busy_grants) if chooser._ctl is not None else set())
            res.explored += 1
            res.probes += 1
            _judged(res, r, hit, on_run)
            if hit and stop_at_first:
                break
            continue
        if runs.past():  # a walk through the record takes time too
            res.out_of_time = True
            break
        chooser = ExploringChooser(tree)
        known = memo is not None and memo.replay(chooser)
        if not known:
            try:
                r, hit = runs.trial(chooser)
            except OutOfTime:
                res.out_of_time = True
                break
            if chooser._ctl is not None:
                chooser.busy = set(chooser._ctl.busy_grants)
            if memo is not None and memo.recording:
                memo.add(chooser.log, chooser.busy)
        chooser.check_followed()
        tree.analyse(chooser.log, chooser.busy)
        if known or not tree.counting or (not count_below and chooser.preemptions < bound and r.serializable):
            # a lower bound's run, or another shard's: it only shows the way to our parts
            if not tree.backtrack():
                res.complete = True
                break
            continue
        if chooser.ended:
            res.redundant += 1  # its sleep set had every branch asleep: equivalent to a run made before
        else:
            res.explored += 1
        if todo is not None and res.explored + res.redundant == 1:
            events = [(c, ANYTHING if v or st is None else st[c]) for v, _e, _l, st, c in chooser.log]
            todo.extend(([c for *_, c in chooser.log[:i + 1]], b) for i, b in probes(events))
        _judged(res, r, hit, on_run)
        if not tree.backtrack():
            res.complete = True
            break
        if hit and stop_at_first:
            break
    res.pruned = tree.pruned
    res.elapsed_s = time.perf_counter() - t0
    return res
