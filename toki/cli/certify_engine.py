"""``toki certify --engine NAME`` / ``--engine-module pkg.mod:factory`` / ``--replay FILE``.

For each scenario of the engine: run every serial order, search interleavings with Hypothesis
(``--budget`` examples, ``--seed``), shrink a found anomaly to the fewest context switches,
replay the shrunk witness to confirm it, and write it (``--witness``), its picture
(``--png``/``--svg``) and a JUnit report (``--junit``). Exit 0 when no scenario admits an
anomaly within the budget, 1 when one does (or when the engine's read-out says nothing, which
no check can pass), 2 on bad input.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path

from toki.render import emit_json, progress, table
from toki.errors import ConfigError


def _per_scenario(path: str | None, scenario: str, many: bool) -> Path | None:
    if not path:
        return None
    p = Path(path)
    return p.with_name(f"{p.stem}.{scenario}{p.suffix}") if many else p


def _server_for(engine, dsn):
    """Point an engine that keeps its memory in a database server at ``--dsn`` (else the default)."""
    if dsn and not hasattr(engine, "use_server"):
        raise ConfigError(f"engine {engine.name} keeps its memory in its own storage, not at a --dsn",
                          fix="drop --dsn for this engine")
    if hasattr(engine, "use_server"):
        from toki.backends.dsn import scheme_of
        from toki.db.server import resolve

        schemes = getattr(engine, "dsn_schemes", ("postgresql",))
        if dsn and scheme_of(dsn) not in schemes:
            raise ConfigError(f"engine {engine.name} runs on {', '.join(schemes)}, not on {scheme_of(dsn)}",
                              fix="pass a postgresql:// DSN, or none for the embedded PostgreSQL")
        engine.use_server(resolve(dsn))


def certify_scenario(engine, name: str, *, budget: int, seed: int, step_limit: float, witness: str | None,
                     png: str | None, svg: str | None, many: bool, bar=None) -> dict:
    """One scenario: serial orders, search, shrink, witness and picture; the verdict row."""
    from toki.harness.controller import ReplayChooser
    from toki.harness.search import search
    from toki.harness.trial import TrialRunner
    from toki.harness.witness import Witness, digest
    from toki.runinfo import provenance

    opts = {"engine": engine.name, "scenario": name, "budget": budget, "seed": seed}
    with TrialRunner(engine, name, step_limit_s=step_limit) as runner:
        task = bar.add_task(f"{engine.name} {name}", total=budget) if bar is not None else None
        res = search(runner, budget=budget, seed=seed, on_trial=None if bar is None else
                     (lambda tried, hit: bar.update(task, completed=min(tried, budget))))
        v = {"system": engine.name, "version": str(engine.version), "executed": getattr(engine, "executed", "real"),
             "scenario": name, "budget": budget, "seed": seed, "trials": res.tried, "shrinks": res.shrinks,
             "serial_orders": res.serial_orders, "elapsed_s": round(res.elapsed_s, 3), "anomalies": [],
             "verdict": "excludes", "witness": None, "replayed": None, "context_switches": None}
        design = [(t, o, runner.by_design(o)) for _, t, o in runner.serial_runs]
        design = [d for d in design if d[2]]
        w = None
        if runner.silent:
            v["verdict"] = "unverifiable"
            v["anomalies"] = ["the engine's read-out is empty in every serial order: a check told nothing "
                              "cannot pass (make state() return what the engine stores)"]
        elif design and res.found is None:  # admitted in a serial order: the design, not a race
            trace, outcome, found = design[0]
            w = Witness.from_serial(engine, name, trace, outcome, found, seed=seed, budget=budget)
            v.update(verdict="admits", anomalies=[f"by design (in {len(design)} of {len(runner.serial_runs)} "
                                                  f"serial orders): {f}" for f in found],
                     context_switches=w.context_switches, replayed=True, grants=len(w.grants))
        elif res.found is not None:
            w = Witness.from_trial(engine, name, res.found, seed=seed, budget=budget,
                                   provenance=provenance(seed=seed, options=opts))
            again = runner.trial(ReplayChooser(w.grants))
            by_design = [f"by design (in {len(design)} of {len(runner.serial_runs)} serial orders): {f}"
                         for f in (design[0][2] if design else [])]
            v.update(verdict="admits", anomalies=w.anomalies + by_design, context_switches=w.context_switches,
                     replayed=digest(again.outcome.key) == w.outcome, grants=len(w.grants))
            for fmt, path in (("png", png), ("svg", svg)):
                ppath = _per_scenario(path, name, many)
                if ppath:
                    from toki.harness.draw import draw

                    v[fmt] = str(draw(w, ppath))
        wpath = _per_scenario(witness, name, many)
        if w is not None and wpath:
            v["witness"] = str(w.save(wpath))
    return v


def _scenario_shard(name: str, spec: dict) -> dict:
    """A Dask worker's share of ``--cluster``: load the engine there and certify one scenario."""
    from toki.engines.registry import load_engine

    engine = load_engine(spec["engine"], spec["engine_module"])
    _server_for(engine, spec["dsn"])
    return certify_scenario(engine, name, budget=spec["budget"], seed=spec["seed"], step_limit=spec["step_limit"],
                            witness=spec["witness"], png=spec["png"], svg=spec["svg"], many=spec["many"])


