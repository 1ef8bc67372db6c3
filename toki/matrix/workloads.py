"""Transaction programs for the anomaly matrix, written as agents run them (docs/design.md, docs/design.md#anomalies-and-guards).

Every predicate has two or three sessions on the real schema (``agent_memory``, ``judge_log``,
``callback_log``, ``policy``, ``belief_cache``): belief reads, judge calls, confidence
revisions, supersedes, cleanups. A :class:`Trial` holds the programs with fresh random data,
the predicate's minimal witness interleaving (docs/design.md#anomalies-and-guards), and a detector that decides from what
happened - the values each session read (its scratch space), which sessions committed, and
the final state - never from which interleaving ran.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from toki.matrix import memory
from toki.model import SENTINEL
from toki.provenance import Carrier

Fn = Callable  # (conn, ctx) -> rows | None
Op = tuple[str, "str | Fn | dict"]  # (label, SQL, Python step, or write-path op step)

PREDICATES = ("P0", "P1", "P2", "P3", "P4", "A5A", "A5B", "N1", "N2")
VARIANTS = ("P3-reread", "N1-unique")
T0 = datetime(2026, 3, 1)
_WORDS = ("penicillin", "amoxicillin", "cephalexin", "ibuprofen", "Mr Park", "Ms Lee", "Seoul", "Busan",
          "vegan", "pescatarian", "Acme", "Globex", "Mangwon-dong", "Hapjeong", "blue", "green")
_PREDS = ("medication", "contact", "address", "employer", "diet", "favourite_colour")


@dataclass
class Trial:
    predicate: str
    programs: dict[str, list[Op]]
    witness: list[tuple[str, int]]
    detect: Callable  # (result, conn) -> bool
    setup: Callable  # (conn) -> None
    cb_after: tuple[str, int]  # the agent reads the callback after this step of its program
    cb_key: str = ""
    judge_log_form: str = "append"
    data: dict = field(default_factory=dict)


# -- small helpers ---------------------------------------------------------------------------

def insert_fact(conn, fid: str, subject: str, predicate: str, obj: str, conf: float,
                 strategy: str = "evi", provenance: str | None = None) -> None:
    conn.execute(
        "insert into agent_memory values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'current')",
        (fid, subject, predicate, obj, T0, SENTINEL, T0, SENTINEL, provenance or f"x_{fid}", conf, strategy))


def _conf(conn, fid: str) -> float:
    return conn.execute("select confidence from agent_memory where fact_id = %s and system_time_end = %s",
                        (fid, SENTINEL)).fetchone()[0]


def set_conf(conn, fid: str, value: float) -> None:
    conn.execute("update agent_memory set confidence = %s where fact_id = %s and system_time_end = %s",
                 (value, fid, SENTINEL))


def _committed(result, *sessions: str) -> bool:
    return all(result.sessions.get(s) == "committed" for s in sessions)


def draw_slot(rng: random.Random, trial_key: str) -> tuple[str, str, list[str]]:
    subject = f"user-{rng.randrange(10**9):09d}"
    predicate = rng.choice(_PREDS)
    objects = [f"{w}#{rng.randrange(1000)}" for w in rng.sample(_WORDS, 4)]
    return subject, predicate, objects


def current_facts(conn, subject: str, predicate: str) -> list[tuple[str, float, str]]:
    return [tuple(r) for r in conn.execute(
        "select object, confidence, fact_id from agent_memory where subject = %s and predicate = %s"
        " and row_kind = 'current' and system_time_end = %s order by fact_id",
        (subject, predicate, SENTINEL)).fetchall()]


def read_cache(conn, subject: str, predicate: str) -> str | None:
    row = conn.execute("select object from belief_cache where subject = %s and predicate = %s",
                       (subject, predicate)).fetchone()
    return row[0] if row else None


def write_cache(conn, subject: str, predicate: str, obj: str | None, score: float | None) -> None:
    conn.execute("insert into belief_cache values (%s, %s, %s, %s) on conflict (subject, predicate)"
                 " do update set object = excluded.object, score = excluded.score", (subject, predicate, obj, score))


def reading_step(label_key: str, fn: Callable) -> Fn:
    """A step that reads and keeps what it saw under ``label_key`` in the session's scratch space."""
    def step(conn, ctx):
        value = fn(conn)
        ctx.setdefault(label_key, []).append(value)
        return [[repr(value)]]
    return step


