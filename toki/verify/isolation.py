"""Isolation levels as axioms over bounded histories, and the anomaly predicates (the anomalies: docs/proofs.md).

Model: Adya's dependency-graph conditions, not an operational engine.
  A. Adya, "Weak Consistency: A Generalized Theory and Optimistic Implementations for
  Distributed Transactions", PhD thesis, MIT, 1999 (ch. 3-4: histories, version orders,
  the direct serialization graph DSG, G0/G1/G2, PL-2, PL-3, and the start-ordered graph SSG
  with G-SIa/G-SIb for PL-SI); A. Adya, B. Liskov, P. O'Neil, "Generalized Isolation Level
  Definitions", ICDE 2000.

A history here is: an initial transaction T0 that installed the first version of every row
(an "unborn" version for rows that a later insert creates), three agent transactions T1, T2,
T3 (the predicates name T1 and T2; T3 is any other transaction, possibly empty) with up to
``slots`` operations each - item read, write, or predicate read of a group of rows
- that commit or abort, and, on the callback axis, one callback-delivery transaction per agent.
Every event has a position in one total order (the schedule). Each read returns one version
(named by the transaction that wrote it). The version order of a row is the order of its
write events (a write installs its version when performed, as a single-version store does;
Adya leaves the version order free, which would let an order contradicting time hide or
invent a lost update, and would make witnesses that no database can execute).
Well-formedness: a read returns a version written before it, a transaction reads its own
write once it made one, a rolled-back version is never read after the rollback, a
transaction writes a row at most once (so every version is final and Adya's G1b cannot
arise within the bound).

Levels (axioms on the history only; they never mention an anomaly predicate):
  RC = PL-2: no G0 (ww cycle), no G1a (committed reads aborted), no G1c (ww/wr cycle).
  SI = PL-SI: PL-2 and no G-SIa (a wr/ww edge Ti->Tj without Ti committing before Tj's first
       event) and no G-SIb (an SSG cycle with exactly one anti-dependency edge).
  SR = PL-3: PL-2 and no G2 (any DSG cycle).
  +cb: additionally every agent transaction that reads and then writes reads its callback
       row after its first read and before its first write, and the callback was delivered
       (its delivery transaction committed) before that read.
Edges are Adya's with "a later version" in place of "the next version"; this adds only edges
that are compositions of direct ww edges, so it changes no cycle and no count of
anti-dependency edges on a cycle, hence none of the conditions.

Each anomaly predicate (``PREDICATES``) is a formula over the same history vocabulary (reads,
writes, the versions reads return, the version order, commit status, positions). A cell
(predicate, level) is *admitted* when z3 finds a history satisfying level and predicate (the
witness, rendered as a schedule file) and *excluded* when the conjunction is unsatisfiable:
no such history exists within the bound.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from toki.verify import solver as S

LEVELS = ("RC", "RC+cb", "SI", "SI+cb", "SR", "SR+cb")
ALL_LEVELS = ("none",) + LEVELS  # "none": well-formed histories, no isolation axiom

KIND_R, KIND_W, KIND_PR = 0, 1, 2


@dataclass(frozen=True)
class Row:
    name: str
    born: bool = True  # exists before the history; False: created by an insert
    group: str | None = None  # name of the predicate-read group it belongs to
    votes: bool = False  # its versions carry a judge vote (0/1)
    fresh: bool = False  # inserted under a fresh key (append-only): at most one transaction writes it
    owner: int | None = None  # callback rows: the agent whose callback it is


@dataclass(frozen=True)
class Bound:
    agents: int = 3
    slots: int = 4

    def describe(self, callbacks: bool) -> str:
        extra = " plus one callback-delivery transaction per agent" if callbacks else ""
        return (f"T0 plus {self.agents} agent transactions with at most {self.slots} operations each"
                f"{extra}, over the rows the predicate names, each row written at most once per transaction")


def _memo(method):
    """Cache a relation per history and arguments (formulas are rebuilt otherwise, which is slow)."""
    def wrapper(self, *args):
        key = (method.__name__, *args)
        try:
            return self._memo[key]
        except KeyError:
            v = self._memo[key] = method(self, *args)
            return v
    wrapper.__name__, wrapper.__doc__ = method.__name__, method.__doc__
    return wrapper


class History:
    """The symbolic history: z3 variables plus the derived relations of Adya's model."""

    def __init__(self, rows: tuple[Row, ...], *, callbacks: bool, bound: Bound = Bound()):
        self.bound = bound
        self.callbacks = callbacks
        self.agents = list(range(1, bound.agents + 1))
        self.rows = list(rows)
        if callbacks:
            self.rows += [Row(f"cb{i}", owner=i) for i in self.agents]
        self.row_index = {r.name: k for k, r in enumerate(self.rows)}
        groups = sorted({r.group for r in self.rows if r.group})
        if len(groups) > 1:
            raise ValueError("one predicate-read group per history")
        self.group = groups[0] if groups else None
        self.group_rows = [r.name for r in self.rows if r.group]
        self.deliverers = {i: bound.agents + i for i in self.agents} if callbacks else {}
        self.nodes = [0] + self.agents + list(self.deliverers.values())
        K = bound.slots
        A = self.agents
        self.act = {(i, j): S.Bool(f"act_{i}_{j}") for i in A for j in range(K)}
        self.kind = {(i, j): S.Int(f"kind_{i}_{j}") for i in A for j in range(K)}
        self.obj = {(i, j): S.Int(f"obj_{i}_{j}") for i in A for j in range(K)}
        self.pos = {(i, j): S.Int(f"pos_{i}_{j}") for i in A for j in range(K)}
        self.src = {(i, j, o.name): S.Int(f"src_{i}_{j}_{o.name}") for i in A for j in range(K)
                    for o in self.rows}
        self.com = {i: S.Bool(f"commit_{i}") for i in A}
        self.end = {i: S.Int(f"end_{i}") for i in A}
        self.wp = {(i, o.name): S.Int(f"wpos_{i}_{o.name}") for i in A for o in self.rows}
        self.vote = {(i, o.name): S.Bool(f"vote_{i}_{o.name}") for i in A for o in self.rows if o.votes}
        self.dpos = {d: S.Int(f"deliver_{d}") for d in self.deliverers.values()}
        self.dend = {d: S.Int(f"deliver_end_{d}") for d in self.deliverers.values()}
        self._memo: dict = {}
        self.constraints: list = []
        self.definitions: list = []  # name == formula, for derived relations
        self._defs: dict = {}
        self._well_formed()

    # -- basic relations --------------------------------------------------------------------
    def row(self, name: str) -> Row:
        return self.rows[self.row_index[name]]

    def committed(self, n: int):
        return self.com[n] if n in self.com else S.TRUE

    @_memo
    def reads(self, i: int, j: int, o: str):
        """Slot j of agent i reads row o (an item read of o, or a predicate read of o's group)."""
        k = self.row_index[o]
        item = S.And(self.kind[i, j] == KIND_R, self.obj[i, j] == k)
        if self.row(o).group:
            return S.And(self.act[i, j], S.Or(item, self.kind[i, j] == KIND_PR))
        return S.And(self.act[i, j], item)

    @_memo
    def pread(self, i: int, j: int):
        return S.And(self.act[i, j], self.kind[i, j] == KIND_PR)

    @_memo
    def writes_at(self, i: int, j: int, o: str):
        return S.And(self.act[i, j], self.kind[i, j] == KIND_W, self.obj[i, j] == self.row_index[o])

    @_memo
    def writes(self, n: int, o: str):
        if n == 0:
            return S.TRUE
        if n in self.com:
            return S.Or(*[self.writes_at(n, j, o) for j in range(self.bound.slots)])
        return S.BoolVal(self.row(o).owner is not None and self.deliverers[self.row(o).owner] == n)

    def write_pos(self, n: int, o: str):
        return self.wp[n, o] if n in self.com else self.dpos[n]

    def start(self, n: int):
        if n == 0:
            return S.IntVal(-2)
        return self.pos[n, 0] if n in self.com else self.dpos[n]

    def end_of(self, n: int):
        if n == 0:
            return S.IntVal(-1)
        return self.end[n] if n in self.com else self.dend[n]

    @_memo
    def later(self, k: int, m: int, o: str):
        """m's committed version of o comes after k's in the version order."""
        if m == 0 or k == m:
            return S.FALSE
        m_has = S.And(self.committed(m), self.writes(m, o))
        if k == 0:
            return m_has
        if k in self.com and m in self.com:
            return S.And(m_has, self.com[k], self.writes(k, o), self.wp[k, o] < self.wp[m, o])
        return S.FALSE  # a callback row has one writer besides T0

    @_memo
    def writable(self, n: int) -> list[str]:
        """Rows node n can write: T0 all, an agent every non-callback row, a delivery its callback row."""
        if n == 0:
            return [o.name for o in self.rows]
        if n in self.com:
            return [o.name for o in self.rows if o.owner is None]
        return [o.name for o in self.rows if o.owner is not None and self.deliverers[o.owner] == n]

    def later_than_src(self, src, m: int, o: str):
        if o not in self.writable(m):
            return S.FALSE
        return S.Or(*[S.And(src == k, self.later(k, m, o)) for k in self.nodes if o in self.writable(k)])

    def slots(self):
        return range(self.bound.slots)

    # -- well-formedness -------------------------------------------------------------------
    def _well_formed(self) -> None:
        c = self.constraints
        K, A = self.bound.slots, self.agents
        nrows = len(self.rows)
        events = []
        for i in A:
            if i <= 2:
                c.append(self.act[i, 0])  # T1 and T2 do something; further agents may stay empty
            c.append(self.pos[i, 0] < self.end[i])  # an empty transaction still starts before it ends
            for j in range(K):
                kinds = [KIND_R, KIND_W] + ([KIND_PR] if self.group else [])
                c.append(S.Or(*[self.kind[i, j] == v for v in kinds]))
                c.append(S.And(self.obj[i, j] >= 0, self.obj[i, j] < nrows))
                c.append(S.Implies(self.kind[i, j] == KIND_PR, self.obj[i, j] == 0))
                c.append(self.pos[i, j] >= 0)
                if j + 1 < K:
                    c.append(S.Implies(self.act[i, j + 1], S.And(self.act[i, j], self.pos[i, j] < self.pos[i, j + 1])))
                c.append(S.Implies(self.act[i, j], self.pos[i, j] < self.end[i]))
                events.append(self.pos[i, j])
                for o in self.rows:
                    if o.owner is not None:
                        # callback rows: written only by their delivery, read only by their agent
                        c.append(S.Not(self.writes_at(i, j, o.name)))
                        if o.owner != i:
                            c.append(S.Not(self.reads(i, j, o.name)))
            events.append(self.end[i])
            for o in self.rows:
                ws = [self.writes_at(i, j, o.name) for j in range(K)]
                for a, b in itertools.combinations(ws, 2):
                    c.append(S.Not(S.And(a, b)))  # at most one write of a row per transaction
                for j in range(K):
                    c.append(S.Implies(ws[j], self.wp[i, o.name] == self.pos[i, j]))
                if o.fresh:
                    for k in A:
                        if k > i:
                            c.append(S.Not(S.And(self.writes(i, o.name), self.writes(k, o.name))))
        for d in self.dpos:
            c.append(S.And(self.dpos[d] >= 0, self.dpos[d] < self.dend[d]))
            events += [self.dpos[d], self.dend[d]]
        c.append(S.Distinct(*events))
        # what reads return
        for i in A:
            for j in range(K):
                for o in self.rows:
                    r, s, p = self.reads(i, j, o.name), self.src[i, j, o.name], self.pos[i, j]
                    options = [s == 0]
                    for k in A:
                        seen = S.And(self.writes(k, o.name), self.wp[k, o.name] < p)
                        if k != i:
                            seen = S.And(seen, S.Or(self.com[k], p < self.end[k]))
                        options.append(S.And(s == k, seen))
                    if o.owner is not None:
                        d = self.deliverers[o.owner]
                        options.append(S.And(s == d, self.dpos[d] < p))
                    c.append(S.Implies(r, S.Or(*options)))
                    c.append(S.Implies(S.And(r, self.writes(i, o.name), self.wp[i, o.name] < p), s == i))
                    c.append(S.Implies(S.Not(r), s == 0))  # canonical value for unused slots
        if self.callbacks:
            c.append(self._callback_axiom())

    def _callback_axiom(self):
        """+cb: a read-then-write transaction reads its (delivered) callback in between."""
        out = []
        K = self.bound.slots
        for i in self.agents:
            cb = f"cb{i}"
            d = self.deliverers[i]
            data_read = {j: S.Or(*[self.reads(i, j, o.name) for o in self.rows if o.owner is None]) for j in range(K)}
            write = {j: S.Or(*[self.writes_at(i, j, o.name) for o in self.rows]) for j in range(K)}
            read_then_write = S.Or(*[S.And(data_read[a], write[b]) for a in range(K) for b in range(a + 1, K)])
            placed = S.Or(*[S.And(self.reads(i, m, cb), self.dend[d] < self.pos[i, m],
                                  S.Or(*[data_read[a] for a in range(m)] or [S.FALSE]),
                                  S.Not(S.Or(*[write[b] for b in range(m)] or [S.FALSE])))
                            for m in range(K)])
            out.append(S.Implies(read_then_write, placed))
        return S.And(*out)

    # -- Adya's graphs ---------------------------------------------------------------------
    def _pairs(self):
        return [(a, b) for a in self.nodes for b in self.nodes if a != b]

    def _define(self, key: tuple, make: Callable[[], object]):
        """A named Boolean for a derived relation (keeps formulas small and shared)."""
        if key not in self._defs:
            v = S.Bool("_".join(map(str, key)))
            self._defs[key] = v
            self.definitions.append(v == make())
        return self._defs[key]

    def wr(self, k: int, m: int):
        def make():
            if m not in self.com:
                return S.FALSE
            hits = [S.And(self.reads(m, j, o), self.src[m, j, o] == k)
                    for j in self.slots() for o in self.writable(k)]
            return S.And(self.committed(k), self.committed(m), S.Or(*hits))
        return self._define(("wr", k, m), make)

    def ww(self, k: int, m: int):
        both = [o for o in self.writable(k) if o in self.writable(m)]
        return self._define(("ww", k, m), lambda: S.And(self.committed(k), S.Or(
            *[S.And(self.writes(k, o), self.later(k, m, o)) for o in both])))

    def rw(self, k: int, m: int):
        def make():
            if k not in self.com or m == 0:
                return S.FALSE
            hits = [S.And(self.reads(k, j, o), self.later_than_src(self.src[k, j, o], m, o))
                    for j in self.slots() for o in self.writable(m)]
            return S.And(self.committed(k), self.committed(m), S.Or(*hits))
        return self._define(("rw", k, m), make)

    def sd(self, k: int, m: int):
        return self._define(("sd", k, m), lambda: S.And(self.committed(k), self.committed(m),
                                                        self.end_of(k) < self.start(m)))

    def _closure(self, name: str, edge: Callable[[int, int], object]) -> dict:
        reach = {(a, b): (edge(a, b) if a != b else S.FALSE) for a in self.nodes for b in self.nodes}
        for k in self.nodes:
            reach = {(a, b): self._define((name, "via", k, a, b),
                                          lambda a=a, b=b: S.Or(reach[a, b], S.And(reach[a, k], reach[k, b])))
                     for a in self.nodes for b in self.nodes}
        return reach

    def _cyclic(self, name: str, edge) -> object:
        reach = self._closure(name, edge)
        return S.Or(*[reach[n, n] for n in self.nodes])

    def g0(self):
        return self._cyclic("ww", self.ww)

    def g1a(self):
        return S.Or(*[S.And(self.com[i], self.reads(i, j, o.name), self.src[i, j, o.name] == k, S.Not(self.com[k]))
                      for i in self.agents for k in self.agents if k != i
                      for j in self.slots() for o in self.rows])

    def g1c(self):
        return self._cyclic("wwwr", lambda a, b: S.Or(self.ww(a, b), self.wr(a, b)))

    def g2(self):
        return self._cyclic("dsg", lambda a, b: S.Or(self.ww(a, b), self.wr(a, b), self.rw(a, b)))

    def g_si_a(self):
        return S.Or(*[S.And(S.Or(self.wr(a, b), self.ww(a, b)), S.Not(self.sd(a, b))) for a, b in self._pairs()])

    def g_si_b(self):
        reach = self._closure("ssg", lambda a, b: S.Or(self.ww(a, b), self.wr(a, b), self.sd(a, b)))
        return S.Or(*[S.And(self.rw(a, b), reach[b, a]) for a, b in self._pairs()])

    def level(self, name: str):
        """The axioms of a level (a name from ALL_LEVELS; the +cb part is built in)."""
        base = name.replace("+cb", "")
        if base == "none":
            return S.TRUE
        pl2 = S.And(S.Not(self.g0()), S.Not(self.g1a()), S.Not(self.g1c()))
        if base == "RC":
            return pl2
        if base == "SI":
            return S.And(pl2, S.Not(self.g_si_a()), S.Not(self.g_si_b()))
        if base == "SR":
            return S.And(pl2, S.Not(self.g2()))
        raise ValueError(f"unknown level {name!r}")

    # -- vocabulary for predicates -----------------------------------------------------------
    def sees(self, i: int, o: str, k: int):
        """Some read of o by agent i returned k's version."""
        return S.Or(*[S.And(self.reads(i, j, o), self.src[i, j, o] == k) for j in self.slots()])

    def misses(self, i: int, o: str, m: int, *, predicate_read: bool = False, before_write: str | None = None):
        """Some read of o by agent i returned a version older than committed m's version
        (a predicate read when asked; before i's own write of ``before_write`` when named)."""
        out = []
        for j in self.slots():
            r = self.pread(i, j) if predicate_read else self.reads(i, j, o)
            hit = S.And(r, self.src[i, j, o] != i, self.later_than_src(self.src[i, j, o], m, o))
            if before_write is not None:
                hit = S.And(hit, self.writes(i, before_write), self.pos[i, j] < self.wp[i, before_write])
            out.append(hit)
        return S.Or(*out)

    def both_commit(self):
        return S.And(self.com[1], self.com[2])

    def size(self):
        return S.Sum(*[S.If(a, 1, 0) for a in self.act.values()])

    def cost(self):
        """What witness minimisation minimises: operations, and heavily reads of versions whose
        writer has not yet ended (legal in Adya's PL-2 and PL-3, but PostgreSQL never serves
        them, so a witness without them is one PostgreSQL can replay), and lightly reads of a
        version older than one committed before the read (PostgreSQL's read committed reads the
        latest committed version)."""
        dirty = [S.If(S.And(self.reads(i, j, o.name), self.src[i, j, o.name] == k, self.pos[i, j] < self.end[k]), 8, 0)
                 for i in self.agents for k in self.agents if k != i for j in self.slots() for o in self.rows]
        stale = [S.If(S.And(self.reads(i, j, o.name), self.later_than_src(self.src[i, j, o.name], m, o.name),
                            self.end[m] < self.pos[i, j]), 2, 0)
                 for i in self.agents for m in self.agents if m != i for j in self.slots() for o in self.rows]
        return self.size() + S.Sum(*dirty) + S.Sum(*stale)


