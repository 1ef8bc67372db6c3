"""The keyed judge log (docs/design.md#judges): read before judging, record the first vote, re-adjudicate only
on an explicit, recorded condition.

The write path (:meth:`toki.db.store.WriteTxn._judge`) calls :func:`lookup` and, when the key is
absent, calls the judge and :func:`record` with reason ``first`` at epoch 0 inside the same
transaction, before the operator writes. Every later write of the same conflict under the same
(R, θ) reads the vote back, so a replay cannot get a different winner (the keyed-log reference
of the N1 experiment).

A logged vote changes only through :func:`readjudicate`, which needs one of the three reasons the
paper names (docs/design.md#judges: "consistent is not correct: re-adjudication needs its own conditions"):

``new-evidence``  the caller names the evidence (its hash is written into the row's θ);
``model-change``  a judge whose model differs from the one in the key re-votes;
``appeal``        the same or another judge re-votes, or a person gives the vote directly.

It appends a row at the next epoch with the reason; lookups take the highest epoch. Under the
``unique`` form two concurrent re-adjudications of one key at the same epoch collide on
(judge_key, epoch) (SQLSTATE 23505); under the ``append`` form both rows land and the first
by ``seq`` is read (the read-then-append log the paper's N1 row assumes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import psycopg

from toki.errors import DatabaseError, InputError
from toki.judges.base import Judge, JudgeKey, Vote
from toki.model import Fact
from toki.operators import canonical

REASONS = ("first", "new-evidence", "model-change", "appeal")
READJUDICATION_REASONS = REASONS[1:]

_COLS = "seq, judge_key, epoch, read_set, theta, vote, probability, reason, session, logged_at"


@dataclass(frozen=True, slots=True)
class LogEntry:
    seq: int
    judge_key: str
    epoch: int
    read_set: str
    theta: str
    vote: int  # index into the canonical (sorted by fact id) order
    probability: float | None
    reason: str
    session: str | None
    logged_at: datetime


def _digest(key: JudgeKey | str) -> str:
    return key.digest if isinstance(key, JudgeKey) else str(key)


def lookup(conn: psycopg.Connection, key: JudgeKey | str) -> LogEntry | None:
    """The vote in force for ``key``: highest epoch, first logged within it; None if never judged."""
    row = conn.execute(f"select {_COLS} from judge_log where judge_key = %s order by epoch desc, seq limit 1",
                       (_digest(key),)).fetchone()
    return LogEntry(*row) if row else None


def history(conn: psycopg.Connection, key: JudgeKey | str) -> list[LogEntry]:
    """Every row logged for ``key``, oldest first."""
    return [LogEntry(*r) for r in conn.execute(
        f"select {_COLS} from judge_log where judge_key = %s order by epoch, seq", (_digest(key),)).fetchall()]


def record(conn: psycopg.Connection, key: JudgeKey, vote: Vote, *, session: str | None = None,
           reason: str = "first", epoch: int = 0, theta: str | None = None) -> int:
    """Insert one vote (canonical index) under ``key``; the caller's transaction commits it.

    Returns the row's ``seq``."""
    if reason not in REASONS:
        raise InputError(f"unknown judge-log reason {reason!r}", fix=f"use one of {', '.join(REASONS)}")
    return conn.execute(
        "insert into judge_log (judge_key, epoch, read_set, theta, vote, probability, reason, session) "
        "values (%s, %s, %s, %s, %s, %s, %s, %s) returning seq",
        (key.digest, int(epoch), "|".join(key.read_set), theta if theta is not None else repr(key.theta),
         int(vote.index), vote.probability, reason, session),
    ).fetchone()[0]


def _presented(key: JudgeKey, candidates: Sequence[Fact]) -> tuple[Fact, ...]:
    by_id = {f.fact_id: f for f in candidates}
    if sorted(by_id) != sorted(key.read_set) or len(by_id) != len(candidates):
        raise InputError(f"candidates {sorted(by_id)} are not the read set {list(key.read_set)} of the key",
                         fix="re-adjudicate the same conflict set the key was made from")
    return tuple(by_id[i] for i in key.read_set)  # the order the key was judged in


def readjudicate(conn: psycopg.Connection, key: JudgeKey, candidates: Sequence[Fact], *, reason: str,
                 judge: Judge | None = None, vote: int | None = None, evidence: str | None = None,
                 session: str | None = None) -> LogEntry:
    """Explicitly re-decide a logged conflict; returns the new row (see the module docstring).

    Runs in its own transaction when ``conn`` is in autocommit mode, else in the caller's.
    """
    if reason not in READJUDICATION_REASONS:
        raise InputError(f"re-adjudication needs an explicit reason, got {reason!r}",
                         fix=f"use one of {', '.join(READJUDICATION_REASONS)}; first votes come from the write path")
    if (judge is None) == (vote is None):
        raise InputError("re-adjudication takes either a judge or a vote, exactly one",
                         fix="pass judge= to ask a judge again, or vote= for a person's decision")
    if vote is not None and reason != "appeal":
        raise InputError(f"a vote given by hand is an appeal, not {reason!r}", fix="use reason='appeal'")
    if vote is not None and (isinstance(vote, bool) or vote not in range(len(key.read_set))):
        raise InputError(f"vote {vote!r} is out of range for {len(key.read_set)} candidates",
                         fix="a vote indexes the candidates sorted by fact id")
    old_theta = dict(key.theta)
    if reason == "model-change" and judge is not None and judge.theta().get("model") == old_theta.get("model"):
        raise InputError(f"model-change re-adjudication with the same model {old_theta.get('model')!r}",
                         fix="pass a judge of another model, or use reason='appeal'")
    if reason == "new-evidence" and not (isinstance(evidence, str) and evidence.strip()):
        raise InputError("new-evidence re-adjudication without evidence", fix="pass evidence= (the new tool output)")
    shown = _presented(key, candidates)
    try:
        ctx = conn.transaction()
        with ctx:
            current = lookup(conn, key)
            if current is None:
                raise InputError(f"key {key.digest} has no logged vote to re-adjudicate",
                                 fix="the first vote is logged by the write path (⊕? or ⊕c); write the fact first")
            if judge is not None:
                v = judge.vote(shown)
                canon = canonical(shown)
                index = canon.index(shown[v.index])  # back into canonical order, as the log stores it
                new_vote = Vote(index, v.probability)
                theta = dict(sorted(judge.theta().items()))
            else:
                new_vote = Vote(int(vote), None)
                theta = {"by": session or "appeal"}
            if evidence:
                theta["evidence_sha256"] = hashlib.sha256(evidence.encode()).hexdigest()[:16]
            epoch = int(conn.execute("select coalesce(max(epoch), -1) + 1 from judge_log where judge_key = %s",
                                     (key.digest,)).fetchone()[0])
            seq = record(conn, key, new_vote, session=session, reason=reason, epoch=epoch,
                         theta=repr(tuple(sorted((str(k), str(v)) for k, v in theta.items()))))
        return next(e for e in history(conn, key) if e.seq == seq)
    except psycopg.Error as e:
        state = getattr(e, "sqlstate", None)
        raise DatabaseError(f"re-adjudication of key {key.digest} failed with SQLSTATE {state}",
                            sqlstate=state, fix="another session re-adjudicated the same key: read it and retry"
                            if state == "23505" else "see the server log") from e
