"""What the engine harness costs, and how many interleavings it explores per second.

    python benchmarks/bench_engines.py [--trials 200] [--json PATH] [--certificates]

1. Per intercepted call: a SQLite ``select`` on a plain connection, the same on a controlled
   connection from a thread outside any run (the pass-through), and as a granted step inside a
   run (one agent: no switches; two agents alternating: a thread switch per step).
2. SodaMem's own ``ingest`` of one utterance, bare and as one agent under the controller, per
   intercepted call; and as a self-checked serial run (the storage fingerprinted between steps).
3. Interleavings per second for two-agent SodaMem scenarios (random tapes, fresh storage each
   trial, the state read back and compared with the serial outcomes), and the floor: one run of
   sodamem-fixed double-supersede as SodaMem's own code costs it, with no controller.
4. With ``--certificates``: bounded-exhaustive certificates at K=2 as a user runs them
   (``toki certify --engine E --exhaustive 2 --json``, end to end, process start included), in one
   process and with ``--workers 2``: SodaMem's double-supersede alone (interleavings per second),
   then every scenario of sodamem-fixed, atommem-atomic and TOKI's own write path.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toki.harness.controller import Controller, SerialChooser, TapeChooser  # noqa: E402
from toki.harness.sqlite_calls import controlled_connect  # noqa: E402
from toki.harness.trial import TrialRunner  # noqa: E402


def per_call(n: int = 20000) -> dict:
    d = Path(tempfile.mkdtemp())
    plain = sqlite3.connect(d / "a.db")
    plain.execute("create table t (x int)")
    plain.execute("insert into t values (1)")
    plain.commit()
    ctl_conn = controlled_connect(str(d / "a.db"))
    out = {}
    for name, conn in (("plain sqlite3", plain), ("controlled, outside a run", ctl_conn)):
        t = time.perf_counter()
        for _ in range(n):
            conn.execute("select x from t").fetchall()
        out[name] = (time.perf_counter() - t) / n * 1e6

    def agent(k):
        def run():
            for _ in range(k):
                ctl_conn.execute("select x from t").fetchall()
        return run

    # The first run of a process starts the connect watch (a filtered thread and a supervisor
    # process): paid once per process, measured apart from the per-step cost.
    t = time.perf_counter()
    Controller(SerialChooser(["A"])).run({"A": agent(1)})
    out["first run of a process (starts the connect watch), ms"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    for _ in range(200):
        Controller(SerialChooser(["A"])).run({"A": agent(1)})
    out["a later run of one agent and one step, ms"] = (time.perf_counter() - t) / 200 * 1e3
    k = n // 4
    t = time.perf_counter()
    Controller(SerialChooser(["A"])).run({"A": agent(k)})
    out["granted step, one agent"] = (time.perf_counter() - t) / k * 1e6
    t = time.perf_counter()
    Controller(TapeChooser([1] * (2 * k + 4))).run({"A": agent(k // 2), "B": agent(k // 2)})
    out["granted step, two agents switching every step"] = (time.perf_counter() - t) / k * 1e6
    return {key: round(v, 2) for key, v in out.items()}


def sodamem_ingest(reps: int = 30) -> dict:
    from toki.engines.registry import load_engine

    eng = load_engine("sodamem")
    sc = eng.scenarios["double-supersede"]
    with TrialRunner(eng, sc) as tr:
        bare, ctl, checked, calls = [], [], [], []
        for _ in range(reps):
            loc = Path(tempfile.mkdtemp(dir=tr.workdir))
            tr._seed(loc)  # noqa: SLF001 - the benchmark reuses the runner's seeding
            h = eng.open(loc)
            t = time.perf_counter()
            sc.call(h, "A")
            bare.append(time.perf_counter() - t)
            eng.close(h)
            # as in a search trial; a serial run (and a replay) also checks the storage between steps
            trace, _ = tr.run(TapeChooser([0]), agents=("A",))
            ctl.append(trace.elapsed_s)
            calls.append(len(trace.steps) - 1)
            trace, _ = tr.run(SerialChooser(["A"]), agents=("A",))
            checked.append(trace.elapsed_s)
    b, c, k, n = statistics.median(bare), statistics.median(ctl), statistics.median(checked), statistics.median(calls)
    return {"intercepted calls per ingest": n, "bare ingest ms": round(b * 1e3, 2),
            "controlled ingest ms": round(c * 1e3, 2), "harness cost per call us": round((c - b) / n * 1e6, 1),
            "self-checked ingest ms (serial runs, replays)": round(k * 1e3, 2),
            "self-check cost per call us": round((k - c) / n * 1e6, 1)}


def interleavings(trials: int) -> dict:
    from toki.engines.registry import load_engine

    out = {}
    for name in ("sodamem", "sodamem-fixed"):
        for sc in ("double-supersede", "patch-supersede"):
            with TrialRunner(load_engine(name), sc) as tr:
                tr.serial_outcomes()
                rng = random.Random(0)
                t = time.perf_counter()
                grants = 0
                for _ in range(trials):
                    r = tr.trial(TapeChooser([rng.randrange(2) for _ in range(400)]))
                    grants += len(r.trace.grants)
                dt = time.perf_counter() - t
            out[f"{name} {sc}"] = {"interleavings/s": round(trials / dt, 1), "grants/trial": round(grants / trials)}
    return out


def bare_run(engine: str = "sodamem-fixed", scenario: str = "double-supersede", n: int = 50) -> dict:
    """The floor under any search of ``scenario``: one run as the engine's own code costs it, with
    no controller (fresh copy of the seeded folder, an open per agent, the calls one after the
    other, a fresh open to read the state), the storage hooks passing every call through."""
    import shutil

    from toki.engines.registry import load_engine
    from toki.harness.trial import hooks_installed, scratch_base

    eng = load_engine(engine)
    sc = eng.scenarios[scenario]
    root = Path(tempfile.mkdtemp(dir=scratch_base()))  # where the harness's trials keep their storage
    tpl = root / "template"
    tpl.mkdir()
    with hooks_installed(tpl):
        h = eng.open(tpl)
        sc.setup(h)
        eng.close(h)
    t = time.perf_counter()
    for i in range(n):
        loc = root / f"t{i}"
        shutil.copytree(tpl, loc)
        with hooks_installed(loc):
            handles = {a: eng.open(loc) for a in sc.agents}
            for a in sc.agents:
                sc.call(handles[a], a)
            for h in handles.values():
                eng.close(h)
        r = eng.open(loc)
        eng.state(r)
        eng.close(r)
        shutil.rmtree(loc)
    ms = (time.perf_counter() - t) / n * 1e3
    shutil.rmtree(root, ignore_errors=True)
    return {"ms per run": round(ms, 1), "runs/s on one core": round(1e3 / ms, 1)}


def certify_k2(engine: str, scenario: str | None, workers: int) -> dict:
    """One ``toki certify --exhaustive 2`` as a subprocess: wall time, interleavings, completeness."""
    import subprocess

    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "v.json"
        argv = [str(Path(sys.executable).with_name("toki")), "certify", "--engine", engine, "--exhaustive", "2", "--json", str(out)]
        argv += ["--scenario", scenario] if scenario else []
        argv += ["--workers", str(workers)] if workers > 1 else []
        t = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if not out.exists():
            raise SystemExit(f"{' '.join(argv)} wrote no verdicts (exit {proc.returncode}): {proc.stderr[-500:]}")
        verdicts = json.loads(out.read_text())["verdicts"]
    explored = sum(v["search"]["explored"] for v in verdicts)
    return {"scenarios": len(verdicts), "wall s": round(wall, 1), "explored": explored,
            "interleavings/s": round(explored / wall, 1),
            "complete": sum(v["search"]["complete"] for v in verdicts),
            "verdicts": {v["scenario"]: v["verdict"] for v in verdicts}, "exit": proc.returncode}


def certificates() -> dict:
    out = {}
    for workers in (1, 2):
        out[f"sodamem-fixed double-supersede, workers {workers}"] = certify_k2("sodamem-fixed", "double-supersede",
                                                                                workers)
        for engine in ("sodamem-fixed", "atommem-atomic", "toki"):
            out[f"{engine}, every scenario, workers {workers}"] = certify_k2(engine, None, workers)
            print(engine, workers, out[f"{engine}, every scenario, workers {workers}"], file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--certificates", action="store_true", help="also time K=2 certificates (about 10 minutes)")
    args = ap.parse_args()
    res = {"per call (us)": per_call(), "sodamem ingest": sodamem_ingest(),
           "interleavings": interleavings(args.trials),
           "sodamem-fixed double-supersede without the harness": bare_run()}
    if args.certificates:
        res["certificates at K=2"] = certificates()
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
