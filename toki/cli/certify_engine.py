"""``toki certify --engine NAME`` / ``--engine-module pkg.mod:factory`` / ``--replay FILE``.

For each scenario of the engine: run every serial order, search interleavings with Hypothesis
(``--budget`` examples, ``--seed``), shrink a found anomaly to the fewest context switches,
replay the shrunk witness to confirm it, and write it (``--witness``), its picture
(``--png``/``--svg``) and a JUnit report (``--junit``).

Verdicts: ``admits`` (an outcome no serial order produces), ``excludes`` (none within the
budget), ``by-design`` (a property of the engine that serial orders show too: reported with its
note), ``unverifiable`` (the run did something the harness did not control, or the engine's
read-out says nothing: no check can pass on it), ``out-of-time`` (``--time-budget`` ended the
search before it finished, with no anomaly found: nothing is certified). Exit 0 when every
scenario excludes or is by-design (``--fail-on-design`` fails those too), 1 when one admits or is
unverifiable, 2 on bad input (a malformed ``--baseline`` among it) or a plug-in whose own methods
fail, 3 when a search ran out of time and nothing else failed ("not certified").

``--baseline FILE`` gates against a file of accepted findings (:class:`toki.harness.witness.Baseline`):
a race whose anomaly kinds the file accepts for its scenario passes, as does an accepted by-design
finding under ``--fail-on-design``; a new race or kind fails, and the text, JSON and JUnit say
which. ``--write-baseline FILE`` records this run's findings (races apart from by-design ones),
each with a placeholder reason to edit.

A replay (``--replay``) exits 1 whenever a replayed run shows an anomaly or a by-design finding,
whether or not it is the recorded outcome, and says where the outcome differs from the recorded
one; 0 only when no run shows one.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path

from toki.render import emit_json, progress, table
from toki.errors import ConfigError
from toki.harness.findings import DesignFinding, Finding, anomaly_of

FAILING = ("admits", "unverifiable")
NOT_CERTIFIED = 3  # exit status: the time budget ended a search and nothing worse was found


def _per_scenario(path: str | None, scenario: str) -> Path | None:
    """``w.json`` -> ``w.SCENARIO.json``, for one scenario as for many: the name does not change
    with how many scenarios a run certifies."""
    if not path:
        return None
    p = Path(path)
    return p.with_name(f"{p.stem}.{scenario}{p.suffix}")


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _server_for(engine, dsn):
    """Point an engine that keeps its memory in a database server at ``--dsn`` (else the default)."""
    from toki.harness import connect_database

    connect_database(engine, dsn)


def certify_scenario(engine, name: str, *, budget: int, seed: int, step_limit: float, witness: str | None,
                     png: str | None, svg: str | None, bar=None, mode: str = "random",
                     bound: int | None = None, strategy=None, keep_going: bool = False,
                     deadline: float | None = None) -> dict:
    """One scenario's verdict row: :func:`toki.harness.certify` with ``strategy`` (or the one
    ``mode`` and ``bound`` name, as before there were strategies), then its witness, picture and
    progress written here. ``deadline`` (a :func:`time.monotonic` time) ends the search."""
    from toki.harness import certify

    t0 = time.perf_counter()
    if strategy is None:
        strategy = _named(mode, bound, budget, seed, keep_going)
    on_run = None
    if bar is not None:
        task = bar.add_task(f"{engine.name} {name}", total=budget)
        on_run = lambda n, hit: bar.update(task, completed=n)  # noqa: E731
    verdict = certify(engine, name, strategy, step_limit_s=step_limit, deadline=deadline, on_run=on_run)
    v = verdict.row()
    w = verdict.witness
    if w is not None:
        if verdict.admits:
            for fmt, path in (("png", png), ("svg", svg)):
                ppath = _per_scenario(path, name)
                if ppath:
                    from toki.harness import draw

                    v[fmt] = str(draw(w, ppath))
        wpath = _per_scenario(witness, name)
        if wpath:
            v["witness"] = str(w.save(wpath))
    v["elapsed_s"] = round(time.perf_counter() - t0, 3)
    return v


def _named(mode: str, bound: int | None, budget: int | None, seed: int, keep_going: bool = False):
    """The strategy a search's former ``mode`` and ``bound`` name ("random", or the option of a
    strategy: "exhaustive" with its preemptions, "pct" with its depth)."""
    from toki.harness import Random, strategy_options

    if mode == "random":
        return Random(budget=budget, seed=seed)
    option = next((o for o in strategy_options() if o.name == mode), None)
    if option is None:
        raise ConfigError(f"search mode {mode!r} does not exist", fix="name a strategy: random, "
                          + ", ".join(o.name for o in strategy_options()))
    return option.make(bound, budget=budget, seed=seed, **({"keep_going": keep_going} if option.keep_going else {}))


def _strategy(spec: dict):
    """The search a worker's share of ``--cluster``/``--workers`` runs (a spec written before
    strategies names it by ``mode`` and ``bound``)."""
    if spec.get("strategy") is not None:
        return spec["strategy"]
    return _named(spec.get("mode", "random"), spec.get("bound"), spec.get("budget"), spec.get("seed", 0),
                  spec.get("keep_going", False))


def _scenario_shard(name: str, spec: dict) -> dict:
    """A Dask worker's share of ``--cluster``: load the engine there and certify one scenario."""
    from toki.engines.registry import load_engine

    engine = load_engine(spec["engine"], spec["engine_module"])
    _server_for(engine, spec["dsn"])
    return certify_scenario(engine, name, budget=spec["budget"], seed=spec["seed"], step_limit=spec["step_limit"],
                            witness=spec["witness"], png=spec["png"], svg=spec["svg"], strategy=_strategy(spec),
                            deadline=_local_deadline(spec))


