"""``toki check --workload memory`` (docs/memory-histories.md): every anomaly planted one at a time
in an otherwise valid hand-written history (tests/data/memory/, written by make.py there) is found
and named; the valid history passes in JSON lines, a JSON array and EDN; an empty or all-fail
history is unknown (exit 1); bad input is one line naming the op (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._cli import toki
from toki.check import accel, check, memory
from toki.check.reading import memory as memory_reading
from toki.check.memory_gen import PLANTS, plant, simulate

D = Path(__file__).parent / "data" / "memory"

#: each planted file: exactly the anomaly types the check reports (the first named is the plant's)
PLANTED = {
    "lost-update": {"lost-update", "G2-item"},        # two supersedes of one claim at once
    "write-skew": {"G2-item"},                         # each drops a different one of two contacts
    "double-supersede": {"double-supersede"},          # a supersede that forgot to retract
    "duplicate-insert": {"duplicate-insert", "lost-update"},  # dedup check then insert, twice at once
    "n2-belief-drift": {"N2", "G-single-item"},        # old home, new job: no serial order has both
    "n3-audit-erasure": {"N3", "incompatible-order"},  # the audit history lost Rome
    "n3-stale-audit": {"N3"},                          # an acknowledged claim missing from a later read
    "n1-replay": {"N1"},                               # one question, one set, two choices
    "g1a-aborted-read": {"G1a"},                       # a read of a failed add
}


def result(*args: str) -> tuple[int, dict]:
    rc, out, err = toki("check", *args, "--workload", "memory", "--json")
    assert err == "", err
    return rc, json.loads(out)


@pytest.mark.parametrize("name", ["valid.jsonl", "valid.json", "valid.edn"])
def test_the_valid_history_passes_in_every_format(name):
    rc, res = result(str(D / name))
    assert (rc, res["valid"], res["anomaly_types"]) == (0, True, [])
    assert set(res) == {"valid", "anomaly_types", "anomalies", "not", "also_not"}


def test_the_three_formats_read_the_same_history():
    hs = [memory.read(D / n) for n in ("valid.jsonl", "valid.json", "valid.edn")]
    ops = [[h.op(t) for t in range(h.n_txns)] for h in hs]
    assert ops[0] == ops[1] == ops[2] and len(ops[0]) == 11
    assert all(h.header["multi_valued"] == ["alice/hobbies"] for h in hs[:2])
    assert all(bool(h.multi[h.slots.index("alice/hobbies")]) for h in hs)  # EDN's :multi-valued too


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_each_planted_anomaly_is_found_and_named(name):
    valid = (D / "valid.jsonl").read_text().splitlines()
    planted = (D / f"{name}.jsonl").read_text().splitlines()
    assert planted[:len(valid)] == valid and len(planted) > len(valid)  # planted into the valid history
    rc, res = result(str(D / f"{name}.jsonl"))
    assert rc == 1 and res["valid"] is False
    assert set(res["anomaly_types"]) == PLANTED[name]
    for typ in res["anomaly_types"]:
        for case in res["anomalies"][typ]:
            text = json.dumps(case)
            assert "explanation" in case or all("explanation" in s for s in case["steps"]), (typ, case)
            assert '"index"' in text  # the ops themselves are in the evidence


def test_explanations_name_slots_claims_and_the_edges():
    _, res = result(str(D / "n2-belief-drift.jsonl"))
    n2 = res["anomalies"]["N2"][0]
    assert sorted(n2["slots"]) == ["alice/employer", "alice/residence"]
    kinds = {s["type"]: s["explanation"] for s in n2["steps"]}
    assert kinds == {
        "rw": "T1's current read of 'alice/residence' still held 'alice/residence=Paris', which T2 retracted",
        "wr": "T1's current read of 'alice/employer' held 'alice/employer=Lisbon Labs', which T2 added"}
    _, res = result(str(D / "n3-stale-audit.jsonl"))
    (case,) = res["anomalies"]["N3"]
    assert case["claim"] == "alice/residence=Madrid" and case["known_from"]["type"] == "ok"
    assert "completed before op" in case["explanation"]
    _, res = result(str(D / "n1-replay.jsonl"))
    (case,) = res["anomalies"]["N1"]
    assert {c["chosen"] for c in case["choices"]} == {"alice/hobbies=chess", "alice/hobbies=go"}
    _, res = result(str(D / "double-supersede.jsonl"))
    assert res["anomalies"]["double-supersede"][0]["claims"] == ["alice/residence=Berlin", "alice/residence=Paris"]


@pytest.mark.parametrize("name", ["empty.jsonl", "all-fail.jsonl"])
def test_empty_and_all_fail_histories_are_unknown(name):
    rc, res = result(str(D / name))
    assert (rc, res["valid"], res["anomaly_types"]) == (1, "unknown", ["empty-transaction-graph"])


def test_nothing_at_all_is_unknown_too(tmp_path):
    f = tmp_path / "h.jsonl"
    f.write_text("")
    assert result(str(f)) == (1, result(str(D / "empty.jsonl"))[1])
    f.write_text('{"type": "info", "process": "nemesis", "f": "kill", "value": null}\n')
    assert result(str(f))[1]["valid"] == "unknown"


def op(i, typ, p, value):
    return json.dumps({"index": i, "type": typ, "process": p, "f": "txn", "value": value})


@pytest.mark.parametrize("lines, where", [
    ([op(0, "invoke", 0, [["upsert", "s", "c"]]), op(1, "ok", 0, [["upsert", "s", "c"]])],
     "op 0 (line 1): micro-op 0 has f 'upsert'"),
    ([op(0, "ok", 0, [["add", "s"]])], "op 0 (line 1): micro-op 0 (add) has 2 elements"),
    ([op(0, "ok", 0, [["retract", "s", None]])], "micro-op 0 retracts null in an ok op"),
    ([op(0, "ok", 0, [["current", "s", "c"]])], "micro-op 0 (current) read 'c', not a list of claims"),
    ([op(0, "ok", 0, [["history", "s", [["c"]]]])], "micro-op 0 (history) read the claim ['c']"),
    ([op(0, "ok", 0, [["add", None, "c"]])], "micro-op 0 (add) has the slot None"),
    ([op(0, "ok", 0, [["decide", "q", "c", "c"]])], "micro-op 0 considered 'c', not a list of claims"),
    ([op(0, "ok", 0, []), '{"type": "header", "multi_valued": []}'], "op at line 2: is a header"),
    ([op(0, "done", 0, [])], "op 0 (line 1): has type 'done'"),
    ([op(0, "ok", 0, None)], "value is None, not a list of micro-ops"),
    ([op(0, "ok", 0, []), '{"index": 1, "type": "ok", "process": 0'], "line 2 is not valid JSON"),
    (['{"type": "header", "multi_valued": "*"}', op(0, "ok", 0, [["current", "s", []]]),
      '{"type": "ok", "process": 1, "value": []}'], "op at line 3: has an index while other ops do not"),
    (['{"type": "header", "multi_valued": [["s"]]}'], "the header's multi_valued is [['s']]"),
])
def test_bad_input_is_one_line_naming_the_op(tmp_path, lines, where):
    f = tmp_path / "h.jsonl"
    f.write_text("\n".join(lines) + "\n")
    rc, out, err = toki("check", str(f), "--workload", "memory")
    assert rc == 2, (out, err)
    assert where in err and err.count("\n") == 1, err


def test_an_invocation_that_never_completes_may_have_happened():
    ops = [{"type": "invoke", "process": 0, "value": [["current", "s", None], ["retract", "s", None],
                                                      ["add", "s", "s=1"], ["decide", "q", None, None]]},
           {"type": "invoke", "process": 1, "value": [["current", "s", None]]},
           {"type": "ok", "process": 1, "value": [["current", "s", ["s=1"]]]}]
    h = memory.parse(ops)
    assert h.op(0)["type"] == "info" and h.op(0)["value"][1] == ["retract", "s", None]
    res = check(ops, workload="memory")
    assert res["valid"] is True  # its add was seen, so it happened; nothing contradicts it


def test_serializable_by_default_strict_serializable_on_request():
    # two supersedes one after the other in real time; a reader that starts after both sees the
    # old home and the new job: serializable (it may go between them), not strict serializable
    ops = [
        {"index": 0, "type": "invoke", "process": 0, "value": [["add", "h", "h=1"], ["add", "j", "j=1"]]},
        {"index": 1, "type": "ok", "process": 0, "value": [["add", "h", "h=1"], ["add", "j", "j=1"]]},
        {"index": 2, "type": "invoke", "process": 0, "value": [["retract", "h", "h=1"], ["add", "h", "h=2"]]},
        {"index": 3, "type": "ok", "process": 0, "value": [["retract", "h", "h=1"], ["add", "h", "h=2"]]},
        {"index": 4, "type": "invoke", "process": 1, "value": [["retract", "j", "j=1"], ["add", "j", "j=2"]]},
        {"index": 5, "type": "ok", "process": 1, "value": [["retract", "j", "j=1"], ["add", "j", "j=2"]]},
        {"index": 6, "type": "invoke", "process": 2, "value": [["current", "h", None], ["current", "j", None]]},
        {"index": 7, "type": "ok", "process": 2, "value": [["current", "h", ["h=1"]], ["current", "j", ["j=2"]]]},
    ]
    assert check(ops, workload="memory")["valid"] is True
    res = check(ops, workload="memory", models=["strict-serializable"])
    assert res["valid"] is False and set(res["anomaly_types"]) == {"G-single-item-realtime", "N2"}
    assert res["anomalies"]["N2"][0]["cycle_type"] == "G-single-item-realtime"


def test_multi_valued_slots_from_the_header_or_the_flag(tmp_path):
    lines = [op(0, "ok", 0, [["add", "bob/tags", "bob/tags=a"], ["add", "bob/tags", "bob/tags=b"]]),
             op(1, "ok", 1, [["current", "bob/tags", ["bob/tags=a", "bob/tags=b"]]])]
    f = tmp_path / "h.jsonl"
    f.write_text("\n".join(lines) + "\n")
    assert result(str(f))[1]["anomaly_types"] == ["double-supersede"]
    assert result(str(f), "--multi-valued", "*/tags")[1]["valid"] is True
    assert result(str(f), "--multi-valued", "bob/tags")[1]["valid"] is True
    f.write_text(json.dumps(memory.header(["*/tags"])) + "\n" + "\n".join(lines) + "\n")
    assert result(str(f))[1]["valid"] is True


def test_anomaly_flags_choose_what_must_not_occur():
    f = str(D / "lost-update.jsonl")
    assert result(f, "--anomaly", "N1")[1]["valid"] is True
    rc, res = result(f, "--anomaly", "lost-update")
    assert (rc, res["anomaly_types"]) == (1, ["lost-update"])
    rc, out, err = toki("check", f, "--workload", "memory", "--anomaly", "N4")
    assert rc == 2 and "unknown anomaly 'N4'" in err and "N1" in err


def test_plot_draws_each_cycle(tmp_path):
    rc, out, _ = toki("check", str(D / "n2-belief-drift.jsonl"), "--workload", "memory", "--plot", str(tmp_path))
    assert rc == 1 and "picture:" in out
    svgs = sorted(p.name for p in tmp_path.iterdir())
    assert svgs == ["G-single-item-1.svg", "N2-1.svg"]
    svg = (tmp_path / "N2-1.svg").read_text()
    assert svg.startswith("<svg") and "alice/residence" in svg and "T1 → T2 (rw)" in svg
    rc, out, _ = toki("check", str(D / "write-skew.jsonl"), "--workload", "memory", "--plot", str(tmp_path), "--json")
    assert json.loads(out)["anomalies"]["G2-item"][0]["plot"].endswith("G2-item-1.svg")


def test_simulated_histories_valid_and_planted():
    ops = simulate(1500, seed=7)
    assert check(ops, workload="memory")["valid"] is True
    assert check(ops, workload="memory", models=["strict-serializable"])["valid"] is True
    for kind, name in PLANTS.items():
        res = check(plant(ops, [kind]), workload="memory")
        assert res["valid"] is False and name in res["anomaly_types"], (kind, res["anomaly_types"])
    racy = check(simulate(400, seed=1, engine="snapshot", clients=4, slots=6), workload="memory")
    assert racy["valid"] is False and {"lost-update", "double-supersede"} <= set(racy["anomaly_types"])


@pytest.mark.slow  # compiling the scanner costs a fresh clone's worker about 20 s
@pytest.mark.skipif(not accel.can_compile(), reason="numba is not installed or TOKI_JIT=never")
def test_the_compiled_scanner_reads_what_the_python_builder_reads():
    texts = [(D / n).read_bytes() for n in sorted(p.name for p in D.glob("*.jsonl"))]
    ops = plant(simulate(800, seed=3), list(PLANTS))
    ops.append({"type": "invoke", "process": 999, "value": [["current", "x", None], ["retract", "x", None],
                                                            ["decide", "q", None, None]], "index": len(ops) - 1})
    texts.append("\n".join(json.dumps(o) for o in ops).encode())
    texts.append(json.dumps(ops).encode())  # an array
    texts.append('[{"type": "ok", "process": 0, "value": [["add", "s", "caf\\u00e9"], ["add", "s", "café"]]}]'.encode())
    for text in texts:
        for split in (False, True) if len(text) > 100_000 else (False,):  # (a forked child reads half)
            got = memory_reading._parse_compiled(text, split)
            assert got is not None, text[:200]
            a = got[0]
            b = memory.parse(memory.loads(text))
            assert [a.op(t) for t in range(a.n_txns)] == [b.op(t) for t in range(b.n_txns)]
            assert sorted(map(str, a.slots)) == sorted(map(str, b.slots))
            assert sorted(map(str, a.pair_claim)) == sorted(map(str, b.pair_claim))
    # EDN as Jepsen writes it (keywords, commas as whitespace; a keyword slot is its name)
    edn = [(D / "valid.edn").read_bytes(),
           b'[{:type :header, :multi-valued [:tags]}, {:type :ok, :process 0, :f :txn, :value '
           b'[[:add :tags :a] [:add "tags" "b"] [:current :tags [:a, "b"]] [:decide 7 [:a] nil]]}]']
    for text in edn:
        a = memory_reading.parse_edn(text, compiled=True, split=False)
        b = memory.parse(memory.loads(text, fmt="edn"))
        assert [a.op(t) for t in range(a.n_txns)] == [b.op(t) for t in range(b.n_txns)] and a.header == b.header
    assert memory_reading._parse_compiled(b'{:type :ok, :process 0, :time #inst "2020-01-01", :value []}', False, edn=True) \
        is None  # a tag: left to the EDN reader
    # what it does not read goes to the Python builder: a float, a nested map in a micro-op
    for text in (b'{"type": "ok", "process": 0, "index": 1.5, "value": []}\n',
                 b'{"type": "ok", "process": 0, "value": [["add", {"k": 1}, "c"]]}\n'):
        assert memory_reading._parse_compiled(text, False) is None


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["cli", "compiled"])
def test_mutated_histories_get_a_verdict_or_one_line_never_a_traceback(tmp_path, compiled):
    """Seeded mutations of the valid history (a character dropped, a value replaced, an op dropped
    or repeated, a type changed): every one is checked (exit 0 or 1) or refused in one line (exit
    2), and (in the slow tier, where the scanner is compiled) the compiled reader, where it reads
    one, reads what the Python reader reads."""
    import random

    rng = random.Random(36)
    base = (D / "valid.jsonl").read_text().splitlines()
    values = ["null", "1", '"x"', "[]", "{}", "1.5", "true", "-3", '[["add"]]', '"header"', "007"]
    f = tmp_path / "h.jsonl"
    seen = set()
    for _ in range(60):
        lines = list(base)
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(lines))
            s, k = lines[i], rng.randrange(5)
            if k == 0:
                j = rng.randrange(len(s))
                lines[i] = s[:j] + s[j + 1:]
            elif k == 1:
                j = rng.choice([m for m in range(len(s)) if s[m] in ",[:"]) + 1
                e = j
                while e < len(s) and s[e] not in ",]}":
                    e += 1
                lines[i] = s[:j] + rng.choice(values) + s[e:]
            elif k == 2 and len(lines) > 1:
                del lines[i]
            elif k == 3:
                lines.insert(i, lines[rng.randrange(len(lines))])
            else:
                lines[i] = s.replace('"ok"', '"info"', 1) if rng.random() < 0.5 else s.replace('"invoke"', '"ok"', 1)
        text = "\n".join(lines) + "\n"
        f.write_text(text)
        rc, out, err = toki("check", str(f), "--workload", "memory")
        seen.add(rc)
        assert rc in (0, 1) or (rc == 2 and err.count("\n") == 1), (rc, err, text)
        if compiled and accel.load("memory_scan") is not None and rc != 2:
            a = memory_reading.parse_json(text.encode(), compiled=True, split=False)
            b = memory.parse(memory.loads(text.encode()))
            assert [a.op(t) for t in range(a.n_txns)] == [b.op(t) for t in range(b.n_txns)], text
    assert seen == {0, 1, 2}