B, C, A = "begin", "commit", "rollback"


# -- the nine predicates ---------------------------------------------------------------------

def p0(rng: random.Random) -> Trial:
    """Dirty write: two confidence revisions each set a complementary pair (f, g)."""
    s, p, objs = draw_slot(rng, "P0")
    f, g = f"f-{rng.randrange(10**9)}", f"g-{rng.randrange(10**9)}"
    a1, a2 = round(rng.uniform(0.05, 0.45), 6), round(rng.uniform(0.55, 0.95), 6)

    def setup(conn):
        insert_fact(conn, f, s, p, objs[0], 0.5)
        insert_fact(conn, g, s, p, objs[1], 0.5)

    def revise(fid, v):
        return lambda conn, ctx: set_conf(conn, fid, v)

    progs = {"T1": [(B, B), ("w1[f]", revise(f, a1)), ("w1[g]", revise(g, 1 - a1)), (C, C)],
             "T2": [(B, B), ("w2[f]", revise(f, a2)), ("w2[g]", revise(g, 1 - a2)), (C, C)]}
    writer_of = {(f, a1): "T1", (g, 1 - a1): "T1", (f, a2): "T2", (g, 1 - a2): "T2"}

    def detect(result, conn):
        if not _committed(result, "T1", "T2"):
            return False
        return memory.mixed_final_writes({f: _conf(conn, f), g: _conf(conn, g)}, writer_of)

    # w1[xa] w2[xb] c2 c1, on two items so the interleaving shows in the final state
    witness = [("T1", 0), ("T2", 0), ("T1", 1), ("T2", 1), ("T2", 2), ("T2", 3), ("T1", 2), ("T1", 3)]
    return Trial("P0", progs, witness, detect, setup, ("T1", 1), cb_key=f"{f}|{g}")


def p1(rng: random.Random) -> Trial:
    """Dirty read: a revision that aborts; a belief read that caches what it saw."""
    s, p, objs = draw_slot(rng, "P1")
    f = f"f-{rng.randrange(10**9)}"
    c0, bad = round(rng.uniform(0.1, 0.4), 6), round(rng.uniform(0.6, 0.9), 6)

    def setup(conn):
        insert_fact(conn, f, s, p, objs[0], c0)

    progs = {"T1": [(B, B), ("w1[f]", lambda conn, ctx: set_conf(conn, f, bad)), ("a1", A)],
             "T2": [(B, B), ("r2[f]", reading_step("conf", lambda conn: _conf(conn, f))),
                    ("w2[cache]", lambda conn, ctx: write_cache(conn, s, p, objs[0], ctx["conf"][-1])), (C, C)]}

    def detect(result, conn):
        reads = result.contexts["T2"].get("conf", [])
        return _committed(result, "T2") and any(memory.dirty_read(v, [bad]) for v in reads)

    # w1[xa] r2[xa] a1 c2
    witness = [("T1", 0), ("T2", 0), ("T1", 1), ("T2", 1), ("T1", 2), ("T2", 2), ("T2", 3)]
    return Trial("P1", progs, witness, detect, setup, ("T1", 1), cb_key=f)


def p2(rng: random.Random) -> Trial:
    """Fuzzy read: a belief read reads f before and after a committed confidence revision."""
    s, p, objs = draw_slot(rng, "P2")
    f = f"f-{rng.randrange(10**9)}"
    c0, c1 = round(rng.uniform(0.1, 0.4), 6), round(rng.uniform(0.6, 0.9), 6)

    def setup(conn):
        insert_fact(conn, f, s, p, objs[0], c0)

    read_f = reading_step("conf", lambda conn: _conf(conn, f))
    progs = {"T1": [(B, B), ("r1[f]", read_f), ("r1[f]'", read_f),
                    ("w1[cache]", lambda conn, ctx: write_cache(conn, s, p, objs[0], ctx["conf"][-1])), (C, C)],
             "T2": [(B, B), ("w2[f]", lambda conn, ctx: set_conf(conn, f, c1)), (C, C)]}

    def detect(result, conn):
        return _committed(result, "T1") and memory.fuzzy_read(result.contexts["T1"].get("conf", []))

    # r1[xa] w2[xb] c2 r1[xb] c1
    witness = [("T1", 0), ("T2", 0), ("T1", 1), ("T2", 1), ("T2", 2), ("T1", 2), ("T1", 3), ("T1", 4)]
    return Trial("P2", progs, witness, detect, setup, ("T1", 1), cb_key=f)


