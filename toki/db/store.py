"""The bitemporal store and the write path (docs/design.md#the-write-path), as explicit phases.

A :class:`WriteTxn` is one write-path transaction on one connection, split into the phases an
agent goes through: ``begin``, ``read_candidates``, ``judge`` (keyed log, then judge),
``read_callback``, ``write`` (resolve, close, insert, audit) and ``commit``. :meth:`Store.write`
runs them straight through; the scheduler (:mod:`toki.sched`) runs them step by step,
interleaved with other sessions, which is how an agent's read, LLM and write windows become
schedules. Any failure rolls the transaction back: the store is left as it was.

Schema modes (same physical table):

* ``audit_row`` (default): bitemporal close-and-insert plus one audit row per resolution;
* ``dual_row``: bitemporal close-and-insert, no audit row (a losing newcomer leaves no trace);
* ``base``: the winner overwrites the incumbent in place; no history, no audit (what most
  memory engines do; N3 is admitted by construction).
"""

from __future__ import annotations

import contextlib
import enum
import threading
from types import SimpleNamespace
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone

import psycopg

from toki.db import judge_log
from toki.db import schema as dbschema
from toki.db.schema import SENTINEL_SQL
from toki.db.server import Server, drop_schema, resolve
from toki.errors import (
    AmbiguousIncumbents,
    ConcurrentClose,
    ConfigError,
    DatabaseError,
    InputError,
)
from toki.judges.base import Judge, SimulatedJudge, Vote, judge_key
from toki.levels import PRECONDITION, Isolation, Level, parse_level
from toki.model import SENTINEL, Fact, contradicts, duplicates, naive_utc
from toki.operators import (
    BINARY,
    OPERATORS,
    Resolution,
    audit_id,
    canonical,
    encode_witness,
    evi_key,
    lww_key,
    provenance_of,
    set_key,
)
from toki.provenance import Carrier, plus_all


REVISIONS = ("change", "correction")


class SchemaMode(enum.Enum):
    AUDIT_ROW = "audit_row"
    DUAL_ROW = "dual_row"
    BASE = "base"

    @classmethod
    def parse(cls, value: "SchemaMode | str") -> "SchemaMode":
        if isinstance(value, SchemaMode):
            return value
        try:
            return cls(str(value).replace("-", "_"))
        except ValueError:
            raise ConfigError(f"unknown schema mode {value!r}", fix="use audit_row, dual_row or base") from None


COLUMNS = ("fact_id", "subject", "predicate", "object", "valid_from", "valid_to", "system_time_start",
           "system_time_end", "provenance_id", "confidence", "resolution_strategy_id", "row_kind")
_SELECT = "select " + ", ".join(COLUMNS) + " from agent_memory"
# The open current rows of a slot overlapping [valid_from, valid_to). The sentinel is a literal,
# not a parameter, so that the planner can prove the partial index agent_memory_open_slot
# applies even to a generic (prepared) plan.
_CANDIDATES = (_SELECT + " where subject = %s and predicate = %s and row_kind = 'current'"
               " and system_time_end = " + SENTINEL_SQL + " and valid_from < %s and %s < valid_to"
               " order by fact_id")
_INSERT = ("insert into agent_memory (" + ", ".join(COLUMNS) + ") values ("
           + ", ".join(["%s"] * len(COLUMNS)) + ")")


@dataclass(frozen=True, slots=True)
class Row:
    """One row of agent_memory, all 12 columns."""

    fact_id: str
    subject: str
    predicate: str
    object: str
    valid_from: datetime
    valid_to: datetime
    system_time_start: datetime
    system_time_end: datetime
    provenance_id: str
    confidence: float
    resolution_strategy_id: str
    row_kind: str

    def to_fact(self) -> Fact:
        return Fact(self.fact_id, self.subject, self.predicate, self.object, self.valid_from,
                    self.valid_to, self.confidence, self.provenance_id, self.system_time_start,
                    self.system_time_end)

    def values(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self))

    @classmethod
    def of(cls, fact: Fact, strategy: str, row_kind: str = "current") -> "Row":
        return cls(fact.fact_id, fact.subject, fact.predicate, fact.object, fact.valid_from,
                   fact.valid_to, fact.system_time_start, fact.system_time_end, fact.provenance,
                   fact.confidence, strategy, row_kind)


