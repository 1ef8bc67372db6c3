"""Property tests down the lattice, on histories from the simulated databases.

serializable simulator: never flagged (strict serializable, with real-time and process edges);
snapshot-isolation simulator: valid under snapshot isolation (never G-single-item, G-nonadjacent-item,
G0, G1), and write skew (G2-item) is found across seeds; read-committed simulator: valid under
read committed (never G0, G1a, G1b, G1c), and lost updates and G-single are found across seeds.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toki.check import check
from toki.check.gen import generate

PROPS = settings(max_examples=12, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(0, 2 ** 31 - 1)
WORKLOADS = st.sampled_from(["list-append", "rw-register"])
SI_FORBIDDEN = {"G0", "G1a", "G1b", "G1c", "G-single-item", "G-nonadjacent-item", "internal", "dirty-update",
                "duplicate-elements", "incompatible-order", "future-read", "cyclic-versions"}
RC_FORBIDDEN = {"G0", "G1a", "G1b", "G1c", "dirty-update", "duplicate-elements", "incompatible-order",
                "future-read", "cyclic-versions"}


def hist(workload, db, seed, txns=150, keys=3):
    return list(generate(workload=workload, txns=txns, keys=keys, db=db, seed=seed, concurrency=5))


def found(r):
    return set(r["anomaly_types"])


@PROPS
@given(WORKLOADS, SEEDS)
def test_serializable_simulator_is_never_flagged(workload, seed):
    ops = hist(workload, "serializable", seed)
    r = check(ops, workload=workload)  # Elle's default: strict-serializable
    assert r["valid"] is True, r["anomaly_types"]
    # the strongest models Elle knows, with process order too
    r = check(ops, workload=workload, models=["strict-serializable", "strong-session-serializable"])
    assert r["valid"] is True
    if workload == "rw-register":
        r = check(ops, workload=workload, wfr_keys=True, sequential_keys=True, linearizable_keys=True)
        assert r["valid"] is True, r["anomaly_types"]


@PROPS
@given(WORKLOADS, SEEDS)
def test_snapshot_isolation_simulator(workload, seed):
    ops = hist(workload, "snapshot-isolation", seed)
    r = check(ops, workload=workload, models=["snapshot-isolation"])
    assert r["valid"] is True, r["anomaly_types"]
    r = check(ops, workload=workload, models=["serializable"])
    assert not found(r) & SI_FORBIDDEN
    assert found(r) <= {"G2-item", "lost-update", "PL-3-cycle-exists"}


@pytest.mark.slow
@PROPS
@given(WORKLOADS, SEEDS)
def test_read_committed_simulator(workload, seed):
    ops = hist(workload, "read-committed", seed)
    r = check(ops, workload=workload, models=["read-committed"])
    assert r["valid"] is True, r["anomaly_types"]
    r = check(ops, workload=workload, models=["serializable"])
    assert not found(r) & RC_FORBIDDEN


@pytest.mark.slow
def test_weaker_simulators_do_show_their_anomalies():
    si, rc = set(), set()
    for seed in range(6):
        for wl in ("list-append", "rw-register"):
            si |= found(check(hist(wl, "snapshot-isolation", seed), workload=wl, models=["serializable"]))
            rc |= found(check(hist(wl, "read-committed", seed), workload=wl, models=["serializable"]))
    assert "G2-item" in si
    assert {"G-single-item", "lost-update"} <= rc
    assert "G-single-item" not in si


def test_generator_is_deterministic_per_seed():
    a = hist("list-append", "snapshot-isolation", 7)
    b = hist("list-append", "snapshot-isolation", 7)
    c = hist("list-append", "snapshot-isolation", 8)
    assert a == b and a != c
