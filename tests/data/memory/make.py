"""Writes tests/data/memory/*.jsonl (run once; the files are the hand-written histories)."""
import json
from pathlib import Path

OUT = Path("tests/data/memory")
R, E, H = "alice/residence", "alice/employer", "alice/hobbies"
PH, EM = "alice/phone", "alice/email"
Rome, Paris = f"{R}=Rome", f"{R}=Paris"
ACME, Initech = f"{E}=ACME", f"{E}=Initech"
chess, go = f"{H}=chess", f"{H}=go"
phone, email = f"{PH}=555-0100", f"{EM}=alice@example.org"
Q = "where does alice live?"

def inv(value):
    return [[m[0], m[1], None] if m[0] in ("current", "history") else
            [m[0], m[1], None, None] if m[0] == "decide" else m for m in value]

HEADER = {"type": "header", "multi_valued": [H], "recorded_by": "hand, for tests/test_check_memory.py"}
# (process, completion type, value); "invoke" events: ("inv", process, value as invoked)
BASE = [
    ("inv", 0, [["current", R, None], ["retract", R, None], ["add", R, Rome]]),
    ("ok", 0, [["current", R, []], ["add", R, Rome]]),
    ("inv", 1, [["add", H, chess], ["add", H, go]]),
    ("inv", 2, [["current", E, None], ["add", E, ACME], ["add", PH, phone], ["add", EM, email]]),
    ("ok", 1, [["add", H, chess], ["add", H, go]]),
    ("ok", 2, [["current", E, []], ["add", E, ACME], ["add", PH, phone], ["add", EM, email]]),
    ("inv", 0, [["current", R, None], ["retract", R, None], ["add", R, Paris]]),
    ("ok", 0, [["current", R, [Rome]], ["retract", R, Rome], ["add", R, Paris]]),
    ("inv", 1, [["history", R, None]]),
    ("ok", 1, [["history", R, [Rome, Paris]]]),
    ("inv", 2, [["current", H, None], ["current", R, None]]),
    ("ok", 2, [["current", H, [chess, go]], ["current", R, [Paris]]]),
    ("inv", 1, [["add", E, Initech]]),
    ("fail", 1, [["add", E, Initech]]),
    ("inv", 0, [["current", R, None], ["decide", Q, None, None]]),
    ("ok", 0, [["current", R, [Paris]], ["decide", Q, [Paris], Paris]]),
    ("inv", 2, [["decide", Q, None, None]]),
    ("ok", 2, [["decide", Q, [Paris], Paris]]),
    ("inv", 1, [["history", H, None]]),
    ("info", 1, [["history", H, None]]),
    ("inv", 2, [["history", E, None], ["current", E, None], ["current", PH, None], ["current", EM, None]]),
    ("ok", 2, [["history", E, [ACME]], ["current", E, [ACME]], ["current", PH, [phone]], ["current", EM, [email]]]),
]

def txn(p, value, typ="ok"):
    return [("inv", p, inv(value)), (typ, p, value)]

