"""N1 replay: the same contradiction adjudicated again, with and without TOKI's keyed judge log.

Per seed, one conflict (an incumbent, then a contradicting newcomer) is replayed ``--trials``
times; a *pair* is two consecutive trials and it *disagrees* when the surviving fact differs.
Every system asks the same kind of judge (the judge model is shared so that only the write path
differs):

* reference ``toki-keyed-log``: TOKI's write path (⊕?, :class:`toki.db.store.Store` on
  PostgreSQL). Between trials the memory rows are deleted and the ``judge_log`` is kept, as it
  would be when an agent re-processes the same conflict. Step 5 of the write path (docs/design.md#the-write-path) reads the log before
  calling the judge, so only the first trial of a seed calls the judge; the count of
  disagreements is measured from the stored winners, and it is zero because the log returns the
  same vote, not because anything is asserted.
* ``toki-no-log``: the same write path on the same database with the log emptied before every
  trial (what TOKI would be without its log).
* four log-less engines modelled after their public write paths (docs/tables/verdicts.md), simulated in memory:
  nothing is logged, so every trial asks the judge again.
  ``mem0-v3-like``: ADD only with MD5 dedup, both facts stay current, the answering LLM picks one
  at read time (shown in retrieval order: the incumbent first);
  ``graphiti-like``: existing edge then new edge in one LLM call (temperature 1), then
  deterministic invalidation of the loser (invalid_at = new.valid_at, expired_at = now);
  ``letta-like``: the agent loads the block (incumbent) at step start, its LLM step decides the
  new block value (shown block first, then the message), then a last-writer-wins flush whose
  version check passes (one writer);
  ``zep-like``: Graphiti's pipeline as Zep runs it, the new episode shown before the retrieved edge.

Judges: ``bernoulli`` (default) votes for the first shown candidate with probability ``--p``
(0.9: 2p(1-p) = 0.18, the centre of the published 0.167-0.204; the paper does not state its
judge, so this is an assumption, named in the JSON); ``fixture`` draws each seed's conflict from
the wobbling cells of the calibrated local-judge fixture (:mod:`toki.judges.study`).
"""

from __future__ import annotations

import math
import random
from datetime import datetime

from toki.render import table
from toki.judges import FixtureJudge, SimulatedJudge, disagreement, local_judge_study, temper
from toki.model import Fact

NAME = "n1-replay"
TABLE = "N1 replay: keyed-log reference vs five log-less variants, 245 consecutive pairs over 5 seeds (docs/tables/index.md)"

PUBLISHED = {"reference_disagreements": 0, "pairs": 245, "variant_rate_min": 0.167, "variant_rate_max": 0.204}

VARIANTS = {
    "mem0-v3-like": "ADD only, MD5 dedup, both current; the answering LLM picks at read time (incumbent shown first)",
    "graphiti-like": "one LLM call (existing edge, then new), then deterministic invalidation of the loser",
    "letta-like": "block loaded at step start, LLM step decides the value, last-writer-wins flush",
    "zep-like": "Graphiti pipeline as Zep runs it: new episode shown before the retrieved edge",
    "toki-no-log": "TOKI's write path on PostgreSQL with the judge log emptied before every trial",
}


def add_arguments(p) -> None:
    p.add_argument("--trials", type=int, default=50, help="replays per seed (pairs = trials - 1; default 50)")
    p.add_argument("--seeds", type=int, default=5, help="number of seeds, --seed, --seed+1, ... (default 5)")
    p.add_argument("--judge", choices=("bernoulli", "fixture"), default="bernoulli",
                   help="bernoulli judge with --p, or the calibrated local-judge fixture (default bernoulli)")
    p.add_argument("--p", type=float, default=0.9, help="bernoulli judge: P(first shown candidate) (default 0.9)")
    p.add_argument("--temperature", type=float, default=1.0, help="judge temperature (default 1.0)")
    p.add_argument("--log-form", choices=("unique", "append"), default="unique", help="judge_log form (default unique)")


