"""Memory histories from a simulated memory engine, for tests and benchmarks (docs/memory-histories.md).

``clients`` clients each run one transaction at a time: invoke, take effect, complete. A seeded
scheduler picks the next client to step, so transactions overlap, but each takes effect
atomically between its invocation and its completion: the histories are strict serializable, and
``toki check --workload memory`` must find them valid. A transaction is one of

- supersede (a single-valued slot ``u<n>/home``): read the current claims, retract them, add a new one;
- add / retract (a multi-valued slot ``u<n>/tags``): read the current claims, add a new one or
  retract one of them;
- recall: read the current claims of two slots; history: read a slot's audit history;
- decide: read a slot and decide a question over its current claims (always the same choice for
  the same set: a replayable judge).

Slots rotate (a slot that took ``max_adds`` adds is retired for a fresh one) so that audit
histories stay short, as Elle's generator rotates keys. A few transactions fail (no effect) or end
``info`` (effect or not, at random). :func:`plant` adds one anomaly of each kind asked for, on
fresh slots and processes, in the middle of a history.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable

from toki.errors import ConfigError

#: what :func:`plant` can add, and the anomaly the checker must name for each
PLANTS = {"lost-update": "lost-update", "double-supersede": "double-supersede", "duplicate-insert": "duplicate-insert",
          "n2": "N2", "n3": "N3", "n1": "N1", "write-skew": "G2-item"}
HEADER = {"type": "header", "multi_valued": ["*/tags"]}


ENGINES = ("serializable", "snapshot")


def simulate(n_txns: int, *, clients: int = 8, slots: int = 64, max_adds: int = 12, seed: int = 0,
             fail_rate: float = 0.02, info_rate: float = 0.005, engine: str = "serializable") -> list[dict]:
    """A memory history of ``n_txns`` transactions (header first). ``engine``: "serializable"
    (each transaction takes effect atomically: strict serializable), or "snapshot" (a racy
    engine: reads see the state as it was at the invocation, and the writes decided from them
    are applied at the commit without any conflict check, so supersedes race: lost updates,
    double supersedes, duplicate inserts, read skew)."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}", fix="one of " + ", ".join(ENGINES))
    rng = random.Random(seed)
    state: dict[str, dict] = {}
    active: list[str] = []
    fresh = [0]

    def new_slot() -> str:
        n = fresh[0]
        fresh[0] += 1
        name = f"u{n}/tags" if n % 4 == 3 else f"u{n}/home"
        state[name] = {"current": [], "audit": [], "adds": 0, "claims": 0, "multi": name.endswith("/tags")}
        return name

    for _ in range(slots):
        active.append(new_slot())
    ops: list[dict] = [dict(HEADER)]
    busy: dict[int, list] = {}          # client -> [invoke op, plan, completion value or None]
    started = done = 0
    kinds = ("write", "write", "write", "write", "retract", "recall", "recall", "history", "history", "decide")
    while done < n_txns:
        c = rng.randrange(clients)
        b = busy.get(c)
        if b is None:
            if started >= n_txns:
                continue
            started += 1
            kind, s = rng.choice(kinds), rng.choice(active)
            st = state[s]
            st["claims"] += 1  # a write's claim is fixed when it is invoked
            plan = (kind, s, rng.choice(active), f"{s}={st['claims']}")
            inv = {"type": "invoke", "process": c, "f": "txn", "value": _invoke_value(plan)}
            ops.append(inv)
            snap = {x: {"current": list(state[x]["current"]), "audit": list(state[x]["audit"])}
                    for x in {plan[1], plan[2]}} if engine == "snapshot" else None
            busy[c] = [inv, plan, None, snap]
        elif b[2] is None:
            x = rng.random()
            if x < fail_rate:
                b[2] = ("fail", b[0]["value"])
            elif x < fail_rate + info_rate:
                if rng.random() < 0.5:
                    _apply(b[1], state, active, new_slot, max_adds, b[3])
                b[2] = ("info", b[0]["value"])
            else:
                b[2] = ("ok", _apply(b[1], state, active, new_slot, max_adds, b[3]))
        else:
            typ, value = b[2]
            ops.append({"type": typ, "process": c, "f": "txn", "value": value})
            del busy[c]
            done += 1
    for i, op in enumerate(ops[1:]):
        op["index"] = i
        op["time"] = i * 1000
    return ops


def _invoke_value(plan) -> list:
    kind, s, s2, claim = plan
    multi = s.endswith("/tags")
    if kind == "write":  # a supersede retracts what it finds current: not known yet (null)
        return [["current", s, None]] + ([] if multi else [["retract", s, None]]) + [["add", s, claim]]
    if kind == "retract":
        return [["current", s, None]] + ([["retract", s, None]] if multi else [])
    if kind == "recall":
        return [["current", s, None], ["current", s2, None]] if s2 != s else [["current", s, None]]
    if kind == "history":
        return [["history", s, None]]
    return [["current", s, None]]


