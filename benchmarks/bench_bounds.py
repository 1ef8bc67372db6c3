"""Time the bounds the tests no longer assert: how long a timeout, a deadlock, an unseen wait or a
refused connection takes to be recognised, and how many observer questions a run asks.

These were wall-clock or count-of-polls assertions in tests/ (``assert elapsed < 0.9``,
``assert questions <= 5``): true on an idle machine, false now and then on a loaded one. The tests
keep the deterministic half (the error raised, the rows, the verdict: what would differ had the
wait been sat out); this script prints the figures, each beside the bound the test used to
assert, and flags any above it. Cases that need a database use the embedded PostgreSQL (or
``--dsn``); ``deadlock-nosu`` needs the PostgreSQL at 127.0.0.1:5432 and is skipped without it.

    .venv/bin/python benchmarks/bench_bounds.py [--repeat 3] [--only NAME ...] [--dsn DSN]

Each row: case, the former bound, the best / worst of ``--repeat`` runs, and ``over`` when the
worst exceeded the bound. Test functions are timed whole (set-up included); the former bound
covered part of the test, so the figure is an upper estimate.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the test modules import their helpers (_databases) by name

import pytest  # noqa: E402  (the test modules import it; pytest.skip is caught below)

from toki.db.server import resolve  # noqa: E402


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def wire_questions(server):
    """Observer questions in 20 runs of a schedule that never blocks (former bound: <= 5 in the
    quieter of two batches; each statement silent past 0.5 ms costs one)."""
    from tests.test_sched_wire import FREE
    from toki.sched import Runner, parse_toml
    from toki.sched.runner import Lane

    calls = [0]
    real = Lane.is_blocked

    def is_blocked(self, pid, others):
        calls[0] += 1
        return real(self, pid, others)

    Lane.is_blocked = is_blocked
    try:
        runner = Runner(server)
        with runner.lane("benchbounds") as lane:
            runner.run(parse_toml(FREE), "rc", lane=lane)
            calls[0] = 0
            for _ in range(20):
                runner.run(parse_toml(FREE), "rc", lane=lane)
    finally:
        Lane.is_blocked = real
    return calls[0]


def deadlock(server):
    from tests import test_sched_runner as t
    from toki.sched import Runner

    return _timed(lambda: t.test_deadlock_is_resolved_in_milliseconds(Runner(server, step_limit_s=5)))


def deadlock_nosu(server):
    """The run's own elapsed_s for a deadlock under a role that cannot lower deadlock_timeout."""
    from tests import test_faults_hardening as t
    from toki.cli import main

    dsn = t._pg15_nosu()
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "dl.toml"
        f.write_text(t.DEADLOCK)
        out = io.StringIO()
        assert main(["run", str(f), "--level", "rc", "--dsn", dsn, "--json", "-"], out=out) == 0
        return json.loads(out.getvalue())["elapsed_s"]


def step_timeout(server):
    from tests import test_sched_runner as t

    return _timed(lambda: t.test_hanging_step_raises_step_timeout_and_leaves_no_schema(server))


def judge_timeout(server):
    from tests import test_judges_http as t

    srv = t.ChatServer()
    th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    th.start()
    try:
        return _timed(lambda: t.test_timeout_is_an_error(srv))
    finally:
        srv.shutdown()
        srv.server_close()


def unreachable(server):
    from tests import test_server as t

    return _timed(t.test_unreachable_dsn_fails_fast_with_a_fix)


def docker(server):
    from tests import test_server as t

    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as d:
        return _timed(lambda: t.test_docker_without_an_engine_fails_within_seconds(mp, Path(d)))


def pg_plugin(server):
    from tests import test_harness_soundness as t

    test = t.test_a_postgres_plugin_gets_its_observer_and_per_trial_setup_from_the_harness
    return _timed(lambda: test(server))


def _plain(module: str, name: str, *args):
    def case(server):
        mod = __import__(f"tests.{module}", fromlist=[name])
        return _timed(lambda: getattr(mod, name)(*args))
    return case


# name -> (former bound, unit, function)
CASES = {
    "wire-questions": (5, "questions", wire_questions),
    "deadlock": (0.9, "s", deadlock),
    "deadlock-nosu": (0.9, "s", deadlock_nosu),
    "step-timeout": (4, "s", step_timeout),
    "judge-timeout": (1.4, "s", judge_timeout),
    "unreachable": (10, "s", unreachable),
    "docker": (15, "s", docker),  # three hosts, 5 s each
    "sqlite-busy": (2, "s", _plain(
        "test_engines_harness", "test_begin_immediate_contention_is_busy_then_reissued_never_slept")),
    "unseen-wait": (2, "s", _plain(
        "test_engines_harness", "test_an_agent_asleep_outside_any_storage_call_is_unverifiable_naming_where")),
    "import-lock": (5, "s", _plain(
        "test_harness_soundness",
        "test_a_lock_made_before_the_trial_out_of_reach_is_recognised_as_an_uncontrolled_wait_quickly")),
    "pg-plugin": (60, "s", pg_plugin),
    "handover": (10, "s", _plain(
        "test_harness_soundness",
        "test_conditions_semaphores_and_events_the_engine_creates_are_waits_on_another_agent", "condition")),
    "timed-poll": (2, "s", _plain(
        "test_harness_soundness", "test_a_timed_wait_times_out_only_when_no_agent_can_step")),
    "virtual-sleep": (10, "s", _plain(
        "test_harness_paths", "test_an_agents_sleep_is_virtual_time_not_an_unseen_wait")),
    "hung-child": (5, "s", _plain(
        "test_faults_hardening", "test_a_fault_child_that_hangs_is_killed_and_named")),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=sorted(CASES), default=None)
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()
    server = resolve(args.dsn)
    over = 0
    print(f"{'case':16} {'bound':>8} {'best':>9} {'worst':>9}")
    for name in args.only or CASES:
        bound, unit, fn = CASES[name]
        try:
            xs = [fn(server) for _ in range(args.repeat)]
        except pytest.skip.Exception as e:
            print(f"{name:16} skipped: {e}")
            continue
        except Exception as e:  # a case that fails is reported, and the others still run
            print(f"{name:16} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            over += 1
            continue
        flag = "  over" if max(xs) > bound else ""
        over += bool(flag)
        fmt = (lambda x: f"{x:d}") if unit == "questions" else (lambda x: f"{x:.3f}")
        print(f"{name:16} {bound:>8} {fmt(min(xs)):>9} {fmt(max(xs)):>9} {unit}{flag}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
