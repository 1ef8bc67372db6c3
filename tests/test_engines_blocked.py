"""Engines toki checked and cannot certify (toki.engines.blocked): each is a row naming its blocker,
never a gap; and the blocker behind A-MEM, ChromaDB's native writer, is what the harness refuses."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from toki.engines.blocked import BLOCKERS
from toki.engines.registry import ENGINES, available, load_engine
from toki.errors import ConfigError


@pytest.mark.parametrize("name", sorted(BLOCKERS))
def test_a_blocked_engine_is_a_row_that_names_its_blocker(name):
    info = ENGINES[name]
    assert info.executed == "blocked" and not available(info)
    with pytest.raises(ConfigError) as e:
        load_engine(name)
    what, why, _ = BLOCKERS[name]
    assert what in str(e.value) and why[:40] in str(e.value) and e.value.fix


def test_the_verdicts_experiment_lists_them_with_the_reason(tmp_path):
    from toki.experiments import verdicts

    assert set(BLOCKERS) <= set(verdicts.SYSTEMS)


class ChromaProbe:
    """Two agents add a document each to one ChromaDB PersistentClient collection in the run's folder
    (A-MEM's store: agentic_memory/retrievers.py ChromaRetriever)."""

    name, executed = "chroma-probe", "real"

    def __init__(self):
        import chromadb

        from toki.harness.engine import Detector, Scenario

        self.version = chromadb.__version__
        self.scenarios = {"add-add": Scenario(
            "add-add", "two agents add one document each", ("A", "B"), self.add,
            detectors=(Detector("lost-update", lambda st, err: [] if len(st) == 2 else [f"ids {st}"]),))}

    def open(self, location):
        import chromadb

        return chromadb.PersistentClient(path=str(Path(location) / "chroma")).get_or_create_collection("memories")

    def close(self, c):
        pass

    def state(self, c):
        return sorted(c.get()["ids"])

    def add(self, c, agent):
        c.add(ids=[agent], embeddings=[[1.0, 0.0, 0.0]], documents=[f"note by {agent}"])


def chroma_probe():
    return ChromaProbe()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("chromadb") is None, reason="chromadb is not installed here")
def test_chromadb_native_writer_is_refused():
    from tests._cli import toki

    rc, out, _ = toki("certify", "--engine-module", "tests.test_engines_blocked:chroma_probe", "--budget", "3")
    assert rc == 1 and "unverifiable" in out and "data_level0.bin" in out
