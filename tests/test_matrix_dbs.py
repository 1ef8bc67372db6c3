"""The anomaly matrix on the databases beyond PostgreSQL: the cells a database can express run,
the others are marked with the reason (never a rate of 0); MariaDB's repeatable read admits P4."""

from __future__ import annotations

import io
import json

import pytest
from _databases import duckdb_dsn, mysql_dsn, sqlite_dsn  # noqa: F401 - fixtures

from toki.cli import main
from toki.matrix import cells as mx


def matrix(dsn: str, tmp_path, *extra: str) -> dict:
    path = tmp_path / "m.json"
    out = io.StringIO()
    rc = main(["matrix", "--dsn", dsn, "--trials", "2", "--quiet", "--json", str(path), *extra], out=out,
              err=io.StringIO())
    assert rc == 0, out.getvalue()
    doc = json.loads(path.read_text())
    doc["_out"] = out.getvalue()
    return doc


def _cells(doc) -> dict:
    return {(c["predicate"], c["level"]): c for c in doc["cells"] + doc["variants"]}


@pytest.mark.slow
def test_sqlite_runs_only_serializable_and_says_why(sqlite_dsn, tmp_path):
    doc = matrix(sqlite_dsn, tmp_path)
    cells = _cells(doc)
    for (p, lv), c in cells.items():
        if lv.startswith("SR"):
            assert c["rate"] == 0.0 and c["trials"] == 2, (p, lv, c)
        else:
            assert c["rate"] is None and "sqlite has no" in c["not_expressible"]
    assert all(c["rate"] is None and "write path" in c["not_expressible"] for c in doc["n3_grid"])
    assert doc["summary"]["not_expressible"] == 36 and doc["summary"]["mismatches"] == []
    assert doc["backend"]["name"] == "sqlite" and doc["workers"] == 1
    assert "n/a (12 cell(s)): N3 runs the write path" in doc["_out"]
    assert doc["provenance"]["seed"] == 42


@pytest.mark.slow
def test_duckdb_is_snapshot_isolation_in_the_matrix(duckdb_dsn, tmp_path):
    cells = _cells(matrix(duckdb_dsn, tmp_path, "--no-n3"))
    si = {p: c for (p, lv), c in cells.items() if lv == "SI"}
    # what SI excludes (first committer wins on P0/P4, snapshot reads on P1, P2, A5A) ...
    assert all(si[p]["rate"] == 0.0 for p in ("P0", "P1", "P2", "P4", "A5A"))
    assert si["P4"]["aborted"] == 2 and "TransactionException" in si["P4"]["codes"]
    assert si["P4"]["sqlstates"] == {"none": 2}  # DuckDB has no SQLSTATE: named so, not faked
    # ... and what it admits (write skew and its agent-memory forms)
    assert all(si[p]["rate"] == 1.0 for p in ("P3", "A5B", "N1", "N2"))
    assert all(c["rate"] is None for (p, lv), c in cells.items() if not lv.startswith("SI"))


@pytest.mark.slow
@pytest.mark.mysql
def test_mariadb_repeatable_read_admits_p4(mysql_dsn, tmp_path):
    doc = matrix(mysql_dsn, tmp_path, "--no-n3", "--only", "P4", "--only", "P2", "--no-variants")
    cells = _cells(doc)
    assert cells[("P4", "SI")]["rate"] == 1.0 and cells[("P4", "SI+cb")]["rate"] == 1.0  # lost update at RR
    assert cells[("P4", "SR")]["rate"] == 0.0 and "1213" in cells[("P4", "SR")]["codes"]
    assert "40001" in cells[("P4", "SR")]["sqlstates"]  # MySQL's deadlock 1213 is SQLSTATE 40001
    assert cells[("P2", "SI")]["rate"] == 0.0 and cells[("P2", "RC")]["rate"] == 1.0
    assert {m["predicate"] + " " + m["level"] for m in doc["summary"]["mismatches"]} == {"P4 SI", "P4 SI+cb"}
    assert doc["backend"]["name"] == "mariadb" and "innodb_snapshot_isolation" in doc["backend"]


def test_unexpressible_is_decided_before_any_trial(sqlite_dsn):
    from toki.db.server import resolve

    server = resolve(sqlite_dsn)
    jobs = mx.plan(trials=1, mode="witness", seed=1, predicates=["P4"], variants=False)
    why = {(j.kind, j.level): mx.unexpressible(j, server) for j in jobs}
    assert why[("cell", "SR")] is None and why[("cell", "SR+cb")] is None
    assert "read-committed" in why[("cell", "RC")] and "write path" in why[("n3", "SR")]
