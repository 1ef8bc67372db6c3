"""Benchmark ``toki check`` end to end, process start included, in every history layout.

Serializable histories (1-5 micro-ops, a rotating pool of keys, lists of at most
``--max-writes-per-key`` elements) of 10^5, 10^6 and 10^7 transactions are generated once per
workload (cached under --dir, /tmp by default: 10^7 is 3.3 GB, never in the repository) and
written in each layout users produce:

- ``lines``:   a JSON array, one op per line (what ``toki gen history`` writes)
- ``compact``: a JSON array on one line (``json.dump(ops, f, separators=(",", ":"))``)
- ``jsonl``:   JSON lines, one op per line, no array
- ``pretty``:  a JSON array pretty-printed with ``indent=2`` (an op spans many lines)
- ``edn``:     Jepsen's history.edn: one op map per line, keywords, ", " between map entries

Each size is also checked with one anomaly planted in its middle (``--plant g2-item``: a write
skew on two fresh keys, :func:`toki.check.gen.plant`), which must be found and explained.

Each is checked by the ``toki`` command in a fresh process (``toki check FILE --workload W
--model serializable --json --stats``), timed from spawn to exit, so the figures include
Python's start, imports, reading, parsing, inference, cycle search and writing the result.
CPU and peak RSS come from the child's rusage (os.wait4): CPU includes the forked helpers (the
scanner's, and inference's for histories of 10^6 micro-ops or more), the peak RSS is the largest
of them, and the helpers' own peak (their inherited pages included) is shown beside it. Since a
forked helper shares the History's pages with the check, the sum of the two peaks counts those
pages twice; the memory the check and its helpers use together is measured as their summed
proportional set size (PSS, /proc/PID/smaps_rollup), sampled every 0.2 s: "PSS" in the output.
The machine's 1-minute load average is recorded with each run, since the cores may be shared. This is a script, not a test: it
asserts nothing about speed.

    .venv/bin/python benchmarks/bench_check.py                          # list-append, all layouts
    .venv/bin/python benchmarks/bench_check.py --sizes 10000000 --layouts lines --repeat 2
    .venv/bin/python benchmarks/bench_check.py --workloads rw-register --sizes 10000 100000
    .venv/bin/python benchmarks/bench_check.py --json results/bench_check.json --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

LAYOUTS = ("lines", "compact", "jsonl", "pretty", "edn")


def _toki() -> list[str]:
    exe = Path(sys.executable).parent / "toki"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("toki")
    return [found] if found else []


def ensure_base(path: Path, workload: str, n: int, seed: int, keys: int, mwpk: int) -> float:
    """The history as a JSON array, one op per line (the ``lines`` layout), generated once."""
    if path.exists():
        return 0.0
    from toki.check.gen import generate, write_json
    from toki.check.reading.history import no_gc

    t = time.perf_counter()
    tmp = path.with_suffix(".tmp")
    with no_gc(), open(tmp, "w") as f:
        write_json(generate(workload=workload, txns=n, keys=keys, db="serializable", seed=seed,
                            max_writes_per_key=mwpk), f)
    tmp.rename(path)
    return time.perf_counter() - t


def ensure_planted(base: Path, workload: str, anomaly: str) -> Path:
    """The base history with one anomaly planted in its middle (toki.check.gen.plant), written
    in the base's layout; the check must find it, and explain it."""
    path = base.with_name(base.stem + f".plant-{anomaly}.json")
    if path.exists():
        return path
    import orjson

    from toki.check.gen import plant

    with open(base, "rb") as f:  # the base layout has one op per line
        n_ops = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b"")) - 2
    # The planted ops come from toki.check.gen.plant; the ops after them move up four places in
    # the history, which in toki gen's layout is the "index" and "time" that open each line.
    at = n_ops // 2
    head = [{"index": i, "time": i, "type": "ok", "process": 0, "f": "txn", "value": []} for i in range(at)]
    planted = list(plant(iter(head), anomaly, at=at - 1, workload=workload))[at:]
    tmp = path.with_suffix(".tmp")
    with open(base, "rb") as src, open(tmp, "wb") as f:
        for i, line in enumerate(src):
            if i == at + 1:  # after the "[" line and `at` ops
                f.writelines(orjson.dumps(op) + b",\n" for op in planted)
            if i > at and line.startswith(b'{"index":'):
                idx, rest = line[9:].split(b",", 1)
                n = int(idx) + len(planted)
                if rest.startswith(b'"time":'):
                    _, rest = rest.split(b",", 1)
                    line = b'{"index":%d,"time":%d,%s' % (n, n, rest)
                else:
                    line = b'{"index":%d,%s' % (n, rest)
            f.write(line)
    tmp.rename(path)
    return path


