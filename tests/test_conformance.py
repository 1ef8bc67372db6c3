"""``toki conformance``: Hermitage's table, measured on real databases and decided from what happened.

What is claimed: on PostgreSQL and on MariaDB (innodb_snapshot_isolation off) every cell agrees with
Hermitage's published column; with the variable on, MariaDB's repeatable read prevents PMP, P4 and
G-single and the difference is reported with its reason; SQLite's two journal modes prevent every
case, by different means; DuckDB's snapshot isolation admits write skew and loses an update to a delete; each cell says how (a waited statement, an abort, a snapshot) and an
abort that followed a wait is an abort; a run that did not finish is never "prevented".
"""

from __future__ import annotations

import io
import json

import pytest
from _databases import duckdb_dsn, mysql_dsn, sqlite_dsn  # noqa: F401 - fixtures

from toki.cli import main
from toki.conformance import CASES, FORMS, measure
from toki.conformance.cases import Form
from toki.conformance.judge import Commits, Ends, Reads
from toki.db.server import resolve
from toki.errors import ConfigError


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def grid(doc: dict) -> dict[tuple[str, str], dict]:
    return {(c["level"], c["case"]): c for c in doc["cells"]}


def form(cell: dict, schedule: str) -> dict:
    return next(f for f in cell["forms"] if f["schedule"] == schedule)


# -- PostgreSQL (embedded 18, or TOKI_DSN) ---------------------------------------------------------

@pytest.mark.db
def test_postgresql_table_is_hermitages():
    doc = measure(resolve())
    h = doc["hermitage"]
    assert h["column"] == "PostgreSQL 9.3.5" and h["compared"] == 30 and h["agree"] == 30, h["differ"]
    assert h["levels_not_in_hermitage"] == ["read-uncommitted"]
    g = grid(doc)
    # PostgreSQL's read uncommitted is its read committed.
    assert [g[("read-uncommitted", c)]["label"] for c in CASES] == [g[("read-committed", c)]["label"] for c in CASES]
    assert all(c["outcome"] != "unknown" for c in doc["cells"])
    assert doc["database"]["name"] == "postgresql" and doc["database"]["settings"]["default_transaction_isolation"]


@pytest.mark.db
def test_postgresql_cells_say_how_they_were_decided():
    g = grid(measure(resolve(), cases=["G0", "P4", "G-single", "G2-item"], levels=["rc", "rr", "sr"]))
    # Read committed: T2's update waits for T1, then overwrites both rows: no mix, by blocking.
    assert g[("read-committed", "G0")]["how"] == "blocking"
    # Repeatable read: T2 waits too, but what prevents the mix is its serialization failure.
    rr = form(g[("repeatable-read", "G0")], "g0")
    assert rr["how"] == "abort" and "40001" in rr["why"]
    assert any(s["blocked"] for s in rr["run"]["steps"])  # it waited first: an abort, not a block
    # Read skew at repeatable read: the read-only form is prevented by the snapshot, the write form by 40001.
    gs = g[("repeatable-read", "G-single")]
    assert form(gs, "g-single")["how"] == "snapshot" and form(gs, "g-single-write-1")["how"] == "abort"
    assert g[("read-committed", "P4")]["outcome"] == "anomaly" and g[("read-committed", "P4")]["label"] == "—"
    assert g[("repeatable-read", "G2-item")]["outcome"] == "anomaly"
    assert g[("serializable", "G2-item")]["how"] == "abort"


# -- SQLite, both journal modes --------------------------------------------------------------------

@pytest.mark.parametrize("suffix, journal", [("", "delete"), ("?journal=wal", "wal")])
def test_sqlite_prevents_every_case_and_says_how(sqlite_dsn, suffix, journal):
    doc = measure(resolve(sqlite_dsn + suffix))
    assert doc["database"]["settings"]["journal_mode"] == journal and doc["levels"] == ["serializable"]
    assert doc["hermitage"] is None
    g = grid(doc)
    assert all(g[("serializable", c)]["label"] == "✓" for c in CASES), [c["why"] for c in doc["cells"]]
    p4 = form(g[("serializable", "P4")], "p4")
    assert p4["how"] == "abort"
    if journal == "wal":
        # A snapshot older than the last commit cannot write; the re-read sees the snapshot.
        assert "SQLITE_BUSY_SNAPSHOT" in p4["why"]
        assert form(g[("serializable", "PMP")], "pmp")["how"] == "snapshot"
    else:
        # Rollback journal: T2's commit waits for T1's read lock, so T1 re-reads before T2's row exists.
        assert "toki rolled this one back" in p4["why"]
        assert form(g[("serializable", "PMP")], "pmp")["how"] == "blocking"


