"""Histories recorded by the runner's write-path runs (docs/design.md#histories-and-toki-check-output) go straight into toki check:
the unguarded double supersede is a lost update on the incumbent row; the guarded one is not."""

from __future__ import annotations

import pytest

from toki.check import check
from toki.sched import Runner, Schedule, Step

pytestmark = pytest.mark.db

SETUP = ["insert into agent_memory values ('rx-1', 'alice', 'medication', 'penicillin', '2026-03-01', "
         "'9999-12-31', '2026-03-01', '9999-12-31', 'x_rx1', 0.5, 'lww', 'current')"]


def _fact(fid, obj):
    return {"fact_id": fid, "subject": "alice", "predicate": "medication", "object": obj,
            "valid_from": "2026-03-01T00:00:00"}


def _double_supersede(guard: bool) -> Schedule:
    steps = [Step("A", op="begin", args={"fact": _fact("rx-2", "amoxicillin"), "guard": guard}),
             Step("B", op="begin", args={"fact": _fact("rx-3", "cephalexin"), "guard": guard}),
             Step("A", op="read_candidates"), Step("B", op="read_candidates"),
             Step("A", op="write"), Step("B", op="write"), Step("A", op="commit"), Step("B", op="commit")]
    return Schedule(name="double-supersede", steps=steps, setup=SETUP, on_blocked="defer", store=True).validate()


@pytest.mark.parametrize("guard", [True, False])
def test_write_path_history_checks_as_elle_would(toki_server, guard):
    res = Runner(toki_server).run(_double_supersede(guard), "read-committed", check_expect=False)
    history = res.history
    assert [op["type"] for op in history].count("ok") == 2
    assert all(op["f"] == "txn" for op in history)
    verdict = check(history, workload="rw-register")
    if guard:
        assert verdict["valid"] is True, verdict
    else:
        assert verdict["valid"] is False and "lost-update" in verdict["anomaly_types"], verdict
        assert "serializable" in verdict["also_not"] or "serializable" in verdict["not"]


# (the compiled passes in the slow tier: compiling them costs a fresh clone's worker seconds)
@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["numpy", "compiled"])
@pytest.mark.parametrize("shape", ["dense", "planted-far", "sparse", "int64-extremes", "edge-of-near"])
def test_process_codes_are_np_unique_whatever_the_processes(monkeypatch, shape, compiled):
    """Processes (and sparse keys) are coded by counting the near ones and sorting the far ones,
    in numpy or in two compiled passes: the same codes np.unique gives, for dense processes, a few
    far ones (a planted anomaly's, at 2^30), all far apart, values at int64's extremes (value -
    smallest overflows) and values right at the edge of the counted range; with
    ``sort_sparse=False``, values mostly far apart are declined."""
    import numpy as np

    from toki.check import accel
    from toki.check.reading import history

    if compiled:
        if accel.load("transactions") is None:
            pytest.skip("numba is not installed or cannot compile")
        monkeypatch.setattr(accel, "MODE", "always")
    near = history._NEAR
    rng = np.random.default_rng(len(shape))
    for _ in range(60):
        n = int(rng.integers(0, 3000))
        if shape == "dense":
            v = rng.integers(0, 50, n)
        elif shape == "planted-far":
            v = np.r_[rng.integers(3, 60, n), rng.integers(1 << 30, (1 << 30) + 3, int(rng.integers(1, 4)))]
        elif shape == "sparse":
            v = rng.integers(-(1 << 40), 1 << 40, n)
        elif shape == "int64-extremes":
            v = np.r_[rng.integers(0, 50, n), [np.iinfo(np.int64).min, np.iinfo(np.int64).max]]
        else:
            v = np.r_[rng.integers(0, 2 * near, n), [near, near - 1, 0]]
        v = rng.permutation(v.astype(np.int64))
        uniq, codes = history._dense_codes(v)
        want_uniq, want_codes = np.unique(v, return_inverse=True)
        assert uniq.tolist() == want_uniq.tolist()
        assert codes.tolist() == want_codes.tolist() and codes.dtype == np.int64
        if shape == "sparse" and n > 16:
            assert history._dense_codes(v, sort_sparse=False) is None