def _ops(base: Path):
    import orjson

    with open(base, "rb") as f:
        for line in f:
            line = line.strip().rstrip(b",")
            if line.startswith(b"{"):
                yield orjson.loads(line)


def ensure_layout(base: Path, layout: str) -> Path:
    """Rewrite the base history in another layout (same ops, same order)."""
    if layout == "lines":
        return base
    path = base.with_name(base.stem + f".{layout}" + (".edn" if layout == "edn" else ".json"))
    if path.exists():
        return path
    from toki.check.gen import write_edn

    tmp = path.with_suffix(".tmp")
    if layout == "compact":
        # the base is toki gen's layout ("[", then one op per line, separators "," and ":"): the
        # compact array is the same bytes without the line breaks (json.dumps per op: 20 minutes at 10^7)
        with open(base, "rb") as src, open(tmp, "wb") as f:
            for block in iter(lambda: src.read(1 << 26), b""):
                f.write(block.replace(b"\n", b""))
            f.write(b"\n")
        tmp.rename(path)
        return path
    with open(tmp, "w") as f:
        if layout == "edn":
            write_edn(_ops(base), f)
        elif layout == "jsonl":
            f.writelines(json.dumps(op, separators=(",", ":")) + "\n" for op in _ops(base))
        elif layout == "compact":
            f.write("[")
            f.writelines(("," if i else "") + json.dumps(op, separators=(",", ":")) for i, op in enumerate(_ops(base)))
            f.write("]")
        elif layout == "pretty":
            f.write("[\n")
            for i, op in enumerate(_ops(base)):
                f.write((",\n" if i else "") + "  " + json.dumps(op, indent=2).replace("\n", "\n  "))
            f.write("\n]\n")
        else:
            raise SystemExit(f"unknown layout {layout!r}; layouts: {', '.join(LAYOUTS)}")
    tmp.rename(path)
    return path


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the scanner's and the inference's forked children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _pss_mb(pid: int) -> float:
    total = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


class _PssPeak(threading.Thread):
    """The largest proportional set size of a process and its children together, sampled every
    0.2 s: pages a forked child shares with its parent count once, split between them, where the
    sum of their peak resident sets counts them twice."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            self.peak = max(self.peak, _pss_mb(self.pid))


def _spawn_rusage(cmd: list[str]) -> dict:
    """Run one check and take the child's own rusage (wait4 before anything else reaps it)."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    out_f = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: stdout to the pipe, stderr kept
        os.close(out_f[0])
        os.dup2(out_f[1], 1)
        try:
            os.execv(cmd[0], cmd)
        finally:
            os._exit(127)
    os.close(out_f[1])
    pss = _PssPeak(pid)
    pss.start()
    chunks = []
    while True:
        b = os.read(out_f[0], 1 << 20)
        if not b:
            break
        chunks.append(b)
    os.close(out_f[0])
    pss.stop.set()
    pss.join()
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"toki check failed ({code}): {' '.join(cmd)}")
    r = json.loads(b"".join(chunks))  # (the planted cases' explanations are in r["anomalies"])
    # wait4's rusage covers the check and the scanner children it reaped: CPU is their sum, the
    # peak RSS their maximum. The children's peak (inherited pages included, so an upper bound) is
    # added to give an upper bound for the machine's memory.
    helper_mb = r["stats"].get("helper_max_rss_kb", 0) / 1024
    first = {t: (c[0] if isinstance(c, list) and c else c) for t, c in r["anomalies"].items()}
    return {"valid": r["valid"], "anomaly_types": r["anomaly_types"], "first_cases": first, "stats": r["stats"],
            "wall_s": wall,
            "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024, "helper_rss_mb": helper_mb,
            "peak_total_mb": ru.ru_maxrss / 1024 + helper_mb, "peak_pss_mb": pss.peak, "loadavg_1m": load}


def _compile_toki() -> None:
    """Write toki's bytecode once, as ``pip install`` does for a regular install. An editable
    install under PYTHONDONTWRITEBYTECODE (set on some CI machines) would otherwise compile every
    module at every start: 0.08 s of each check here, a cost no installed toki pays."""
    import compileall

    import toki

    compileall.compile_dir(Path(toki.__file__).parent, quiet=1)


