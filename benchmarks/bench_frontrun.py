"""toki and frontrun side by side on the same small programs (issue 24, part 5).

    python benchmarks/bench_frontrun.py [--runs 3] [--seed 0] [--budget 100] [--bound 2]
                                        [--programs sqlite-racy,...] [--tools frontrun-dpor,...]
                                        [--dsn DSN] [--run-timeout S] [--json PATH]
    python benchmarks/bench_frontrun.py --markdown results/bench_frontrun.json   # the docs' table

Programs (``benchmarks/frontrun_programs``): a SQLite counter, a JSON-file counter and a
PostgreSQL counter, each racy (read-modify-write, no guard) and fixed (``BEGIN IMMEDIATE``; a lock
and an atomic save; ``SELECT ... FOR UPDATE``), the SQLite and JSON counters with two agents and
with three (``-3``); the on-call doctors' write skew on PostgreSQL, racy at REPEATABLE READ and
fixed at SERIALIZABLE with retries (``pg-skew-``); and a pure-Python shared dict, racy and locked,
which toki is not built for. Tools:

- ``frontrun-dpor``: ``frontrun.explore`` (DPOR, its default preemption bound 2);
- ``frontrun-dpor-lock-timeout`` (PostgreSQL programs only): the same with ``lock_timeout=2000``,
  frontrun's documented remedy for row-lock waits that its scheduler cannot see;
- ``frontrun-random``: ``frontrun.explore(strategy="random")``, ``--budget`` schedules, seeded;
- ``toki-exhaustive``: ``toki certify --exhaustive K`` (every interleaving with at most K
  preemptions, equivalent ones pruned);
- ``toki-random``: ``toki certify --budget N`` (Hypothesis grant tapes, seeded), for reference.

Each tool runs each program ``--runs`` times, each run in a fresh process (run i of a random tool
takes seed ``--seed + i``). A run reports found / cleared / inconclusive / unverifiable / error,
the interleavings explored, the time inside the tool (frontrun: around ``explore()``; toki: the
verdict's ``elapsed_s``, serial orders included) and the process's wall time, and, when it found
something, how many of ``--replays`` re-executions of the counterexample show it again (frontrun:
its own ``reproduce_on_failure``; toki: ``toki certify --replay W --times N``).

The results (with provenance: commit, versions, seeds, options) go to ``--json``; a table is
printed; the targets of issue 24 are checked from the measured rows, not asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.frontrun_programs import PROGRAMS, STORAGE  # noqa: E402
from toki.runinfo import provenance  # noqa: E402

TOOLS = ("frontrun-dpor", "frontrun-dpor-lock-timeout", "frontrun-random", "toki-exhaustive", "toki-random")
# frontrun's documented remedy for PostgreSQL row-lock waits under DPOR (``lock_timeout=2000``,
# "2 seconds is a good default"): a PostgreSQL-only option, so only the pg- programs run it.
PG_ONLY = {"frontrun-dpor-lock-timeout"}
# What each verdict means for the question "did the tool settle this program?"
DECISIVE = {"found", "cleared"}
RUN_TIMEOUT = 900  # s, default of --run-timeout: a run that takes longer is recorded as an error, not waited for


def _bin(name: str) -> str:
    """A console script of this interpreter's environment (the venv's toki and frontrun)."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"bench_frontrun: no `{name}` next to {sys.executable} or on PATH "
                         f"(pip install -e '.[bench]' brings frontrun)")
    return found


def _timeout(a) -> float:
    return getattr(a, "run_timeout", None) or RUN_TIMEOUT


def _run(cmd: list[str], timeout: float = RUN_TIMEOUT) -> tuple[subprocess.CompletedProcess | None, float]:
    t = time.perf_counter()
    # A session of its own, ended whole: frontrun's launcher runs the program in a child process,
    # and a frontrun DPOR run that deadlocks (json-fixed-3 did, past its own total_timeout) would
    # outlive a kill of the launcher alone and hold a core for the rest of the benchmark.
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException as e:  # the timeout, or ^C: either way nothing of the run may stay behind
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        if isinstance(e, subprocess.TimeoutExpired):
            return None, time.perf_counter() - t
        raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err), time.perf_counter() - t


def _tail(text: str, n: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-n:])