def check_sizes(args) -> None:
    from toki.errors import InputError

    if args.trials < 2:
        raise InputError(f"--trials {args.trials} leaves no consecutive pair", fix="give --trials 2 or more")
    if args.seeds < 1:
        raise InputError(f"--seeds {args.seeds}", fix="give --seeds 1 or more")
    if not 0.0 <= getattr(args, "p", 0.5) <= 1.0:
        raise InputError(f"--p {args.p} is outside [0, 1]", fix="give a probability")
    if getattr(args, "temperature", 0.0) < 0:
        raise InputError(f"--temperature {args.temperature} is negative", fix="give a temperature >= 0")


def disagreements(winners: list[str]) -> int:
    return sum(a != b for a, b in zip(winners, winners[1:]))


def se(rate: float, n: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 0.0) / n) if n else float("nan")


def replay_on_store(store, incumbent: Fact, newcomer: Fact, judge, trials: int, *, keep_log: bool,
                    canonicalize: bool = True) -> tuple[list[str], dict]:
    """Replay one conflict through the real write path; returns winners and where votes came from."""
    c = store.conn
    c.execute("delete from judge_log")  # a new conflict starts from an empty log (delete: cheaper than truncate)
    winners, sources = [], {"judge": 0, "log": 0}
    for _ in range(trials):
        c.execute("delete from agent_memory")
        c.execute("delete from callback_log")
        if not keep_log:
            c.execute("delete from judge_log")
        store.write(incumbent, operator="lww")
        out = store.begin_write(newcomer, operator="await", judge=judge, canonicalize=canonicalize).run()
        winners.append(out.winner_id)
        sources[out.vote_source] = sources.get(out.vote_source, 0) + 1
    return winners, sources


def simulate_variant(name: str, judge, incumbent: Fact, newcomer: Fact) -> str:
    """One trial of a log-less engine; returns the fact a reader gets afterwards."""
    if name == "mem0-v3-like":
        memories = {}
        for f in (incumbent, newcomer):  # ADD only; MD5 dedup of the text drops exact repeats only
            import hashlib
            memories.setdefault(hashlib.md5(f"{f.subject} {f.predicate} {f.object}".encode()).hexdigest(), f)
        retrieved = list(memories.values())  # equal similarity: insertion order
        return retrieved[judge.vote(retrieved).index].fact_id
    if name in ("graphiti-like", "zep-like"):
        shown = (incumbent, newcomer) if name == "graphiti-like" else (newcomer, incumbent)
        edges = {f.fact_id: {"fact": f, "invalid_at": None, "expired_at": None} for f in (incumbent, newcomer)}
        loser = shown[1 - judge.vote(shown).index]
        edges[loser.fact_id]["invalid_at"] = newcomer.valid_from
        edges[loser.fact_id]["expired_at"] = datetime(2100, 1, 1)
        [valid] = [k for k, e in edges.items() if e["invalid_at"] is None]
        return valid
    if name == "letta-like":
        block = {"value": incumbent, "version": 1}
        loaded = dict(block)  # step start
        shown = (loaded["value"], newcomer)
        decided = shown[judge.vote(shown).index]
        if block["version"] == loaded["version"]:  # optimistic check spans the flush only
            block = {"value": decided, "version": loaded["version"] + 1}
        return block["value"].fact_id
    raise KeyError(name)


def conflict_for_seed(args, seed: int):
    """(incumbent, newcomer, judge factory, predicted P(disagree) for each presentation order)."""
    if args.judge == "bernoulli":
        rng = random.Random(f"n1-conflict:{seed}")
        ids = sorted(f"f{rng.getrandbits(40):010x}" for _ in range(2))
        rng.shuffle(ids)
        inc = Fact(ids[0], "user", "lives_in", "Mangwon-dong", datetime(2025, 3, 1), confidence=0.8)
        new = Fact(ids[1], "user", "lives_in", "Seongsu-dong", datetime(2025, 9, 1), confidence=0.8)

        def make(judge_seed: int):
            return SimulatedJudge(p=args.p, seed=judge_seed, temperature=args.temperature)

        rate = disagreement(temper(args.p, args.temperature))
        return inc, new, make, {"shown": rate, "canonical": rate, "cell": None}
    study = local_judge_study(args.seed)
    cell = random.Random(f"n1-cell:{seed}").choice(study.wobbling())
    inc, new = cell.shown
    table_ = study.table

    def make(judge_seed: int):
        return FixtureJudge(table_, seed=judge_seed, temperature=args.temperature, model=f"local-4b-fixture-s{args.seed}")

    def rate_of(order):
        return disagreement(temper(table_[(order[0].fact_id, order[1].fact_id)], args.temperature))

    from toki.operators import canonical
    return inc, new, make, {"shown": rate_of((inc, new)), "reversed": rate_of((new, inc)),
                            "canonical": rate_of(canonical((inc, new))),
                            "cell": {"pair": cell.pair.index, "category": cell.pair.category, "order": cell.order}}