def _local_deadline(spec: dict) -> float | None:
    """The run's deadline on this process's monotonic clock. It travels as wall-clock time (the
    same instant on every machine whose clock is set), converted once, on arrival."""
    at = spec.get("deadline")
    return None if at is None else time.monotonic() + (at - time.time())


# A search cut into shards (--workers, --cluster) is cut into this many shards per scenario (more on a
# larger cluster): the same shards at local:1 and local:2, so both report the same counts and witness.
EXHAUSTIVE_SHARDS = 4


def _exhaustive_shard(job: tuple, spec: dict) -> dict:
    """A worker's share of ``--workers``/``--cluster`` with a search that shards: one job of
    :meth:`toki.harness.Exhaustive.sharded` (``(name, i, n, record, budget, serial)``), run on the
    engine loaded here. A run the harness could not judge, or a plug-in that fails, comes back as
    a part that says so."""
    from dataclasses import replace

    from toki.engines.registry import load_engine
    from toki.errors import TokiError
    from toki.harness import TrialRunner, Unverifiable

    name, i, n, record, budget, serial = job
    shard = (0, 1) if n is None else (i, n)
    strategy = replace(_strategy(spec), budget=budget)
    deadline = _local_deadline(spec)
    if deadline is not None and time.monotonic() >= deadline:  # not even the engine is loaded
        return strategy.late_part(shard)
    try:
        engine = load_engine(spec["engine"], spec["engine_module"])
        _server_for(engine, spec["dsn"])
        with TrialRunner(engine, name, step_limit_s=spec["step_limit"]) as runner:
            return strategy.job(runner, None if n is None else shard, record=record, serial=serial,
                                deadline=deadline)
    except Unverifiable as e:
        return {"shard": list(shard), "explored": 0, "pruned": 0, "level": 0, "complete": False, "grants": None,
                "unverifiable": _one_line(e)}
    except TokiError as e:  # bad input or a broken plug-in: the client says it in one line (exit 2)
        return {"shard": list(shard), "failed": _one_line(e)}


def _in_processes(pool, jobs: list, spec: dict, on_result) -> list[dict]:
    """``--workers N``: the jobs in the pool's N fresh processes, results in job order."""
    from concurrent.futures import as_completed

    out: list = [None] * len(jobs)
    futures = {pool.submit(_exhaustive_shard, job, spec): i for i, job in enumerate(jobs)}
    for fut in as_completed(futures):
        out[futures[fut]] = fut.result()
        on_result()
    return out