# -- the anomaly predicates (history-only) ----------------------------------------------------

ITEMS = (Row("x"), Row("y"))
ONE_ITEM = (Row("x"),)
POLICY = (Row("p1", born=False, group="policy_active", fresh=True),
          Row("p2", born=False, group="policy_active", fresh=True))
JUDGE_LOG = (Row("l1", born=False, group="judge_log_K", votes=True, fresh=True),
             Row("l2", born=False, group="judge_log_K", votes=True, fresh=True))
JUDGE_ROW = (Row("lK", born=False, votes=True),)
PARTITION = (Row("a", group="partition"), Row("B", group="partition"))


def _p0(h: History):
    return S.And(h.both_commit(), *[h.writes(i, o) for i in (1, 2) for o in ("x", "y")],
                 h.wp[1, "x"] < h.wp[2, "x"], h.wp[2, "y"] < h.wp[1, "y"])


def _p0_berenson(h: History):
    return S.And(h.both_commit(), h.writes(1, "x"), h.writes(2, "x"),
                 h.wp[1, "x"] < h.wp[2, "x"], h.wp[2, "x"] < h.end[1])


def _p1(h: History):
    return S.And(h.com[2], S.Not(h.com[1]), h.sees(2, "x", 1))


def _p1_berenson(h: History):
    return S.And(h.both_commit(), S.Or(*[S.And(h.reads(2, j, "x"), h.src[2, j, "x"] == 1, h.pos[2, j] < h.end[1])
                                         for j in h.slots()]))