def _policy_setup(rng):
    s, p, objs = draw_slot(rng, "P3")
    f, g = f"f-{rng.randrange(10**9)}", f"g-{rng.randrange(10**9)}"
    key = "|".join(sorted((f, g)))

    def setup(conn):
        insert_fact(conn, f, s, p, objs[0], 0.5, "rule")
        insert_fact(conn, g, s, p, objs[1], 0.5, "rule")

    def read_active(conn):
        return [tuple(r) for r in conn.execute(
            "select policy_id, chosen_index from policy where set_key = %s and active order by policy_id",
            (key,)).fetchall()]

    return key, setup, read_active


def p3(rng: random.Random) -> Trial:
    """Phantom, predicate-write form: two agents find no active ⊕c policy for a pair and each adds one."""
    key, setup, read_active = _policy_setup(rng)
    v1, v2 = rng.randrange(2), rng.randrange(2)

    def add_if_none(name, vote):
        def step(conn, ctx):
            if not ctx["seen"][-1]:
                conn.execute("insert into policy (policy_id, set_key, chosen_index, source) values (%s, %s, %s, %s)",
                             (f"policy::{key}::{name}", key, vote, name))
        return step

    progs = {"T1": [(B, B), ("r1[policy where active]", reading_step("seen", read_active)),
                    ("w1[insert active]", add_if_none("T1", v1)), (C, C)],
             "T2": [(B, B), ("r2[policy where active]", reading_step("seen", read_active)),
                    ("w2[insert active]", add_if_none("T2", v2)), (C, C)]}

    def detect(result, conn):
        rows = conn.execute("select set_key, active from policy where set_key = %s", (key,)).fetchall()
        return _committed(result, "T1", "T2") and memory.duplicate_active(rows)

    # r1[P] w2[insert active] c2 w1[insert active] c1 (T2 reads P too, before inserting)
    witness = [("T1", 0), ("T2", 0), ("T1", 1), ("T2", 1), ("T2", 2), ("T2", 3), ("T1", 2), ("T1", 3)]
    return Trial("P3", progs, witness, detect, setup, ("T1", 1), cb_key=key)


def p3_reread(rng: random.Random) -> Trial:
    """Phantom, re-read form: an agent reads the active policies twice around a committed insert."""
    key, setup, read_active = _policy_setup(rng)
    read = reading_step("seen", read_active)
    progs = {"T1": [(B, B), ("r1[policy where active]", read), ("r1[same predicate]", read),
                    ("w1[cache]", lambda conn, ctx: conn.execute(
                        "insert into callback_log (request_hash, read_set_hash, chosen_index, status) values"
                        " (%s, %s, %s, 'pending') on conflict do nothing", (f"seen::{key}", key, len(ctx["seen"][-1])))),
                    (C, C)],
             "T2": [(B, B), ("w2[insert active]", lambda conn, ctx: conn.execute(
                 "insert into policy (policy_id, set_key, chosen_index, source) values (%s, %s, 1, 'T2')",
                 (f"policy::{key}::T2", key))), (C, C)]}

    def detect(result, conn):
        return _committed(result, "T1") and memory.predicate_changed(result.contexts["T1"].get("seen", []))

    # r1[policy WHERE active] w2[insert active] c2 r1[same predicate] c1
    witness = [("T1", 0), ("T2", 0), ("T1", 1), ("T2", 1), ("T2", 2), ("T1", 2), ("T1", 3), ("T1", 4)]
    return Trial("P3-reread", progs, witness, detect, setup, ("T1", 1), cb_key=key)


def p4(rng: random.Random) -> Trial:
    """Lost update: two confidence revisions read f and write back read + delta."""
    s, p, objs = draw_slot(rng, "P4")
    f = f"f-{rng.randrange(10**9)}"
    c0 = round(rng.uniform(0.2, 0.5), 6)
    d = {"T1": round(rng.uniform(0.01, 0.2), 6), "T2": round(rng.uniform(0.01, 0.2), 6)}

    def setup(conn):
        insert_fact(conn, f, s, p, objs[0], c0)

    def program(name, i):
        return [(B, B), (f"r{i}[f]", reading_step("conf", lambda conn: _conf(conn, f))),
                (f"w{i}[f]", lambda conn, ctx: set_conf(conn, f, ctx["conf"][-1] + d[name])), (C, C)]

    progs = {"T1": program("T1", 1), "T2": program("T2", 2)}

    def detect(result, conn):
        deltas = [d[t] for t in ("T1", "T2") if _committed(result, t)]
        return len(deltas) == 2 and memory.lost_increment(c0, deltas, _conf(conn, f), tol=1e-6)

    # r1[x0] w2[x1] w1[x2] c2 c1 (T2 reads before it writes, as an agent does)
    witness = [("T1", 0), ("T2", 0), ("T1", 1), ("T2", 1), ("T2", 2), ("T1", 2), ("T2", 3), ("T1", 3)]
    return Trial("P4", progs, witness, detect, setup, ("T1", 1), cb_key=f)


