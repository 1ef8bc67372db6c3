"""docs/ci.md's GitHub Actions workflow and GitLab CI job, run locally as written.

Each YAML block is parsed from the page; the steps that call ``toki`` run with bash in a fresh
folder (the install steps aside: this virtualenv has toki), with the engine variable pointed at
``tests.plugins.gate_notes`` and the baseline the page says to record. A release whose race the
baseline accepts passes (exit 0); one with a new race fails (exit 1); either way the witnesses,
pictures and JUnit report are where the artifact paths say, and a witness replays.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from toki.cli import main

yaml = pytest.importorskip("yaml", reason="PyYAML reads the CI files (it comes with the docs extra, mkdocs)")

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "ci.md").read_text()
RELEASES = {"accepted": ("tests.plugins.gate_notes:released", 0), "new race": ("tests.plugins.gate_notes:planted", 1)}


def _block(heading: str) -> dict:
    (text,) = re.findall(rf"### {heading}\n.*?```yaml\n(.*?)```", PAGE, re.S)
    return yaml.safe_load(text)


def _github() -> tuple[dict, list[str], list[str], list[str], list[str]]:
    """(env, toki steps, other steps, artifact paths, JUnit paths) of the workflow's one job."""
    (job,) = _block("GitHub Actions")["jobs"].values()
    runs = [s["run"] for s in job["steps"] if "run" in s]
    uses = {s["uses"].split("@")[0]: s.get("with", {}) for s in job["steps"] if "uses" in s}
    return (job["env"], [r for r in runs if re.search(r"^\s*toki ", r, re.M)],
            [r for r in runs if not re.search(r"^\s*toki ", r, re.M)],
            [uses["actions/upload-artifact"]["path"]], [uses["mikepenz/action-junit-report"]["report_paths"]])


def _gitlab() -> tuple[dict, list[str], list[str], list[str], list[str]]:
    (job,) = _block("GitLab CI").values()
    art = job["artifacts"]
    assert art["when"] == "always"  # the witnesses of a failing gate are the ones wanted
    return (job["variables"], ["\n".join(job["script"])], job["before_script"], art["paths"],
            [art["reports"]["junit"]])


CI = {"github": _github, "gitlab": _gitlab}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """The baseline the page says to record once, with the search options the CI step uses."""
    path = tmp_path_factory.mktemp("ci") / "toki-baseline.toml"
    (step,) = _github()[1]
    search = re.findall(r"--exhaustive \d+|--budget \d+|--pct \d+", step)
    rc = main(["certify", "--engine-module", RELEASES["accepted"][0], *" ".join(search).split(),
               "--write-baseline", str(path)], out=io.StringIO(), err=io.StringIO())
    assert rc == 1 and path.exists()  # release 1.0 admits its known race: recorded as accepted
    return path


# Each case runs toki as a CI step would (a process of its own, about 4 s here): the fast tier runs
# each example once and each exit status once; the other two pairings are in the slow tier.
CASES = [pytest.param("github", "new race"), pytest.param("gitlab", "accepted"),
         pytest.param("github", "accepted", marks=pytest.mark.slow),
         pytest.param("gitlab", "new race", marks=pytest.mark.slow)]


@pytest.mark.parametrize("ci, release", CASES)
def test_the_ci_steps_in_the_docs_gate_and_leave_their_artifacts(ci, release, baseline, tmp_path):
    variables, steps, others, artifacts, junits = CI[ci]()
    assert steps, f"no step of the {ci} example calls toki"
    for other in others:  # only installing is left out
        assert all(line.strip().startswith("pip install") for line in other.strip().splitlines()), other
    assert set(variables) == {"TOKI_ENGINE_MODULE"}
    module, want = RELEASES[release]
    (tmp_path / "toki-baseline.toml").write_text(baseline.read_text())
    env = dict(os.environ, TOKI_ENGINE_MODULE=module, PYTHONPATH=str(ROOT),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for step in steps:
        proc = subprocess.run(["bash", "-e", "-c", step], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == want, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr, proc.stderr
    (folder,) = {a.rstrip("/") for a in artifacts}
    kept = {p.name for p in (tmp_path / folder).iterdir()}
    found = ["counter"] + (["notes"] if release == "new race" else [])
    for scenario in found:  # each race: its witness and its picture
        assert {f"witness.{scenario}.json", f"witness.{scenario}.png"} <= kept, kept
    assert "witness.audit.json" in kept  # the by-design finding's serial run
    (junit,) = junits
    assert (tmp_path / junit).parent == tmp_path / folder
    suite = ET.parse(tmp_path / junit).getroot()
    assert suite.get("tests") == "3" and suite.get("failures") == str(want), ET.tostring(suite)[:2000]
    rc = main(["certify", "--replay", str(tmp_path / folder / f"witness.{found[-1]}.json")],
              out=io.StringIO(), err=io.StringIO())
    assert rc == 1  # the kept witness shows its race again