def _p2(h: History):
    pairs = [S.And(h.reads(1, a, "x"), h.reads(1, b, "x"), h.src[1, a, "x"] != 2, h.src[1, b, "x"] == 2)
             for a in h.slots() for b in h.slots() if a < b]
    return S.And(h.both_commit(), S.Or(*pairs))


def _p3(h: History):
    """Predicate-write phantom: each inserts a row matching P that the other's P-read missed."""
    cases = [S.And(h.misses(1, q2, 2, predicate_read=True, before_write=q1),
                   h.misses(2, q1, 1, predicate_read=True, before_write=q2))
             for q1, q2 in (("p1", "p2"), ("p2", "p1"))]
    return S.And(h.both_commit(), S.Or(*cases))


def _p3_reread(h: History):
    """Re-read phantom: a second read of P returns a row another transaction inserted."""
    cases = [S.And(h.pread(1, a), h.pread(1, b), h.src[1, a, q] != 2, h.src[1, b, q] == 2)
             for a in h.slots() for b in h.slots() if a < b for q in ("p1", "p2")]
    return S.And(h.both_commit(), S.Or(*cases))


def _p4(h: History):
    lost = [S.And(h.reads(1, j, "x"), h.src[1, j, "x"] != 1, h.later_than_src(h.src[1, j, "x"], 2, "x"),
                  h.wp[1, "x"] > h.pos[1, j]) for j in h.slots()]
    return S.And(h.both_commit(), h.writes(1, "x"), h.writes(2, "x"), h.wp[2, "x"] < h.wp[1, "x"], S.Or(*lost))