def a5a(rng: random.Random) -> Trial:
    """Read skew: a belief query reads f and g while a revision moves evidence from f to g."""
    s, p, objs = draw_slot(rng, "A5A")
    f, g = f"f-{rng.randrange(10**9)}", f"g-{rng.randrange(10**9)}"
    a = round(rng.uniform(0.3, 0.7), 6)
    delta = round(rng.uniform(0.05, 0.25), 6)

    def setup(conn):
        insert_fact(conn, f, s, p, objs[0], a)
        insert_fact(conn, g, s, p, objs[1], round(1 - a, 6))

    total = a + round(1 - a, 6)

    def transfer_f(conn, ctx):
        ctx["f"], ctx["g"] = _conf(conn, f), _conf(conn, g)
        set_conf(conn, f, ctx["f"] - delta)

    def transfer_g(conn, ctx):
        set_conf(conn, g, ctx["g"] + delta)

    progs = {"T1": [(B, B), ("r1[f]", reading_step("seen", lambda conn: _conf(conn, f))),
                    ("r1[g]", reading_step("seen", lambda conn: _conf(conn, g))),
                    ("w1[cache]", lambda conn, ctx: write_cache(conn, s, p, objs[0], sum(ctx["seen"]))), (C, C)],
             "T2": [(B, B), ("r2[f,g] w2[f]", transfer_f), ("w2[g]", transfer_g), (C, C)]}

    def detect(result, conn):
        return _committed(result, "T1") and memory.read_skew(result.contexts["T1"].get("seen", []), total, tol=1e-6)

    # r1[xa] w2[xb] w2[yb] c2 r1[post-2] c1
    witness = [("T1", 0), ("T2", 0), ("T1", 1), ("T2", 1), ("T2", 2), ("T2", 3), ("T1", 2), ("T1", 3), ("T1", 4)]
    return Trial("A5A", progs, witness, detect, setup, ("T1", 1), cb_key=f"{f}|{g}")


def a5b(rng: random.Random) -> Trial:
    """Write skew: two cleanup agents each see two current values and retire a different one."""
    s, p, objs = draw_slot(rng, "A5B")
    x, y = f"x-{rng.randrange(10**9)}", f"y-{rng.randrange(10**9)}"

    def setup(conn):
        insert_fact(conn, x, s, p, objs[0], 0.5)
        insert_fact(conn, y, s, p, objs[1], 0.5)

    def retire(victim):
        def step(conn, ctx):
            if len(ctx["seen"][-1]) >= 2:  # clean up only a slot that holds two values
                conn.execute("update agent_memory set system_time_end = clock_timestamp()::timestamp"
                             " where fact_id = %s and system_time_end = %s", (victim, SENTINEL))
        return step

    read_slot = reading_step("seen", lambda conn: current_facts(conn, s, p))
    progs = {"T1": [(B, B), ("r1[slot]", read_slot), ("w1[retire y]", retire(y)), (C, C)],
             "T2": [(B, B), ("r2[slot]", read_slot), ("w2[retire x]", retire(x)), (C, C)]}

    def detect(result, conn):
        return _committed(result, "T1", "T2") and memory.slot_emptied(2, len(current_facts(conn, s, p)))

    # r1[xa] r2[ya] w1[yb] w2[xb] c1 c2
    witness = [("T1", 0), ("T2", 0), ("T1", 1), ("T2", 1), ("T1", 2), ("T2", 2), ("T1", 3), ("T2", 3)]
    return Trial("A5B", progs, witness, detect, setup, ("T1", 1), cb_key=f"{x}|{y}")