def run_engine(args, out) -> int:
    from toki.engines.registry import load_engine
    from toki.runinfo import provenance

    engine = load_engine(args.engine, args.engine_module)
    budget = 100 if args.budget is None else args.budget
    if budget < 1:
        raise ConfigError(f"--budget {budget} must be at least 1", fix="pass --budget 100 or more")
    names = list(engine.scenarios) if args.scenario in (None, "all") else [args.scenario]
    for n in names:
        if n not in engine.scenarios:
            raise ConfigError(f"engine {engine.name} has no scenario {n!r}",
                              fix="choose one of " + ", ".join(engine.scenarios) + " (see toki engines list)")
    _server_for(engine, args.dsn)
    many = len(names) > 1
    t_all = time.perf_counter()
    cluster_info = None
    if getattr(args, "cluster", None):
        # One shard per scenario: each is searched from the same seed wherever it runs.
        from toki.cluster import Cluster

        spec = {"engine": args.engine, "engine_module": args.engine_module, "dsn": args.dsn, "budget": budget,
                "seed": args.seed, "step_limit": args.step_limit, "many": many,
                "witness": str(Path(args.witness).resolve()) if args.witness else None,
                "png": str(Path(args.png).resolve()) if args.png else None,
                "svg": str(Path(args.svg).resolve()) if args.svg else None}
        with Cluster(args.cluster) as cl, progress() as bar:
            task = bar.add_task(f"{engine.name} on {args.cluster}", total=len(names))
            verdicts = cl.map(_scenario_shard, names, spec, on_result=lambda i, r: bar.advance(task))
            cluster_info = cl.describe()
    else:
        verdicts = []
        for name in names:
            with progress() as bar:
                verdicts.append(certify_scenario(engine, name, budget=budget, seed=args.seed,
                                                 step_limit=args.step_limit, witness=args.witness, png=args.png,
                                                 svg=args.svg, many=many, bar=bar))
    rows = []
    for v in verdicts:
        kinds = sorted({a.split(": ", 1)[1].split(":", 1)[0] if a.startswith("by design") else a.split(":", 1)[0]
                        for a in v["anomalies"]}) or ["-"]
        rows.append((v["scenario"], v["verdict"], ", ".join(kinds), f"{v['trials']} (+{v['shrinks']} shrinking)",
                     "" if v["context_switches"] is None else f"{v['grants']} grants, {v['context_switches']} switches",
                     "" if v["replayed"] is None else ("yes" if v["replayed"] else "NO")))
    elapsed = time.perf_counter() - t_all
    if args.junit:
        _junit(verdicts, args.junit, elapsed)
    failed = any(v["verdict"] != "excludes" for v in verdicts)
    if args.json is not None:
        doc = {"verdicts": verdicts, "provenance": provenance(seed=args.seed, options={
            "engine": engine.name, "engine_module": args.engine_module, "scenarios": names, "budget": budget,
            "cluster": cluster_info}, elapsed_s=round(elapsed, 3))}
        emit_json(doc, out, None if args.json == "-" else args.json)
        if args.json == "-":
            return 1 if failed else 0
    label = "model" if getattr(engine, "executed", "real") == "model" else "real"
    table(out, f"toki certify --engine {engine.name} {engine.version} ({label}), budget {budget}, seed {args.seed}",
          ["scenario", "verdict", "anomaly", "examples", "minimal witness", "replays"], rows)
    for v in verdicts:
        for a in v["anomalies"]:
            out.write(f"{v['scenario']}: {a}\n")
        if v.get("witness"):
            out.write(f"{v['scenario']}: witness {v['witness']} (replay: toki certify --replay {v['witness']})\n")
    return 1 if failed else 0


def _junit(verdicts: list[dict], path: str, elapsed: float) -> None:
    suite = ET.Element("testsuite", name="toki-certify-engine", tests=str(len(verdicts)),
                       failures=str(sum(v["verdict"] != "excludes" for v in verdicts)), errors="0",
                       time=f"{elapsed:.3f}")
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"toki.certify.{v['system']}", name=v["scenario"],
                             time=f"{v['elapsed_s']:.3f}")
        props = ET.SubElement(case, "properties")
        for k in ("version", "executed", "budget", "seed", "trials", "verdict", "witness"):
            ET.SubElement(props, "property", name=k, value=str(v.get(k)))
        if v["verdict"] != "excludes":
            fail = ET.SubElement(case, "failure", type=v["verdict"], message="; ".join(v["anomalies"])[:500])
            fail.text = "\n".join(v["anomalies"])
    ET.indent(suite)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n")


def run_replay(args, out) -> int:
    from toki.harness.controller import ReplayChooser
    from toki.engines.registry import load_engine
    from toki.harness.trial import TrialRunner
    from toki.harness.witness import Witness, digest

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
    same = anomalous = 0
    last = None
    with TrialRunner(engine, w.scenario, step_limit_s=args.step_limit) as runner:
        design: list[str] = []
        for _ in range(args.times):
            last = runner.trial(ReplayChooser(w.grants))
            design = runner.by_design(last.outcome)
            same += digest(last.outcome.key) == w.outcome
            anomalous += (not last.serializable) or bool(design)
    if args.png or args.svg:
        from toki.harness.draw import draw

        replayed = Witness.from_trial(engine, w.scenario, last, seed=w.seed, budget=w.budget)
        for p in (args.png, args.svg):
            if p:
                draw(replayed, p)
    out.write(f"replayed {w.engine} {w.scenario}: {len(w.grants)} grants, {w.context_switches} context switches\n")
    out.write(f"reproduced the recorded outcome {same} of {args.times} times; it shows the anomaly {anomalous} of "
              f"{args.times} times\n")
    for a in (last.anomalies if last is not None else []):
        out.write(f"  {a}\n")
    for a in design:
        out.write(f"  by design (a serial order shows it): {a}\n")
    if same == args.times:
        return 1
    if same:
        out.write("warning: the replay is not deterministic (the outcome differs between runs)\n")
        return 1
    out.write("the anomaly did NOT reproduce\n")
    return 0