def _a5a(h: History):
    return S.And(h.both_commit(), h.writes(2, "x"), h.writes(2, "y"), h.misses(1, "x", 2), h.sees(1, "y", 2))


def _a5b(h: History):
    return S.And(h.both_commit(), h.misses(1, "x", 2, before_write="y"), h.misses(2, "y", 1, before_write="x"),
                 S.Not(h.writes(1, "x")), S.Not(h.writes(2, "y")))


def _adjudications(h: History, rows: tuple[str, ...]):
    """Each judge-log read of an agent and the vote it acts on (None when it is no adjudication).

    A read that sees a logged vote acts on it (the first row in key order that is born); a
    read that sees none is an adjudication only if its transaction then logs a vote, and acts
    on that vote."""
    out = []
    for i in h.agents:
        mine = None
        for o in reversed(rows):
            mine = h.vote[i, o] if mine is None else S.If(h.writes(i, o), h.vote[i, o], mine)
        for j in h.slots():
            read = h.pread(i, j) if len(rows) > 1 else h.reads(i, j, rows[0])
            decision = mine
            seen = S.FALSE
            for o in reversed(rows):
                s = h.src[i, j, o]
                v = S.FALSE
                for k in h.agents:
                    v = S.If(s == k, h.vote[k, o], v)
                decision = S.If(s != 0, v, decision)
                seen = S.Or(seen, s != 0)
            logs_after = S.Or(*[S.And(h.writes(i, o), h.wp[i, o] > h.pos[i, j]) for o in rows])
            valid = S.And(h.com[i], read, S.Or(seen, logs_after))
            out.append((valid, decision))
    return out


