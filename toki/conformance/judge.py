"""Deciding one run of a Hermitage case from what happened in it, with no golden outcome.

A case states what the anomaly needs, in the order the schedule produces it: reads that return
the anomalous rows (:class:`Reads`), transactions that commit (:class:`Commits`), a final state
(:class:`Ends`). When every requirement is met the anomaly was observed. Otherwise the first
requirement that failed says how the database prevented it:

* ``abort``: a transaction the anomaly needs was ended by the database (a serialization failure,
  a deadlock, a write conflict), or a read the anomaly needs came after that end;
* ``blocking``: a read returned the harmless rows because a statement waited: the read itself,
  or a step scheduled before it that finished only after it (a lock held the writer back);
* ``snapshot``: a read returned the harmless rows at once, nothing before it waited (it read a
  snapshot or the last committed version).

Fail closed: a step that never finished, an error that is not an abort (a syntax error, a lock
wait timeout), a session left open: the run is ``unknown``, never "prevented".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from toki.sched.results import RunResult, jsonable

# The codes the backends record for "the database ended this transaction", with what they mean.
# (toki.backends classifies the driver's exception by the same codes; a run keeps only the code.)
ABORTS = {
    "40001": "serialization failure (SQLSTATE 40001)",
    "40P01": "deadlock detected (SQLSTATE 40P01)",
    "1213": "deadlock, transaction rolled back (MySQL error 1213)",
    "1020": "record changed since the snapshot (MySQL error 1020, innodb_snapshot_isolation)",
    "SQLITE_BUSY_SNAPSHOT": "the snapshot is older than the last commit, it cannot write (SQLITE_BUSY_SNAPSHOT)",
    # toki's own answer to a SQLite deadlock (toki.sched.backend_runner): both sessions get
    # SQLITE_BUSY for ever, so the one not committing is rolled back, as SQLite tells applications to.
    "SQLITE_BUSY": "each session waited for the other's lock (SQLITE_BUSY both ways); toki rolled this one back",
    "TransactionException": "write-write conflict (DuckDB TransactionException)",
}
# PostgreSQL's answer to every statement after an abort, inside the ended transaction.
AFTER_ABORT = {"25P02"}


@dataclass(frozen=True)
class Reads:
    """Steps ``steps`` (all of one session) return rows for which ``shows(*rows)`` holds."""
    steps: tuple[int, ...]
    shows: Callable[..., bool]
    says: str


@dataclass(frozen=True)
class Commits:
    sessions: tuple[str, ...]


@dataclass(frozen=True)
class Ends:
    """The first ``final`` query returns rows for which ``shows(rows)`` holds."""
    shows: Callable[[list], bool]
    says: str


Requirement = Reads | Commits | Ends


@dataclass(frozen=True)
class Decision:
    outcome: str  # prevented | anomaly | unknown
    how: str  # abort | blocking | snapshot | observed | incomplete
    why: str

    def to_json(self) -> dict:
        return {"outcome": self.outcome, "how": self.how, "why": self.why}


def _aborts(run: RunResult) -> dict[str, tuple[int, str]]:
    """session -> (step, code) of the error that ended its transaction."""
    out: dict[str, tuple[int, str]] = {}
    for st in run.steps:
        if st.status == "error" and st.sqlstate in ABORTS and st.session not in out:
            out[st.session] = (st.index, st.sqlstate)
    return out


def _stray_error(run: RunResult, aborted: dict[str, tuple[int, str]]) -> str | None:
    """An error that is neither an abort nor PostgreSQL's echo of one: the case did not run as written."""
    for st in run.steps:
        if st.status == "error" and st.sqlstate not in ABORTS:
            if st.sqlstate in AFTER_ABORT and st.session in aborted and aborted[st.session][0] < st.index:
                continue
            return f"step {st.index} ({st.session}: {st.sql}) failed with {st.sqlstate or 'no code'}: {st.error}"
        if st.status == "pending":
            return f"step {st.index} ({st.session}: {st.sql}) never finished"
    return None


def _waited_before(run: RunResult, i: int) -> list[int]:
    """Steps whose waiting decided what read ``i`` returned: ``i`` itself, an earlier step of the same
    transaction (it went on from the state it waited for), or a step of another session scheduled
    before ``i`` that finished after it (it blocked, or was held back behind a block)."""
    pos = {idx: p for p, idx in enumerate(run.executed)}
    me = run.steps[i]
    out = [i] if me.blocked else []
    for st in run.steps[:i]:
        if st.session == me.session:
            if st.blocked:
                out.append(st.index)
            continue
        late = pos.get(st.index, len(pos)) > pos.get(i, len(pos))
        if late or (st.blocked and st.completed_at is not None and st.completed_at >= i):
            out.append(st.index)
    return out


def _abort_text(run: RunResult, session: str, at: tuple[int, str]) -> str:
    step, code = at
    return f"{session} was aborted at step {step} ({run.steps[step].sql}): {ABORTS[code]}"


def decide(run: RunResult, needs: list[Requirement]) -> Decision:
    aborted = _aborts(run)
    stray = _stray_error(run, aborted)
    if stray:
        return Decision("unknown", "incomplete", stray)
    for need in needs:
        if isinstance(need, Reads):
            for i in need.steps:
                s = run.steps[i].session
                if s in aborted and aborted[s][0] <= i:
                    return Decision("prevented", "abort", _abort_text(run, s, aborted[s])
                                    + f", so step {i} cannot show that {need.says}")
            rows = [jsonable(run.steps[i].rows) for i in need.steps]
            if need.shows(*rows):
                continue
            seen = "; ".join(f"step {i} returned {r}" for i, r in zip(need.steps, rows))
            waited = sorted({w for i in need.steps for w in _waited_before(run, i)})
            if waited:
                return Decision("prevented", "blocking", f"not observed: {need.says} ({seen}), because step(s) "
                                f"{waited} waited for a lock")
            return Decision("prevented", "snapshot", f"not observed: {need.says} ({seen}, at once: "
                            "a snapshot or the last committed version)")
        elif isinstance(need, Commits):
            for s in need.sessions:
                state = run.sessions.get(s)
                if state == "committed":
                    continue
                if s in aborted:
                    return Decision("prevented", "abort", _abort_text(run, s, aborted[s]))
                return Decision("unknown", "incomplete", f"{s} ended {state!r}, neither committed nor aborted "
                                "by the database")
        else:
            if not run.final:  # nothing was read at the end: no ground to call it prevented
                return Decision("unknown", "incomplete", f"the schedule reads no final state, so whether {need.says} "
                                "is not known")
            rows = run.final[0]["rows"]
            if need.shows(rows):
                continue
            waited = [st.index for st in run.steps if st.blocked]
            if waited:
                return Decision("prevented", "blocking", f"not observed: {need.says} (final {rows}); step(s) "
                                f"{waited} waited for a lock")
            if aborted:
                s = next(iter(aborted))
                return Decision("prevented", "abort", _abort_text(run, s, aborted[s]))
            return Decision("prevented", "snapshot", f"not observed: {need.says} (final {rows}); no step waited "
                            "and none aborted: each transaction wrote its own version")
    said = "; ".join(n.says for n in needs if not isinstance(n, Commits))
    return Decision("anomaly", "observed", said + "; and the transactions involved committed")
