"""The agent-races experiment with few runs: JSON shape, the naive writer's docs/tables/index.md table,
and what the guarded writer does."""

from __future__ import annotations

import io
import json

import pytest

from toki.cli import main

pytestmark = pytest.mark.db


def test_agent_races_few_runs(tmp_path):
    out = io.StringIO()
    path = tmp_path / "ar.json"
    rc = main(["experiment", "agent-races", "--runs", "3", "--json", str(path)], out=out, err=io.StringIO())
    assert rc == 0
    doc = json.loads(path.read_text())
    assert doc["experiment"] == "agent-races" and doc["runs"] == 3 and doc["backend"]["name"] == "postgresql"
    assert len(doc["cells"]) == 3 * 2 * 3
    cells = {(c["scenario"], c["writer"], c["level"]): c for c in doc["cells"]}
    for c in doc["cells"]:
        assert set(c) >= {"scenario", "writer", "level", "runs", "anomalies", "one_aborted", "sqlstates",
                          "current_values"}
        assert sum(c["current_values"].values()) == 3
    # the naive writer reproduces docs/tables/index.md (scaled to 3 runs)
    assert doc["naive_matches_published"] is True and doc["mismatches"] == []
    ds = cells[("double-supersede", "naive", "read-committed")]
    assert ds["anomalies"] == 3 and ds["current_values"] == {"2": 3}
    assert cells[("cleanup-write-skew", "naive", "repeatable-read")]["current_values"] == {"0": 3}
    assert cells[("lost-update", "naive", "serializable")]["sqlstates"] == {"40001": 3}
    # the guarded writer: one current value after a double supersede at every level
    for level in ("read-committed", "repeatable-read", "serializable"):
        c = cells[("double-supersede", "toki", level)]
        assert c["anomalies"] == 0 and c["current_values"] == {"1": 3}
    assert "every cell reproduces the published table" in out.getvalue()
    assert doc["provenance"]["seed"] == 42


def test_agent_races_rejects_bad_options():
    err = io.StringIO()
    assert main(["experiment", "agent-races", "--writers", "careful"], out=io.StringIO(), err=err) == 2
    assert "careful" in err.getvalue()
