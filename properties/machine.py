"""A stateful property test (Hypothesis ``RuleBasedStateMachine``) over the Store on a real database.

Rules write claims through the write path with every operator (⊕? gets a delivered callback
or none, ⊕c a policy or none), in the schema mode the run drew: new claims, contradictions,
duplicate confirmations, claims over other valid periods (every Allen relation). After every
step the invariants are checked against the database:

* at most one current value per slot and valid instant (sequential writes, guarded path);
* in audit-row mode every loser is dominated by an audit row (no audit erasure, N3);
* ``as_of(tv, ts)`` for every earlier write's system time gives the current rows recorded right
  after that write (audit-row and dual-row modes keep history; base mode overwrites it, so there
  only the present is checked).

Use :func:`store_machine` to get a test class bound to a server::

    TestStore = store_machine(server).TestCase
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from toki.db.store import SchemaMode, Store
from toki.errors import WriteRefused
from toki.judges.base import SimulatedJudge
from toki.matrix import memory
from toki.model import SENTINEL, Fact
from toki.operators import OPERATORS
from toki.provenance import Carrier

from .strategies import T0

OBJECTS = ("penicillin", "amoxicillin", "cephalexin")
SLOTS = (("alice", "medication"), ("bob", "medication"))


def _key(r) -> tuple:
    # provenance is left out: a duplicate confirmation merges it in place (not bitemporally)
    return (r.fact_id, r.object, r.valid_from, r.valid_to, r.system_time_start)


def store_machine(server, *, modes=tuple(m.value for m in SchemaMode)) -> type[RuleBasedStateMachine]:
    """A machine class whose runs share one Store schema (reset at the start of each run)."""
    shared: dict = {}

    def get_store() -> Store:
        if "store" not in shared:
            shared["store"] = Store.open(server=server, label="machine")
        return shared["store"]

    class StoreMachine(RuleBasedStateMachine):
        @initialize(mode=st.sampled_from(modes), seed=st.integers(0, 3))
        def start(self, mode, seed):
            self.store = get_store()
            self.store.reset()
            self.store.mode = SchemaMode.parse(mode)
            self.judge = SimulatedJudge(p=0.5, seed=seed)
            self.n = 0
            self.snapshots: list[tuple] = []  # (system time after the write, current rows)
            self.losers: list[str] = []  # provenance of every loser the write path reported

        def _write(self, subject, predicate, obj, start, length, operator, conf, confirm):
            self.n += 1
            end = SENTINEL if length is None else T0 + timedelta(days=start + length)
            fact = Fact(f"m{self.n}", subject, predicate, obj, T0 + timedelta(days=start), end, confidence=conf)
            rivals = [r for r in self.store.current(subject, predicate)
                      if r.object != obj and r.valid_from < fact.valid_to and fact.valid_from < r.valid_to]
            if confirm is not None and len(rivals) == 1:
                if operator == "await":
                    self.store.deliver_callback([rivals[0], fact], confirm)
                elif operator == "rule":
                    self.store.policy([rivals[0], fact], confirm)
            before = {r.fact_id: r for r in self.store.rows("current")}
            try:
                out = self.store.write(fact, operator=operator, judge=self.judge)
            except WriteRefused:
                return None  # several incumbents: the write path refused and wrote nothing
            if out.action in ("superseded", "rejected"):
                loser = before.get(out.loser_id)
                self.losers.append(loser.provenance_id if loser is not None and out.action == "superseded"
                                   else f"x_{fact.fact_id}")
                if confirm is not None and len(rivals) == 1 and operator in ("await", "rule"):
                    pair = sorted((out.winner_id, out.loser_id))
                    assert set(pair) == {rivals[0].fact_id, fact.fact_id}
                    assert pair.index(out.winner_id) == confirm, (
                        f"{operator}: the write kept {out.winner_id}, not the confirmed/policy choice {pair[confirm]}")
            at = self.store.conn.execute("select clock_timestamp()::timestamp").fetchone()[0]
            self.snapshots.append((at, sorted(map(_key, self.store.current()))))
            return out

        @rule(slot=st.sampled_from(SLOTS), obj=st.sampled_from(OBJECTS), start=st.integers(0, 6),
              length=st.one_of(st.none(), st.integers(1, 6)), operator=st.sampled_from(OPERATORS),
              conf=st.sampled_from([0.5, 0.9, 0.2]), confirm=st.one_of(st.none(), st.integers(0, 1)))
        def write(self, slot, obj, start, length, operator, conf, confirm):
            self._write(slot[0], slot[1], obj, start, length, operator, conf, confirm)

        @precondition(lambda self: self.n > 0)
        @rule(data=st.data(), operator=st.sampled_from(OPERATORS))
        def contradict_or_confirm(self, data, operator):
            """Write against an existing current row: a contradiction or a duplicate confirmation."""
            cur = self.store.current()
            if not cur:
                return
            r = data.draw(st.sampled_from(cur))
            obj = data.draw(st.sampled_from(OBJECTS))
            start = (r.valid_from - T0).days + data.draw(st.integers(-1, 1))
            self._write(r.subject, r.predicate, obj, max(0, start), data.draw(st.one_of(st.none(), st.integers(1, 4))),
                        operator, data.draw(st.sampled_from([0.5, 0.9])), data.draw(st.one_of(st.none(), st.integers(0, 1))))

        @invariant()
        def one_current_value_per_slot_and_instant(self):
            if not hasattr(self, "store"):
                return
            rows = self.store.rows("current")
            bad = []
            for subj, pred, t in memory.slots_with_several_current(rows):
                # two rows of one object are an unmerged duplicate, not two values (see the README)
                vals = {r.object for r in rows if (r.subject, r.predicate) == (subj, pred)
                        and r.system_time_end == SENTINEL and r.valid_from <= t < r.valid_to}
                if len(vals) > 1:
                    bad.append((subj, pred, t, sorted(vals)))
            assert not bad, f"several current values: {bad}"

        @invariant()
        def every_loser_dominated_by_an_audit_row(self):
            if not hasattr(self, "store") or self.store.mode is not SchemaMode.AUDIT_ROW:
                return
            audits = [r.provenance_id for r in self.store.rows("audit")]
            erased = memory.audit_erasure(self.losers, audits, Carrier.MULTILINEAR)
            assert not erased, f"losers dominated by no audit row: {erased}"

        @invariant()
        def as_of_matches_the_history_of_writes(self):
            if not hasattr(self, "store") or not self.snapshots:
                return
            history = self.store.mode is not SchemaMode.BASE
            for at, rows in (self.snapshots if history else self.snapshots[-1:]):
                ts = at if history else None
                seen = set()
                for r in rows:
                    for got in self.store.as_of(r[2], ts):
                        seen.add(_key(got))
                want = {k for k in rows}
                assert want <= seen, f"as_of at {at} lost rows {sorted(want - seen)}"
                # nothing current then is missing, and nothing as_of shows was not current then
                for k in seen:
                    assert k in want, f"as_of at {at} shows {k}, which was not current after that write"

        def teardown(self):
            pass

    StoreMachine.shared = shared
    return StoreMachine


__all__ = ["store_machine"]
