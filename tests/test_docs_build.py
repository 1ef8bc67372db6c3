"""The documentation site builds in strict mode: every page in nav, every link and anchor resolves.

Skipped when mkdocs (the ``docs`` extra: ``pip install -e '.[docs]'``) is not installed; CI
installs it and also builds the site in ``.ci/run``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mkdocs")
pytest.importorskip("material")


def test_docs_build_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").exists()
    shutil.rmtree(tmp_path / "site", ignore_errors=True)


def test_docs_never_point_outside_the_repository():
    """Readers of the site cannot follow the project's private notes: no page may cite them."""
    for page in (ROOT / "docs").rglob("*.md"):
        text = page.read_text()
        for banned in ("DESIGN.md", "SPEC §", "SPEC.md", "../shared"):
            assert banned not in text, f"{page.relative_to(ROOT)} mentions {banned}"