def calibrate() -> dict:
    """Seconds this machine takes for fixed work, now (best of three): a numpy sort of 4 million
    integers and a Python loop of 3 million steps. On a shared VM the same check has run 2x
    slower at one hour than at another; these figures, printed and recorded with every run, let
    two runs' timings be compared."""
    import numpy as np

    x = np.random.default_rng(0).integers(0, 1 << 40, 4_000_000)
    sort_s, loop_s = [], []
    for _ in range(3):
        t = time.perf_counter()
        np.sort(x)
        sort_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        acc = 0
        for i in range(3_000_000):
            acc += i & 7
        loop_s.append(time.perf_counter() - t)
    return {"numpy_sort_4m_s": min(sort_s), "python_loop_3m_s": min(loop_s)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    ap.add_argument("--plant", nargs="*", default=["g2-item"], metavar="ANOMALY",
                    help="also check each history with this anomaly planted in its middle (default g2-item; "
                         "--plant with nothing: none)")
    ap.add_argument("--models", nargs="+", default=["serializable"], help="models to check (default serializable)")
    ap.add_argument("--workloads", nargs="+", default=["list-append"], choices=("list-append", "rw-register"))
    ap.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--keys", type=int, default=100, help="active keys (default 100)")
    ap.add_argument("--max-writes-per-key", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=1, help="checks per history; the fastest is reported")
    ap.add_argument("--dir", default="/tmp/toki-bench-check", help="where generated histories are cached")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args(argv)
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    toki = _toki()
    if not toki:
        raise SystemExit("the toki command is not installed next to this Python (pip install -e .)")
    _compile_toki()
    cal = calibrate()
    print(f"machine: numpy sort of 4M ints {cal['numpy_sort_4m_s']:.3f} s, Python loop of 3M steps "
          f"{cal['python_loop_3m_s']:.3f} s (compare these across runs)", flush=True)
    rows = []
    for w in args.workloads:
        for n in args.sizes:
            base = d / f"{w}-serializable-{n}-k{args.keys}-m{args.max_writes_per_key}-s{args.seed}.json"
            gen_s = ensure_base(base, w, n, args.seed, args.keys, args.max_writes_per_key)
            cases = [(layout, ensure_layout(base, layout), None) for layout in args.layouts]
            cases += [("lines", ensure_planted(base, w, a), a) for a in args.plant]
            for layout, path, planted in cases:
                cmd = toki + ["check", str(path), "--workload", w, "--json", "--stats"]
                for m in args.models:
                    cmd += ["--model", m]
                runs = [_spawn_rusage(cmd) for _ in range(args.repeat)]
                best = min(runs, key=lambda r: r["wall_s"])
                best.update({"workload": w, "layout": layout, "planted": planted, "models": args.models, "txns": n,
                             "file_mb": path.stat().st_size / 1e6, "generate_s": gen_s,
                             "txns_per_s_wall": n / best["wall_s"], "txns_per_s_cpu": n / best["cpu_s"],
                             "wall_s_all": [r["wall_s"] for r in runs]})
                rows.append(best)
                s = best["stats"]["seconds"]
                found = ",".join(best["anomaly_types"]) or "-"
                print(f"{w:>11} {layout:>7} {n:>9} txns {best['file_mb']:7.1f} MB  "
                      f"{'planted ' + planted if planted else 'as generated':>17}  wall {best['wall_s']:6.2f} s  "
                      f"cpu {best['cpu_s']:6.2f} s  {best['txns_per_s_wall']:>8.0f} txn/s  "
                      f"peak {best['peak_rss_mb']:6.0f} MB (+{best['helper_rss_mb']:.0f} MB forked child) "
                      f"PSS {best['peak_pss_mb']:6.0f} MB  "
                      f"valid={best['valid']} found={found}  ({best['stats']['parser']}: "
                      f"read+parse {s['load'] + s['parse']:.2f} infer {s['infer']:.2f} cycles {s['cycles']:.2f}; "
                      f"loadavg {best['loadavg_1m']:.1f})", flush=True)
    if args.json:
        from toki.runinfo import provenance

        out = {"results": rows, "calibration": cal, "provenance": provenance(seed=args.seed, options=vars(args))}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