def _fails(v: dict, fail_on_design: bool) -> bool:
    """Does the row fail the gate (exit 1)? With a baseline, the baseline's judgement says."""
    if "baseline" in v:
        return v["baseline"]["fails"]
    return v["verdict"] in FAILING or (fail_on_design and bool(v["by_design"]))


def _race_kinds(v: dict) -> list[str]:
    return sorted({anomaly_of(a) for a in v["anomalies"]}) if v["verdict"] == "admits" else []


def _design_kinds(v: dict) -> list[str]:
    return sorted({d.anomaly for d in v["by_design"]})


def _kinds(v: dict) -> str:
    found = _race_kinds(v) if v["verdict"] == "admits" else _design_kinds(v) if v["verdict"] == "by-design" else []
    return ", ".join(found) or "-"


def exit_status(verdicts: list[dict], fail_on_design: bool) -> int:
    """1 a row fails the gate, else 3 a search ran out of time (not certified), else 0."""
    if any(_fails(v, fail_on_design) for v in verdicts):
        return 1
    if any(v["verdict"] == "out-of-time" for v in verdicts):
        return NOT_CERTIFIED
    return 0


def _finding(v: dict) -> dict:
    """What --write-baseline records of a row."""
    return {"scenario": v["scenario"], "verdict": v["verdict"], "anomalies": _race_kinds(v),
            "by_design": _design_kinds(v), "example": v["anomalies"][0] if _race_kinds(v) else None,
            "design_example": str(v["by_design"][0].finding) if v["by_design"] else None,
            "witness": v.get("witness") if v["verdict"] == "admits" else None}


def _explain(v: dict, out) -> None:
    """What a person reads under the table: findings, the witness's grant order and its switches."""
    sc = v["scenario"]
    if (v.get("search") or {}).get("guarantee") and v["verdict"] in ("excludes", "admits", "out-of-time"):
        out.write(f"{sc}: search: {v['search']['guarantee']}\n")
    for a in v["anomalies"]:
        out.write(f"{sc}: {a}\n")
    for d in v["by_design"]:
        gate = "" if v["verdict"] != "by-design" else " (not a race; --fail-on-design makes it fail the gate)"
        out.write(f"{sc}: note: {d}{gate}\n")
    for line in (v.get("baseline") or {}).get("says", []):
        out.write(f"{sc}: baseline: {line}\n")
    if v["runs"] is None:
        return
    n = v["context_switches"]
    if v["verdict"] == "admits":
        out.write(f"{sc}: minimal witness, {v['grants']} grants, {n} context switch{'es' if n != 1 else ''}: "
                  f"{v['runs']}\n")
    else:  # a serial order: its one change of agent is no preemption
        out.write(f"{sc}: serial run, {v['grants']} grants, one agent after another: {v['runs']}\n")
    from toki.harness.draw import shorten

    for i, sw in enumerate(v["switches"][:8], 1):
        paused = sw["paused_before"]
        then = (f"; {sw['from']} resumes at #{paused['seq']}: {shorten(paused['call'], 90)}" if paused
                else f"; {sw['from']} has finished")
        out.write(f"  switch {i} at #{sw['seq']}, {sw['from']} → {sw['to']}: {shorten(sw['call'], 90)}{then}\n")
    if len(v["switches"]) > 8:
        out.write(f"  ... and {len(v['switches']) - 8} more switches (in the witness file)\n")
    given = {"witness": "--witness", "png": "--png", "svg": "--svg"}
    for k, opt in given.items():
        if v.get(k):
            replay = f"; replay: toki certify --replay {v[k]}" if k == "witness" else ""
            out.write(f"{sc}: {k} {v[k]} ({opt} writes one file per scenario, NAME.SCENARIO.EXT{replay})\n")


