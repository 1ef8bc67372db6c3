"""Temperature sweep: consecutive-replay disagreement at judge temperatures 0.5, 1.0, 1.5.

For each temperature, every conflict of the population (default: the 19 wobbling cells of the
calibrated local-judge fixture, shown in their own order; ``--cells all`` for the 72 cells) is
replayed ``--trials`` times per seed through TOKI's write path on PostgreSQL, exactly as in
``n1-replay``: the reference keeps the keyed judge log between replays, the *stripped* path
empties it before every replay. A pair of consecutive replays disagrees when the surviving fact
differs. Prompts and keys keep the cell's own order (``canonicalize=False``) so that the judge is
asked exactly the population's cells (canonicalisation is ``order-swap``'s subject; the log pins
the vote under either key). The fixture's probabilities are temperature-1 token probabilities, scaled as
sigmoid(logit(p) / T); 2p(1-p) at each temperature is printed next to the measured rate.
"""

from __future__ import annotations

import random

from toki.render import table
from toki.judges import disagreement, local_judge_study, temper

NAME = "temperature-sweep"
TABLE = "Temperature sweep 0.5 / 1.0 / 1.5: reference 0.000, stripped (no log) 0.32-0.34 (docs/tables/index.md)"

PUBLISHED = {"reference": 0.0, "stripped_min": 0.32, "stripped_max": 0.34, "temperatures": [0.5, 1.0, 1.5]}


def add_arguments(p) -> None:
    p.add_argument("--temperatures", default="0.5,1.0,1.5", help="comma-separated (default 0.5,1.0,1.5)")
    p.add_argument("--trials", type=int, default=11, help="replays per conflict and seed (default 11)")
    p.add_argument("--seeds", type=int, default=5, help="seeds --seed .. --seed+N-1 (default 5)")
    p.add_argument("--cells", choices=("wobbling", "all"), default="wobbling", help="conflict population")


def parse_temperatures(text: str) -> list[float]:
    from toki.errors import InputError

    try:
        ts = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--temperatures {text!r} is not a comma-separated list of numbers",
                         fix="e.g. --temperatures 0.5,1.0,1.5") from None
    if not ts or any(t < 0 for t in ts):
        raise InputError(f"--temperatures {text!r} needs one or more values >= 0", fix="e.g. 0.5,1.0,1.5")
    return ts


def run(args, out) -> dict:
    from toki.db.server import resolve
    from toki.db.store import Store
    from toki.errors import InputError
    from toki.experiments.n1_replay import disagreements, replay_on_store, se

    temps = parse_temperatures(args.temperatures)
    if args.trials < 2 or args.seeds < 1:
        raise InputError("--trials must be at least 2 and --seeds at least 1", fix="give larger sizes")
    study = local_judge_study(args.seed)
    cells = study.wobbling() if args.cells == "wobbling" else list(study.cells)
    seeds = [args.seed + i for i in range(args.seeds)]
    server = resolve(args.dsn)
    rows_out = []
    with Store.open(server=server, label="tsweep") as store:
        for T in temps:
            ref_d = strip_d = pairs = 0
            calls = 0
            for s in seeds:
                for i, c in enumerate(cells):
                    inc, new = c.shown
                    js = random.Random(f"tsweep:{s}:{i}:{T}").getrandbits(31)
                    w, src = replay_on_store(store, inc, new, study.judge(seed=js, temperature=T), args.trials,
                                             keep_log=True, canonicalize=False)
                    ref_d += disagreements(w)
                    calls += src.get("judge", 0)
                    w, _ = replay_on_store(store, inc, new, study.judge(seed=js + 1, temperature=T), args.trials,
                                           keep_log=False, canonicalize=False)
                    strip_d += disagreements(w)
                    pairs += args.trials - 1
            pred = sum(disagreement(temper(c.p_a, T)) for c in cells) / len(cells)
            rows_out.append({"temperature": T, "pairs": pairs, "reference": {"disagreements": ref_d,
                             "rate": round(ref_d / pairs, 4), "judge_calls": calls},
                             "stripped": {"disagreements": strip_d, "rate": round(strip_d / pairs, 4),
                                          "se": round(se(strip_d / pairs, pairs), 4)},
                             "predicted_2p1p": round(pred, 4)})
    doc = {"rows": rows_out, "population": {"cells": args.cells, "n": len(cells)}, "seeds": seeds,
           "trials": args.trials, "published": PUBLISHED, "backend": server.describe()}
    table(out, f"Temperature sweep over {len(cells)} {args.cells} cells (published: reference 0.000, "
               "stripped 0.32-0.34)",
          ["T", "pairs", "reference rate", "stripped rate", "± se", "2p(1-p)"],
          [(f"{r['temperature']:g}", r["pairs"], f"{r['reference']['rate']:.3f}", f"{r['stripped']['rate']:.3f}",
            f"{r['stripped']['se']:.3f}", f"{r['predicted_2p1p']:.3f}") for r in rows_out])
    return doc
