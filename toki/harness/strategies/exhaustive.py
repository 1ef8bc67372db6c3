"""Bounded-exhaustive search: every interleaving with at most K preemptions, a certificate within K.

The search itself (the decision tree, DPOR and sleep sets, races-first probes, shards, the
record of the lower bounds) is :mod:`toki.harness.explore`; this strategy runs it by iterative
context bounding (CHESS): K = 1, 2, ... so that a race is found with the fewest preemptions, and
a bound with no anomaly is covered completely before the next. K = 0 is not a level of its own:
its runs are the serial orders, which the reference outcomes ran already and which no anomaly
can be, so bound 1 counts them with its own. A bound walks the lower bounds' runs from a record
instead of executing them again, and counts only its own (exactly K preemptions), so
``explored`` counts distinct interleavings, each executed once.

Sharded (``toki certify --workers N``/``--cluster``): :meth:`Exhaustive.part` searches one shard
of the tree (a *part*, a dict of JSON values that travels back from a worker process),
:meth:`Exhaustive.merge` adds the parts up, and :meth:`Exhaustive.shards` is the strategy that
stands for a search run elsewhere: it re-executes the anomaly the parts report from its grants.
Any number of shards gives the counts one process gives: a DPOR search (the default
``reduction``) is one job per scenario, the workers sharing the scenarios; a sleep-set search
(``reduction="sleep"``) cuts each scenario's tree into shards whose counts add up.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from toki.errors import ConfigError
from toki.harness.controller import Unverifiable, context_switches
from toki.harness.loop import Base, Option, Runs, Searched


@dataclass(frozen=True)
class Exhaustive(Base):
    """Every interleaving with at most ``preemptions`` preemptions (equivalent ones pruned), at most
    ``budget`` runs (None: no cap). ``keep_going`` covers the whole bound in one pass past every
    anomaly and counts the anomalous interleavings (the witness is the one with the fewest
    switches). ``iterative=False`` searches the bound in one depth-first pass instead of bound by
    bound (the anomaly found is then not the one with the fewest preemptions). ``seed`` is only
    recorded with the verdict: nothing here is drawn at random."""

    preemptions: int
    budget: int | None = None
    keep_going: bool = False
    seed: int = 0
    iterative: bool = True
    # "dpor": one run per class of equivalent interleavings (toki.harness.explore.races), in one
    # process per scenario; "sleep": sleep sets alone, whose tree shards cut into parts.
    reduction: str = "dpor"
    mode: ClassVar[str] = "exhaustive"
    certifies: ClassVar[bool] = True

    def head(self) -> dict:
        return {"mode": self.mode, "bound": self.preemptions}

    def describe(self) -> str:
        return f"exhaustive to {self.preemptions} preemption(s)" + (f", at most {self.budget} runs" if self.budget
                                                                     else "")

    def examples(self, row: dict) -> str:
        how = row.get("search") or {}
        head = f"{how['explored']} (+{how['pruned']} pruned)"
        if "anomalous" in how:
            return f"{head}, {how['anomalous']} anomalous" + ("" if how.get("complete") else ", incomplete")
        return head + (", complete" if how.get("complete") else "" if row["verdict"] == "admits" else
                       ", out of time" if how.get("out_of_time") else ", incomplete")

    def search(self, runs: Runs) -> Searched:
        part = self.part(runs)
        found = part.pop("found")
        return replace(self.merge([part]), found=found)

    def part(self, runs: Runs, *, shard: tuple[int, int] = (0, 1), memo=None, start: int = 0) -> dict:
        """Shard ``shard`` of the search, as a part :meth:`merge` adds up, with the anomalous run as
        ``found``. A sharded search runs the bounds below K once, whole (``memo`` given: every
        bound's runs are recorded in it), and hands the record to the shards of bound K
        (``start=K``), which walk it. ``budget`` caps this shard's runs, the deadline its time:
        given one, the part says ``out_of_time``."""
        from toki.harness.explore import Memo, explore

        runner, on_run, bound, budget = runs.runner, runs.on_run, self.preemptions, self.budget
        explored = pruned = redundant = 0
        res, k = None, 0
        record_all = memo is not None
        memo = Memo() if memo is None else memo
        one_pass = self.keep_going or not self.iterative
        # The bounds go up from 1, not 0: the runs with no preemption are the serial orders, which
        # the reference outcomes ran already and which no anomaly can be, so bound 1 counts them
        # among its own rather than spending a level (and the serial orders' runs) on them.
        first = start if start > 0 or bound == 0 else 1
        for k in ([bound] if one_pass else range(first, bound + 1)):
            memo.recording = record_all or k < bound
            res = explore(runner, bound=k, max_runs=None if budget is None else max(1, budget - explored - redundant),
                          on_run=None if on_run is None else (lambda n, hit, base=explored: on_run(base + n, hit)),
                          shard=shard, stop_at_first=not self.keep_going, memo=memo,
                          count_below=one_pass or (k == first and start == 0), want=runs.want,
                          deadline=runs.deadline, dpor=self.reduction == "dpor",
                          probe=self.reduction == "dpor" and k == first and start == 0)
            # each bound's tree holds the lower bounds' runs: its prunings are the search's
            explored, pruned, redundant = explored + res.explored, res.pruned, redundant + res.redundant
            if res.found is not None or not res.complete:
                break
        part = {"shard": list(shard), "explored": explored, "pruned": pruned, "redundant": redundant, "level": k,
                "complete": res.complete and (self.keep_going or res.found is None), "found": res.found,
                "grants": None if res.found is None else list(res.found.trace.grants)}
        if self.keep_going:
            part.update(anomalous=res.hits, anomalous_outcomes=sorted(res.anomalous))
        if runs.deadline is not None:
            part["out_of_time"] = res.out_of_time
        if res.found is not None:
            part["switches"] = context_switches(res.found.trace)
        return part

    def merge(self, parts: list[dict]) -> Searched:
        """What the parts of one search (one part, or the shards of one in shard order) found and
        certify together: the anomaly reported is the first shard's at the lowest level, so any
        number of workers reports the same one (its run is not here: ``found`` is None)."""
        bound = self.preemptions
        explored, pruned = sum(p["explored"] for p in parts), sum(p["pruned"] for p in parts)
        redundant = sum(p.get("redundant", 0) for p in parts)
        hit = first_hit(parts)
        going_on = all("anomalous" in p for p in parts)
        complete = (hit is None or going_on) and all(p["complete"] for p in parts)
        late = any(p.get("out_of_time") for p in parts)
        cut = "--time-budget" if late else "--budget"
        if going_on:
            bad = sum(p["anomalous"] for p in parts)
            kinds = len(set().union(*(p["anomalous_outcomes"] for p in parts)))
            covered = "all" if complete else f"incomplete: cut short by {cut} after"
            guarantee = (f"{covered} {explored} interleavings with at most {bound} preemption(s) explored ({pruned} "
                         f"pruned as equivalent): {bad} show an anomaly, with {kinds} distinct outcome(s)")
        elif hit is not None:
            guarantee = f"an anomaly with at most {hit['level']} preemption(s), after {explored} interleavings"
        elif complete:
            guarantee = (f"no anomaly in any interleaving with at most {bound} preemption(s): {explored} explored, "
                         f"{pruned} pruned as equivalent")
        else:
            level = min(p["level"] for p in parts if not p["complete"])
            guarantee = (f"incomplete: cut short by {cut} after {explored} interleavings at {level} preemption(s); "
                         "no guarantee beyond them")
        return Searched(self, None, explored=explored, guarantee=guarantee, pruned=pruned, complete=complete,
                        redundant=redundant,
                        out_of_time=late if any("out_of_time" in p for p in parts) else None,
                        anomalous=sum(p["anomalous"] for p in parts) if going_on else None,
                        shards=max(p["shard"][1] for p in parts))

    def shards(self, parts: list[dict]) -> "Shards":
        """The strategy that stands for this search run elsewhere, cut into ``parts``."""
        return Shards(self, tuple(parts))

    # -- a search cut into shards, run by worker processes or a cluster -----------------------------

    def sharded(self, names: list[str], n: int, run_jobs, *, wall_deadline: float | None = None,
                total=None, advance=None) -> list[list[dict]]:
        """Each scenario's parts of a search cut into ``n`` shards per scenario. Iterative bounding
        covers the bounds below K once per scenario, whole (small, and a race there ends the
        search: the count is then one process's); only bound K is cut into ``n`` shards, which walk
        the lower bounds' record instead of executing those runs again. ``keep_going`` and K=0
        have one bound: shards only. ``run_jobs(jobs)`` runs :meth:`job` on each job ``(scenario,
        i, n, record, budget, serial)`` wherever the jobs run, results in job order; a top bound
        not started by ``wall_deadline`` (a :func:`time.time`) is not started at all. ``total(n)``
        and ``advance(k)`` follow the jobs (a progress bar)."""
        import time

        total = total or (lambda _: None)
        advance = advance or (lambda _: None)
        bound, budget = self.preemptions, self.budget

        def share(left):
            return None if left is None else max(1, -(-left // n))

        if self.reduction == "dpor":
            # DPOR's branches come from the races of runs anywhere below a decision, so its tree
            # has no parts to cut beforehand: each scenario is one job, whole (the same counts
            # as one process), and the workers share the scenarios.
            total(len(names))
            return [[p] for p in run_jobs([(name, 0, 1, None, budget, None) for name in names])]
        if self.keep_going or bound == 0:
            total(len(names) * n)
            parts = run_jobs([(name, i, n, None, share(budget), None) for name in names for i in range(n)])
            return [parts[k * n:(k + 1) * n] for k in range(len(names))]
        total(len(names) * (n + 1))
        below = run_jobs([(name, None, None, None, budget, None) for name in names])
        jobs, whose = [], []
        for k, (name, part) in enumerate(zip(names, below)):
            done = part.get("failed") or part.get("unverifiable") or part["grants"] is not None or not part["complete"]
            left = None if budget is None or done else budget - part["explored"]
            if done or (left is not None and left < 1):
                if not done:
                    part["complete"] = False  # the budget ran out at the lower bounds: the top one is not covered
                advance(n)
                continue
            record, serial = part.pop("record"), part.pop("serial")
            jobs += [(name, i, n, record, share(left), serial) for i in range(n)]
            whose += [k] * n
        out = [[p] for p in below]
        if jobs and wall_deadline is not None and time.time() >= wall_deadline:
            parts = [self.late_part((i, n)) for (_, i, *_rest) in jobs]  # the top bound is not started at all
            advance(len(jobs))
        else:
            parts = run_jobs(jobs) if jobs else []
        for k, part in zip(whose, parts):
            out[k][0]["pruned"] = 0  # the top bound's tree holds the lower bounds': its prunings are the search's
            out[k].append(part)
        for parts in out:
            parts[0].pop("record", None)
            parts[0].pop("serial", None)
        return out

    def job(self, runner, shard: tuple[int, int] | None, *, record=None, serial=None,
            deadline: float | None = None) -> dict:
        """One job of :meth:`sharded`: shard ``shard`` of the tree at the top bound, walking the
        lower bounds' ``record`` and judging by the ``serial`` outcomes of the worker that searched
        them, or with ``shard`` None the lower bounds whole, recorded (the part then carries
        ``record`` and ``serial``). The anomalous run travels back as its grants."""
        from toki.harness.explore import Memo

        if serial is not None:
            runner.adopt_serial_outcomes(serial)
        runs = Runs(runner, deadline=deadline)
        if shard is None:
            record = Memo()
            part = replace(self, preemptions=self.preemptions - 1, keep_going=False).part(runs, memo=record)
            part["record"], part["serial"] = record, runner.serial_outcomes()
        elif self.keep_going or record is None:
            part = self.part(runs, shard=shard)
        else:
            part = self.part(runs, shard=shard, memo=record, start=self.preemptions)
        part.pop("found")
        return part

    @staticmethod
    def late_part(shard: tuple[int, int]) -> dict:
        """A shard the deadline reached before it started: nothing explored, nothing certified."""
        return {"shard": list(shard), "explored": 0, "pruned": 0, "redundant": 0, "level": 0, "complete": False,
                "grants": None, "out_of_time": True}


def first_hit(parts: list[dict]) -> dict | None:
    """The part whose anomaly a sharded search reports: the lowest level, then the first shard."""
    hits = [p for p in parts if p["grants"] is not None]
    return min(hits, key=lambda p: (p["level"], p.get("switches", 0))) if hits else None


@dataclass(frozen=True)
class Shards(Base):
    """An exhaustive search whose shards ran elsewhere (worker processes, a cluster), merged: its
    search re-executes the anomaly the parts report from its grants, in this process. An
    unverifiable shard makes the whole search unverifiable."""

    exhaustive: Exhaustive
    parts: tuple[dict, ...]
    mode: ClassVar[str] = "exhaustive"
    certifies: ClassVar[bool] = True

    @property
    def budget(self) -> int | None:
        return self.exhaustive.budget

    @property
    def reduction(self) -> str:
        return self.exhaustive.reduction

    @property
    def seed(self) -> int:
        return self.exhaustive.seed

    def head(self) -> dict:
        return self.exhaustive.head()

    def describe(self) -> str:
        return self.exhaustive.describe()

    def examples(self, row: dict) -> str:
        return self.exhaustive.examples(row)

    def search(self, runs: Runs) -> Searched:
        bad = next((p for p in self.parts if p.get("unverifiable")), None)
        if bad is not None:
            raise Unverifiable(f"shard {bad['shard'][0]} of {bad['shard'][1]}: {bad['unverifiable']}")
        merged, hit = self.exhaustive.merge(list(self.parts)), first_hit(list(self.parts))
        if hit is None:
            return merged
        found = runs.replay(hit["grants"])
        if found.serializable:
            raise Unverifiable("the anomalous run a shard found did not repeat when re-executed from its grants",
                               fix="the run depends on something the harness does not control (time, "
                                   "randomness, a thread of the engine's own)")
        return replace(merged, found=found)

    def known(self) -> tuple[bool, Searched | None]:
        """What is known before anything runs here: whether some shard found an anomaly (or could
        not judge), and the merged search when every shard could judge."""
        good = [p for p in self.parts if not p.get("unverifiable")]
        hit = first_hit(good) is not None or len(good) < len(self.parts)
        return hit, self.exhaustive.merge(good) if good and len(good) == len(self.parts) else None


def _make(preemptions: int, *, budget: int | None, seed: int, keep_going: bool = False) -> Exhaustive:
    if preemptions < 0:
        raise ConfigError(f"--exhaustive {preemptions}: the preemption bound must be 0 or more",
                          fix="pass --exhaustive 2 (CHESS found nearly every known bug within two preemptions)")
    return Exhaustive(preemptions=preemptions, budget=budget, keep_going=keep_going, seed=seed)


OPTION = Option("exhaustive", "K", "(--engine) every interleaving with at most K preemptions, equivalent ones "
                "pruned: a bounded certificate (K=0 is the serial orders); --budget caps the interleavings run",
                "a bounded certificate", _make, default_budget=None, keep_going=True, shards=True)
