"""Typed steps: each interception module says what its call touches where it makes the step
(toki.harness.steps), and the exhaustive search's dependence is read from that footprint, never
from the display string.

- files: an open for reading and a read read the file; opens for writing, writes, truncates,
  renames, removals and file locks write the files they name; an fsync names a descriptor, so it
  writes every file;
- SQL (sqlite3, psycopg, PyMySQL): a plain read reads its driver family's database, anything else
  writes it, whatever table it names (the tables travel as a hint);
- locks and semaphores: acquiring writes the lock; starting an agent touches nothing; a sleep, a
  condition wait or a resume touches anything (what enables them happens between steps);
- two steps are dependent iff some resource one writes overlaps one the other reads or writes,
  and an unknown footprint conflicts with every step that touches something.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time

import pytest

from toki.harness import mysql_calls, pg_calls
from toki.harness.controller import Controller, SerialChooser, StepRecord
from toki.harness.explore import dependent, footprint
from toki.harness.steps import ANYTHING, NOTHING, Footprint, StepKind, file_footprint, lock_footprint
from toki.harness.sqlite_calls import statement_footprint
from toki.harness.trial import hooks_installed


def _steps(tmp_path, fn) -> list[StepRecord]:
    with hooks_installed(tmp_path):
        trace = Controller(SerialChooser(["A"])).run({"A": fn})
    assert not trace.errors, trace.errors
    return sorted(trace.steps, key=lambda s: s.seq)


def _touches(steps) -> list[tuple[str, str, Footprint | None]]:
    return [(s.kind, s.detail, s.touches) for s in steps]


def _reads(*rs):
    return Footprint(reads=frozenset(rs))


def _writes(*rs):
    return Footprint(writes=frozenset(rs))


def test_file_calls_say_which_file_they_read_or_write(tmp_path):
    def agent():
        with open(tmp_path / "a.json", "w") as f:
            f.write("1")
        with open(tmp_path / "a.json") as f:
            f.read()
        with open(tmp_path / "log", "a") as f:
            f.write("x")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path / "a.json", tmp_path / "b.json")
        os.remove(tmp_path / "b.json")
        fd = os.open(tmp_path / "raw", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.write(fd, b"x")
        os.close(fd)

    got = _touches(_steps(tmp_path, agent))
    assert got[0] == (StepKind.START, "agent", NOTHING)
    a, b = ("file", "a.json"), ("file", "b.json")
    assert [(k, t) for k, _, t in got[1:]] == [
        (StepKind.FILE_OPEN_W, _writes(a)), (StepKind.FILE_WRITE, _writes(a)),
        (StepKind.FILE_OPEN, _reads(a)), (StepKind.FILE_READ, _reads(a)),
        (StepKind.FILE_OPEN_A, _writes(("file", "log"))), (StepKind.FILE_WRITE, _writes(("file", "log"))),
        (StepKind.FILE_FSYNC, _writes(("file",))),
        (StepKind.FILE_RENAME, _writes(a, b)), (StepKind.FILE_RENAME, _writes(b)),
        (StepKind.FILE_OPEN_W, _writes(("file", "raw"))), (StepKind.FILE_WRITE, _writes(("file", "raw"))),
    ], got
    # the display strings are what output always showed
    assert [d for _, d, _ in got[1:4]] == ["open('a.json', 'w')", "write+close a.json", "open('a.json', 'r')"]
    assert all(isinstance(k, StepKind) for k, _, _ in got)


def test_a_file_lock_writes_its_lock_file(tmp_path):
    import fcntl

    def agent():
        with open(tmp_path / ".lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            fcntl.flock(f, fcntl.LOCK_UN)

    got = [(k, t) for k, _, t in _touches(_steps(tmp_path, agent)) if k == StepKind.FILE_LOCK]
    assert got == [(StepKind.FILE_LOCK, _writes(("file", ".lock")))] * 2


def test_sqlite_calls_read_or_write_the_database_and_name_their_tables(tmp_path):
    def agent():
        conn = sqlite3.connect(tmp_path / "db.sqlite")
        conn.execute("create table t (k integer primary key, v text)")
        conn.execute("insert into t values (?, ?)", (1, "x"))
        conn.commit()
        conn.execute("select v from t where k = 1").fetchall()
        conn.executemany("insert into t values (?, ?)", [(2, "y"), (3, "z")])
        conn.rollback()
        conn.close()

    got = _touches(_steps(tmp_path, agent))[1:]
    kinds = [k for k, _, _ in got]
    assert kinds == [StepKind.SQL_OPEN, StepKind.SQL_WRITE, StepKind.SQL_WRITE, StepKind.SQL_COMMIT,
                     StepKind.SQL_READ, StepKind.SQL_WRITE, StepKind.SQL_TXN], got
    db = ("sql", os.path.realpath(tmp_path / "db.sqlite"))  # the file (a search names it by order of meeting)
    # a commit or rollback of a transaction holding the write lock writes the data and gives the lock back
    ends = Footprint(writes=frozenset({db + ("data",)}), releases=frozenset({db + ("lock",)}))
    assert [t for _, _, t in got] == [_writes(("sql",)), _writes(db), _writes(db), ends, _reads(db), _writes(db), ends]
    assert got[4][2].tables == {"t"} and got[2][2].tables == {"t"} and got[5][2].tables == {"t"}
    assert got[2][1] == "insert into t values (?, ?) ← (1, 'x')"


@pytest.mark.parametrize("sql, reads", [
    ("select * from a", True),
    ("WITH x AS (SELECT 1) SELECT * FROM x", True),
    ("explain select 1", True),
    ("select * from a for update", False),
    ("select * from a for no key update", False),
    ("select nextval('s')", False),
    ("with d as (delete from a returning *) select * from d", False),
    ("select pg_advisory_lock(1)", False),
    ("pragma table_info(a)", False),
    ("insert into a values (1)", False),
    ("update a set v = 1", False),
    ("begin", False),
    ("select " + "x, " * 60 + "1 from a", False),  # longer than its description: not classified, a write
])
def test_a_statement_reads_only_when_it_is_a_plain_read(sql, reads):
    fp = statement_footprint("pg", sql)
    assert fp == (_reads(("pg",)) if reads else _writes(("pg",)))


def test_statement_footprints_name_tables_as_a_hint_that_conflicts_do_not_read():
    a = statement_footprint("sql", "insert into notes (k) values (1)")
    b = statement_footprint("sql", 'update "Other" set v = 2 where k = 1')
    j = statement_footprint("sql", "select * from facts f join beliefs b on f.k = b.k")
    assert a.tables == {"notes"} and b.tables == {"other"} and j.tables == {"facts", "beliefs"}
    assert dependent(a, b)  # different tables: a trigger or a foreign key may link them; one SQLite file
    assert a == b  # equal as footprints: the hint is no part of what conflicts read


def test_psycopg_and_pymysql_statements_carry_their_family_footprint():
    kind, detail, fp = pg_calls._detail(None, "select v from t where k = %s", ((1,),))
    assert (kind, detail, fp) == (StepKind.PG_READ, "select v from t where k = %s ← (1,)", _reads(("pg",)))
    assert pg_calls._detail(None, "update t set v = 1", ())[2] == _writes(("pg",))
    assert statement_footprint("my", "select 1") == _reads(("my",))
    assert not dependent(statement_footprint("my", "update t set v = 1"), statement_footprint("pg", "update t set v = 1"))


class _Unconnected:
    """A driver connection that answers no session (the wrappers then pass db=None)."""

    connection = None

    def thread_id(self):
        raise RuntimeError("not connected")


def _recorded(monkeypatch, module) -> list:
    seen = []

    def controlled(kind, detail, fn, **kw):
        seen.append((kind, detail, kw.get("touches")))
        return fn()
    monkeypatch.setattr(module, "controlled", controlled)
    return seen


def test_pymysql_and_psycopg_wrappers_hand_the_controller_kind_and_footprint(monkeypatch):
    seen = _recorded(monkeypatch, mysql_calls)
    cur = _Unconnected()
    cur.connection = _Unconnected()
    mysql_calls._wrap_execute(lambda self, q, a: None)(cur, "select v from t where k = %s", (1,))
    mysql_calls._wrap_query(lambda self, sql: None)(_Unconnected(), b"update t set v = 2")
    mysql_calls._wrap_txn(lambda self: None, "commit")(_Unconnected())
    my = ("my",)
    assert seen == [(StepKind.MY_READ, "select v from t where k = %s ← (1,)", _reads(my)),
                    (StepKind.MY_WRITE, "update t set v = 2", _writes(my)),
                    (StepKind.MY_COMMIT, "commit", _writes(my))]
    seen = _recorded(monkeypatch, pg_calls)
    pg_calls._wrap_txn(lambda self: None, "rollback")(_Unconnected())
    pg_calls._wrap_wait(lambda self, gen: None)(_Unconnected(), iter(()))
    assert seen == [(StepKind.PG_ROLLBACK, "rollback", _writes(("pg",))),
                    (StepKind.PG_TXN, "round trip (transaction block, COPY, stream or pipeline)", _writes(("pg",)))]


def test_locks_and_semaphores_write_the_lock_and_waits_touch_anything(tmp_path):
    def agent():
        lock = threading.Lock()  # engine code (this test) gets an instrumented lock during a trial
        with lock:
            pass
        sem = threading.Semaphore(1)
        with sem:
            pass
        time.sleep(0.001)

    got = _touches(_steps(tmp_path, agent))[1:]
    assert [k for k, _, _ in got] == [StepKind.LOCK, StepKind.LOCK, StepKind.SLEEP]
    assert got[0][2] == lock_footprint(got[0][1].removeprefix("acquire "))
    assert got[1][2] == lock_footprint(got[1][1].removeprefix("acquire "))
    assert got[2][2] == ANYTHING


def test_a_step_made_without_a_footprint_touches_anything():
    bare = StepRecord(0, "A", "cypher", "MATCH (n) RETURN n")  # a plug-in's own step
    read_back = StepRecord.from_json(StepRecord(1, "A", StepKind.SQL_READ, "select 1",
                                                touches=_reads(("sql",))).to_json())
    assert footprint(bare) == footprint(read_back) == footprint(None) == ANYTHING
    assert read_back.kind is StepKind.SQL_READ and bare.kind == "cypher"
    # the footprint, not the display string, decides: a "select" that says it writes is a write
    lying = StepRecord(2, "A", StepKind.SQL_READ, "select 1", touches=_writes(("sql",)))
    assert dependent(footprint(lying), statement_footprint("sql", "select 2"))


F, G = ("file", "f"), ("file", "g")
DEPENDENCE = [
    # (a, b, dependent)
    (_reads(F), _reads(F), False),  # two reads commute
    (_reads(F), _writes(F), True),
    (_writes(F), _writes(G), False),  # different files
    (_writes(("file",)), _reads(G), True),  # an fsync: any file
    (_writes(F, G), _reads(G), True),  # a rename names two
    (_reads(("sql",)), _reads(("sql",)), False),
    (_reads(("sql",)), _writes(("sql",)), True),
    (_writes(("sql",)), _writes(("pg",)), False),  # different databases
    (_writes(("sql",)), _writes(F), False),
    (lock_footprint("x"), lock_footprint("x"), True),
    (lock_footprint("x"), lock_footprint("y"), False),
    (NOTHING, ANYTHING, False),  # starting an agent touches nothing
    (ANYTHING, ANYTHING, True),
    (ANYTHING, _reads(F), True),
    (ANYTHING, lock_footprint("x"), True),
    (file_footprint(StepKind.FILE_OPEN, "f"), file_footprint(StepKind.FILE_READ, "f"), False),
    (file_footprint(StepKind.FILE_OPEN_W, "f"), file_footprint(StepKind.FILE_READ, "f"), True),
]


@pytest.mark.parametrize("a, b, expected", DEPENDENCE)
def test_two_steps_are_dependent_iff_their_footprints_conflict(a, b, expected):
    assert dependent(a, b) is expected and dependent(b, a) is expected


def test_footprints_print_their_space_and_rename_a_lock_stably():
    assert [fp.space for fp in (NOTHING, ANYTHING, _reads(F), _writes(("sql",)), lock_footprint("x"))] == \
        [None, "*", "file", "sql", "lock"]
    assert lock_footprint("Lock created at a.py:3").renamed("lock", "lock 0") == lock_footprint("lock 0")
