"""Draw the notebooks' figures for the documentation site.

Executes ``notebooks/01_matrix.ipynb`` .. ``04_engines.ipynb`` with nbclient and saves every figure
they draw as a PNG under ``docs/figures/`` (``01_matrix-matrix.png``, ...), which the pages embed.
The notebooks only read result files; this script gives them results in one of two ways:

* ``--results DIR``: an existing results folder (``DIR/NAME/NAME.json``, as ``toki experiment``
  and ``toki matrix --json`` write them), for example the repository's ``results/`` after the
  full-size runs;
* by default: small runs of every experiment (seconds to a few minutes each on two cores) into
  a temporary folder (``--keep DIR`` keeps it). The figures then show the published structure at
  small sample sizes; the numbers quoted in the pages come from the full-size runs.

The committed figures: notebooks 01-03 from these small runs; notebook 04 from full-size runs
(``toki experiment verdicts`` at its default budget of 30, ``toki experiment reported-races`` at
40), which the Table 4 and reported-races pages quote.

Usage (from the repository root)::

    .venv/bin/python docs/make_figures.py                  # small runs, then the figures
    .venv/bin/python docs/make_figures.py --results results
    .venv/bin/python docs/make_figures.py --only 02_judges --results results

Needs nbclient, nbformat and ipykernel (``pip install -e '.[notebooks]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures"
NOTEBOOKS = ["01_matrix", "02_judges", "03_contention", "04_engines"]

# Names of the figures each notebook draws, in drawing order (a figure beyond the list is numbered).
NAMES = {
    "01_matrix": ["matrix", "n3-grid", "n2-grid"],
    "02_judges": ["calibration", "replay-consistency", "order-swap", "n1-replay-temperature"],
    "03_contention": ["pilot", "multi-writer-rates", "multi-writer-throughput", "retry", "two-writer"],
    "04_engines": ["verdicts", "reported-races"],
}

# Small runs: (results name, command after `toki`). Sizes are chosen so the whole set takes a few
# minutes on a shared two-core machine; every result file records its options and provenance.
SMALL_RUNS = [
    ("matrix", ["matrix", "--trials", "10", "--n2-grid", "--n2-schedules", "20", "--workers", "1",
                "--quiet"]),
    ("n1-replay", ["experiment", "n1-replay", "--trials", "30", "--seeds", "3"]),
    ("judge-calibration", ["experiment", "judge-calibration", "--calls", "100"]),
    ("replay-consistency", ["experiment", "replay-consistency", "--reps", "200", "--log-reps", "2"]),
    ("order-swap", ["experiment", "order-swap"]),
    ("temperature-sweep", ["experiment", "temperature-sweep", "--trials", "5", "--seeds", "2"]),
    ("serializable-pilot", ["experiment", "serializable-pilot"]),
    ("multi-writer", ["experiment", "multi-writer", "--runs", "5", "--writers", "1,2,4,8"]),
    ("two-writer", ["experiment", "two-writer", "--runs", "10"]),
    ("verdicts", None),  # one process per system, merged: see run_verdicts
    ("reported-races", ["experiment", "reported-races"]),
]
VERDICTS_ARGS = ["--budget", "10", "--trials", "5"]
NEEDS = {
    "01_matrix": ["matrix"],
    "02_judges": ["judge-calibration", "replay-consistency", "order-swap", "n1-replay", "temperature-sweep"],
    "03_contention": ["serializable-pilot", "multi-writer", "two-writer"],
    "04_engines": ["verdicts", "reported-races"],
}

# Injected before a notebook's first cell: plt.show() saves every open figure instead of
# displaying it, so figures are collected whatever backend the notebook asks for.
PRELUDE = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as _plt
_toki_seen = [0]
def _toki_show(*args, **kwargs):
    import matplotlib.pyplot as plt
    for num in plt.get_fignums():
        fig = plt.figure(num)
        names = {names!r}
        i = _toki_seen[0]
        name = names[i] if i < len(names) else str(i + 1)
        _toki_seen[0] += 1
        fig.savefig({out!r} + "/{stem}-" + name + ".png", dpi=100, bbox_inches="tight")
    plt.close("all")
_plt.show = _toki_show
"""


