"""Record again the engine witnesses shipped in docs/engines/ and their pictures, with the current harness.

For each one: ``toki certify --engine ENGINE --scenario SCENARIO --budget 100 --seed 0 --witness ...
--png ...`` into a temporary folder, the witness and its picture copied to
``docs/engines/ENGINE-SCENARIO.witness.json`` and ``.png`` (no picture for NO_PICTURE's engines),
then ``toki certify --replay`` of the copy 5 times, which must exit 1 (every run shows the
anomaly). The script exits 1 when a search finds no anomaly (the old files stay) or a recorded
witness does not reproduce.

tests/test_certify_contract.py replays every ``*.witness.json`` under docs/ and fails when one no
longer reproduces (after a change to the harness or an engine): this is the one command that
records them again.

Usage (from the repository root; the SodaMem search takes about a minute, all of them 15-20 min
on 2 busy cores)::

    .venv/bin/python docs/make_witnesses.py
    .venv/bin/python docs/make_witnesses.py --only sodamem-double-supersede
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "engines"
# (engine, scenario): the two docs/engines.md shows, then one per race of each real engine toki ships
# that admits one (toki certify --engine E at budget 100, seed 0: every scenario that admits an
# anomaly by an interleaving, not by design; one of several scenarios that show the same race),
# which tests/test_trial_history.py also checks against the memory-history checker
WITNESSES = [("sodamem", "double-supersede"), ("atommem", "add-add"),
             # TOKI's write path below its preconditions, and at one (the empty-slot phantom at SI)
             ("toki", "lww-unguarded-at-RC"), ("toki", "evi-empty-slot-at-SI"), ("toki", "rule-at-SI"),
             ("toki", "n2-at-SI"),
             ("langmem", "blind-put"), ("langmem", "double-remember"), ("langmem", "duplicate-remember"),
             ("mem0", "add-same-fact"), ("mem0", "update-update"), ("mem0", "reported-linked-ids-p4"),
             # Graphiti: one (each replay imports graphiti and Kuzu, about 9 s; its duplicate entity is
             # checked against the memory-history checker by tests/test_trial_history.py's fast test)
             ("graphiti", "restated-fact")]
# Engines whose witnesses ship without a picture: toki.harness.draw hands each step's statement to
# matplotlib as it is, and Graphiti's Cypher parameters ($uuid, $name) are read as mathtext, which
# fails to parse, so `--png` ends the certify run with a ValueError
NO_PICTURE = {"graphiti"}
SEARCH = ["--budget", "100", "--seed", "0"]
REPLAYS = 5


def _toki(toki: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([toki, *args], cwd=ROOT, capture_output=True, text=True)


def record(toki: str, engine: str, scenario: str) -> bool:
    name = f"{engine}-{scenario}"
    with tempfile.TemporaryDirectory(prefix="toki-witness-") as tmp:
        png = [] if engine in NO_PICTURE else ["--png", f"{tmp}/w.png"]
        found = _toki(toki, "certify", "--engine", engine, "--scenario", scenario, *SEARCH,
                      "--witness", f"{tmp}/w.json", *png)
        witness, picture = Path(tmp) / f"w.{scenario}.json", Path(tmp) / f"w.{scenario}.png"
        if found.returncode != 1 or not witness.exists():
            print(f"{name}: no witness (toki certify exit {found.returncode}); docs/engines/ left as it was\n"
                  f"{found.stdout}{found.stderr}", file=sys.stderr)
            return False
        shutil.copyfile(witness, OUT / f"{name}.witness.json")
        if png:
            shutil.copyfile(picture, OUT / f"{name}.png")
    replay = _toki(toki, "certify", "--replay", str(OUT / f"{name}.witness.json"), "--times", str(REPLAYS))
    print(f"{name}: recorded; replay exit {replay.returncode}\n{replay.stdout}", end="")
    if replay.returncode != 1 or f"it shows the anomaly {REPLAYS} of {REPLAYS}" not in replay.stdout:
        print(f"{name}: the recorded witness does not reproduce {REPLAYS} of {REPLAYS} times\n{replay.stderr}",
              file=sys.stderr)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=[f"{e}-{s}" for e, s in WITNESSES],
                    help="record this one only (repeatable)")
    args = ap.parse_args(argv)
    toki = str(Path(sys.executable).with_name("toki"))
    chosen = [(e, s) for e, s in WITNESSES if not args.only or f"{e}-{s}" in args.only]
    ok = [record(toki, e, s) for e, s in chosen]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