def _log_protocol(h: History, rows: tuple[str, ...]):
    """Insert-if-absent: a transaction logs a vote only after a read of the log that saw none."""
    out = []
    for i in h.agents:
        for o in rows:
            empty_reads = []
            for j in h.slots():
                read = h.pread(i, j) if len(rows) > 1 else h.reads(i, j, rows[0])
                empty_reads.append(S.And(read, h.pos[i, j] < h.wp[i, o], *[h.src[i, j, q] == 0 for q in rows]))
            out.append(S.Implies(h.writes(i, o), S.Or(*empty_reads)))
        for a, b in itertools.combinations(rows, 2):
            out.append(S.Not(S.And(h.writes(i, a), h.writes(i, b))))  # one vote per transaction
    return S.And(*out)


def _n1(h: History, rows=("l1", "l2")):
    adj = _adjudications(h, rows)
    differ = S.Or(*[S.And(va, vb, da != db) for (va, da), (vb, db) in itertools.combinations(adj, 2)])
    return S.And(_log_protocol(h, rows), differ)


def _n1_unique(h: History):
    return _n1(h, ("lK",))


def _n2(h: History):
    return S.And(h.both_commit(),
                 h.misses(1, "a", 2, predicate_read=True, before_write="B"), S.Not(h.writes(1, "a")),
                 h.misses(2, "B", 1, predicate_read=True, before_write="a"), S.Not(h.writes(2, "B")))


