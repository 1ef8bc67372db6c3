"""Benchmark ``toki check --workload memory`` end to end, process start included (issue 36: 10^6
memory operations in at most 10 s on 2 cores).

Histories come from ``toki.check.memory_gen.simulate`` (a strict-serializable simulated memory:
8 clients, 64 rotating slots, a quarter of them multi-valued, audit histories of at most 12
claims; transactions of 1-6 micro-ops: supersedes, adds, retracts, recalls of two slots, audit
reads, decisions; 2% fail, 0.5% end info), generated once per size and cached under --dir, in
JSON lines (what ``toki record`` writes) and, with ``--layouts``, as one JSON array or EDN. Each
size is also checked with one anomaly of every kind planted in its middle (lost update, double
supersede, duplicate insert, N2, N3, N1, write skew), each of which must be found.

Each history is checked by the ``toki`` command in a fresh process (``toki check FILE --workload
memory --json --stats``), timed from spawn to exit, CPU and peak memory from the child's rusage
(the forked readers included), as ``benchmarks/bench_check.py`` does (its helpers are used here).
The compiled reader is compiled (or its cache loaded) once before any timing. This is a script,
not a test: it asserts nothing about speed.

    .venv/bin/python benchmarks/bench_memory_check.py                       # 10^5 and 10^6 transactions
    .venv/bin/python benchmarks/bench_memory_check.py --sizes 1000000 --repeat 3 --json results/bench_memory.json
    .venv/bin/python benchmarks/bench_memory_check.py --sizes 100000 --layouts jsonl array edn
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_check import _compile_toki, _spawn_rusage, _toki, calibrate  # noqa: E402

LAYOUTS = ("jsonl", "array", "edn")
PLANTS = ("lost-update", "double-supersede", "duplicate-insert", "n2", "n3", "n1", "write-skew")


def ensure(d: Path, n: int, seed: int, layout: str, planted: bool) -> tuple[Path, float]:
    """The history (generated once), in ``layout``, with every anomaly planted or none."""
    from toki.check.memory_gen import plant, simulate, write_jsonl

    suffix = {"jsonl": ".jsonl", "array": ".json", "edn": ".edn"}[layout]
    path = d / f"memory-{n}-s{seed}{'-planted' if planted else ''}{suffix}"
    if path.exists():
        return path, 0.0
    t = time.perf_counter()
    ops = simulate(n, seed=seed)
    if planted:
        ops = plant(ops, PLANTS)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        if layout == "jsonl":
            write_jsonl(ops, f)
        elif layout == "array":
            f.write("[\n" + ",\n".join(json.dumps(op, separators=(",", ":")) for op in ops) + "\n]\n")
        else:
            f.writelines(_edn(op) + "\n" for op in ops)
    tmp.rename(path)
    return path, time.perf_counter() - t


def _edn(x) -> str:
    if x is None:
        return "nil"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, list):
        return "[" + " ".join(_edn(v) for v in x) + "]"
    keyword = {"type", "f"}
    return "{" + ", ".join(f":{k.replace('_', '-')} " + (f":{v}" if k in keyword else
                           "[" + " ".join("[:" + m[0] + " " + " ".join(_edn(v) for v in m[1:]) + "]" for m in v) + "]"
                           if k == "value" and v else _edn(v)) for k, v in x.items()) + "}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="transactions")
    ap.add_argument("--layouts", nargs="+", default=["jsonl"], choices=LAYOUTS)
    ap.add_argument("--models", nargs="+", default=["serializable"], help="models to check (default serializable)")
    ap.add_argument("--no-plant", action="store_true", help="skip the histories with planted anomalies")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--repeat", type=int, default=1, help="checks per history; the fastest is reported")
    ap.add_argument("--dir", default="/tmp/toki-bench-memory", help="where generated histories are cached")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args(argv)
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    toki = _toki()
    if not toki:
        raise SystemExit("the toki command is not installed next to this Python (pip install -e .)")
    _compile_toki()
    from toki.check import accel

    t = time.perf_counter()
    compiled = accel.load("memory_scan") is not None
    print(f"compiled reader: {'ready' if compiled else 'NOT available (numba missing?)'} "
          f"({time.perf_counter() - t:.1f} s to compile or load its cache)", flush=True)
    cal = calibrate()
    print(f"machine: numpy sort of 4M ints {cal['numpy_sort_4m_s']:.3f} s, Python loop of 3M steps "
          f"{cal['python_loop_3m_s']:.3f} s (compare these across runs)", flush=True)
    rows = []
    for n in args.sizes:
        for layout in args.layouts:
            for planted in (False,) if args.no_plant else (False, True):
                path, gen_s = ensure(d, n, args.seed, layout, planted)
                cmd = toki + ["check", str(path), "--workload", "memory", "--json", "--stats"]
                for m in args.models:
                    cmd += ["--model", m]
                runs = [_spawn_rusage(cmd) for _ in range(args.repeat)]
                best = min(runs, key=lambda r: r["wall_s"])
                s = best["stats"]
                best.update({"layout": layout, "planted": list(PLANTS) if planted else [], "models": args.models,
                             "txns": n, "ops": s["ops"], "file_mb": path.stat().st_size / 1e6, "generate_s": gen_s,
                             "ops_per_s_wall": s["ops"] / best["wall_s"], "wall_s_all": [r["wall_s"] for r in runs]})
                rows.append(best)
                sec = s["seconds"]
                found = ",".join(best["anomaly_types"]) or "-"
                print(f"{layout:>5} {n:>8} txns {s['ops']:>8} ops {best['file_mb']:6.1f} MB "
                      f"{'planted' if planted else 'valid':>7}  wall {best['wall_s']:6.2f} s  cpu {best['cpu_s']:6.2f} s  "
                      f"{best['ops_per_s_wall']:>8.0f} ops/s  peak {best['peak_rss_mb']:5.0f} MB PSS "
                      f"{best['peak_pss_mb']:5.0f} MB  valid={best['valid']} found={found}  (read+parse "
                      f"{sec['parse']:.2f} infer {sec['infer']:.2f} cycles {sec['cycles']:.2f}; "
                      f"loadavg {best['loadavg_1m']:.1f})", flush=True)
    if args.json:
        from toki.runinfo import provenance

        out = {"results": rows, "calibration": cal, "compiled_reader": compiled,
               "provenance": provenance(seed=args.seed, options=vars(args))}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