Berlin, Madrid, Lisbon = f"{R}=Berlin", f"{R}=Madrid", f"{R}=Lisbon"
Globex, Hooli, LisbonLabs = f"{E}=Globex", f"{E}=Hooli", f"{E}=Lisbon Labs"
tennis = f"{H}=tennis"
PLANTS = {
    # two supersedes of ACME at once: each retracts it and adds its own; neither sees the other
    "lost-update": [("inv", 0, inv([["current", E, []], ["retract", E, None], ["add", E, Globex]])),
                    ("inv", 1, inv([["current", E, []], ["retract", E, None], ["add", E, Hooli]])),
                    ("ok", 0, [["current", E, [ACME]], ["retract", E, ACME], ["add", E, Globex]]),
                    ("ok", 1, [["current", E, [ACME]], ["retract", E, ACME], ["add", E, Hooli]])],
    # alice must keep a phone or an email: each transaction checks both and drops a different one
    "write-skew": [("inv", 0, inv([["current", PH, []], ["current", EM, []], ["retract", PH, phone]])),
                   ("inv", 1, inv([["current", PH, []], ["current", EM, []], ["retract", EM, email]])),
                   ("ok", 0, [["current", PH, [phone]], ["current", EM, [email]], ["retract", PH, phone]]),
                   ("ok", 1, [["current", PH, [phone]], ["current", EM, [email]], ["retract", EM, email]])],
    # a supersede that forgets to retract: the slot then holds two residences
    "double-supersede": txn(0, [["current", R, [Paris]], ["add", R, Berlin]]) + txn(1, [["current", R, [Paris, Berlin]]]),
    # a dedup check then insert, twice at once (mem0 #6515): tennis is added twice
    "duplicate-insert": [("inv", 0, inv([["current", H, []], ["add", H, tennis]])),
                         ("inv", 1, inv([["current", H, []], ["add", H, tennis]])),
                         ("ok", 0, [["current", H, [chess, go]], ["add", H, tennis]]),
                         ("ok", 1, [["current", H, [chess, go]], ["add", H, tennis]])]
                        + txn(2, [["history", H, [chess, go, tennis, tennis]]]),
    # alice moves to Lisbon with a job there, in one transaction; a reader sees the old home, the new job
    "n2-belief-drift": [("inv", 1, [["current", R, None], ["current", E, None]]),
                        ("inv", 0, inv([["current", R, []], ["retract", R, None], ["add", R, Lisbon],
                                        ["current", E, []], ["retract", E, None], ["add", E, LisbonLabs]])),
                        ("ok", 0, [["current", R, [Paris]], ["retract", R, Paris], ["add", R, Lisbon],
                                   ["current", E, [ACME]], ["retract", E, ACME], ["add", E, LisbonLabs]]),
                        ("ok", 1, [["current", R, [Paris]], ["current", E, [LisbonLabs]]])],
    # the audit history loses Rome (an update in place): a later read shows only Paris
    "n3-audit-erasure": txn(1, [["history", R, [Paris]]]),
    # Madrid is acknowledged, and an audit read that starts after it does not show it
    "n3-stale-audit": txn(0, [["current", R, [Paris]], ["retract", R, Paris], ["add", R, Madrid]])
                      + txn(1, [["history", R, [Rome, Paris]]]),
    # one question over one set of claims, decided two ways
    "n1-replay": txn(0, [["current", H, [chess, go]], ["decide", "which hobby to suggest?", [chess, go], chess]])
                 + txn(1, [["current", H, [go, chess]], ["decide", "which hobby to suggest?", [go, chess], go]]),
    # a read shows Initech, whose only add failed
    "g1a-aborted-read": txn(2, [["current", E, [Initech]]]),
}

def ops_of(events):
    return [{"index": i, "time": 1_000_000 * (i + 1), "type": "invoke" if t == "inv" else t, "process": p,
             "f": "txn", "value": v} for i, (t, p, v) in enumerate(events)]

def write(name, ops, header=True):
    with open(OUT / name, "w") as f:
        for op in ([HEADER] if header else []) + ops:
            f.write(json.dumps(op) + "\n")

write("valid.jsonl", ops_of(BASE))
for name, plant in PLANTS.items():
    write(f"{name}.jsonl", ops_of(BASE + plant))
ops = [HEADER] + ops_of(BASE)
(OUT / "valid.json").write_text("[\n" + ",\n".join(json.dumps(o) for o in ops) + "\n]\n")

def edn(x):
    if x is None:
        return "nil"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, list):
        return "[" + " ".join(edn(v) for v in x) + "]"
    raise TypeError(x)

KW = {"type", "process", "f", "value", "index", "time"}
def edn_op(o):
    parts = []
    for k, v in o.items():
        key = ":" + k.replace("_", "-")
        if k == "type" or (k == "f"):
            val = ":" + v
        elif k == "value":
            val = "[" + " ".join("[" + " ".join([":" + m[0]] + [edn(x) for x in m[1:]]) + "]" for m in v) + "]"
        else:
            val = edn(v)
        parts.append(f"{key} {val}")
    return "{" + ", ".join(parts) + "}"
(OUT / "valid.edn").write_text("\n".join(edn_op(o) for o in ops) + "\n")
fails = []
for i in range(3):
    fails += [("inv", i, [["current", R, None], ["add", R, f"{R}=x{i}"]]), ("fail", i, [["current", R, None], ["add", R, f"{R}=x{i}"]])]
write("all-fail.jsonl", ops_of(fails))
write("empty.jsonl", [])