def _search(args, budget_given: int | None):
    """The strategy the command line asks for (``--NAME VALUE`` of a strategy's option, else a
    random search), with the option it came from (None: random) and its budget."""
    from toki.harness import Random, strategy_options

    given = [(o, v) for o in strategy_options() if (v := getattr(args, o.name.replace("-", "_"), None)) is not None]
    if len(given) > 1:
        words = {2: "two", 3: "three"}.get(len(given), str(len(given)))
        raise ConfigError(f"{' and '.join('--' + o.name for o, _ in given)} are {words} ways to search; pass one",
                          fix=", ".join(f"--{o.name} {o.metavar} for {o.purpose}" for o, _ in given))
    option, value = given[0] if given else (None, None)
    # An exhaustive search runs until the bound is covered unless --budget caps it.
    budget = budget_given if budget_given is not None else (option.default_budget if option else 100)
    if budget is not None and budget < 1:
        raise ConfigError(f"--budget {budget} must be at least 1", fix="pass --budget 100 or more")
    keep_going = getattr(args, "keep_going", False)
    reduction = getattr(args, "reduction", None)
    if reduction is not None and not (option is not None and option.shards):
        raise ConfigError(f"--reduction {reduction} chooses how an exhaustive search skips equivalent interleavings",
                          fix="add --exhaustive K")
    if option is None:
        return option, Random(budget=budget, seed=args.seed), budget
    strategy = option.make(value, budget=budget, seed=args.seed, **({"keep_going": keep_going} if option.keep_going else {}))
    if reduction is not None:
        from dataclasses import replace

        strategy = replace(strategy, reduction=reduction)
    return option, strategy, budget