@pytest.mark.slow
def test_duckdb_snapshot_isolation_admits_write_skew_and_a_lost_delete(duckdb_dsn):
    g = grid(measure(resolve(duckdb_dsn)))
    assert {lv for lv, _ in g} == {"repeatable-read"}  # its one level, snapshot isolation
    assert g[("repeatable-read", "P4")]["how"] == "abort" and "TransactionException" in g[("repeatable-read", "P4")]["why"]
    assert g[("repeatable-read", "G2-item")]["label"] == "—"
    # Read-only read skew is prevented by the snapshot, but T1's delete removes the row T2 updated
    # and committed after T1's snapshot, and both commit: R/O, not the ✓ of snapshot isolation.
    gs = g[("repeatable-read", "G-single")]
    assert gs["label"] == "R/O" and form(gs, "g-single")["how"] == "snapshot"
    assert form(gs, "g-single-write-1")["outcome"] == "anomaly"


# -- fail closed -----------------------------------------------------------------------------------

_NEVER_RELEASED = """
name = "never-released"
description = "T2 waits for a write lock T1 never gives up"
setup = ["create table test (id int primary key, value int)", "insert into test (id, value) values (1, 10)"]
teardown = ["drop table test"]
steps = [
  { session = "T1", sql = "begin" },
  { session = "T2", sql = "begin" },
  { session = "T1", sql = "update test set value = 11 where id = 1" },
  { session = "T2", sql = "update test set value = 12 where id = 1" },
  { session = "T2", sql = "commit" },
]
"""

_BAD_SQL = """
name = "bad-sql"
description = "a read that is not SQL: the case did not run as written"
setup = ["create table test (id int primary key, value int)", "insert into test (id, value) values (1, 10)"]
teardown = ["drop table test"]
steps = [
  { session = "T1", sql = "begin" },
  { session = "T1", sql = "select value frm test" },
  { session = "T1", sql = "commit" },
]
"""


def test_a_run_that_does_not_finish_is_unknown_never_prevented(sqlite_dsn):
    needs = (Reads((3,), lambda r: False, "never"), Commits(("T2",)))
    forms = {"P4": (Form("never-released", needs, text=_NEVER_RELEASED),),
             "G1a": (Form("bad-sql", (Reads((1,), lambda r: False, "never"),), text=_BAD_SQL),),
             # bad-sql without its bad step: it runs, but reads no final state for Ends to look at
             "G1b": (Form("no-final", (Ends(lambda f: True, "anything"),),
                          text=_BAD_SQL.replace('{ session = "T1", sql = "select value frm test" },', "")),)}
    doc = measure(resolve(sqlite_dsn), cases=["G0", "G1a", "G1b", "P4"], step_limit_s=0.3, forms=forms)
    g = grid(doc)
    assert g[("serializable", "P4")]["outcome"] == "unknown" and "still blocked" in g[("serializable", "P4")]["why"]
    assert g[("serializable", "G1a")]["outcome"] == "unknown" and "failed with" in g[("serializable", "G1a")]["why"]
    assert g[("serializable", "G1b")]["outcome"] == "unknown" and "no final state" in g[("serializable", "G1b")]["why"]
    # The lane left mid-transaction was replaced: the next case still runs.
    assert g[("serializable", "G0")]["label"] == "✓"


def test_cli_exits_1_when_a_cell_is_unknown(sqlite_dsn, monkeypatch):
    needs = (Reads((3,), lambda r: False, "never"), Commits(("T2",)))
    monkeypatch.setitem(FORMS, "P4", (Form("never-released", needs, text=_NEVER_RELEASED),))
    rc, out, _ = cli("conformance", "--dsn", sqlite_dsn, "--case", "P4", "--case", "G0", "--step-limit", "0.3")
    assert rc == 1 and "? P4 at serializable" in out and "still blocked" in out


