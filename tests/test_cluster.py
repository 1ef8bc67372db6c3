"""--cluster: addresses, shards that give the same answer on any number of workers, a killed worker.

Real LocalClusters (worker processes) on the real embedded PostgreSQL; samples are tiny so the
file runs in well under a minute.
"""

from __future__ import annotations

import io
import json
import os
import signal
import time

import pytest

from toki.cli import main
from toki.errors import ConfigError

distributed = pytest.importorskip("distributed", reason="the cluster extra: pip install 'toki[cluster]'")

from toki.cluster import Cluster, parse, shards_of
from toki.levels import MATRIX_LEVELS
from toki.matrix import composition as cm
from toki.matrix.cells import close_worker_benches, worker_bench

# Fields that say how long a run took or where it ran; everything else must be identical.
_VOLATILE = ("elapsed_s", "schedules_per_s", "seconds_per_cell", "provenance", "cluster", "workers")


def _stable(doc: dict) -> str:
    return json.dumps({k: v for k, v in doc.items() if k not in _VOLATILE}, sort_keys=True)


@pytest.mark.parametrize("text, workers, address", [
    ("local:1", 1, None), ("LOCAL:3", 3, None), ("10.0.0.5:8786", None, "tcp://10.0.0.5:8786"),
    ("tcp://sched.example:8786", None, "tcp://sched.example:8786"), ("tls://h:9000", None, "tls://h:9000")])
def test_addresses_parse(text, workers, address):
    spec = parse(text)
    assert spec.local_workers == workers and spec.address == address


@pytest.mark.parametrize("text", ["local:0", "local", "local:two", "sched.example", "h:99999", ""])
def test_bad_addresses_are_rejected_with_a_fix(text):
    with pytest.raises(ConfigError, match="local:2"):
        parse(text)


def test_cli_bad_cluster_input_exits_2():
    err = io.StringIO()
    assert main(["matrix", "--cluster", "local:0", "--quiet"], out=io.StringIO(), err=err) == 2
    assert "local:2" in err.getvalue()
    err = io.StringIO()
    assert main(["matrix", "--cluster", "local:2", "--workers", "2", "--quiet"], out=io.StringIO(), err=err) == 2
    assert "--workers and --cluster" in err.getvalue()


@pytest.mark.slow  # Dask's connect timeout (10 s)
def test_cli_unreachable_scheduler_exits_2():
    err = io.StringIO()
    # an unreachable scheduler is bad input, named with the fix, not a hang
    assert main(["matrix", "--cluster", "127.0.0.1:1", "--only", "P4", "--trials", "1", "--quiet"],
                out=io.StringIO(), err=err) == 2
    assert "cannot reach the Dask scheduler" in err.getvalue()


def test_experiment_that_does_not_shard_refuses_the_cluster():
    err = io.StringIO()
    assert main(["experiment", "two-writer", "--cluster", "local:1", "--json", "-"], out=io.StringIO(), err=err) == 2
    assert "does not split into shards" in err.getvalue()


def test_shards_do_not_depend_on_the_worker_count():
    assert shards_of(range(7), 3) == [[0, 1, 2], [3, 4, 5], [6]]


@pytest.mark.slow
@pytest.mark.db
def test_matrix_local1_and_local2_give_the_same_document(tmp_path):
    docs = []
    for spec in ("local:1", "local:2"):
        path = tmp_path / f"{spec.replace(':', '')}.json"
        rc = main(["matrix", "--cluster", spec, "--trials", "2", "--only", "P4", "--only", "A5B", "--no-variants",
                   "--quiet", "--json", str(path)], out=io.StringIO(), err=io.StringIO())
        assert rc == 0
        docs.append(json.loads(path.read_text()))
    assert docs[0]["provenance"]["cluster"]["workers"] == 1 and docs[1]["provenance"]["cluster"]["workers"] == 2
    assert docs[0]["cluster"]["address"] == "local:1"
    assert _stable(docs[0]) == _stable(docs[1])
    rates = {(c["predicate"], c["level"]): c["rate"] for c in docs[0]["cells"]}
    assert rates[("P4", "RC")] == 1.0 and rates[("P4", "SI")] == 0.0 and rates[("A5B", "SI")] == 1.0


@pytest.mark.slow
@pytest.mark.db
def test_composition_local1_and_local2_give_the_same_document(tmp_path):
    docs = []
    for spec in ("local:1", "local:2"):
        path = tmp_path / f"{spec.replace(':', '')}.json"
        rc = main(["matrix", "--composition", "--cluster", spec, "--pipelines", "4", "--trials", "3", "--noise", "0.3",
                   "--quiet", "--json", str(path)], out=io.StringIO(), err=io.StringIO())
        assert rc == 0
        docs.append(json.loads(path.read_text()))
    assert _stable(docs[0]) == _stable(docs[1])
    assert docs[1]["provenance"]["cluster"]["workers"] == 2 and docs[1]["provenance"]["seed"] == 42
    assert sum(c["noisy_stages"] for c in docs[0]["composition"]["cells"]) > 0  # the noise did run


@pytest.mark.slow
@pytest.mark.db
def test_a_killed_worker_changes_no_result(toki_server):
    """Kill the worker that is running shards; the scheduler re-runs them elsewhere from their seeds."""
    pipes = [("lww", "evi", "await", "rule", "evi"), ("rule", "await"), ("evi", "evi", "lww"), ("await",),
             ("rule", "rule", "lww", "evi"), ("evi", "await", "rule"), ("lww", "lww"), ("await", "evi", "rule")]
    names = [cm.pipeline_name(p) for p in pipes]
    trials, seed, noise = 3, 11, 0.25
    bench = worker_bench(None, 10.0, "composition")  # the reference: this process, one lane
    want = [[cm.run_cell(bench, p, lv, trials, seed, noise) for lv in MATRIX_LEVELS] for p in pipes]
    close_worker_benches()  # give the reference lane's connections back before the workers open theirs
    killed = {}
    with Cluster("local:2") as cl:
        before = cl.worker_pids()

        def kill_a_busy_worker(i, res):
            if killed:
                return
            busy = [w for w, keys in cl.client.processing().items() if keys and w in before]
            if busy:
                killed[busy[0]] = before[busy[0]]
                os.kill(before[busy[0]], signal.SIGKILL)

        got = cl.map(cm.shard, [[n] for n in names], trials, seed, noise, None, 10.0, on_result=kill_a_busy_worker)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and set(cl.worker_pids().values()) & set(killed.values()):
            time.sleep(0.2)
        after = set(cl.worker_pids().values())
    assert killed, "no worker was busy when the first shard finished: nothing was killed"
    assert not after & set(killed.values()), "the killed worker is still there"
    assert got == want
