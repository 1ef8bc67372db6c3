"""`toki prove`: lines, JSON shape, --only, --matrix three-way report, --witness-dir, exit codes."""

import io
import json

import pytest

from toki.cli import main


def _main(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(["prove", *argv], out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_only_group_prints_one_line_per_obligation():
    rc, out, err = _main("--only", "lww")
    assert rc == 0, err
    lines = [line for line in out.splitlines() if ".lww" in line or " lww." in line]
    assert len(lines) == 8 and all(line.split()[0] == "proved" for line in lines)
    assert "all as expected" in out


@pytest.mark.slow
def test_json_shape_and_countermodels():
    rc, out, _ = _main("--only", "theorem3", "--only", "matrix.P4", "--json")
    assert rc == 0
    doc = json.loads(out)
    names = {o["name"]: o for o in doc["obligations"]}
    for o in doc["obligations"]:
        assert set(o) >= {"name", "status", "expected", "seconds", "countermodel"}
        assert o["status"] in ("proved", "refuted", "unknown")
    assert names["theorem3.multilinear"]["status"] == "refuted" and names["theorem3.multilinear"]["countermodel"]
    assert doc["derived_matrix"] == {"P4": {"RC": "admitted", "RC+cb": "admitted", "SI": "excluded",
                                            "SI+cb": "excluded", "SR": "excluded", "SR+cb": "excluded"}}
    h = names["matrix.P4.RC"]["countermodel"]["history"]
    assert "r1[x:T0]" in h and h.index("w2[x") < h.index("w1[x")  # T1 overwrites T2 without reading it
    assert doc["provenance"]["git_commit"]


def test_refuted_law_exits_1(monkeypatch):
    from toki.verify import laws

    monkeypatch.setattr(laws, "LWW", laws.BROKEN_ARRIVAL)  # a tie broken by arrival order
    rc, out, _ = _main("--only", "lww-arrival-tie")
    assert rc == 1
    assert "refuted" in out and "(expected proved)" in out and "not as expected" in out


@pytest.mark.slow
def test_witness_dir_writes_runnable_schedules(tmp_path):
    from toki.sched.files import load

    rc, out, _ = _main("--only", "matrix.A5B", "--witness-dir", str(tmp_path / "w"))
    assert rc == 0
    files = sorted(p.name for p in (tmp_path / "w").iterdir())
    assert files == ["A5B-RC-cb.toml", "A5B-RC.toml", "A5B-SI-cb.toml", "A5B-SI.toml"]
    for f in files:
        load(tmp_path / "w" / f)
    assert "A5B-SI.toml" in out


def _matrix_file(tmp_path, overrides):
    from toki.verify.compare import paper_cell
    from toki.verify.isolation import LEVELS, MATRIX_PREDICATES

    cells = [{"predicate": p, "level": lv, "rate": overrides.get((p, lv), 1.0 if paper_cell(p, lv) == "admitted" else 0.0),
              "trials": 100} for p in MATRIX_PREDICATES for lv in LEVELS]
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps({"cells": cells}))
    return path


@pytest.mark.slow
def test_three_way_report_names_every_disagreement(tmp_path):
    path = _matrix_file(tmp_path, {("N1", "RC"): 0.0, ("P3", "SI"): 0.0})
    rc, out, _ = _main("--only", "matrix.N1", "--only", "matrix.P3", "--matrix", str(path), "--json")
    doc = json.loads(out)
    dis = {(d["predicate"], d["level"]): d for d in doc["comparison"]["disagreements"]}
    assert set(dis) == {("N1", "RC"), ("P3", "SI")}
    assert dis["N1", "RC"]["postgresql"] == "excluded" and dis["N1", "RC"]["z3"] == "admitted"
    assert rc == 0  # measured disagreements are reported, they are no refuted law


@pytest.mark.parametrize("argv, needle", [
    (["--only", "no-such-obligation"], "matches no obligation"),
    (["--timeout", "0"], "not positive"),
    (["--matrix", "/nonexistent/matrix.json"], "does not exist"),
])
def test_bad_input_exits_2(argv, needle):
    rc, _, err = _main(*argv)
    assert rc == 2 and needle in err


def test_malformed_matrix_file_exits_2(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"cells": [{"predicate": "P4", "level": "XX", "rate": 0}]}))
    rc, _, err = _main("--only", "lww.idempotent", "--matrix", str(p))
    assert rc == 2 and "unknown level" in err


@pytest.mark.slow
def test_other_forms_are_compared_apart(tmp_path):
    path = _matrix_file(tmp_path, {})
    doc = json.loads(path.read_text())
    doc["variants"] = [{"predicate": "N1-unique", "level": lv, "rate": 0.0, "sqlstates": {"23505": 100}}
                       for lv in ("RC", "SI")]
    path.write_text(json.dumps(doc))
    rc, out, _ = _main("--only", "matrix.N1-unique.RC", "--only", "matrix.N1-unique.SI", "--matrix", str(path), "--json")
    comp = json.loads(out)["comparison"]
    assert rc == 0 and comp["disagreements"] == []
    forms = {(d["predicate"], d["level"]): d for d in comp["form_disagreements"]}
    # abstract RC admits N1 on a unique-keyed log; PostgreSQL's unique index excludes it (23505)
    assert forms["N1-unique", "RC"]["z3"] == "admitted" and forms["N1-unique", "RC"]["postgresql"] == "excluded"
    assert forms["N1-unique", "SI"]["z3"] == "excluded"
