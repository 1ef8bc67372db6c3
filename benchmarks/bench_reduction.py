"""What the exhaustive search's reduction runs, engine by engine: verdicts and counts at K=2.

    python benchmarks/bench_reduction.py [--engines sodamem,sodamem-fixed,...] [--bound 2]
                                         [--reductions dpor,sleep] [--tree DIR --tree-label before]
                                         [--time-budget 300] [--json PATH]
    python benchmarks/bench_reduction.py --markdown results/bench_reduction.json

Each engine's scenarios, each in a fresh ``toki certify --engine E --scenario S --exhaustive K
--json -`` process (as a user runs it, end to end), once per reduction: ``dpor`` (one run per
class of equivalent interleavings, races tried first) and ``sleep`` (sleep sets alone). With
``--tree DIR`` the same certificates also run on another checkout of toki (``PYTHONPATH=DIR``),
e.g. the commit before a change to the search, labelled ``--tree-label``: its verdicts and counts
sit beside the others, so "every verdict unchanged" is read off the rows, not asserted. A search
the time budget ends is recorded as such (complete false), never as a verdict.

The results (with provenance: commit, versions, options) go to ``--json``; ``--markdown`` prints
the table the docs show from such a file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toki.runinfo import provenance  # noqa: E402

ENGINES = ("sodamem", "sodamem-fixed", "atommem", "atommem-atomic", "toki")


def scenarios(engine: str) -> list[str]:
    from toki.engines.registry import load_engine

    return list(load_engine(engine).scenarios)


def certify(engine: str, scenario: str, bound: int, reduction: str | None, tree: str | None,
            time_budget: float) -> dict:
    argv = [sys.executable, "-c", "import sys; from toki.cli import entry; entry()", "certify", "--engine", engine,
            "--scenario", scenario, "--exhaustive", str(bound), "--time-budget", str(time_budget), "--json", "-"]
    if reduction is not None:
        argv += ["--reduction", reduction]
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = tree
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tree or ROOT, timeout=time_budget + 300)
    wall = time.perf_counter() - t
    try:
        (v,) = json.loads(p.stdout)["verdicts"]
    except (ValueError, KeyError):
        return {"verdict": "error", "exit": p.returncode, "wall_s": round(wall, 2),
                "error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    s = v.get("search") or {}
    return {"verdict": v["verdict"], "exit": p.returncode, "explored": s.get("explored"),
            "redundant": s.get("redundant"), "pruned": s.get("pruned"), "complete": s.get("complete"),
            "out_of_time": s.get("out_of_time"), "elapsed_s": v.get("elapsed_s"), "wall_s": round(wall, 2)}


def markdown(doc: dict) -> str:
    labels = doc["options"]["labels"]
    head = "| engine | scenario | " + " | ".join(labels) + " |"
    lines = [head, "|" + "---|" * (2 + len(labels))]
    for row in doc["rows"]:
        cells = []
        for lab in labels:
            r = row["runs"].get(lab)
            if r is None:
                cells.append("")
            elif r["verdict"] == "error":
                cells.append("error")
            else:
                done = ", complete" if r.get("complete") else ", out of time" if r.get("out_of_time") else ""
                cells.append(f"{r['verdict']} {r['explored']}{done} ({r['elapsed_s']:.1f} s)"
                             if r.get("elapsed_s") is not None else f"{r['verdict']} {r['explored']}{done}")
        lines.append(f"| {row['engine']} | {row['scenario']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--bound", type=int, default=2)
    ap.add_argument("--reductions", default="dpor,sleep")
    ap.add_argument("--tree", default=None, help="another toki checkout to run the same certificates on")
    ap.add_argument("--tree-label", default="before")
    ap.add_argument("--time-budget", type=float, default=300.0, help="seconds per certificate")
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None, metavar="RESULTS", help="print the table of a results file")
    a = ap.parse_args(argv)
    if a.markdown:
        print(markdown(json.loads(Path(a.markdown).read_text())))
        return 0
    reductions = [r for r in a.reductions.split(",") if r]
    labels = ([a.tree_label] if a.tree else []) + reductions
    rows = []
    for engine in a.engines.split(","):
        for scenario in scenarios(engine):
            runs = {}
            if a.tree:
                runs[a.tree_label] = certify(engine, scenario, a.bound, None, a.tree, a.time_budget)
            for red in reductions:
                runs[red] = certify(engine, scenario, a.bound, red, None, a.time_budget)
            rows.append({"engine": engine, "scenario": scenario, "runs": runs})
            print(engine, scenario, " | ".join(f"{k}: {v['verdict']} {v.get('explored')} "
                                             f"{'complete' if v.get('complete') else ''}" for k, v in runs.items()),
                  flush=True)
    changed = [(r["engine"], r["scenario"]) for r in rows
               if len({v["verdict"] for v in r["runs"].values() if not v.get("out_of_time")}) > 1]
    doc = {"provenance": provenance(seed=0, options=vars(a)),
           "options": {"bound": a.bound, "labels": labels, "time_budget": a.time_budget, "tree": a.tree},
           "rows": rows, "verdicts_differ": changed}
    print(markdown(doc))
    print("verdicts that differ between the columns:", changed or "none")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