# -- frontrun -----------------------------------------------------------------------------------

def run_frontrun(program: str, strategy: str, seed: int, a, lock_timeout: bool = False) -> dict:
    cmd = [_bin("frontrun"), sys.executable, "-m", "benchmarks.frontrun_programs.run_frontrun",
           "--program", program, "--strategy", strategy, "--seed", str(seed), "--max-attempts", str(a.budget),
           "--replays", str(a.replays), "--total-timeout", str(a.frontrun_timeout)]
    if program.startswith("pg-"):
        cmd += ["--dsn", a.dsn]
    if lock_timeout:
        cmd += ["--lock-timeout", "2000"]
    p, wall = _run(cmd, _timeout(a))
    if p is None:
        return {"verdict": "error", "reason": f"no result in {_timeout(a):g} s", "wall_s": round(wall, 2)}
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("FRONTRUN-RESULT ")), None)
    if line is None:  # the process died before printing (a crash in frontrun's preload, say)
        return {"verdict": "error", "reason": f"exit {p.returncode}: {_tail(p.stderr)}", "wall_s": round(wall, 2)}
    out = json.loads(line.split(" ", 1)[1])
    out.pop("tool", None), out.pop("program", None)
    return out | {"seed": seed if strategy == "random" else None, "wall_s": round(wall, 2)}


# -- toki ---------------------------------------------------------------------------------------

REPLAYED = re.compile(r"shows the anomaly (\d+) of (\d+) times")


def run_toki(program: str, mode: str, seed: int, a) -> dict:
    mod, variant = PROGRAMS[program]
    work = Path(tempfile.mkdtemp(prefix="bench-fr-toki-"))
    cmd = [_bin("toki"), "certify", "--engine-module", f"benchmarks.frontrun_programs.{mod}:{variant}",
           "--seed", str(seed), "--json", str(work / "verdict.json"), "--witness", str(work / "w.json")]
    cmd += ["--exhaustive", str(a.bound)] if mode == "exhaustive" else ["--budget", str(a.budget)]
    dsn = ["--dsn", a.dsn] if program.startswith("pg-") else []
    p, wall = _run(cmd + dsn, _timeout(a))
    try:
        if p is None:
            return {"verdict": "error", "reason": f"no result in {_timeout(a):g} s", "wall_s": round(wall, 2)}
        if p.returncode not in (0, 1) or not (work / "verdict.json").exists():
            return {"verdict": "error", "reason": f"exit {p.returncode}: {_tail(p.stderr or p.stdout)}",
                    "wall_s": round(wall, 2)}
        v = json.loads((work / "verdict.json").read_text())["verdicts"][0]
        verdict = {"admits": "found", "excludes": "cleared"}.get(v["verdict"], v["verdict"])
        out = {"verdict": verdict, "explored": v["search"]["explored"], "pruned": v["search"]["pruned"],
               "complete": v["search"]["complete"], "guarantee": v["search"]["guarantee"],
               "serial_orders": v.get("serial_orders"), "elapsed_s": v.get("elapsed_s"), "reason": v.get("reason"),
               "anomalies": v.get("anomalies"), "grants": v.get("grants"), "seed": seed, "wall_s": round(wall, 2),
               "replays": 0, "replayed": 0}
        if v.get("witness"):
            r, _ = _run([_bin("toki"), "certify", "--replay", v["witness"], "--times", str(a.replays)] + dsn,
                        _timeout(a))
            m = REPLAYED.search(r.stdout if r else "")
            if m:
                out["replayed"], out["replays"] = int(m.group(1)), int(m.group(2))
            else:
                out["replay_error"] = "no result" if r is None else f"exit {r.returncode}: {_tail(r.stderr or r.stdout)}"
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_one(tool: str, program: str, seed: int, a) -> dict:
    if tool.startswith("frontrun-"):
        return run_frontrun(program, tool.split("-")[1], seed, a, lock_timeout=tool in PG_ONLY)
    return run_toki(program, tool.split("-", 1)[1], seed, a)


# -- summary ------------------------------------------------------------------------------------

def fixed(program: str) -> bool:
    """A fixed program (``sqlite-fixed``, ``sqlite-fixed-3``, ``pg-skew-fixed``), not a racy one."""
    return "fixed" in program.split("-")