@dataclass(frozen=True)
class Predicate:
    name: str
    rows: tuple[Row, ...]
    formula: Callable[[History], object] = field(repr=False)
    meaning: str
    variant_of: str | None = None  # an informational form of a matrix row


PREDICATES: tuple[Predicate, ...] = (
    Predicate("P0", ITEMS, _p0, "dirty write (G0 form): T1 and T2 both write x and y, and the committed "
              "versions interleave: x1 << x2 but y2 << y1"),
    Predicate("P1", ONE_ITEM, _p1, "dirty read (G1a form): committed T2 read a version written by T1, which aborted"),
    Predicate("P2", ONE_ITEM, _p2, "fuzzy read: committed T1 reads x twice; the second read returns committed "
              "T2's version, the first did not"),
    Predicate("P3", POLICY, _p3, "phantom (predicate-write form): T1 and T2 each read P, then insert a row "
              "matching P that the other's read missed; both commit"),
    Predicate("P4", ONE_ITEM, _p4, "lost update: T1 reads x older than T2's version, then writes x, and "
              "T1's version is installed after T2's"),
    Predicate("A5A", ITEMS, _a5a, "read skew: T2 writes x and y; T1 reads x older than T2's and y equal to T2's"),
    Predicate("A5B", ITEMS, _a5b, "write skew: T1 reads x older than T2's write of x, then writes y (not x); "
              "T2 reads y older than T1's write of y, then writes x (not y)"),
    Predicate("N1", JUDGE_LOG, _n1, "judge-replay inconsistency: two adjudications of one key K in committed "
              "transactions act on different votes (read-then-append log: a vote is appended under a fresh "
              "row after a read of K's rows saw none)"),
    Predicate("N2", PARTITION, _n2, "belief-drift skew: T1 predicate-reads the partition, then writes only the "
              "belief row B; T2 predicate-reads it, then writes only the fact row a; each read missed the other's "
              "write"),
    Predicate("P0-berenson", ONE_ITEM, _p0_berenson, "dirty write, Berenson form w1[x] w2[x] ... c1: T2 writes "
              "x after T1 did and before T1 ends; both commit", variant_of="P0"),
    Predicate("P1-berenson", ONE_ITEM, _p1_berenson, "dirty read, Berenson form: T2 reads T1's version of x "
              "before T1 ends; both commit", variant_of="P1"),
    Predicate("P3-reread", POLICY, _p3_reread, "phantom, re-read form: a later predicate read of P by T1 "
              "returns a row inserted by committed T2 that an earlier read of P did not", variant_of="P3"),
    Predicate("N1-unique", JUDGE_ROW, _n1_unique, "N1 with a unique-keyed log: the vote of key K is one row "
              "lK, written only after a read saw it absent; two adjudications act on different votes",
              variant_of="N1"),
)
MATRIX_PREDICATES = tuple(p.name for p in PREDICATES if p.variant_of is None)