def run_engine(args, out) -> int:
    time_budget = getattr(args, "time_budget", None)
    # The budget counts from when the command started (certify_cmd's parser): importing and loading
    # the engine and its serial orders are part of the gate's time too.
    started = getattr(args, "started", None) or time.monotonic()
    deadline = None if time_budget is None else started + time_budget

    from toki.engines.registry import load_engine
    from toki.harness import Baseline
    from toki.runinfo import provenance

    if time_budget is not None and not 0 < time_budget < float("inf"):
        raise ConfigError(f"--time-budget {time_budget}: the budget must be a positive number of seconds",
                          fix="pass --time-budget 600 (ten minutes)")
    baseline_path, write_path = getattr(args, "baseline", None), getattr(args, "write_baseline", None)
    baseline = Baseline.load(baseline_path) if baseline_path else None
    engine = load_engine(args.engine, args.engine_module)
    baseline_notes = baseline.check_engine(engine) if baseline else []
    option, strategy, budget = _search(args, args.budget)
    names = list(engine.scenarios) if args.scenario in (None, "all") else [args.scenario]
    for n in names:
        if n not in engine.scenarios:
            raise ConfigError(f"engine {engine.name} has no scenario {n!r}",
                              fix="choose one of " + ", ".join(engine.scenarios) + " (see toki engines list)")
    _server_for(engine, args.dsn)
    fail_on_design = getattr(args, "fail_on_design", False)
    t_all = time.perf_counter()
    cluster_info = None
    keep_going = getattr(args, "keep_going", False)
    shards = option is not None and option.shards
    if keep_going and not (option is not None and option.keep_going):
        raise ConfigError("--keep-going goes on past the first anomaly of an exhaustive search",
                          fix="add --exhaustive K (a random or PCT search stops at its first anomaly and shrinks it)")
    workers = getattr(args, "workers", None)
    if workers is not None:
        if workers < 1:
            raise ConfigError(f"--workers {workers} must be at least 1", fix="pass --workers 2 (one per core)")
        if not shards:
            raise ConfigError("--workers splits an exhaustive search's tree; random and PCT searches run in one "
                              "process", fix="add --exhaustive K, or use --cluster local:N to spread scenarios")
        if getattr(args, "cluster", None):
            raise ConfigError("--workers and --cluster both say where to run", fix="pass one of them")
    spec = {"engine": args.engine, "engine_module": args.engine_module, "dsn": args.dsn, "budget": budget,
            "seed": args.seed, "step_limit": args.step_limit, "strategy": strategy,
            "witness": str(Path(args.witness).resolve()) if args.witness else None,
            "png": str(Path(args.png).resolve()) if args.png else None,
            "svg": str(Path(args.svg).resolve()) if args.svg else None,
            "deadline": None if deadline is None else time.time() + (deadline - time.monotonic())}

    def merged(per_scenario: list[list[dict]]) -> list[dict]:
        failed = next((p["failed"] for parts in per_scenario for p in parts if p.get("failed")), None)
        if failed is not None:
            from toki.errors import TokiError

            raise TokiError(failed)
        return [certify_scenario(engine, name, budget=budget, seed=args.seed, step_limit=args.step_limit,
                                 witness=args.witness, png=args.png, svg=args.svg, strategy=strategy.shards(parts),
                                 deadline=deadline)
                for name, parts in zip(names, per_scenario)]

    def sharded(n: int, run_jobs, bar, task) -> list[list[dict]]:
        return strategy.sharded(names, n, run_jobs, wall_deadline=spec["deadline"],
                                total=lambda k: bar.update(task, total=k), advance=lambda k: bar.advance(task, k))

    if getattr(args, "cluster", None):
        # One shard per scenario, searched from the same seed wherever it runs; a search that shards
        # cuts each scenario's tree into shards (toki.harness.Exhaustive.sharded), merged here.
        from toki.cluster import Cluster

        with Cluster(args.cluster) as cl, progress() as bar:
            if shards:
                n = max(EXHAUSTIVE_SHARDS, cl.workers)
                task = bar.add_task(f"{engine.name} on {args.cluster}, {n} shards per scenario", total=None)
                parts = sharded(n, lambda jobs: cl.map(_exhaustive_shard, jobs, spec, on_result=lambda i,
                                r: bar.advance(task)), bar, task)
            else:
                task = bar.add_task(f"{engine.name} on {args.cluster}", total=len(names))
                verdicts = cl.map(_scenario_shard, names, spec, on_result=lambda i, r: bar.advance(task))
            cluster_info = cl.describe()
        if shards:
            verdicts = merged(parts)
    elif workers is not None and workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        n = max(EXHAUSTIVE_SHARDS, workers)
        # spawned, not forked: this process holds threads and connections a fork would copy half-way
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        try:
            with progress() as bar:
                task = bar.add_task(f"{engine.name}, {n} shards per scenario in {workers} processes", total=None)
                parts = sharded(n, lambda jobs: _in_processes(pool, jobs, spec, on_result=lambda: bar.advance(task)),
                                bar, task)
        finally:
            # Every job has returned: the idle workers exit (a second or so each, under load) while the
            # verdicts are merged, instead of before (the interpreter's exit joins them in any case).
            pool.shutdown(wait=False, cancel_futures=True)
        verdicts = merged(parts)
    else:
        verdicts = []
        for name in names:
            with progress() as bar:
                verdicts.append(certify_scenario(engine, name, budget=budget, seed=args.seed,
                                                 step_limit=args.step_limit, witness=args.witness, png=args.png,
                                                 svg=args.svg, bar=bar, strategy=strategy, deadline=deadline))
    elapsed = time.perf_counter() - t_all
    head = strategy.head()
    options = {"engine": engine.name, "engine_module": args.engine_module, "scenarios": names, "budget": budget,
               "search": head["mode"], "bound": head["bound"], "keep_going": keep_going, "fail_on_design": fail_on_design,
               "cluster": cluster_info, "workers": workers, "time_budget": time_budget}
    if baseline is not None:
        for v in verdicts:
            v["baseline"] = baseline.compare(v["scenario"], v["verdict"], _race_kinds(v), _design_kinds(v),
                                             fail_on_design=fail_on_design)
        baseline_notes += [f"{k} {sc}: the engine has no such scenario (drop the entry)"
                           for k, entries in (("race", baseline.races), ("by-design", baseline.by_design))
                           for sc in entries if sc not in engine.scenarios]
    written = skipped = None
    if write_path:
        written, skipped = Baseline.record(write_path, [_finding(v) for v in verdicts], engine=engine,
                                           previous=baseline, options={
                                               k: options[k] for k in ("scenarios", "search", "bound", "budget",
                                                                       "keep_going", "time_budget")} | {
                                               "seed": args.seed})
    if args.junit:
        _junit(verdicts, args.junit, elapsed, fail_on_design)
    status = exit_status(verdicts, fail_on_design)
    if args.json is not None:
        doc = {"verdicts": verdicts, "provenance": provenance(seed=args.seed, options=options,
                                                               elapsed_s=round(elapsed, 3))}
        if baseline is not None:
            doc["baseline"] = {"file": str(baseline.path), "engine": baseline.engine,
                               "recorded": baseline.provenance, "notes": baseline_notes,
                               **{st: [v["scenario"] for v in verdicts if v["baseline"]["status"] == st]
                                  for st in ("new-race", "new-design", "unverifiable", "out-of-time",
                                             "accepted-race", "accepted-design", "fixed")}}
        if written is not None:
            doc["written_baseline"] = {"file": str(written.path), "races": sorted(written.races),
                                       "by_design": sorted(written.by_design), "not_recorded": skipped}
        emit_json(doc, out, None if args.json == "-" else args.json)
        if args.json == "-":
            return status
    rows = [(v["scenario"], v["verdict"], _kinds(v), strategy.examples(v),
             "" if v["runs"] is None else f"{v['grants']} grants, {v['context_switches']} switches",
             "" if v["replayed"] is None else ("yes" if v["replayed"] else "NO"))
            + ((v["baseline"]["status"],) if baseline is not None else ()) for v in verdicts]
    label = "model" if getattr(engine, "executed", "real") == "model" else "real"
    how = strategy.describe()
    if time_budget is not None:
        how += f", time budget {time_budget:g} s"
    table(out, f"toki certify --engine {engine.name} {engine.version} ({label}), {how}, seed {args.seed}",
          ["scenario", "verdict", "anomaly", "examples", "witness", "replays"]
          + (["baseline"] if baseline is not None else []), rows)
    for v in verdicts:
        _explain(v, out)
    if baseline is not None:
        _baseline_summary(baseline, verdicts, baseline_notes, out)
    if written is not None:
        out.write(f"wrote baseline {written.path}: {len(written.races)} accepted race(s) "
                  f"({', '.join(sorted(written.races)) or 'none'}), {len(written.by_design)} by-design finding(s) "
                  f"({', '.join(sorted(written.by_design)) or 'none'}); edit each TODO reason, then gate with "
                  f"--baseline {written.path}\n")
        for line in skipped:
            out.write(f"  {line}\n")
    if status == NOT_CERTIFIED:
        late = [v["scenario"] for v in verdicts if v["verdict"] == "out-of-time"]
        out.write(f"not certified: --time-budget {time_budget:g} s ended the search of {', '.join(late)} before it "
                  f"finished (exit {NOT_CERTIFIED}); raise the budget, or narrow the search\n")
    return status


