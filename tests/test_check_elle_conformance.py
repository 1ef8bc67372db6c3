"""Elle's own test suites, as data, against toki's checker (issue 16).

``tests/elle_conformance/*.json`` hold the histories of Elle's list-append and rw-register test
namespaces (written in Elle's own test language, expanded here the way Elle's ``op`` and ``pair``
helpers expand them) with the verdict, anomaly types and ``not`` that Elle's tests assert, and the
lattice expectations of Elle's consistency-model tests. toki's computed answers are compared with
Elle's expected ones; nothing here is tuned to toki. A check where toki deliberately differs would
carry ``"difference"`` (why) and ``"toki_expect"`` (what toki answers instead); none does today.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toki.check import check
from toki.check import models as cm
from toki.errors import ConfigError

D = Path(__file__).parent / "elle_conformance"
KEYS = "xyztu"


def mops(s: str, workload: str) -> list[list]:
    """Elle's test language: ax1 (append 1 to x), ry12 (read y = [1 2]), rx (read, no value),
    wx1 (set x = 1), rx_ (read x = nil). A micro-op with no value stays two elements long, as
    Elle's ``op`` leaves it."""
    out: list[list] = []
    for c in s:
        if c in "arw":
            out.append([{"a": "append", "r": "r", "w": "w"}[c]])
        elif c in KEYS:
            out[-1].append(c)
        elif workload == "list-append":
            m = out[-1]
            if m[0] == "append":
                m.append(int(c))
            elif len(m) == 2:
                m.append([int(c)])
            else:
                m[2].append(int(c))
        else:
            out[-1].append(None if c == "_" else int(c))
    return out


def expand(item, workload: str) -> list[dict]:
    if isinstance(item, str):
        item = {"op": item}
    if "value" in item:
        return [dict(item)]
    base = {"process": item.get("process", 0), "type": item.get("type", "ok")}
    if workload == "list-append":  # Elle's list-append `op` sets :f and :time; rw-register's does not
        base.update({"f": "txn", "time": 0})
    for form in ("op", "pair", "invoke"):
        if form in item:
            value = mops(item[form], workload)
            break
    inv = dict(base, type="invoke", value=[[m[0], m[1], None] if m[0] == "r" else m for m in value])
    done = dict(base, value=value)
    return {"op": [done], "pair": [inv, done], "invoke": [inv]}[form]


def cases(name: str) -> list:
    data = json.loads((D / name).read_text())
    return [pytest.param(data["workload"], case, chk, id=f"{case['name']} #{i + 1}")
            for case in data["cases"] for i, chk in enumerate(case["checks"])]


def run(workload: str, case: dict, chk: dict) -> dict:
    ops = [op for item in case["history"] for op in expand(item, workload)]
    kw = {k: chk[k] for k in ("wfr_keys", "sequential_keys", "linearizable_keys") if k in chk}
    return check(ops, workload=workload, models=chk.get("models"), anomalies=chk.get("anomalies"), **kw)


def compare(res: dict, chk: dict) -> None:
    want = chk["toki_expect"] if "difference" in chk else chk["expect"]
    if "compare" in chk:  # Elle's test asserts only these fields
        got = {k: res[k] for k in chk["compare"]}
    else:
        got = {"valid": res["valid"]}
        if want["valid"] is not True:
            got.update({"anomaly_types": res["anomaly_types"], "not": res["not"]})
    assert got == want, json.dumps(res, default=str)[:2000]


@pytest.mark.parametrize("workload, case, chk", cases("list_append.json"))
def test_elle_list_append(workload, case, chk):
    compare(run(workload, case, chk), chk)


@pytest.mark.parametrize("workload, case, chk", cases("rw_register.json"))
def test_elle_rw_register(workload, case, chk):
    compare(run(workload, case, chk), chk)


def _lattice_checks() -> list:
    return [pytest.param(chk, id=chk["name"]) for chk in json.loads((D / "consistency_model.json").read_text())["checks"]]


@pytest.mark.parametrize("chk", _lattice_checks())
def test_elle_consistency_model(chk):
    fn, args, want = chk["fn"], chk["args"], chk["expect"]
    if want == "error":
        with pytest.raises(ConfigError):
            cm.anomalies_prohibited_by(args)
        return
    if fn == "weakest":
        got = sorted({cm.friendly(m) for m in cm.weakest({cm.canonical(a) for a in args})})
    elif fn == "anomalies_prohibited_by":
        got = sorted(cm.anomalies_prohibited_by(args))
    elif fn == "impossible_models":
        got = sorted({cm.friendly(m) for m in cm.impossible_models(args)})
    elif fn == "boundary":
        got = cm.boundary(args)
    elif fn == "boundary_not":
        got = cm.boundary(args)["not"]
    else:
        got = sorted(cm.impossible_closure(args))
    assert got == want


def test_the_expander_builds_elle_ops():
    # the test language itself, so a wrong expansion cannot pass silently
    assert mops("ax1ry12rz", "list-append") == [["append", "x", 1], ["r", "y", [1, 2]], ["r", "z"]]
    assert mops("wx1rx_", "rw-register") == [["w", "x", 1], ["r", "x", None]]
    inv, done = expand({"pair": "rx1ay2", "process": 3}, "list-append")
    assert inv["type"] == "invoke" and inv["value"] == [["r", "x", None], ["append", "y", 2]]
    assert done["type"] == "ok" and done["process"] == 3 and done["value"][0] == ["r", "x", [1]]
