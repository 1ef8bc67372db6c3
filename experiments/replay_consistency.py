"""Replay consistency C(t): the chance that t re-queries of one conflict all return the same winner.

For a judge that answers position A with probability p, C(t) = p^t + (1-p)^t (docs/design.md#judges). Over the
wobbling cells of the calibrated local-judge fixture (``--cells wobbling``, default; ``all`` for
the 72 cells) the experiment measures, for t = 1..``--tmax``:

* without the log: ``--reps`` independent runs of ``--tmax`` fresh judge calls per cell; C(t) is
  the share of runs whose first t votes agree, averaged over cells (next to the formula);
* with the keyed log: ``--log-reps`` runs per cell against the real ``judge_log`` table on
  PostgreSQL. A run starts from an empty log; each re-query does what step 5 of the write path
  does (:func:`toki.db.judge_log.lookup`, and only on a miss the judge and
  :func:`toki.db.judge_log.record`, in one transaction). C(t) is measured from the votes returned.

Note (also in the README): C(3) = 1 - 1.5 (1 - C(2)) for every p, so the published "below 0.5 by
t = 3" and the local-judge C(2) = 0.685 cannot describe the same cells.
"""

from __future__ import annotations

from toki.render import table
from toki.judges import consistency, judge_key, local_judge_study

NAME = "replay-consistency"
TABLE = "C(t) = E[p^t + (1-p)^t], t = 1..24, with and without the keyed log (paper Fig. 6, docs/tables/index.md)"

PUBLISHED = {"below_half_by_t": 3, "c24": 0.06, "with_log": 1.0,
             "local_judge_wobbling": {"2": 0.685, "10": 0.180, "24": 0.045}}


def add_arguments(p) -> None:
    p.add_argument("--tmax", type=int, default=24, help="largest t (default 24)")
    p.add_argument("--reps", type=int, default=400, help="runs per cell without the log (default 400)")
    p.add_argument("--log-reps", type=int, default=10, help="runs per cell through the keyed log (default 10)")
    p.add_argument("--cells", choices=("wobbling", "all"), default="wobbling", help="which fixture cells")
    p.add_argument("--temperature", type=float, default=1.0, help="judge temperature (default 1.0)")


def agree_prefix(votes: list[int]) -> int:
    """Length of the longest prefix of equal votes."""
    n = 1
    while n < len(votes) and votes[n] == votes[0]:
        n += 1
    return n


def curve(prefixes: list[int], tmax: int) -> list[float]:
    return [sum(p >= t for p in prefixes) / len(prefixes) for t in range(1, tmax + 1)]


def run(args, out) -> dict:
    from toki.db import judge_log
    from toki.db.server import resolve
    from toki.db.store import Store
    from toki.errors import InputError
    from toki.judges import temper

    if args.tmax < 1 or args.reps < 1 or args.log_reps < 1:
        raise InputError("--tmax, --reps and --log-reps must be at least 1", fix="give positive sizes")
    if args.temperature < 0:
        raise InputError(f"--temperature {args.temperature} is negative", fix="give a temperature >= 0")
    study = local_judge_study(args.seed)
    cells = study.wobbling() if args.cells == "wobbling" else list(study.cells)
    T = args.temperature
    no_log, predicted = [], []
    for i, c in enumerate(cells):
        judge = study.judge(seed=args.seed * 100_000 + i, temperature=T)
        prefixes = [agree_prefix([judge.vote(c.shown).index for _ in range(args.tmax)]) for _ in range(args.reps)]
        no_log.append(curve(prefixes, args.tmax))
        p = temper(c.p_a, T)
        predicted.append([consistency(p, t) for t in range(1, args.tmax + 1)])

    server = resolve(args.dsn)
    with_log, calls = [], 0
    with Store.open(server=server, label="replay") as store:
        conn = store.conn
        for i, c in enumerate(cells):
            judge = study.judge(seed=args.seed * 100_000 + 50_000 + i, temperature=T)
            key = judge_key(c.shown, judge)
            prefixes = []
            for _ in range(args.log_reps):
                conn.execute("delete from judge_log")
                votes = []
                for _ in range(args.tmax):
                    with conn.transaction():
                        logged = judge_log.lookup(conn, key)
                        if logged is None:
                            v = judge.vote(c.shown)
                            calls += 1
                            judge_log.record(conn, key, v, session="replay")
                            votes.append(v.index)
                        else:
                            votes.append(logged.vote)
                prefixes.append(agree_prefix(votes))
            with_log.append(curve(prefixes, args.tmax))

    def mean_curve(curves):
        return [round(sum(cv[t] for cv in curves) / len(curves), 4) for t in range(args.tmax)]

    ts = list(range(1, args.tmax + 1))
    doc = {
        "t": ts,
        "without_log": mean_curve(no_log),
        "predicted": mean_curve(predicted),
        "with_log": mean_curve(with_log),
        "cells": [{"pair": c.pair.index, "category": c.pair.category, "order": c.order,
                   "p": round(temper(c.p_a, T), 6), "without_log": [round(v, 4) for v in cv]}
                  for c, cv in zip(cells, no_log)],
        "judge_calls_with_log": calls,
        "sizes": {"cells": len(cells), "population": args.cells, "reps": args.reps, "log_reps": args.log_reps,
                  "temperature": T},
        "published": PUBLISHED,
        "backend": server.describe(),
    }
    below = next((t for t, v in zip(ts, doc["without_log"]) if v < 0.5), None)
    doc["first_t_below_half"] = below
    shown = [t for t in (1, 2, 3, 5, 10, 24) if t <= args.tmax]
    table(out, f"C(t) over {len(cells)} {args.cells} cells, T={T:g} (published: < 0.5 by t=3, ~0.06 at t=24, "
               "log 1.0; local judge 0.685 / 0.180 / 0.045 at t = 2 / 10 / 24)",
          ["t", "without log (measured)", "p^t + (1-p)^t", "with keyed log (measured)"],
          [(t, f"{doc['without_log'][t - 1]:.3f}", f"{doc['predicted'][t - 1]:.3f}", f"{doc['with_log'][t - 1]:.3f}")
           for t in shown])
    return doc