def predicate(name: str) -> Predicate:
    for p in PREDICATES:
        if p.name == name:
            return p
    raise KeyError(name)


# -- cells ------------------------------------------------------------------------------------

@dataclass
class Cell:
    predicate: str
    level: str
    status: str  # admitted | excluded | unknown
    seconds: float
    bound: str
    history: "WitnessHistory | None" = None
    reason: str | None = None


@dataclass
class Event:
    pos: int
    session: str
    kind: str  # read | pread | write | commit | abort | deliver
    row: str | None = None
    version: str | None = None  # for reads: whose version (T0, T1, ...)
    value: int | None = None  # for writes


@dataclass
class WitnessHistory:
    predicate: str
    level: str
    rows: tuple[Row, ...]
    group: str | None
    events: list[Event]

    def notation(self) -> str:
        """Adya-style text: r1[x:T0] w2[x] c2 w1[x] c1 (a read names the version it returned)."""
        out = []
        for e in self.events:
            n = e.session[1:] if e.session.startswith("T") else e.session
            if e.kind == "read":
                out.append(f"r{n}[{e.row}:{e.version}]")
            elif e.kind == "pread":
                out.append(f"r{n}[{self.group}:{e.version}]")
            elif e.kind == "write":
                out.append(f"w{n}[{e.row}={e.value}]")
            elif e.kind == "commit":
                out.append(f"c{n}")
            elif e.kind == "abort":
                out.append(f"a{n}")
        return " ".join(out)