def run_one(cmd: list[str], out: Path, timeout: int) -> bool:
    t0 = time.monotonic()
    print("$", " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  gave up after {timeout} s", flush=True)
        return False
    # exit 1 means "a cell differs from the paper" (an answer, not a failure); 2 is bad input
    if proc.returncode not in (0, 1) or not out.exists():
        print(f"  failed ({proc.returncode}):\n{proc.stderr[-2000:]}", flush=True)
        return False
    print(f"  {time.monotonic() - t0:.1f} s", flush=True)
    return True


def run_verdicts(results: Path, toki: str, timeout: int) -> None:
    """`toki experiment verdicts`, one process per system, rows merged in system order.

    One process per system keeps one slow or stuck engine from holding up the others (a run of
    every system in one process has been seen to stop making progress after mem0-v2 on a loaded
    machine); the merged rows are those of a single run, since a system's cells depend only on
    the system and the seed.
    """
    from toki.experiments.verdicts import SYSTEMS

    docs = []
    for system in SYSTEMS:
        out = results / "verdicts" / "by-system" / system / "verdicts.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        if run_one([toki, "experiment", "verdicts", *VERDICTS_ARGS, "--systems", system, "--json", str(out)],
                   out, timeout):
            docs.append(json.loads(out.read_text()))
    if not docs:
        return
    merged = dict(docs[0])
    merged["rows"] = [r for d in docs for r in d["rows"]]
    merged["differences_from_paper"] = [r for d in docs for r in d.get("differences_from_paper", [])]
    merged["systems"] = len(docs)
    merged["elapsed_s"] = round(sum(d.get("elapsed_s") or 0 for d in docs), 1)
    (results / "verdicts" / "verdicts.json").write_text(json.dumps(merged, indent=1))


def run_small(results: Path, toki: str, timeout: int) -> None:
    for name, args in SMALL_RUNS:
        out = results / name / f"{name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        if args is None:
            run_verdicts(results, toki, timeout)
        else:
            run_one([toki, *args, "--json", str(out)], out, timeout)


def draw(stem: str, results: Path, timeout: int) -> list[Path]:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    prelude = PRELUDE.format(names=NAMES.get(stem, []), out=str(FIGURES), stem=stem)
    nb.cells.insert(1, nbformat.v4.new_code_cell(prelude))
    # `%matplotlib inline` would swap the backend back; the patched show stays in place either way.
    os.environ["TOKI_RESULTS"] = str(results)
    os.environ["TOKI_MATRIX_JSON"] = str(results / "matrix" / "matrix.json")
    before = set(FIGURES.glob(f"{stem}-*.png"))
    for old in before:
        old.unlink()
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    return sorted(FIGURES.glob(f"{stem}-*.png"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, help="an existing results folder (skip the small runs)")
    ap.add_argument("--keep", type=Path, help="run the small experiments into this folder and keep it")
    ap.add_argument("--only", action="append", choices=NOTEBOOKS, help="only these notebooks (repeatable)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per notebook cell (default 600)")
    ap.add_argument("--run-timeout", type=int, default=900, help="seconds per small experiment run (default 900)")
    args = ap.parse_args(argv)

    FIGURES.mkdir(parents=True, exist_ok=True)
    toki = str(Path(sys.executable).with_name("toki"))
    tmp = None
    if args.results:
        results = args.results.resolve()
    else:
        if args.keep:
            results = args.keep.resolve()
        else:
            tmp = tempfile.TemporaryDirectory(prefix="toki-figures-")
            results = Path(tmp.name)
        run_small(results, toki, args.run_timeout)
    for stem in args.only or NOTEBOOKS:
        missing = [n for n in NEEDS[stem] if not (results / n / f"{n}.json").exists()]
        if missing:
            print(f"{stem}: skipped, no results for {', '.join(missing)}")
            continue
        files = draw(stem, results, args.timeout)
        print(f"{stem}: {', '.join(f.name for f in files) or 'no figure'}")
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
