"""CI executes notebooks/01_matrix.ipynb against a small matrix run, so the notebook cannot rot."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from toki.cli import main

pytestmark = [pytest.mark.db, pytest.mark.slow]
NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01_matrix.ipynb"


def test_matrix_notebook_executes(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    path = tmp_path / "matrix.json"
    rc = main(["matrix", "--trials", "1", "--workers", "1", "--quiet", "--n2-grid", "--n2-schedules", "1",
               "--json", str(path)], out=io.StringIO(), err=io.StringIO())
    assert rc == 0 and path.exists()
    monkeypatch.setenv("TOKI_MATRIX_JSON", str(path))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "cells at or above the guard admit 0" in text
    assert os.environ["TOKI_MATRIX_JSON"] == str(path)