@dataclass
class WriteOutcome:
    # inserted | duplicate | superseded | rejected; "unknown" when the COMMIT was sent and its
    # acknowledgement never came (the connection died): it may or may not have committed, so it
    # is never reported as failed (Jepsen's :info); "already-applied" when a retry
    # (``retry=True``) finds the fact's trace in the store and writes nothing.
    action: str
    fact_id: str  # the newcomer's id
    winner_id: str | None = None
    loser_id: str | None = None
    audit_id: str | None = None
    vote: int | None = None
    vote_source: str | None = None  # log | judge | policy | callback
    rereads: int = 0
    at: datetime | None = None
    intended: str | None = None  # for "unknown": what the write would have done had it committed

    @property
    def indeterminate(self) -> bool:
        return self.action == "unknown"


class Clock:
    """Strictly increasing naive-UTC timestamps, shared by every write path of a process."""

    def __init__(self) -> None:
        self._last = datetime.min
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            t = datetime.now(timezone.utc).replace(tzinfo=None)
            if t <= self._last:
                t = self._last + timedelta(microseconds=1)
            self._last = t
            return t


CLOCK = Clock()
MAX_REREADS = 3


def _connection_lost(e: BaseException) -> bool:
    """The session is gone (terminated, server restarted, socket closed): SQLSTATE class 08 or
    57P, or a libpq error with no SQLSTATE at all."""
    from toki.backends.base import ErrorKind
    from toki.backends.postgres import classify

    return classify(e).kind is ErrorKind.CONNECTION


def _db_error(e: psycopg.Error, during: str) -> DatabaseError:
    state = getattr(e, "sqlstate", None)
    hint = {
        "40001": "serialization failure: retry the write",
        "40P01": "deadlock: retry the write",
        "23505": "another session logged the same key first: retry to read its vote",
        "25P02": "the transaction had already failed; roll back first",
    }.get(state or "", "see the server log")
    if _connection_lost(e):
        hint = ("the connection was lost before COMMIT was sent, so the server rolled the write back: "
                "reconnect and retry it")
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return DatabaseError(f"{during} failed with SQLSTATE {state}: {msg}", sqlstate=state, fix=hint)


