"""What power-loss fault injection costs, and what it finds, per engine and case.

    python benchmarks/bench_faults_power.py [--json PATH] [--engines a,b,...] [--heap-objects N]

For each engine (shipped: AtomMem's model, atommem-atomic; plug-ins: the JSON store saved three
ways, TinyDB from PyPI with its default storage and a durable one, AtomMem with durable saves) and
each of its scenarios: the seconds to record the scenario's file operations, to build the crash
states (ALICE's model: every in-order prefix, one operation dropped while later ones persist,
partial 4 KiB writes) and to reopen and judge each distinct one in a fresh process; crash states
explored per second (judging only, and end to end); and the findings (lost acknowledged data,
does not open, half-done). The figures in docs/faults.md come from this script.

``--heap-objects N`` first allocates N small objects and keeps them, as a test runner's process
that imported engines and ran other tests holds them: each crash state is judged in a process forked
from this one, so what the child does in proportion to the parent's heap shows here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toki.engines.registry import load_engine  # noqa: E402
from toki.faults.power_loss import PowerLossFaults  # noqa: E402
from toki.faults.report import category  # noqa: E402
from toki.runinfo import provenance  # noqa: E402

ENGINES = {
    "atommem": ("atommem", None),
    "atommem-atomic": ("atommem-atomic", None),
    "atommem-durable": (None, "tests.plugins.atommem_durable:engine"),
    "json-store-inplace": (None, "tests.plugins.json_store:inplace"),
    "json-store-rename": (None, "tests.plugins.json_store:rename"),
    "json-store-durable": (None, "tests.plugins.json_store:durable"),
    "tinydb": (None, "tests.plugins.tinydb_store:default"),
    "tinydb-durable-storage": (None, "tests.plugins.tinydb_store:durable"),
}


def bench_case(engine, case: str) -> dict:
    t0 = time.perf_counter()
    pl = PowerLossFaults(engine, case)
    try:
        pl.trace()
        t1 = time.perf_counter()
        why = pl.applicable()
        if why is not None:
            return {"case": case, "not_run": why}
        states = pl.states()
        t2 = time.perf_counter()
        pl.serial()
        t3 = time.perf_counter()
        results = [pl.run(i) for i in range(len(states))]
        t4 = time.perf_counter()
    finally:
        pl.close()
    cats = {"lost": 0, "does not open": 0, "half-done": 0}
    for r in results:
        if not r.survived:
            k = category(r.findings[0])
            cats[k] = cats.get(k, 0) + 1
    return {"case": case, "operations": len(pl.trace().ops), "built": pl.constructed, "explored": len(states),
            "survived": sum(r.survived for r in results), "lost": cats["lost"],
            "unopenable": cats["does not open"], "half_done": cats["half-done"],
            "record_s": round(t1 - t0, 3), "build_s": round(t2 - t1, 3), "serial_s": round(t3 - t2, 3),
            "judge_s": round(t4 - t3, 3), "states_per_s": round(len(states) / (t4 - t3), 1),
            "states_per_s_end_to_end": round(len(states) / (t4 - t0), 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--heap-objects", type=int, default=0)
    args = ap.parse_args()
    held = [{"k": i, "v": [i]} for i in range(args.heap_objects // 2)]  # two objects an entry: a dict, a list
    rows = []
    t_all = time.perf_counter()
    for name in args.engines.split(","):
        shipped, module = ENGINES[name]
        engine = load_engine(shipped, module)
        per = [bench_case(engine, c) for c in engine.scenarios]
        ran = [p for p in per if "not_run" not in p]
        tot = {k: sum(p[k] for p in ran) for k in ("operations", "built", "explored", "survived", "lost",
                                                   "unopenable", "half_done", "judge_s", "record_s")}
        wall = sum(p["record_s"] + p["build_s"] + p["serial_s"] + p["judge_s"] for p in ran)
        tot["states_per_s"] = round(tot["explored"] / tot["judge_s"], 1) if tot["judge_s"] else 0.0
        tot["states_per_s_end_to_end"] = round(tot["explored"] / wall, 1) if wall else 0.0
        rows.append({"engine": name, "executed": getattr(engine, "executed", "real"), "cases": per, "total": tot})
        print(f"{name:24} cases {len(ran):2}  ops {tot['operations']:4}  built {tot['built']:5}  "
              f"explored {tot['explored']:4}  survived {tot['survived']:4}  lost {tot['lost']:3}  "
              f"unopenable {tot['unopenable']:3}  half-done {tot['half_done']:3}  "
              f"{tot['states_per_s']:6.1f} states/s judged, {tot['states_per_s_end_to_end']:6.1f} end to end",
              flush=True)
    doc = {"engines": rows, "provenance": provenance(seed=0, options={"engines": args.engines,
                                                                               "heap_objects": args.heap_objects},
                                                     elapsed_s=round(time.perf_counter() - t_all, 3))}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    del held


if __name__ == "__main__":
    main()
