"""`toki run schedules/...` finds the catalogue installed with toki from any directory."""

import io

import pytest

from toki.cli import main

pytestmark = pytest.mark.db


def test_installed_catalogue_runs_from_elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert main(["run", "schedules/classic/p4.toml", "--level", "rc"], out=out, err=io.StringIO()) == 0
    assert "expectation: met" in out.getvalue()
    err = io.StringIO()
    assert main(["run", "schedules/classic/nope.toml", "--level", "rc"], out=io.StringIO(), err=err) == 2
    assert "installed catalogue" in err.getvalue()