def run(args, out) -> dict:
    from toki.db.server import resolve
    from toki.db.store import Store

    check_sizes(args)
    server = resolve(args.dsn)
    seeds = [args.seed + i for i in range(args.seeds)]
    ref_winners, names = [], list(VARIANTS)
    var_winners: dict[str, list[list[str]]] = {n: [] for n in names}
    predicted: dict[str, list[float]] = {n: [] for n in names}
    ref_sources = {"judge": 0, "log": 0}
    conflicts = []
    with Store.open(server=server, label="n1", judge_log_form=args.log_form) as store:
        for s in seeds:
            inc, new, make, rates = conflict_for_seed(args, s)
            conflicts.append({"seed": s, "incumbent": inc.fact_id, "newcomer": new.fact_id, **rates})
            w, src = replay_on_store(store, inc, new, make(s * 1000), args.trials, keep_log=True)
            ref_winners.append(w)
            for k, v in src.items():
                ref_sources[k] = ref_sources.get(k, 0) + v
            w, _ = replay_on_store(store, inc, new, make(s * 1000 + 5), args.trials, keep_log=False)
            var_winners["toki-no-log"].append(w)
            predicted["toki-no-log"].append(rates["canonical"])
            for i, name in enumerate(names[:4]):
                judge = make(s * 1000 + 1 + i)
                var_winners[name].append([simulate_variant(name, judge, inc, new) for _ in range(args.trials)])
                order = "reversed" if name == "zep-like" and "reversed" in rates else "shown"
                predicted[name].append(rates[order])

    pairs = len(seeds) * (args.trials - 1)
    ref_dis = sum(disagreements(w) for w in ref_winners)
    variants = []
    for name in names:
        d = sum(disagreements(w) for w in var_winners[name])
        rate = d / pairs
        variants.append({"name": name, "pairs": pairs, "disagreements": d, "rate": round(rate, 4),
                         "se": round(se(rate, pairs), 4),
                         "predicted_2p1p": round(sum(predicted[name]) / len(predicted[name]), 4),
                         "mechanics": VARIANTS[name]})
    doc = {
        "reference": {"name": "toki-keyed-log", "pairs": pairs, "disagreements": ref_dis,
                      "judge_calls": ref_sources.get("judge", 0), "log_reads": ref_sources.get("log", 0),
                      "log_form": args.log_form},
        "variants": variants,
        "judge": {"kind": args.judge, "p": args.p if args.judge == "bernoulli" else None,
                  "temperature": args.temperature,
                  "assumption": "bernoulli p=0.9 chosen because 2p(1-p)=0.18 is the centre of the published "
                                "range; the paper does not name its judge" if args.judge == "bernoulli" else
                                "calibrated local-judge fixture, one wobbling cell per seed"},
        "seeds": seeds, "trials_per_seed": args.trials, "conflicts": conflicts,
        "published": PUBLISHED, "backend": server.describe(),
    }
    rows = [("toki-keyed-log (reference)", pairs, ref_dis, f"{ref_dis / pairs:.3f}", "", "0 by the log")]
    rows += [(v["name"], v["pairs"], v["disagreements"], f"{v['rate']:.3f}", f"{v['se']:.3f}",
              f"{v['predicted_2p1p']:.3f}") for v in variants]
    table(out, f"N1 replay ({args.judge} judge, T={args.temperature:g}; published: reference 0, "
               f"variants {PUBLISHED['variant_rate_min']}-{PUBLISHED['variant_rate_max']})",
          ["system", "pairs", "disagreements", "rate", "± se", "2p(1-p)"], rows)
    return doc