def _n1(rng: random.Random, form: str) -> Trial:
    """Judge replay: two agents adjudicate the same pair; the log should make the second replay the first."""
    s, p, objs = draw_slot(rng, "N1")
    f, g = f"f-{rng.randrange(10**9)}", f"g-{rng.randrange(10**9)}"
    key = f"judge::{'|'.join(sorted((f, g)))}::theta-{rng.randrange(10**6)}"
    # The judge is nondeterministic: the trial uses the draw in which its two calls disagree
    # (probability 2p(1-p) for a judge at p); whether the log lets both calls stand is the question.
    first = rng.randrange(2)
    votes = {"T1": first, "T2": 1 - first}

    def setup(conn):
        insert_fact(conn, f, s, p, objs[0], 0.5, "await")
        insert_fact(conn, g, s, p, objs[1], 0.5, "await")

    def logged(conn):
        row = conn.execute("select vote from judge_log where judge_key = %s order by epoch, seq limit 1",
                           (key,)).fetchone()
        return None if row is None else row[0]

    def judge(name):
        def step(conn, ctx):
            seen = logged(conn)  # read the log before calling the judge
            if seen is None:
                vote = votes[name]
                conn.execute("insert into judge_log (judge_key, read_set, theta, vote, session) values (%s, %s, %s, %s, %s)",
                             (key, f"{f}|{g}", "theta", vote, name))
                ctx["vote"] = vote
            else:
                ctx["vote"] = seen
            return [[ctx["vote"]]]
        return step

    def replay(conn, ctx):
        ctx["replay"] = logged(conn)
        return [[ctx["replay"]]]

    read_slot = reading_step("seen", lambda conn: current_facts(conn, s, p))
    progs = {"T1": [(B, B), ("r1[candidates]", read_slot), ("j1(R,θ)", judge("T1")), ("j1(R,θ) replay", replay), (C, C)],
             "T2": [(B, B), ("j2(R,θ) w2[judge_log]", judge("T2")), (C, C)]}

    def detect(result, conn):
        committed_votes = conn.execute("select judge_key, vote from judge_log where judge_key = %s", (key,)).fetchall()
        t1 = result.contexts["T1"]
        replay_differs = _committed(result, "T1") and t1.get("replay") is not None and t1.get("replay") != t1.get("vote")
        return memory.conflicting_votes(committed_votes) or replay_differs

    # j1(R,θ) w2[judge_log(R,θ)] c2 j1(R,θ) c1
    witness = [("T1", 0), ("T2", 0), ("T1", 1), ("T1", 2), ("T2", 1), ("T2", 2), ("T1", 3), ("T1", 4)]
    return Trial("N1" if form == "append" else "N1-unique", progs, witness, detect, setup, ("T1", 1),
                 cb_key=f"{f}|{g}", judge_log_form=form)


def n1(rng: random.Random) -> Trial:
    return _n1(rng, "append")


def n1_unique(rng: random.Random) -> Trial:
    return _n1(rng, "unique")