def racy(program: str) -> bool:
    """A racy program: the ones the interleavings-to-the-first-race target is stated over."""
    return "racy" in program.split("-")


def expected(program: str) -> str:
    """The right verdict: every program but the fixed ones breaks its invariant."""
    return "cleared" if fixed(program) else "found"


def targets(rows: list[dict]) -> dict:
    """Issue 24's target for toki, judged on the measured runs: decisive (and right) on every storage
    program, and no more interleavings than frontrun's DPOR on the racy ones."""
    by = {(r["tool"], r["program"]): r["runs"] for r in rows}
    out = {"decisive": {}, "interleavings_vs_dpor": {}}
    for prog in STORAGE:
        runs = by.get(("toki-exhaustive", prog))
        if runs is not None:
            out["decisive"][prog] = all(r["verdict"] == expected(prog) for r in runs)
        dpor = by.get(("frontrun-dpor", prog))
        if racy(prog) and runs and dpor:
            toki_n = [r.get("explored") for r in runs]
            dpor_n = [r.get("explored") for r in dpor]
            out["interleavings_vs_dpor"][prog] = {
                "toki": toki_n, "frontrun_dpor": dpor_n,
                "frontrun_dpor_verdicts": [r["verdict"] for r in dpor],
                "toki_no_more": None if None in toki_n + dpor_n else max(toki_n) <= min(dpor_n)}
    out["decisive_met"] = bool(out["decisive"]) and all(out["decisive"].values())
    cmp = [c["toki_no_more"] for c in out["interleavings_vs_dpor"].values()]
    out["interleavings_met"] = bool(cmp) and all(c is True for c in cmp)
    return out


def _cell(values) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    return str(vals[0]) if len(set(vals)) == 1 else f"{min(vals)}-{max(vals)}"


def _verdicts(runs) -> str:
    vs = [r["verdict"] for r in runs]
    return f"{vs[0]} ×{len(vs)}" if len(set(vs)) == 1 else ", ".join(vs)


def _replays(runs) -> str:
    cells = [f"{r['replayed']}/{r['replays']}" if r.get("replays") else "none"
             for r in runs if r["verdict"] == "found"]
    return ", ".join(cells) if cells else "-"


def print_table(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="toki and frontrun on the same programs (each cell over the runs)")
    for col in ("program", "tool", "verdicts", "interleavings", "time in tool (s)", "wall (s)", "replays"):
        t.add_column(col)
    for i, r in enumerate(rows):
        runs = r["runs"]
        explored = _cell([x.get("explored") for x in runs])
        serial = _cell([x.get("serial_orders") for x in runs])
        if serial != "-":  # toki runs every serial order (twice) before it searches: said, not hidden
            explored += f" (+{serial} serial)"
        times = [x.get("elapsed_s") for x in runs if x.get("elapsed_s") is not None]
        walls = [x["wall_s"] for x in runs]
        t.add_row(r["program"], r["tool"], _verdicts(runs), explored,
                  f"{statistics.median(times):.2f}" if times else "-", f"{statistics.median(walls):.1f}",
                  _replays(runs), end_section=i + 1 < len(rows) and rows[i + 1]["program"] != r["program"])
    Console(width=140).print(t)
    for r in rows:
        reasons = {x["reason"] for x in r["runs"] if x.get("reason") and x["verdict"] not in DECISIVE}
        for why in sorted(reasons):
            print(f"  {r['program']} / {r['tool']}: {why[:300]}")


