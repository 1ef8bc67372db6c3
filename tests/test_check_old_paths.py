"""The checker's modules that moved into ``toki.check.reading`` and ``toki.check.accel`` still
import under their old paths for a release: the same module object, after a DeprecationWarning
naming the new path."""

from __future__ import annotations

import importlib
import sys

import pytest

import toki.check
from toki.check.accel import allocator, children, key_slices, ranges
from toki.check.reading import history, json_scan

NEW = {"history": history, "jsonscan": json_scan, "runs": ranges, "forked": children, "partition": key_slices,
       "tuning": allocator}


@pytest.mark.parametrize("old", sorted(NEW))
def test_an_old_path_gives_the_moved_module_with_a_warning(old, monkeypatch):
    monkeypatch.delitem(sys.modules, f"toki.check.{old}", raising=False)
    monkeypatch.delattr(toki.check, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"toki\.check\.{old} moved to {NEW[old].__name__}"):
        mod = importlib.import_module(f"toki.check.{old}")
    assert mod is NEW[old]


def test_from_the_package_too(monkeypatch):
    monkeypatch.delitem(sys.modules, "toki.check.history", raising=False)
    monkeypatch.delattr(toki.check, "history", raising=False)
    with pytest.warns(DeprecationWarning):
        from toki.check import history as old
    assert old.parse is history.parse and old.History is history.History


def test_the_public_api_stays_where_it_was():
    from toki.check import ALL_ANOMALIES, FRIENDLY_MODELS, History, boundary, check, lattice, load, parse  # noqa: F401
    from toki.check.memory import MemoryHistory, header, loads, read  # noqa: F401

    assert History is history.History and parse is history.parse and load is history.load