def _apply(plan, state, active, new_slot, max_adds, snap=None) -> list:
    """Take the transaction's effect; return its completion value. With ``snap``, reads (and the
    writes decided from them) come from the state at the invocation."""
    kind, s, s2, claim = plan
    st = state[s]
    seen = snap or state
    cur = list(seen[s]["current"])
    if kind == "write":
        out = [["current", s, cur]]
        if not st["multi"]:
            for c in cur:
                out.append(["retract", s, c])
                if c in st["current"]:
                    st["current"].remove(c)
        st["adds"] += 1
        st["current"].append(claim)
        st["audit"].append(claim)
        out.append(["add", s, claim])
        if st["adds"] >= max_adds and s in active:
            active[active.index(s)] = new_slot()
        return out
    if kind == "retract":
        out = [["current", s, cur]]
        if cur and st["multi"]:
            c = cur[len(cur) // 2]
            if c in st["current"]:
                st["current"].remove(c)
            out.append(["retract", s, c])
        return out
    if kind == "recall":
        return [["current", s, cur], ["current", s2, list(seen[s2]["current"])]] if s2 != s else [["current", s, cur]]
    if kind == "history":
        return [["history", s, list(seen[s]["audit"])]]
    chosen = min(cur) if cur else None
    return [["current", s, cur], ["decide", f"about {s}", cur, chosen]]


# ------------------------------------------------------------------------- planted anomalies

def planted(kind: str, process: int, tag: str) -> list[dict]:
    """The ops of one anomaly of ``kind`` on slots named after ``tag``, by processes from
    ``process`` (no indices: :func:`plant` numbers them)."""
    a, b = f"planted-{tag}/home", f"planted-{tag}/work"
    p, q = process, process + 1

    def txn(proc, value, typ="ok"):
        inv = [[m[0], m[1], None] if m[0] in ("current", "history") else m for m in value]
        return [{"type": "invoke", "process": proc, "f": "txn", "value": inv},
                {"type": typ, "process": proc, "f": "txn", "value": value}]

    def both(t1, t2):  # two transactions that overlap
        return [t1[0], t2[0], t1[1], t2[1]]

    a0, a1, a2 = f"{a}=0", f"{a}=1", f"{a}=2"
    setup = txn(p, [["current", a, []], ["add", a, a0]])
    if kind in ("lost-update", "double-supersede-race"):
        race = both(txn(p, [["current", a, [a0]], ["retract", a, a0], ["add", a, a1]]),
                    txn(q, [["current", a, [a0]], ["retract", a, a0], ["add", a, a2]]))
        return setup + race
    if kind == "double-supersede":  # an add that forgot to retract, then a read holding both
        return setup + txn(p, [["current", a, [a0]], ["add", a, a1]]) + txn(q, [["current", a, [a0, a1]]])
    if kind == "duplicate-insert":  # a claim added twice, seen twice in the audit history
        return setup + txn(q, [["add", a, a0]]) + txn(p, [["history", a, [a0, a0]]])
    if kind == "n2":  # one writer moves home and work together; a reader sees home before, work after
        b0, b1 = f"{b}=0", f"{b}=1"
        setup = txn(p, [["current", a, []], ["add", a, a0], ["current", b, []], ["add", b, b0]])
        writer = txn(q, [["current", a, [a0]], ["retract", a, a0], ["add", a, a1],
                         ["current", b, [b0]], ["retract", b, b0], ["add", b, b1]])
        reader = [{"type": "invoke", "process": p, "f": "txn", "value": [["current", a, None], ["current", b, None]]}]
        return setup + reader + writer + [{"type": "ok", "process": p, "f": "txn",
                                           "value": [["current", a, [a0]], ["current", b, [b1]]]}]
    if kind == "n3":  # the audit history loses a superseded claim
        return (setup + txn(q, [["current", a, [a0]], ["retract", a, a0], ["add", a, a1]])
                + txn(p, [["history", a, [a0, a1]]]) + txn(q, [["history", a, [a1]]]))
    if kind == "n1":
        return setup + txn(p, [["decide", f"where does {tag} live", [a0, a1], a0]]) \
            + txn(q, [["decide", f"where does {tag} live", [a1, a0], a1]])
    if kind == "write-skew":  # two slots that must not both be empty; each txn empties one
        b0 = f"{b}=0"
        setup = txn(p, [["add", a, a0], ["add", b, b0]])
        return setup + both(txn(p, [["current", a, [a0]], ["current", b, [b0]], ["retract", a, a0]]),
                            txn(q, [["current", a, [a0]], ["current", b, [b0]], ["retract", b, b0]]))
    raise ConfigError(f"cannot plant {kind!r}", fix="one of " + ", ".join(PLANTS))


def plant(ops: list[dict], kinds: Iterable[str]) -> list[dict]:
    """``ops`` with one anomaly of each kind inserted in the middle (fresh slots and processes);
    indices and times renumbered."""
    head = [o for o in ops[:1] if o.get("type") == "header"]
    body = ops[len(head):]
    top = max((o["process"] for o in body if isinstance(o.get("process"), int)), default=0) + 1
    extra: list[dict] = []
    for i, kind in enumerate(kinds):
        extra += planted(kind, top + 2 * i, f"{kind}-{i}")
    mid = len(body) // 2
    out = body[:mid] + extra + body[mid:]
    out = [dict(o) for o in out]
    for i, op in enumerate(out):
        op["index"] = i
        op["time"] = i * 1000
    return head + out


def write_jsonl(ops: list[dict], f) -> None:
    for op in ops:
        f.write(json.dumps(op, separators=(",", ":")))
        f.write("\n")


__all__ = ["PLANTS", "plant", "planted", "simulate", "write_jsonl"]