def _baseline_summary(baseline, verdicts: list[dict], notes: list[str], out) -> None:
    by = {}
    for v in verdicts:
        by.setdefault(v["baseline"]["status"], []).append(v["scenario"])
    worse = by.get("new-race", []) + by.get("new-design", []) + by.get("unverifiable", [])
    parts = [f"{len(by.get(k, []))} {what}" for k, what in (("accepted-race", "accepted race(s)"),
                                                            ("accepted-design", "accepted by-design finding(s)"))]
    verdict = (f"WORSE in {', '.join(worse)}: fails the gate" if worse else
               "nothing worse than the baseline accepts")
    out.write(f"baseline {baseline.path}: {', '.join(parts)}; {verdict}\n")
    for n in notes:
        out.write(f"  note: {n}\n")


def _junit(verdicts: list[dict], path: str, elapsed: float, fail_on_design: bool) -> None:
    """JUnit XML: a failing verdict is a <failure>; a by-design note that does not fail is system-out.
    A value the row does not have is left out (never written as "None")."""
    def late(v):  # out of time, and nothing worse: an error (the test did not finish), not a failure
        return v["verdict"] == "out-of-time" and not _fails(v, fail_on_design)

    suite = ET.Element("testsuite", name="toki-certify-engine", tests=str(len(verdicts)),
                       failures=str(sum(_fails(v, fail_on_design) for v in verdicts)),
                       errors=str(sum(late(v) for v in verdicts)), time=f"{elapsed:.3f}")
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"toki.certify.{v['system']}", name=v["scenario"],
                             time=f"{v['elapsed_s']:.3f}")
        props = ET.SubElement(case, "properties")
        for k in ("version", "executed", "budget", "seed", "trials", "verdict", "reason", "witness", "runs"):
            if v.get(k) is not None:
                ET.SubElement(props, "property", name=k, value=str(v[k]))
        for k in ("explored", "complete", "out_of_time"):
            if (v.get("search") or {}).get(k) is not None:
                ET.SubElement(props, "property", name=f"search.{k}", value=str(v["search"][k]).lower())
        judged = v.get("baseline")
        if judged is not None:
            ET.SubElement(props, "property", name="baseline", value=judged["status"])
        said = judged["says"] if judged is not None else []
        if _fails(v, fail_on_design):
            lines = said + v["anomalies"] + v["by_design"]
            fail = ET.SubElement(case, "failure", type=judged["status"] if judged else v["verdict"],
                                 message="; ".join(lines)[:500])
            fail.text = "\n".join(lines)
        elif late(v):
            lines = [v["search"]["guarantee"]] + v["by_design"]
            err = ET.SubElement(case, "error", type="out-of-time", message=f"not certified: {lines[0]}"[:500])
            err.text = "\n".join(lines)
        elif said or v["by_design"] or v["anomalies"]:
            ET.SubElement(case, "system-out").text = "\n".join(said + v["anomalies"] + v["by_design"])
    ET.indent(suite)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n")


