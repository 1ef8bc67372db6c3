"""Two hand-written write paths for `toki certify` tests: an unsafe one and a careful one.

Both follow the adapter protocol (toki.properties.adapter) and keep their memory in TOKI's
``agent_memory`` table. They resolve by last-writer-wins.

* :func:`unsafe` is how many memory engines write (docs/tables/verdicts.md): read the slot, decide, then close
  the old row and insert the new one without checking that the close took effect, and merge a
  duplicate's provenance from what was read. Under READ COMMITTED two agents superseding one
  row both "win" (the second close is lost: two current values) - a P4 lost update.
* :func:`locking` is the same engine with one change: the candidate read locks the slot's
  current rows (``for update``) and the slot itself (a transaction-scoped advisory lock), so
  concurrent writers of one slot queue up. It holds at READ COMMITTED.
"""

from __future__ import annotations

from toki.db.store import COLUMNS, WriteOutcome
from toki.model import SENTINEL
from toki.operators import audit_id, encode_witness

_SELECT = ("select fact_id, object, system_time_start, provenance_id from agent_memory where subject = %s"
           " and predicate = %s and row_kind = 'current' and system_time_end = %s and valid_from < %s"
           " and %s < valid_to order by fact_id")
_INSERT = f"insert into agent_memory ({', '.join(COLUMNS)}) values ({', '.join(['%s'] * len(COLUMNS))})"


class _Txn:
    def __init__(self, engine, conn, fact):
        self.engine, self.conn, self.fact = engine, conn, fact
        self.rows = []

    def read_candidates(self):
        f = self.fact
        if self.engine.lock:
            self.conn.execute("select pg_advisory_xact_lock(hashtext(%s))", (f"{f.subject}\x1f{f.predicate}",))
        sql = _SELECT + (" for update" if self.engine.lock else "")
        self.rows = self.conn.execute(sql, (f.subject, f.predicate, SENTINEL, f.valid_to, f.valid_from)).fetchall()
        return self.rows

    def judge(self):
        return None  # last-writer-wins needs no judge

    def write(self):
        f, c = self.fact, self.conn
        t = c.execute("select clock_timestamp()::timestamp").fetchone()[0]
        mine = f"x_{f.fact_id}"
        same = [r for r in self.rows if r[1] == f.object]
        if same:  # duplicate: merge the provenance we read
            fid, _, start, prov = same[0]
            c.execute("update agent_memory set provenance_id = %s where fact_id = %s and system_time_start = %s",
                      (f"{prov} + {mine}", fid, start))
            return WriteOutcome("duplicate", f.fact_id, winner_id=fid, at=t)
        if not self.rows:
            c.execute(_INSERT, (f.fact_id, f.subject, f.predicate, f.object, f.valid_from, f.valid_to, t, SENTINEL,
                                mine, f.confidence, "lww", "current"))
            return WriteOutcome("inserted", f.fact_id, winner_id=f.fact_id, at=t)
        fid, obj, start, prov = self.rows[0]
        # close the old row (no check that it was still open) and insert the new one
        c.execute("update agent_memory set system_time_end = %s where fact_id = %s and system_time_start = %s"
                  " and system_time_end = %s", (t, fid, start, SENTINEL))
        merged = f"{mine} + {prov}"
        c.execute(_INSERT, (f.fact_id, f.subject, f.predicate, f.object, f.valid_from, f.valid_to, t, SENTINEL,
                            merged, f.confidence, "lww", "current"))
        c.execute(_INSERT, (audit_id(fid, t), f.subject, f.predicate, encode_witness(f.object, obj), f.valid_from,
                            f.valid_to, t, SENTINEL, merged, f.confidence, "lww", "audit"))
        return WriteOutcome("superseded", f.fact_id, winner_id=f.fact_id, loser_id=fid, at=t)

    def commit(self):
        self.conn.execute("commit")

    def rollback(self):
        self.conn.execute("rollback")


class Engine:
    operator = "lww"

    def __init__(self, *, lock: bool):
        self.lock = lock
        self.name = "locking-lww" if lock else "unsafe-lww"

    def begin(self, conn, fact, level):
        conn.execute(f"begin isolation level {level.isolation.sql}")
        return _Txn(self, conn, fact)


def unsafe() -> Engine:
    return Engine(lock=False)


def locking() -> Engine:
    return Engine(lock=True)


class _SilentTxn(_Txn):
    def write(self):
        super().write()  # writes exactly as the unsafe engine does, then reports nothing


class SilentEngine(Engine):
    """The unsafe engine whose write() returns None: a check told nothing must not pass it."""

    def __init__(self):
        super().__init__(lock=False)
        self.name = "silent-unsafe-lww"

    def begin(self, conn, fact, level):
        conn.execute(f"begin isolation level {level.isolation.sql}")
        return _SilentTxn(self, conn, fact)


def silent() -> SilentEngine:
    return SilentEngine()