class WriteTxn:
    """One write path on one connection, as phases. Use :meth:`Store.begin_write` to make one."""

    PHASES = ("begin", "read_candidates", "judge", "read_callback", "write", "commit")

    def __init__(self, store: "Store", conn: psycopg.Connection, fact: Fact, *, operator: str,
                 level: Level, mode: SchemaMode, judge: Judge | None, guard: bool, at: datetime | None,
                 canonicalize: bool = True, session: str | None = None, slot_lock: bool = False,
                 revision: str = "change", retry: bool = False):
        self.store, self.conn, self.fact = store, conn, fact
        # A retry of a write whose outcome was unknown: look for the fact's trace first, so that
        # a write that did commit is not applied twice (idempotence by fact id).
        self.retry = retry
        self.applied: WriteOutcome | None = None
        self.slot_lock = slot_lock
        self._locked = False
        self.operator, self.level, self.mode = operator, level, mode
        self.judge, self.guard, self.at = judge, guard, at
        if revision not in REVISIONS:
            raise ConfigError(f"unknown revision {revision!r}", fix="use 'change' (the old value was true until "
                              "the new one's valid time) or 'correction' (it was never true)")
        self.revision = revision
        self.canonicalize = canonicalize
        self.session = session
        self.candidates: list[Row] | None = None
        self.duplicate: Row | None = None
        self.incumbent: Row | None = None
        self.vote: Vote | None = None
        self.vote_source: str | None = None
        self.outcome: WriteOutcome | None = None
        self.done = False
        self.reads: list[tuple[str, object]] = []  # (fact_id or key, version seen) for histories
        self.writes: list[tuple[str, object]] = []

    # -- plumbing -------------------------------------------------------------------------
    def _run(self, during: str, fn):
        if self.done:
            raise InputError(f"write of {self.fact.fact_id!r} already finished; {during} is too late",
                             fix="start a new write")
        try:
            return fn()
        except psycopg.Error as e:
            self.rollback()
            raise _db_error(e, f"{during} of fact {self.fact.fact_id!r}") from e
        except BaseException:  # TokiError, a judge's own exception, KeyboardInterrupt: never half-written
            self.rollback()
            raise

    def rollback(self) -> None:
        if not self.done:
            self.done = True
            with contextlib.suppress(psycopg.Error):
                self.conn.execute("rollback")
            self._unlock()

    # -- the optional slot lock -------------------------------------------------------------
    # SI cannot stop two writers that both find a slot empty and both insert (a phantom: no row
    # to conflict on). A session-level advisory lock on the slot, taken *before* BEGIN so the
    # snapshot is taken after the previous holder committed, serialises the slot's writers.
    def _slot_key(self) -> str:
        return f"toki-slot:{self.fact.subject}/{self.fact.predicate}"

    def _unlock(self) -> None:
        if self._locked:
            self._locked = False
            with contextlib.suppress(psycopg.Error):
                self.conn.execute("select pg_advisory_unlock(hashtextextended(%s, 0))", (self._slot_key(),))

    # -- phases ---------------------------------------------------------------------------
    def begin(self) -> None:
        def go():
            if self.slot_lock:
                self.conn.execute("select pg_advisory_lock(hashtextextended(%s, 0))", (self._slot_key(),))
                self._locked = True
            self.conn.execute(f"begin isolation level {self.level.isolation.sql}")
        self._run("begin", go)

    def read_candidates(self) -> list[Row]:
        return self._run("read_candidates", self._read_candidates)

    def _find_trace(self) -> WriteOutcome | None:
        """The outcome of an earlier application of this very fact, if the slot shows one: a row
        with its id (inserted, or the winner of a supersession, closed since or not), an audit row
        naming it as the loser, or its write-event token merged into a row (a duplicate)."""
        f = self.fact
        rows = self.conn.execute(
            "select fact_id, row_kind, provenance_id from agent_memory where subject = %s and predicate = %s"
            " order by system_time_start, fact_id", (f.subject, f.predicate)).fetchall()
        self.reads.append((f"trace:{f.fact_id}", len(rows)))
        carrier = self.store.carrier
        # A fact with an annotation of its own has no write-event token of its own to look for.
        token = next(iter(carrier.token(f.fact_id).variables())) if not f.provenance else None
        for fid, kind, prov in rows:
            if kind == "current" and fid == f.fact_id:
                return WriteOutcome("already-applied", f.fact_id, winner_id=fid, intended="written")
            if kind == "audit" and fid.startswith(f"audit::{f.fact_id}::"):
                return WriteOutcome("already-applied", f.fact_id, audit_id=fid, intended="rejected")
        for fid, kind, prov in rows:
            if token is not None and kind == "current" and prov:
                with contextlib.suppress(Exception):  # a malformed annotation is no trace
                    if token in carrier.parse(prov).variables():
                        return WriteOutcome("already-applied", f.fact_id, winner_id=fid, intended="merged")
        return None

    def _read_candidates(self) -> list[Row]:
        f = self.fact
        if self.retry and self.applied is None:
            self.applied = self._find_trace()
        if self.applied is not None:
            self.candidates, self.duplicate, self.incumbent = [], None, None
            return []
        rows = [Row(*r) for r in self.conn.execute(
            _CANDIDATES, (f.subject, f.predicate, f.valid_to, f.valid_from),
        ).fetchall()]
        self.candidates = rows
        for r in rows:
            self.reads.append((r.fact_id, r.object))
        dups = [r for r in rows if duplicates(r.to_fact(), f)]
        rivals = [r for r in rows if contradicts(r.to_fact(), f)]
        if any(r.fact_id == f.fact_id for r in rows):
            raise InputError(f"fact id {f.fact_id!r} is already current in the store",
                             fix="give every new claim its own fact id")
        if len(rivals) > 1:
            raise AmbiguousIncumbents(
                f"fact {f.fact_id!r} contradicts {len(rivals)} current rows "
                f"({', '.join(r.fact_id for r in rivals)}); the write path never guesses",
                fix="resolve the incumbents among themselves first (Store.consolidate), then write",
            )
        if dups and rivals:
            raise AmbiguousIncumbents(
                f"fact {f.fact_id!r} confirms {dups[0].fact_id} but contradicts {rivals[0].fact_id}: the slot "
                "already holds contradicting current values; the write path never guesses",
                fix="resolve the slot first (Store.consolidate), then write",
            )
        self.duplicate = dups[0] if dups else None
        self.incumbent = rivals[0] if rivals else None
        return rows

    def _pair(self) -> tuple[Fact, Fact]:
        return self.incumbent.to_fact(), self.fact

    def judge_step(self) -> Vote | None:
        return self._run("judge", self._judge)

    def _judge(self) -> Vote | None:
        if self.candidates is None:
            self._read_candidates()
        if self.incumbent is None or self.operator not in ("await", "rule"):
            return None
        if self.vote is not None:  # already decided by a delivered callback
            return self.vote
        pair = self._pair()
        ordered = canonical(pair) if self.canonicalize else pair
        if self.operator == "rule":
            row = self.conn.execute(
                "select chosen_index from policy where set_key = %s and active order by created_at, policy_id limit 1",
                (set_key(pair),),
            ).fetchone()
            self.reads.append((f"policy:{set_key(pair)}", row[0] if row else None))
            if row is not None:
                self.vote, self.vote_source = Vote(int(row[0])), "policy"
                return self.vote
        judge = self.judge or self.store.default_judge
        key = judge_key(ordered, judge, canonicalize=self.canonicalize)
        logged = judge_log.lookup(self.conn, key)  # read the log before calling the judge
        self.reads.append((f"judge:{key.digest}", logged.vote if logged else None))
        if logged is not None:
            self.vote, self.vote_source = Vote(int(logged.vote), logged.probability), "log"
        else:
            vote = judge.vote(ordered)
            if self.canonicalize is False and ordered != canonical(pair):
                vote = Vote(1 - vote.index, vote.probability)  # index back into canonical order
            judge_log.record(self.conn, key, vote, session=self.session)
            self.writes.append((f"judge:{key.digest}", vote.index))
            self.vote, self.vote_source = vote, "judge"
        if self.operator == "rule":
            self.conn.execute(
                "insert into policy (policy_id, set_key, chosen_index, source) values (%s, %s, %s, %s)",
                (f"policy::{set_key(pair)}::{self.fact.fact_id}", set_key(pair), self.vote.index, "judge"),
            )
            self.writes.append((f"policy:{set_key(pair)}", self.vote.index))
        return self.vote

    def read_callback(self) -> int | None:
        return self._run("read_callback", self._read_callback)

    def _read_callback(self) -> int | None:
        if self.candidates is None:
            self._read_candidates()
        if self.incumbent is None:
            return None
        pair = self._pair()
        req = set_key(pair)
        row = self.conn.execute(
            "select chosen_index, status from callback_log where request_hash = %s", (req,)
        ).fetchone()
        self.reads.append((f"callback:{req}", row[0] if row else None))
        if row is None:
            self.conn.execute(
                "insert into callback_log (request_hash, read_set_hash, status) values (%s, %s, 'pending') "
                "on conflict (request_hash) do nothing", (req, req))
            return None
        if row[1] == "delivered" and self.operator == "await":
            self.vote, self.vote_source = Vote(int(row[0])), "callback"
        return row[0] if row[1] == "delivered" else None

    def write(self) -> WriteOutcome:
        return self._run("write", self._write)

    def _write(self) -> WriteOutcome:
        if self.candidates is None:
            self._read_candidates()
        if self.applied is not None:
            self.outcome = self.applied
            return self.applied
        rereads = 0
        while True:
            outcome = self._apply()
            if outcome is not None:
                outcome.rereads = rereads
                self.outcome = outcome
                return outcome
            # The row we meant to close was closed by a concurrent writer (zero rows affected).
            rereads += 1
            if rereads > MAX_REREADS:
                raise ConcurrentClose(
                    f"write of {self.fact.fact_id!r}: the incumbent kept changing under us ({rereads} re-reads)",
                    fix="retry the write; contention on this slot is high",
                )
            before = self.incumbent.fact_id if self.incumbent is not None else None
            self._read_candidates()
            if self.incumbent is None or self.incumbent.fact_id != before:
                # A vote (or a delivered callback) decided the old pair, not this one: _resolve
                # asks again for the pair we now see.
                self.vote = self.vote_source = None

    @property
    def _unchanged(self) -> str:
        """Compare-and-set: with the guard, a write to the incumbent also checks its provenance
        is still the one we read, so a concurrent confirmation makes it affect zero rows."""
        return " and provenance_id = %s" if self.guard else ""

    @property
    def _read_provenance(self) -> tuple:
        return (self.incumbent.provenance_id,) if self.guard else ()

    def _stamp(self) -> datetime:
        t = naive_utc(self.at) if self.at is not None else self.store.clock.now()
        return t

    def _apply(self) -> WriteOutcome | None:
        """Resolve and write once. None means 'the close affected zero rows: re-read'."""
        t = self._stamp()
        carrier = self.store.carrier
        new = self.fact.stamped(t).replace(provenance=str(provenance_of(self.fact, carrier)))
        c = self.conn
        if self.duplicate is not None:
            d = self.duplicate
            merged = carrier.parse(d.provenance_id) + carrier.parse(new.provenance)
            # Compare-and-set on the provenance we read: a concurrent confirmation that merged
            # its own evidence first makes this affect zero rows, and we re-read and re-merge
            # instead of overwriting its token (a lost update of evidence).
            cur = c.execute(
                "update agent_memory set provenance_id = %s where fact_id = %s and system_time_start = %s"
                " and system_time_end = %s and row_kind = 'current'"
                + (" and provenance_id = %s" if self.guard else ""),
                (str(merged), d.fact_id, d.system_time_start, SENTINEL)
                + ((d.provenance_id,) if self.guard else ()))
            if cur.rowcount == 0 and self.guard:
                return None
            self.writes.append((d.fact_id, d.object))
            return WriteOutcome("duplicate", new.fact_id, winner_id=d.fact_id, at=t)
        if self.incumbent is None:
            c.execute(_INSERT, Row.of(new, self.operator).values())
            self.writes.append((new.fact_id, new.object))
            return WriteOutcome("inserted", new.fact_id, winner_id=new.fact_id, at=t)

        inc = self.incumbent.to_fact()
        if t <= inc.system_time_start:
            raise InputError(
                f"write time {t.isoformat()} of {new.fact_id!r} is not after incumbent {inc.fact_id!r} "
                f"({inc.system_time_start.isoformat()})", fix="pass a later 'at' or let the store stamp it")
        res = self._resolve(inc, new)
        newcomer_won = res.winner.fact_id == new.fact_id
        if newcomer_won:
            if self.mode is SchemaMode.BASE:
                cur = c.execute(
                    "update agent_memory set fact_id = %s, object = %s, valid_from = %s, valid_to = %s,"
                    " system_time_start = %s, provenance_id = %s, confidence = %s, resolution_strategy_id = %s"
                    " where fact_id = %s and system_time_start = %s and system_time_end = %s and row_kind = 'current'"
                    + self._unchanged,
                    (new.fact_id, new.object, new.valid_from, new.valid_to, t, new.provenance,
                     new.confidence, self.operator, inc.fact_id, inc.system_time_start, SENTINEL)
                    + self._read_provenance)
            else:
                cur = c.execute(
                    "update agent_memory set system_time_end = %s where fact_id = %s and system_time_start = %s"
                    " and system_time_end = %s and row_kind = 'current'" + self._unchanged,
                    (t, inc.fact_id, inc.system_time_start, SENTINEL) + self._read_provenance)
            if cur.rowcount == 0 and self.guard:
                return None
            self.writes.append((inc.fact_id, None))
            if self.mode is not SchemaMode.BASE:
                c.execute(_INSERT, Row.of(res.winner, self.operator).values())
                # A change: the loser stays true outside the winner's valid period, so those parts
                # stay current. A correction: the loser was never true; nothing of it stays.
                parts = inc.valid.minus(new.valid) if self.revision == "change" else []
                for part in parts:
                    suffix = "#pre" if part.start < new.valid_from else "#post"
                    rest = inc.replace(fact_id=inc.fact_id + suffix, valid_from=part.start,
                                       valid_to=part.end).stamped(t)
                    c.execute(_INSERT, Row.of(rest, self.incumbent.resolution_strategy_id).values())
            self.writes.append((new.fact_id, new.object))
        elif self.guard:
            # The incumbent stays, so the decision rests on it as we read it: lock it (FOR SHARE
            # waits for a concurrent writer) and re-read if it was closed or merged meanwhile.
            still = c.execute(
                "select 1 from agent_memory where fact_id = %s and system_time_start = %s and system_time_end = %s"
                " and row_kind = 'current' and provenance_id = %s for share",
                (inc.fact_id, inc.system_time_start, SENTINEL, self.incumbent.provenance_id)).fetchone()
            if still is None:
                return None
        aid = None
        if self.mode is SchemaMode.AUDIT_ROW:
            aid = audit_id(res.loser.fact_id, t)
            loser = res.loser
            c.execute(_INSERT, (aid, loser.subject, loser.predicate,
                                encode_witness(res.winner.object, loser.object), loser.valid_from,
                                loser.valid_to, t, SENTINEL, str(res.audit.provenance), loser.confidence,
                                self.operator, "audit"))
            self.writes.append((aid, "audit"))
        return WriteOutcome("superseded" if newcomer_won else "rejected", new.fact_id,
                            winner_id=res.winner.fact_id, loser_id=res.loser.fact_id, audit_id=aid,
                            vote=self.vote.index if self.vote else None, vote_source=self.vote_source, at=t)

    def _resolve(self, inc: Fact, new: Fact) -> Resolution:
        carrier = self.store.carrier
        if self.operator in ("lww", "evi"):
            return BINARY[self.operator](inc, new, carrier)
        if self.vote is None:
            if self.operator == "await":
                self._read_callback()
            if self.vote is None:
                self._judge()
        return BINARY[self.operator](inc, new, self.vote.index, carrier)

    def commit(self) -> WriteOutcome:
        def go():
            try:
                self.conn.execute("commit")
            except psycopg.Error as e:
                if not _connection_lost(e):
                    raise
                # The COMMIT was sent (or was about to be) and no answer came: it may have
                # committed. Report it as unknown, never as failed; the session (and any slot
                # lock it held) died with the connection.
                self.done, self._locked = True, False
                self.outcome = WriteOutcome(**{**vars(self.outcome), "action": "unknown",
                                               "intended": self.outcome.action})
                return self.outcome
            self.done = True
            self._unlock()
            return self.outcome
        if self.outcome is None:
            self.write()
        return self._run("commit", go)

    def run(self) -> WriteOutcome:
        """All phases, straight through."""
        self.begin()
        self.read_candidates()
        if self.level.callback or self.operator == "await":
            self.read_callback()
        self.judge_step()
        self.write()
        return self.commit()


