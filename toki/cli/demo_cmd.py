"""``toki demo``: the running example of the paper through every operator and schema mode.

alice's medication: penicillin from 1 March, then amoxicillin written on 15 April. Each
(operator, schema mode) pair gets a fresh store; we print the current and audit rows and two
as_of views (what is valid on 20 March, as believed on 1 April and as believed now).
"""

from __future__ import annotations

from datetime import datetime

from toki.cli import add_dsn_option
from toki.render import emit_json, table

OPERATORS = ("lww", "evi", "await", "rule")
MODES = ("audit_row", "dual_row", "base")


def register(sub) -> None:
    p = sub.add_parser("demo", help="the running example (alice, medication) through each operator and schema mode")
    add_dsn_option(p)
    p.add_argument("--operator", choices=OPERATORS, action="append", help="only these operators (repeatable)")
    p.add_argument("--mode", choices=MODES, action="append", help="only these schema modes (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=run)


def scenario():
    from toki.model import Fact

    old = Fact("rx-1", "alice", "medication", "penicillin", datetime(2026, 3, 1), confidence=0.6)
    new = Fact("rx-2", "alice", "medication", "amoxicillin", datetime(2026, 4, 15), confidence=0.9)
    return old, new


def run(args, out) -> int:
    from toki.db.server import resolve
    from toki.db.store import Store
    from toki.judges.base import SimulatedJudge

    server = resolve(args.dsn)
    old, new = scenario()
    results = []
    for op in args.operator or OPERATORS:
        for mode in args.mode or MODES:
            with Store.open(server=server, label="demo", mode=mode) as store:
                store.write(old, operator=op, at=datetime(2026, 3, 1, 9))
                if op == "rule":
                    store.policy([old, new], 1)  # the policy prefers rx-2 (index 1 by fact id)
                if op == "await":
                    store.deliver_callback([old, new], 1)  # the clinician confirms rx-2
                outcome = store.write(new, operator=op, at=datetime(2026, 4, 15, 9),
                                      judge=SimulatedJudge(p=0.5, seed=7))
                results.append({
                    "operator": op, "mode": mode, "outcome": vars(outcome),
                    "current": [r.values() for r in store.rows("current")],
                    "audit": [r.values() for r in store.rows("audit")],
                    "as_of_march20_believed_april1": [r.values() for r in store.as_of(datetime(2026, 3, 20), datetime(2026, 4, 1))],
                    "as_of_march20_now": [r.values() for r in store.as_of(datetime(2026, 3, 20))],
                    "as_of_may1_now": [r.values() for r in store.as_of(datetime(2026, 5, 1))],
                })
    if args.json:
        emit_json({"backend": server.describe(), "results": results}, out)
        return 0
    out.write(f"server: {server.describe()['name']} {server.version} ({server.how}, {server.where})\n")
    out.write("alice/medication: rx-1 penicillin from 2026-03-01 (conf 0.6), then rx-2 amoxicillin "
              "from 2026-04-15 (conf 0.9), written 2026-04-15\n")
    cols = ["fact_id", "object", "valid", "system", "provenance", "conf", "strategy", "kind"]

    def fmt(rows):
        return [(r[0], r[3], f"[{r[4]:%Y-%m-%d}, {_d(r[5])})", f"[{r[6]:%Y-%m-%d}, {_d(r[7])})", r[8], r[9], r[10], r[11])
                for r in rows]

    for res in results:
        o = res["outcome"]
        title = (f"{res['operator']} / {res['mode']}: {o['action']}"
                 + (f", winner {o['winner_id']}" if o["winner_id"] else "")
                 + (f" (vote from {o['vote_source']})" if o["vote_source"] else ""))
        table(out, title + " - all rows", cols, fmt(res["current"] + res["audit"]))
        out.write("  as_of(2026-03-20, believed 2026-04-01): "
                  + (", ".join(r[3] for r in res["as_of_march20_believed_april1"]) or "nothing") + "\n")
        out.write("  as_of(2026-03-20, now): " + (", ".join(r[3] for r in res["as_of_march20_now"]) or "nothing")
                  + ";  as_of(2026-05-01, now): " + (", ".join(r[3] for r in res["as_of_may1_now"]) or "nothing")
                  + "\n\n")
    return 0


def _d(t: datetime) -> str:
    return "∞" if t.year == 9999 else f"{t:%Y-%m-%d}"