def n2(rng: random.Random, *, size: int = 2, contention: float = 1.0) -> Trial:
    """Belief-drift skew: a belief query refreshes the cache while a revision demotes the winner.

    The partition holds ``size`` current rows: the cached belief A, a newer better-supported C
    (so the cache is stale and the belief query refreshes it), and weaker others. With
    probability ``contention`` the revision demotes C below A (it conflicts with the refresh);
    otherwise it revises a weaker row, which cannot change the winner.
    """
    s, p, _ = draw_slot(rng, "N2")
    ids = [f"r{i}-{rng.randrange(10**9)}" for i in range(size)]
    objs = [f"{w}#{rng.randrange(1000)}" for w in rng.choices(_WORDS, k=size)]
    objs = [f"{o}/{i}" for i, o in enumerate(objs)]  # distinct objects
    a_conf = round(rng.uniform(0.5, 0.6), 6)
    c_conf = round(rng.uniform(0.65, 0.9), 6)
    others = [round(rng.uniform(0.05, 0.45), 6) for _ in range(size - 2)]
    confs = [a_conf, c_conf, *others]
    conflict = rng.random() < contention
    target = 1 if conflict or size == 2 else rng.randrange(2, size)
    new_conf = round(rng.uniform(0.1, a_conf - 0.05), 6) if target == 1 else round(rng.uniform(0.05, 0.45), 6)
    if not conflict and size == 2:  # no weaker row to revise: revise C upwards, which keeps C the winner
        new_conf = round(min(1.0, c_conf + 0.05), 6)

    def setup(conn):
        for fid, obj, conf in zip(ids, objs, confs):
            insert_fact(conn, fid, s, p, obj, conf)
        write_cache(conn, s, p, objs[0], a_conf)  # stale: C arrived after the cache was computed

    def read_partition(conn):
        return {"rows": current_facts(conn, s, p), "cache": read_cache(conn, s, p)}

    def refresh(conn, ctx):
        rows = ctx["seen"][-1]["rows"]
        write_cache(conn, s, p, memory.evi_winner(rows), max(r[1] for r in rows))

    def revise(conn, ctx):
        seen = ctx["seen"][-1]
        set_conf(conn, ids[target], new_conf)
        after = [(o, new_conf if fid == ids[target] else c, fid) for o, c, fid in seen["rows"]]
        winner = memory.evi_winner(after)
        if winner != seen["cache"]:  # keep the cache right when this revision changes the belief
            write_cache(conn, s, p, winner, max(r[1] for r in after))

    read = reading_step("seen", read_partition)
    progs = {"T1": [(B, B), ("r1[partition]", read), ("w1[belief cache]", refresh), (C, C)],
             "T2": [(B, B), ("r2[partition]", read), ("w2[one row]", revise), (C, C)]}

    def detect(result, conn):
        return _committed(result, "T1", "T2") and memory.belief_drift(read_cache(conn, s, p), current_facts(conn, s, p))

    # both read, both write, both commit (the schedule SI lets through)
    witness = [("T1", 0), ("T2", 0), ("T1", 1), ("T2", 1), ("T1", 2), ("T2", 2), ("T1", 3), ("T2", 3)]
    return Trial("N2", progs, witness, detect, setup, ("T1", 1), cb_key="|".join(sorted(ids)),
                 data={"size": size, "contention": contention, "conflict": conflict})


def n3(rng: random.Random, *, mode: str = "audit_row") -> Trial:
    """Audit erasure: two supersedes through the write path, then a reader (docs/design.md#anomalies-and-guards N3 witness)."""
    s, p, objs = draw_slot(rng, "N3")
    f1, f2 = f"f1-{rng.randrange(10**9)}", f"f2-{rng.randrange(10**9)}"

    def writer(fid, obj, day):
        fact = {"fact_id": fid, "subject": s, "predicate": p, "object": obj,
                "valid_from": T0 + timedelta(days=day)}
        return [("begin", {"op": "begin", "fact": fact, "operator": "lww", "mode": mode}),
                ("read candidates", {"op": "read_candidates"}),
                ("resolve and write", {"op": "write"}),
                ("commit", {"op": "commit"})]

    progs = {"T1": writer(f1, objs[0], 0), "T2": writer(f2, objs[1], 30),
             "T3": [(B, B), ("r3[x]", reading_step("seen", lambda conn: current_facts(conn, s, p))), (C, C)]}

    def setup(conn):
        pass

    def detect(result, conn):
        written = {"T1": f1, "T2": f2}
        committed = [fid for name, fid in written.items() if _committed(result, name)]
        current = {r[2].split("#")[0] for r in current_facts(conn, s, p)}
        losers = [f"x_{fid}" for fid in committed if fid not in current]
        audits = [r[0] for r in conn.execute(
            "select provenance_id from agent_memory where row_kind = 'audit' and subject = %s and predicate = %s",
            (s, p)).fetchall()]
        return bool(memory.audit_erasure(losers, audits, Carrier.MULTILINEAR))

    # w1[xa,pa] c1 w2[xb,pb] c2 r3[x] c3
    witness = [("T1", i) for i in range(4)] + [("T2", i) for i in range(4)] + [("T3", i) for i in range(3)]
    return Trial("N3", progs, witness, detect, setup, ("T2", 1), cb_key=f"{f1}|{f2}", data={"mode": mode})


BUILDERS: dict[str, Callable[..., Trial]] = {
    "P0": p0, "P1": p1, "P2": p2, "P3": p3, "P4": p4, "A5A": a5a, "A5B": a5b, "N1": n1, "N2": n2,
    "P3-reread": p3_reread, "N1-unique": n1_unique, "N3": n3,
}

FORMS = {
    "P3": "predicate-write form (both find no active policy and insert one)",
    "P3-reread": "re-read form (the same predicate read twice around a committed insert)",
    "N1": "append-only judge log (read, call the judge, append)",
    "N1-unique": "unique-keyed judge log (one vote per key: the second insert is a unique violation)",
}
