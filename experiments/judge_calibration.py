"""Judge calibration: observed disagreement of consecutive calls against 2p(1-p), per cell.

A *cell* is one contradiction pair shown in one order, a judge with a known probability p of
answering position A (read from token probabilities). Each cell is asked ``--calls`` times
afresh (no log); its observed disagreement is the share of consecutive calls that differ, its
prediction 2p(1-p) at the judge's temperature. Summary over ``--cells`` cells drawn (seeded) from
the 72 cells of the calibrated local-judge fixture: mean absolute deviation, maximum, R² of
observed against predicted (1 - SS_res / SS_tot), and how many cells are deterministic (p is 0
or 1: they can never disagree). The pooled rate over all 72 cells is printed next to the
published 7.97 % observed / 9.21 % predicted.

With ``--judge-url`` the cells are asked of a real OpenAI-compatible server instead (llama-server,
vLLM, Ollama): p is then the answer probability the server reports, averaged over the calls.
"""

from __future__ import annotations

import random

from toki.render import table
from toki.judges import disagreement, local_judge_study, temper

NAME = "judge-calibration"
TABLE = "2p(1-p) calibration: 30 cells, mean absolute deviation 0.017, max 0.111, R² 0.98 (docs/tables/index.md)"

PUBLISHED = {"cells": 30, "mad": 0.017, "max": 0.111, "r2": 0.98, "deterministic": 17,
             "pooled_observed_t1": 0.0797, "pooled_predicted_t1": 0.0921}


def add_arguments(p) -> None:
    p.add_argument("--cells", type=int, default=30, help="cells drawn from the 72 (default 30)")
    p.add_argument("--calls", type=int, default=100, help="fresh calls per cell (default 100)")
    p.add_argument("--temperature", type=float, default=1.0, help="judge temperature (default 1.0)")
    p.add_argument("--judge-url", default=None, help="ask an OpenAI-compatible server instead of the fixture")
    p.add_argument("--model", default="local", help="model name sent to --judge-url (default 'local')")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per call to --judge-url (default 30)")


def stats(observed: list[float], predicted: list[float]) -> dict:
    dev = [abs(o - q) for o, q in zip(observed, predicted)]
    mean_o = sum(observed) / len(observed)
    ss_res = sum((o - q) ** 2 for o, q in zip(observed, predicted))
    ss_tot = sum((o - mean_o) ** 2 for o in observed)
    return {"mad": sum(dev) / len(dev), "max": max(dev),
            "r2": (1 - ss_res / ss_tot) if ss_tot > 0 else None}


def measure(cell, judge, calls: int, temperature: float, use_server: bool) -> dict:
    shown = cell.shown
    votes, reported = [], []
    for _ in range(calls):
        v = judge.vote(shown)
        votes.append(v.index)
        if v.probability is not None:
            reported.append(v.probability if v.index == 0 else 1 - v.probability)
    p = sum(reported) / len(reported) if use_server else temper(cell.p_a, temperature)
    flips = sum(a != b for a, b in zip(votes, votes[1:]))
    return {"pair": cell.pair.index, "category": cell.pair.category, "order": cell.order,
            "p": round(p, 6), "predicted": round(disagreement(p), 6), "observed": round(flips / (calls - 1), 6),
            "share_a": round(votes.count(0) / calls, 4), "deterministic": p in (0.0, 1.0)}


def run(args, out) -> dict:
    from toki.errors import InputError

    if args.calls < 2:
        raise InputError(f"--calls {args.calls} gives no consecutive pair", fix="give --calls 2 or more")
    if not 1 <= args.cells <= 72:
        raise InputError(f"--cells {args.cells} is not between 1 and 72", fix="the fixture has 72 cells")
    if args.temperature < 0:
        raise InputError(f"--temperature {args.temperature} is negative", fix="give a temperature >= 0")
    study = local_judge_study(args.seed)
    rng = random.Random(f"judge-calibration:{args.seed}")
    chosen = rng.sample(range(len(study.cells)), args.cells)

    def judge_for(i: int):
        if args.judge_url:
            from toki.judges import HTTPJudge
            return HTTPJudge(args.judge_url, model=args.model, temperature=args.temperature, seed=None,
                             timeout_s=args.timeout)
        return study.judge(seed=args.seed * 10_000 + i, temperature=args.temperature)

    every = [measure(c, judge_for(i), args.calls, args.temperature, bool(args.judge_url))
             for i, c in enumerate(study.cells)]
    cells = [every[i] for i in chosen]
    summary = stats([c["observed"] for c in cells], [c["predicted"] for c in cells])
    wob = [c for c in cells if 0.05 < c["p"] < 0.95]
    doc = {
        "cells": cells,
        "summary": {**{k: (round(v, 4) if v is not None else None) for k, v in summary.items()},
                    "n": len(cells), "deterministic": sum(c["deterministic"] for c in cells),
                    "never_disagreed": sum(c["observed"] == 0 for c in cells),
                    "wobbling": len(wob), "calls_per_cell": args.calls},
        "pooled_72": {"observed": round(sum(c["observed"] for c in every) / len(every), 4),
                      "predicted": round(sum(c["predicted"] for c in every) / len(every), 4)},
        "judge": {"kind": "http" if args.judge_url else "fixture", "url": args.judge_url,
                  "temperature": args.temperature, "study_seed": args.seed},
        "published": PUBLISHED,
    }
    s = doc["summary"]
    table(out, f"2p(1-p) calibration, {len(cells)} cells x {args.calls} calls, T={args.temperature:g}",
          ["statistic", "measured", "published"],
          [("mean |observed - 2p(1-p)|", f"{s['mad']:.3f}", PUBLISHED["mad"]),
           ("max |observed - 2p(1-p)|", f"{s['max']:.3f}", PUBLISHED["max"]),
           ("R²", "n/a" if s["r2"] is None else f"{s['r2']:.3f}", PUBLISHED["r2"]),
           ("deterministic cells (p = 0 or 1)", f"{s['deterministic']} of {s['n']}", f"{PUBLISHED['deterministic']} of 30"),
           ("cells that never disagreed", f"{s['never_disagreed']} of {s['n']}", ""),
           ("pooled over 72 cells: observed", f"{doc['pooled_72']['observed']:.4f}", PUBLISHED["pooled_observed_t1"]),
           ("pooled over 72 cells: 2p(1-p)", f"{doc['pooled_72']['predicted']:.4f}", PUBLISHED["pooled_predicted_t1"])])
    return doc