def test_a_form_told_nothing_to_look_for_is_refused(sqlite_dsn):
    with pytest.raises(ConfigError, match="names no read and no final state"):
        measure(resolve(sqlite_dsn), cases=["P4"], forms={"P4": (Form("p4", (Commits(("T1", "T2")),)),)})
    with pytest.raises(ConfigError, match="more than one session"):
        measure(resolve(sqlite_dsn), cases=["P4"], forms={"P4": (Form("p4", (Reads((2, 3), lambda a, b: True, "x"),)),)})


# -- the command -----------------------------------------------------------------------------------

def test_cli_prints_the_table_and_writes_json_and_png(sqlite_dsn, tmp_path):
    rc, out, err = cli("conformance", "--dsn", sqlite_dsn + "?journal=wal", "--json", str(tmp_path / "t.json"),
                       "--png", str(tmp_path / "t.png"))
    assert rc == 0, err
    assert "Hermitage's table for SQLite" in out and "(WAL)" in out and "G-single" in out and "G2-item" in out
    doc = json.loads((tmp_path / "t.json").read_text())
    assert {"case", "level", "outcome", "how"} <= set(doc["cells"][0])
    assert [c["case"] for c in doc["cells"]] == list(CASES)
    assert doc["provenance"]["git_commit"] and doc["provenance"]["backend"]["settings"]["journal_mode"] == "wal"
    assert (tmp_path / "t.png").stat().st_size > 10_000


@pytest.mark.parametrize("argv, words", [
    (["--dsn", "oracle://scott@db/orcl"], ["unknown database scheme 'oracle'", "use postgresql://"]),
    (["--dsn", "mysql://root@127.0.0.1:1/test"], ["cannot connect", "start the server or fix the DSN"]),
    (["--case", "G9"], ["unknown case(s) 'G9'", "G2-item"]),
])
def test_bad_input_is_one_line_exit_2(argv, words):
    rc, out, err = cli("conformance", *argv)
    assert rc == 2 and err.count("\n") == 1, err
    assert all(w in err for w in words), err


# -- MariaDB ---------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.mysql
def test_mariadb_agrees_with_hermitages_mysql_column(mysql_dsn):
    doc = measure(resolve(mysql_dsn))
    if doc["database"]["name"] != "mariadb":
        pytest.skip("innodb_snapshot_isolation is MariaDB's")
    assert doc["database"]["settings"]["innodb_snapshot_isolation"] is False
    h = doc["hermitage"]
    assert h["column"] == "MySQL 5.6.21 (InnoDB)" and h["agree"] == h["compared"] == 40, h["differ"]
    g = grid(doc)
    assert g[("repeatable-read", "PMP")]["label"] == "R/O" and g[("repeatable-read", "P4")]["label"] == "—"
    # Serializable write skew: T1's update waits for T2's read lock, T2's update closes the cycle and
    # InnoDB kills T2 (1213). A wait came first; what prevented the anomaly is the abort.
    g2 = form(g[("serializable", "G2-item")], "g2-item")
    assert g2["how"] == "abort" and "1213" in g2["why"] and any(s["blocked"] for s in g2["run"]["steps"])
    # Serializable dirty read: the plain read waits for T1's row lock (a locking read), then sees 10.
    assert g[("serializable", "G1a")]["how"] == "blocking"


@pytest.mark.slow
@pytest.mark.mysql
def test_mariadb_snapshot_isolation_on_makes_repeatable_read_snapshot_isolation(mysql_dsn):
    doc = measure(resolve(mysql_dsn + "?snapshot_isolation=on"), levels=["rr"])
    if doc["database"]["name"] != "mariadb":
        pytest.skip("innodb_snapshot_isolation is MariaDB's")
    assert doc["database"]["settings"]["innodb_snapshot_isolation"] is True
    g = grid(doc)
    for case in ("PMP", "P4", "G-single"):
        assert g[("repeatable-read", case)]["label"] == "✓", g[("repeatable-read", case)]["why"]
    assert "1020" in form(g[("repeatable-read", "P4")], "p4")["why"]
    differ = {d["case"]: d for d in doc["hermitage"]["differ"]}
    assert set(differ) == {"PMP", "P4", "G-single"}
    assert all("innodb_snapshot_isolation is ON" in d["why"] for d in differ.values())
    assert g[("repeatable-read", "G2-item")]["label"] == "—"  # still not serializable