def markdown(rows: list[dict]) -> str:
    """The table as docs/frontrun.md prints it, from a results file (``--markdown PATH``)."""
    out = ["| program | tool | verdicts | interleavings | time in tool, median (s) | replays |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        runs = r["runs"]
        explored = _cell([x.get("explored") for x in runs])
        serial = _cell([x.get("serial_orders") for x in runs])
        if serial != "-":
            explored += f" (+{serial} serial)"
        times = [x.get("elapsed_s") for x in runs if x.get("elapsed_s") is not None]
        median = f"{statistics.median(times):.2f}" if times else "-"  # no run answered (each timed out)
        out.append(f"| {r['program']} | {r['tool']} | {_verdicts(runs)} | {explored} | {median} | {_replays(runs)} |")
    return "\n".join(out)


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def resolve_dsn(dsn: str | None) -> tuple[str, dict]:
    """The PostgreSQL programs' server: --dsn, else $TOKI_DSN, else toki's embedded PostgreSQL."""
    from toki.db.server import resolve

    s = resolve(dsn)
    return s.dsn, {"how": s.how, "where": s.where}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per tool and program (default 3)")
    ap.add_argument("--seed", type=int, default=0, help="run i of a random tool takes seed SEED+i (default 0)")
    ap.add_argument("--budget", type=int, default=100, help="schedules per random run, both tools (default 100)")
    ap.add_argument("--bound", type=int, default=2, help="toki --exhaustive K (default 2, frontrun's DPOR default too)")
    ap.add_argument("--replays", type=int, default=10, help="re-executions of a found counterexample (default 10)")
    ap.add_argument("--frontrun-timeout", type=float, default=120.0, help="frontrun's total_timeout per run, s")
    ap.add_argument("--run-timeout", type=float, default=RUN_TIMEOUT,
                    help=f"s: a run (one process) still going then is ended and recorded as an error (default {RUN_TIMEOUT})")
    ap.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated, default all")
    ap.add_argument("--tools", default=",".join(TOOLS), help="comma-separated, default all")
    ap.add_argument("--dsn", default=None, help="PostgreSQL for the pg- programs (default $TOKI_DSN, else embedded)")
    ap.add_argument("--json", metavar="PATH", default=str(ROOT / "results" / "bench_frontrun.json"))
    ap.add_argument("--markdown", metavar="PATH", help="print the table of a results file as Markdown, run nothing")
    a = ap.parse_args(argv)
    if a.markdown:
        print(markdown(json.loads(Path(a.markdown).read_text())["rows"]))
        return 0
    programs = [p for p in a.programs.split(",") if p]
    tools = [t for t in a.tools.split(",") if t]
    for name, known in (("program", PROGRAMS), ("tool", TOOLS)):
        bad = [x for x in (programs if name == "program" else tools) if x not in known]
        if bad:
            ap.error(f"unknown {name} {', '.join(bad)}: one of {', '.join(known)}")
    backend = None
    if any(p.startswith("pg-") for p in programs):
        a.dsn, backend = resolve_dsn(a.dsn)

    t0 = time.perf_counter()
    rows = []
    for prog in programs:
        for tool in tools:
            if tool in PG_ONLY and not prog.startswith("pg-"):
                continue
            runs = []
            for i in range(a.runs):
                r = run_one(tool, prog, a.seed + i, a)
                runs.append(r)
                print(f"{prog:19} {tool:26} run {i + 1}: {r['verdict']:12} explored={r.get('explored')} "
                      f"time={r.get('elapsed_s')} wall={r['wall_s']} replays={r.get('replayed')}/{r.get('replays')}",
                      flush=True)
            rows.append({"program": prog, "tool": tool, "runs": runs})
    res = {"rows": rows, "targets": targets(rows),
           "versions": {"toki": _version("toki"), "frontrun": _version("frontrun"), "python": sys.version.split()[0],
                        "sqlite": sqlite3.sqlite_version, "psycopg": _version("psycopg")},
           "provenance": provenance(seed=a.seed, backend=backend, elapsed_s=round(time.perf_counter() - t0, 1),
                                    options={k: v for k, v in vars(a).items() if k != "json"})}
    print_table(rows)
    tg = res["targets"]
    if not tg["decisive"]:  # --tools without toki-exhaustive (a frontrun-only run): nothing to judge
        print("targets: not judged (no toki-exhaustive runs)")
    else:
        print(f"target: toki --exhaustive {a.bound} decisive on every storage program: "
              f"{'met' if tg['decisive_met'] else 'NOT met'} {tg['decisive']}")
        print(f"target: no more interleavings than frontrun's DPOR on the racy ones: "
              f"{'met' if tg['interleavings_met'] else 'NOT met'} "
              + "; ".join(f"{p}: toki {c['toki']} vs dpor {c['frontrun_dpor']} "
                          f"({_verdicts([{'verdict': v} for v in c['frontrun_dpor_verdicts']])})"
                          for p, c in tg["interleavings_vs_dpor"].items()))
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