class ConsolidateTxn(WriteTxn):
    """Resolve every open current value of a slot at once: the n-ary ⊕t or ⊕p fold (docs/design.md#the-four-operators).

    This is what a TOKI cleanup agent runs when a slot holds several current values. The fold is
    an argmax over a total order, so two agents that consolidate the same slot concurrently pick
    the same winner and close the same losers; with the re-read guard the second one finds the
    work done instead of retiring the value the first one kept (the cleanup write skew of docs/tables/index.md).
    """

    def __init__(self, store: "Store", conn: psycopg.Connection, subject: str, predicate: str, *,
                 operator: str, level: Level, mode: SchemaMode, guard: bool, at: datetime | None,
                 session: str | None = None):
        if operator not in ("lww", "evi"):
            raise ConfigError(f"consolidation folds with lww or evi, not {operator!r}",
                              fix="⊕? and ⊕c decide pairs; fold a slot with operator='lww' or 'evi'")
        slot = SimpleNamespace(fact_id=f"{subject}/{predicate}", subject=subject, predicate=predicate)
        super().__init__(store, conn, slot, operator=operator, level=level, mode=mode, judge=None,
                         guard=guard, at=at, session=session)

    def _read_candidates(self) -> list[Row]:
        rows = [Row(*r) for r in self.conn.execute(
            _SELECT + " where subject = %s and predicate = %s and row_kind = 'current'"
            " and system_time_end = %s order by fact_id",
            (self.fact.subject, self.fact.predicate, SENTINEL)).fetchall()]
        self.candidates = rows
        self.reads.extend((r.fact_id, r.object) for r in rows)
        return rows

    def _judge(self) -> None:
        return None

    def _read_callback(self) -> None:
        return None

    def _apply(self) -> WriteOutcome | None:
        facts = [r.to_fact() for r in self.candidates or []]
        if len({f.object for f in facts}) < 2:
            return WriteOutcome("nothing-to-do", self.fact.fact_id)
        t = self._stamp()
        key = lww_key if self.operator == "lww" else evi_key
        winner = max(facts, key=key)
        losers = [f for f in facts if f.object != winner.object]  # same object: a duplicate, not a rival
        carrier = self.store.carrier
        merged = plus_all([provenance_of(f, carrier) for f in [winner, *losers]], carrier)
        for loser in losers:
            if t <= loser.system_time_start:
                raise InputError(f"consolidation time {t.isoformat()} is not after {loser.fact_id!r}",
                                 fix="pass a later 'at' or let the store stamp it")
            if self.mode is SchemaMode.BASE:
                sql = ("delete from agent_memory where fact_id = %s and system_time_start = %s"
                       " and system_time_end = %s and row_kind = 'current'")
                args: tuple = (loser.fact_id, loser.system_time_start, SENTINEL)
            else:
                sql = ("update agent_memory set system_time_end = %s where fact_id = %s and system_time_start = %s"
                       " and system_time_end = %s and row_kind = 'current'")
                args = (t, loser.fact_id, loser.system_time_start, SENTINEL)
            if self.conn.execute(sql, args).rowcount == 0 and self.guard:
                return None  # someone else consolidated first: re-read
            self.writes.append((loser.fact_id, None))
            if self.mode is SchemaMode.AUDIT_ROW:
                self.conn.execute(_INSERT, (audit_id(loser.fact_id, t), loser.subject, loser.predicate,
                                            encode_witness(winner.object, loser.object), loser.valid_from,
                                            loser.valid_to, t, SENTINEL, str(merged), loser.confidence,
                                            self.operator, "audit"))
                self.writes.append((audit_id(loser.fact_id, t), "audit"))
        return WriteOutcome("consolidated", self.fact.fact_id, winner_id=winner.fact_id,
                            loser_id=",".join(f.fact_id for f in losers), at=t)



