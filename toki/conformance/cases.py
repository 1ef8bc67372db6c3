"""Hermitage's ten cases as toki schedules, each with what its anomaly needs (docs/conformance.md).

Every case runs the schedules of ``schedules/classic`` that Hermitage's postgres.md spells out,
and two forms from its mysql.md where that file probes further: OTV read with ``select *``
(a read that sees one transaction's write to row 1 and an older version of row 2 in one go), and
PMP on a write predicate with a read before the delete (the read fixes InnoDB's snapshot, so the
row the delete skipped is seen afterwards). A case is prevented only when every form is; a form
whose anomalous transaction only reads is marked ``read_only`` (Hermitage's "R/O": prevented in
a read-only context only).

Rows are ``[id, value]``; the table starts as 1 => 10, 2 => 20 in every schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files

from toki.conformance.judge import Commits, Ends, Reads, Requirement
from toki.errors import ConfigError
from toki.sched.schedule import Schedule, parse_toml

CASES = ("G0", "G1a", "G1b", "G1c", "OTV", "PMP", "P4", "G-single", "G2-item", "G2")


@dataclass(frozen=True)
class Form:
    schedule: str  # a file of schedules/classic (without .toml), or a form defined below
    needs: tuple[Requirement, ...]  # what the anomaly needs, in the order the schedule produces it
    read_only: bool = False  # the transaction that sees the anomaly only reads
    text: str | None = None  # the schedule itself (TOML), for a form that is not a file

    def load(self) -> Schedule:
        if self.text is not None or self.schedule in _FORMS:
            sched = parse_toml(self.text or _FORMS[self.schedule], source=f"toki.conformance:{self.schedule}")
        else:
            entry = files("toki.schedules") / "classic" / f"{self.schedule}.toml"
            sched = parse_toml(entry.read_text(), source=f"schedules/classic/{self.schedule}.toml")
        self._check(sched)
        return sched

    def _check(self, sched: Schedule) -> None:
        """A form told nothing to look for would never see an anomaly: refuse it, and any step it
        names that the schedule does not have (or that mixes sessions in one read)."""
        def bad(why: str) -> ConfigError:
            return ConfigError(f"conformance form {self.schedule!r}: {why}",
                               fix="name the reads (step indexes of one session) or the final state the anomaly needs")

        if not any(isinstance(n, (Reads, Ends)) for n in self.needs):
            raise bad("it names no read and no final state to observe")
        for n in self.needs:
            if isinstance(n, Reads):
                if not n.steps or any(not 0 <= i < len(sched.steps) for i in n.steps):
                    raise bad(f"steps {list(n.steps)} are not all in its {len(sched.steps)} steps")
                if len({sched.steps[i].session for i in n.steps}) != 1:
                    raise bad(f"steps {list(n.steps)} belong to more than one session")
            elif isinstance(n, Commits) and not set(n.sessions) <= set(sched.sessions):
                raise bad(f"sessions {sorted(set(n.sessions) - set(sched.sessions))} are not in the schedule")


def _row(rows, rid):
    return next((r[1] for r in rows if r[0] == rid), None)


def _otv(*reads) -> bool:
    """T3 sees a write of T1 or T2 and, in that read or a later one, a version of the other row
    older than what that writer wrote there: the observed transaction vanished (Adya's OTV).
    Versions in write order: row 1: 10, 11 (T1), 12 (T2); row 2: 20, 19 (T1), 18 (T2)."""
    order = {1: [10, 11, 12], 2: [20, 19, 18]}
    seen = 0  # how many writers (T1 = 1, T2 = 2) the reads so far have shown, in write order
    for rows in reads:
        got = {r[0]: r[1] for r in rows if r[0] in order and r[1] in order[r[0]]}
        seen = max([seen] + [order[k].index(v) for k, v in got.items()])
        if any(order[k].index(v) < seen for k, v in got.items()):
            return True
    return False


_OTV_SELECT_ALL = """
name = "otv-select-all"
description = "OTV as Hermitage's mysql.md runs it: T3 reads both rows at once, between and after T1 and T2"
setup = ["create table test (id int primary key, value int)",
         "insert into test (id, value) values (1, 10), (2, 20)"]
teardown = ["drop table test"]
steps = [
  { session = "T1", sql = "begin" },                                     # 0
  { session = "T2", sql = "begin" },                                     # 1
  { session = "T3", sql = "begin" },                                     # 2
  { session = "T1", sql = "update test set value = 11 where id = 1" },   # 3
  { session = "T1", sql = "update test set value = 19 where id = 2" },   # 4
  { session = "T2", sql = "update test set value = 12 where id = 1" },   # 5  waits for T1
  { session = "T1", sql = "commit" },                                    # 6
  { session = "T3", sql = "select id, value from test order by id" },    # 7
  { session = "T2", sql = "update test set value = 18 where id = 2" },   # 8
  { session = "T3", sql = "select id, value from test order by id" },    # 9
  { session = "T2", sql = "commit" },                                    # 10
  { session = "T3", sql = "select id, value from test order by id" },    # 11
  { session = "T3", sql = "commit" },                                    # 12
]
final = ["select id, value from test order by id"]
"""

_PMP_WRITE_READ_FIRST = """
name = "pmp-write-read-first"
description = "PMP on a write predicate as Hermitage's mysql.md runs it: T2 reads value = 20 before deleting it"
setup = ["create table test (id int primary key, value int)",
         "insert into test (id, value) values (1, 10), (2, 20)"]
teardown = ["drop table test"]
steps = [
  { session = "T1", sql = "begin" },                                              # 0
  { session = "T2", sql = "begin" },                                              # 1
  { session = "T1", sql = "update test set value = value + 10" },                 # 2
  { session = "T2", sql = "select id, value from test where value = 20" },        # 3
  { session = "T2", sql = "delete from test where value = 20" },                  # 4  waits for T1
  { session = "T1", sql = "commit" },                                             # 5
  { session = "T2", sql = "select id, value from test where value = 20" },        # 6
  { session = "T2", sql = "commit" },                                             # 7
]
final = ["select id, value from test order by id"]
"""

_FORMS = {"otv-select-all": _OTV_SELECT_ALL, "pmp-write-read-first": _PMP_WRITE_READ_FIRST}

_BOTH = Commits(("T1", "T2"))

FORMS: dict[str, tuple[Form, ...]] = {
    "G0": (Form("g0", (_BOTH, Ends(lambda f: {_row(f, 1), _row(f, 2)} in ({11, 22}, {12, 21}),
                                   "the final state mixes T1's and T2's writes (1 => 11, 2 => 22 or 1 => 12, 2 => 21)"))),),
    "G1a": (Form("g1a", (Reads((3,), lambda r: _row(r, 1) == 101, "T2 reads T1's uncommitted 1 => 101 (T1 aborts)"),
                         Commits(("T2",))), read_only=True),),
    "G1b": (Form("g1b", (Reads((3,), lambda r: _row(r, 1) == 101, "T2 reads T1's intermediate 1 => 101"),
                         Commits(("T2",))), read_only=True),),
    "G1c": (Form("g1c", (Reads((4,), lambda r: _row(r, 2) == 22, "T1 reads T2's 2 => 22"),
                         Reads((5,), lambda r: _row(r, 1) == 11, "T2 reads T1's 1 => 11"), _BOTH)),),
    "OTV": (Form("otv-select-all", (Reads((7, 9, 11), _otv, "T3 sees a transaction's write, then an older "
                                          "version of a row that transaction wrote"), _BOTH), read_only=True),
            Form("otv", (Reads((7, 9, 11, 12), _otv, "T3 sees a transaction's write, then an older version of "
                               "a row that transaction wrote"), _BOTH), read_only=True)),
    "PMP": (Form("pmp", (Commits(("T2",)), Reads((5,), lambda r: _row(r, 3) == 30,
                                                  "T1's second predicate read returns T2's new row 3 => 30")),
                 read_only=True),
            Form("pmp-write", (Reads((5,), lambda r: bool(r), "after deleting value = 20, T2 still reads a row "
                                     "with value 20"), Commits(("T1",)))),
            Form("pmp-write-read-first", (Reads((6,), lambda r: bool(r), "after deleting value = 20, T2 still "
                                                "reads a row with value 20"), Commits(("T1",))))),
    "P4": (Form("p4", (Reads((2,), lambda r: _row(r, 1) == 10, "T1 reads 1 => 10"),
                       Reads((3,), lambda r: _row(r, 1) == 10, "T2 reads 1 => 10"), _BOTH,
                       Ends(lambda f: _row(f, 1) == 11, "both wrote 10 + 1: one increment is lost (1 => 11)"))),),
    "G-single": (Form("g-single", (Reads((2,), lambda r: _row(r, 1) == 10, "T1 reads 1 => 10"), Commits(("T2",)),
                                   Reads((8,), lambda r: _row(r, 2) == 18, "then T2's 2 => 18 (10 + 18 is no "
                                         "state the table was in)")), read_only=True),
                 Form("g-single-dependencies", (Commits(("T2",)), Reads((5,), lambda r: _row(r, 1) == 12,
                                                "T1's second predicate read returns T2's 1 => 12 after its first "
                                                "read saw 1 => 10")), read_only=True),
                 Form("g-single-write-1", (Reads((2,), lambda r: _row(r, 1) == 10, "T1 reads 1 => 10 (before T2)"),
                                           Reads((3,), lambda r: _row(r, 2) == 20, "T2 reads 2 => 20 (before "
                                                 "T1's delete)"), _BOTH)),
                 Form("g-single-write-2", (Commits(("T2",)), Ends(lambda f: f != [[1, 12], [2, 18]],
                                           "T2's writes are not what the table holds after T1 rolled back")))),
    "G2-item": (Form("g2-item", (Reads((2,), lambda r: _row(r, 2) == 20, "T1 reads 2 => 20"),
                                 Reads((3,), lambda r: _row(r, 1) == 10, "T2 reads 1 => 10"), _BOTH)),),
    "G2": (Form("g2", (Reads((2,), lambda r: r == [], "T1 finds no multiple of 3"),
                       Reads((3,), lambda r: r == [], "T2 finds no multiple of 3"), _BOTH)),
           Form("g2-two-edges", (Reads((1,), lambda r: _row(r, 2) == 20, "T1 reads 2 => 20"), Commits(("T2",)),
                                 Reads((6,), lambda r: _row(r, 1) == 10 and _row(r, 2) == 25,
                                       "T3 sees T2's 2 => 25 but not T1's 1 => 0"),
                                 Commits(("T3", "T1"))))),
}
assert tuple(FORMS) == CASES