def run_replay(args, out) -> int:
    from toki.engines.registry import load_engine
    from toki.harness import Witness, replay

    if args.times < 1:
        raise ConfigError(f"--times {args.times} must be at least 1", fix="pass --times 20")
    w = Witness.load(args.replay)
    engine = load_engine(None, w.engine_module) if w.engine_module else load_engine(w.engine, None)
    if w.scenario not in engine.scenarios:
        raise ConfigError(f"witness {args.replay} names scenario {w.scenario!r}, which engine {engine.name} "
                          "does not have", fix="replay it with the toki and engine versions that recorded it")
    _server_for(engine, args.dsn)
    if str(engine.version) != w.version:
        out.write(f"note: the witness was recorded with {w.engine} {w.version}; this is {engine.version}\n")
    out.write(f"replayed {w.engine} {w.scenario}: {len(w.grants)} grants, {w.context_switches} context switches: "
              f"{w.runs()}\n")
    done = replay(engine, w, times=args.times, step_limit_s=args.step_limit)
    if done.unverifiable is not None:
        # Fail closed: a replay the harness did not control cannot show the anomaly is gone.
        out.write(f"unverifiable after {len(done.runs)} of {args.times} runs: {done.unverifiable}\n")
        return 1
    shows = done.shows
    out.write(f"it shows the anomaly {len(shows)} of {args.times} times; reproduced the recorded outcome {done.same} "
              f"of {args.times} times\n")
    r, design = shows[-1] if shows else done.runs[-1]
    for a in r.anomalies:
        out.write(f"  {a}\n")
    for a in design:
        out.write(f"  by design (a serial order shows it): {a}\n")
    if done.same < args.times:
        out.write("the replayed outcome differs from the recorded one:\n")
        for d in w.differences(done.differs.outcome):
            out.write(f"  {d}\n")
    if not done.deterministic:
        out.write("warning: the replay is not deterministic (the outcome differs between runs)\n")
    if args.png or args.svg:
        from toki.harness import draw

        replayed = Witness.from_trial(engine, w.scenario, r, seed=w.seed, budget=w.budget)
        for p in (args.png, args.svg):
            if p:
                draw(replayed, p)
    if shows:
        return 1
    out.write("no replayed run shows an anomaly: the witness no longer reproduces (the engine, its version or toki "
              "changed since it was recorded)\n")
    return 0