@dataclass
class Store:
    """A bitemporal agent memory in one schema of one server.

    ``Store.open()`` makes a fresh schema on the resolved server and drops it on ``close()``;
    pass ``schema=`` to attach to an existing one instead.
    """

    server: Server
    schema: str
    carrier: Carrier = Carrier.MULTILINEAR
    mode: SchemaMode = SchemaMode.AUDIT_ROW
    judge_log_form: str = "unique"
    default_judge: Judge = field(default_factory=lambda: SimulatedJudge(p=0.5, seed=0))
    clock: Clock = field(default_factory=lambda: CLOCK)
    owns_schema: bool = False
    # Commits wait for the WAL to reach the operating system (synchronous_commit on): with it
    # off, a server crash within the WAL writer's delay loses writes that were acknowledged
    # (toki faults measures it). The matrix's lanes, which only compare interleavings, keep it off.
    durable: bool = True
    _conn: psycopg.Connection | None = field(default=None, repr=False)

    @classmethod
    def open(cls, dsn: str | None = None, *, server: Server | None = None, schema: str | None = None,
             label: str = "store", create: bool = True, **kw) -> "Store":
        """A store in a fresh run schema (``schema=None``; dropped on close), or attached to an
        existing ``schema`` (created if missing when ``create``; never dropped by the store)."""
        from toki.db.server import check_ident, create_run_schema

        server = server or resolve(dsn)
        if "mode" in kw:
            kw["mode"] = SchemaMode.parse(kw["mode"])
        owns = schema is None
        with server.connect() as c:
            if owns:
                schema = create_run_schema(c, label)
            else:
                check_ident(schema)
                if create:
                    c.execute(f"create schema if not exists {schema}")
        store = cls(server=server, schema=schema, owns_schema=owns, **kw)
        if owns or create:
            dbschema.create_all(store.conn, store.judge_log_form)
        return store

    @property
    def conn(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = self.connect()
        return self._conn

    def connect(self, **kw) -> psycopg.Connection:
        kw.setdefault("durable", self.durable)
        return self.server.connect(schema=self.schema, **kw)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self.owns_schema:
            drop_schema(self.server, self.schema)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def reset(self) -> None:
        dbschema.truncate_all(self.conn)

    # -- writing --------------------------------------------------------------------------
    def begin_write(self, fact: Fact, *, operator: str = "lww", level: Level | str | None = None,
                    mode: SchemaMode | str | None = None, judge: Judge | None = None, guard: bool = True,
                    at: datetime | None = None, conn: psycopg.Connection | None = None,
                    canonicalize: bool = True, session: str | None = None, slot_lock: bool = False,
                    revision: str = "change", canonicalizer=None, retry: bool = False) -> WriteTxn:
        if operator not in OPERATORS:
            raise ConfigError(f"unknown operator {operator!r}", fix=f"use one of {', '.join(OPERATORS)}")
        if not isinstance(fact, Fact):
            raise InputError(f"write needs a Fact, got {type(fact).__name__}", fix="build a toki.Fact")
        lvl = PRECONDITION[operator] if level is None else (parse_level(level) if isinstance(level, str) else level)
        if canonicalizer is not None:  # one real-world slot, one predicate name, whatever the extractor said
            fact = fact.replace(predicate=canonicalizer.slot(fact.predicate))
        return WriteTxn(self, conn or self.conn, fact, operator=operator, level=lvl,
                        mode=SchemaMode.parse(mode) if mode is not None else self.mode,
                        judge=judge, guard=guard, at=at, canonicalize=canonicalize, session=session,
                        slot_lock=slot_lock, revision=revision, retry=retry)

    def write(self, fact: Fact, *, operator: str = "lww", level: Level | str | None = None,
              mode: SchemaMode | str | None = None, judge: Judge | None = None, guard: bool = True,
              at: datetime | None = None, conn: psycopg.Connection | None = None,
              slot_lock: bool = False, revision: str = "change", canonicalizer=None,
              retry: bool = False) -> WriteOutcome:
        """Run docs/design.md#the-write-path as one transaction at ``level`` (default: the operator's precondition).

        ``revision``: ``"change"`` (default) keeps the loser current outside the winner's valid
        period ("lived in Berlin until March"); ``"correction"`` closes all of it ("never lived in
        Berlin"): ``as_of(valid, system)`` then answers what was believed at ``system`` about
        ``valid`` for each. ``canonicalizer`` (:mod:`toki.slots`) maps the predicate to its slot.

        ``slot_lock=True`` also serialises writers of the same (subject, predicate) slot with an
        advisory lock taken before the transaction begins: beyond docs/design.md#the-write-path, it closes the
        empty-slot phantom that SI lets through (two writers both insert into an empty slot).

        The outcome's action is ``unknown`` when the COMMIT was sent and the connection died
        before its answer (it may have committed). Retry such a write on a new connection with
        ``retry=True``: the write path first looks for the fact's trace and answers
        ``already-applied`` instead of writing it twice.
        """
        return self.begin_write(fact, operator=operator, level=level, mode=mode, judge=judge,
                                guard=guard, at=at, conn=conn, slot_lock=slot_lock, revision=revision,
                                canonicalizer=canonicalizer, retry=retry).run()

    def begin_consolidate(self, subject: str, predicate: str, *, operator: str = "lww",
                          level: Level | str | None = None, mode: SchemaMode | str | None = None,
                          guard: bool = True, at: datetime | None = None,
                          conn: psycopg.Connection | None = None, session: str | None = None) -> ConsolidateTxn:
        lvl = PRECONDITION[operator] if level is None else (parse_level(level) if isinstance(level, str) else level)
        return ConsolidateTxn(self, conn or self.conn, subject, predicate, operator=operator, level=lvl,
                              mode=SchemaMode.parse(mode) if mode is not None else self.mode, guard=guard,
                              at=at, session=session)

    def consolidate(self, subject: str, predicate: str, **kw) -> WriteOutcome:
        """Fold every open current value of the slot with ⊕t or ⊕p, in one transaction."""
        return self.begin_consolidate(subject, predicate, **kw).run()

    def policy(self, facts: Sequence[Fact], chosen_index: int, *, source: str = "user") -> None:
        """Install a ⊕c policy row for the unordered set of ``facts``."""
        key = set_key(facts)
        self.conn.execute("insert into policy (policy_id, set_key, chosen_index, source) values (%s, %s, %s, %s)",
                          (f"policy::{key}::{source}", key, int(chosen_index), source))

    def deliver_callback(self, facts: Sequence[Fact], chosen_index: int, *, conn=None) -> None:
        """The external confirmer of ⊕? delivers its choice (an index into the canonical order)."""
        key = set_key(facts)
        (conn or self.conn).execute(
            "insert into callback_log (request_hash, read_set_hash, chosen_index, status, delivered_at)"
            " values (%s, %s, %s, 'delivered', clock_timestamp()) on conflict (request_hash) do update"
            " set chosen_index = excluded.chosen_index, status = 'delivered', delivered_at = excluded.delivered_at",
            (key, key, int(chosen_index)))

    # -- reading --------------------------------------------------------------------------
    def as_of(self, valid_time: datetime, system_time: datetime | None = None, *,
              kind: str = "current") -> list[Row]:
        """Rows whose valid and system periods both contain the instant (closed-open)."""
        if kind not in ("current", "audit", "all"):
            raise ConfigError(f"unknown row kind {kind!r}", fix="use current, audit or all")
        tv = naive_utc(valid_time)
        ts = naive_utc(system_time) if system_time is not None else datetime(9999, 12, 30)
        where = "" if kind == "all" else f" and row_kind = '{kind}'"
        return [Row(*r) for r in self.conn.execute(
            _SELECT + " where valid_from <= %s and %s < valid_to and system_time_start <= %s"
            " and %s < system_time_end" + where + " order by subject, predicate, fact_id",
            (tv, tv, ts, ts)).fetchall()]

    def rows(self, kind: str = "all") -> list[Row]:
        if kind not in ("current", "audit", "all"):
            raise ConfigError(f"unknown row kind {kind!r}", fix="use current, audit or all")
        where = "" if kind == "all" else f" where row_kind = '{kind}'"
        return [Row(*r) for r in self.conn.execute(
            _SELECT + where + " order by system_time_start, fact_id").fetchall()]

    def current(self, subject: str | None = None, predicate: str | None = None) -> list[Row]:
        """Open current rows (system_time_end at the sentinel), optionally of one slot."""
        sql, args = _SELECT + " where row_kind = 'current' and system_time_end = " + SENTINEL_SQL, []
        if subject is not None:
            sql += " and subject = %s"
            args.append(subject)
        if predicate is not None:
            sql += " and predicate = %s"
            args.append(predicate)
        return [Row(*r) for r in self.conn.execute(sql + " order by fact_id", args).fetchall()]

    def judge_votes(self) -> list[tuple[str, int, str | None]]:
        return self.conn.execute("select judge_key, vote, session from judge_log order by seq").fetchall()


@contextlib.contextmanager
def temporary_store(dsn: str | None = None, **kw) -> Iterator[Store]:
    store = Store.open(dsn, **kw)
    try:
        yield store
    finally:
        store.close()


__all__ = ["COLUMNS", "CLOCK", "Clock", "Row", "SchemaMode", "Store", "WriteOutcome", "WriteTxn",
           "temporary_store", "Isolation"]
