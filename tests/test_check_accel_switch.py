"""One switch chooses the checker's compiled twins: ``TOKI_JIT`` (auto, always, never) read into
``toki.check.accel.MODE`` at import, ``TOKI_NO_JIT=1`` meaning never, as it did before the switch
existed; with never, no kernel is loaded and numba is never imported."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = ("import sys; from toki.check import accel, check; from toki.check.gen import generate; "
         "check(list(generate(workload='list-append', txns=200, keys=4, db='serializable', seed=1)));"
         "print(accel.MODE, accel.load('ranges') is None, 'numba' in sys.modules)")


@pytest.mark.parametrize("env, mode", [({"TOKI_NO_JIT": "1"}, "never")] + [
    pytest.param(env, mode, marks=pytest.mark.slow) for env, mode in (
        ({}, "auto"), ({"TOKI_JIT": "always"}, "always"), ({"TOKI_JIT": "never"}, "never"),
        ({"TOKI_JIT": "always", "TOKI_NO_JIT": "1"}, "never"), ({"TOKI_JIT": "bogus"}, "auto"))])
def test_the_environment_sets_the_one_switch(env, mode):
    clean = {k: v for k, v in os.environ.items() if k not in ("TOKI_JIT", "TOKI_NO_JIT")}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == mode
    if mode == "never":
        assert out[1:] == ["True", "False"]  # nothing loaded, numba not imported


@pytest.mark.slow
def test_a_small_history_in_auto_does_not_import_numba():
    clean = {k: v for k, v in os.environ.items() if k not in ("TOKI_JIT", "TOKI_NO_JIT")}
    probe = PROBE.replace("accel.load('ranges') is None, ", "")
    out = subprocess.run([sys.executable, "-c", probe], env=clean, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["auto", "False"]