def _extract(h: History, m: S.Model, pred: Predicate, level: str) -> WitnessHistory:
    events: list[Event] = []
    names = {0: "T0", **{i: f"T{i}" for i in h.agents}, **{d: f"D{i}" for i, d in h.deliverers.items()}}
    for i in h.agents:
        for j in h.slots():
            if not m(h.act[i, j]):
                continue
            p, kind = m(h.pos[i, j]), m(h.kind[i, j])
            if kind == KIND_PR:
                seen = ",".join(f"{o}:{names[m(h.src[i, j, o])]}" for o in h.group_rows)
                events.append(Event(p, f"T{i}", "pread", version=seen))
            else:
                o = h.rows[m(h.obj[i, j])].name
                if kind == KIND_R:
                    events.append(Event(p, f"T{i}", "read", o, version=names[m(h.src[i, j, o])]))
                else:
                    val = int(m(h.vote[i, o])) if h.row(o).votes else 10 * i + j + 1
                    events.append(Event(p, f"T{i}", "write", o, value=val))
        if any(m(h.act[i, j]) for j in h.slots()):  # an empty transaction leaves no trace
            events.append(Event(m(h.end[i]), f"T{i}", "commit" if m(h.com[i]) else "abort"))
    for i, d in h.deliverers.items():
        if not any(m(h.act[i, j]) for j in h.slots()):
            continue
        events.append(Event(m(h.dpos[d]), f"D{i}", "write", f"cb{i}", value=1))
        events.append(Event(m(h.dend[d]), f"D{i}", "commit"))
    events.sort(key=lambda e: e.pos)
    return WitnessHistory(pred.name, level, tuple(h.rows), h.group, events)


def derive_cell(pred: Predicate | str, level: str, *, timeout_s: float = 30.0, bound: Bound = Bound(),
                minimise: bool = True) -> Cell:
    """Search for a history at ``level`` exhibiting ``pred``."""
    if isinstance(pred, str):
        pred = predicate(pred)
    if level not in ALL_LEVELS:
        raise ValueError(f"unknown level {level!r}")
    cb = level.endswith("+cb")
    h = History(pred.rows, callbacks=cb, bound=bound)
    goal = [h.level(level), pred.formula(h)]
    ans = S.search([*h.constraints, *h.definitions, *goal], timeout_s=timeout_s,
                   minimise=h.cost() if minimise else None, max_rounds=8)
    desc = bound.describe(cb)
    if ans.verdict is S.Found.FOUND:
        return Cell(pred.name, level, "admitted", ans.seconds, desc, _extract(h, ans.model, pred, level))
    if ans.verdict is S.Found.NONE:
        return Cell(pred.name, level, "excluded", ans.seconds, desc)
    return Cell(pred.name, level, "unknown", ans.seconds, desc, reason=ans.reason)


def level_inclusion(stronger: str, weaker: str, rows: tuple[Row, ...] = ITEMS + PARTITION[:0], *,
                    timeout_s: float = 30.0, bound: Bound = Bound()) -> S.Answer:
    """Is every bounded history allowed at ``stronger`` also allowed at ``weaker``?"""
    h = History(rows, callbacks=False, bound=bound)
    weak, strong = h.level(weaker), h.level(stronger)
    return S.prove(weak, assumptions=[*h.constraints, *h.definitions, strong], timeout_s=timeout_s)


def level_satisfiable(level: str, *, timeout_s: float = 30.0, bound: Bound = Bound()) -> S.Answer:
    """Non-vacuity: some history at ``level`` has both agents commit after reading and writing."""
    h = History(ITEMS, callbacks=level.endswith("+cb"), bound=bound)
    busy = [S.Or(*[h.reads(i, j, o) for j in h.slots() for o in ("x", "y")]) for i in h.agents]
    busy += [S.Or(*[h.writes(i, o) for o in ("x", "y")]) for i in h.agents]
    goal = h.level(level)
    return S.search([*h.constraints, *h.definitions, goal, h.both_commit(), *busy], timeout_s=timeout_s)
