"""notebooks/03_contention.ipynb runs against fresh results of the three contention experiments.

The experiments run with tiny sizes into a temporary folder (their default layout,
``NAME/NAME.json``); the notebook is executed with nbclient, reading that folder through
``TOKI_RESULTS``. It must finish without an error and draw every figure.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "03_contention.ipynb"


def _experiment(name: str, argv: list[str], results: Path, dsn: str) -> None:
    from toki.cli import main

    path = results / name / f"{name}.json"
    out, err = io.StringIO(), io.StringIO()
    rc = main(["experiment", name, "--dsn", dsn, "--json", str(path), *argv], out=out, err=err)
    assert rc == 0, out.getvalue() + err.getvalue()
    assert path.exists()


@pytest.mark.slow
@pytest.mark.db
def test_contention_notebook_executes_against_fresh_results(toki_server, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    results = tmp_path / "results"
    _experiment("serializable-pilot", ["--writers", "1,2", "--writes", "4", "--runs", "1", "--think-ms", "0"],
                results, toki_server.dsn)
    _experiment("multi-writer", ["--writers", "1,2", "--runs", "2", "--max-retries", "1"], results, toki_server.dsn)
    _experiment("two-writer", ["--runs", "1"], results, toki_server.dsn)

    monkeypatch.setenv("TOKI_RESULTS", str(results))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "data" in o and "image/png" in o["data"]]
    assert len(images) == 5  # pilot, admit/abort, commits/s, retry, two-writer
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "reproduced in 6 of 6 cells" in text
    assert "mismatches with the published numbers: none" in text


def test_notebook_reads_only_experiment_json():
    """Notebooks draw; they never touch the database or recompute an experiment (docs/design.md#experiment-results-json)."""
    nbformat = pytest.importorskip("nbformat")
    source = "\n".join(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code")
    for forbidden in ("psycopg", "toki.db", "toki.sched", "Runner", "resolve("):
        assert forbidden not in source
    for name in ("serializable-pilot", "multi-writer", "two-writer"):
        assert f'load("{name}")' in source
