"""Execute notebooks/02_judges.ipynb against JSON the experiments produce (small sizes)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from toki.cli import main

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_judges.ipynb"

SIZES = {
    "n1-replay": ["--trials", "10", "--seeds", "2"],
    "judge-calibration": ["--cells", "20", "--calls", "30"],
    "replay-consistency": ["--tmax", "6", "--reps", "30", "--log-reps", "1"],
    "order-swap": [],
    "temperature-sweep": ["--trials", "2", "--seeds", "1", "--temperatures", "0.5,1.5"],
}


@pytest.mark.slow
@pytest.mark.db
def test_judges_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for name, extra in SIZES.items():
        err = io.StringIO()
        rc = main(["experiment", name, "--json", str(tmp_path / name / f"{name}.json"), *extra],
                  out=io.StringIO(), err=err)
        assert rc == 0, err.getvalue()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    old = os.environ.get("TOKI_RESULTS")
    os.environ["TOKI_RESULTS"] = str(tmp_path)
    try:
        nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if old is None:
            os.environ.pop("TOKI_RESULTS", None)
        else:
            os.environ["TOKI_RESULTS"] = old
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 4  # calibration, C(t), order swap, N1 + sweep
    text = "".join(o.get("text", "") for o in outputs)
    assert str(tmp_path) in text
