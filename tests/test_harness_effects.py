"""No wrong certificate: fail closed on every effect, in the shapes third-party code takes.

Each plug-in here (tests/plugins/mixed_paths.py, file_locked.py) was written from docs/engines.md
as a new user would, around a library no one in toki wrote. The claims:

- an agent that mixes one controlled call with a path toki does not intercept (psycopg2, libpq in
  C, over a Unix socket or TCP; redis-py over a Python socket; LMDB, a native writer with its files
  outside the run's folder) is never certified: unverifiable, naming the path, never exit 0;
- a scenario whose calls fail in every serial order is unverifiable, naming the failure;
- file locks are steps: a blocking ``flock`` and ``filelock``'s polled lock are certified complete
  at two preemptions; no lock, or ``lockf`` (a per-process lock that threads share), is found;
- a detector that raises is a one-line plug-in error (exit 2), never a traceback;
- plug-ins written against the previous release's import paths keep working.
"""

from __future__ import annotations

import json
from pathlib import Path
import socket
import warnings

import pytest

from tests._cli import toki as _toki


def _verdict(spec: str, *extra: str) -> tuple[int, dict]:
    rc, out, err = _toki("certify", "--engine-module", spec, "--scenario", "increment", "--step-limit", "5",
                         "--json", "-", *extra)
    assert rc in (0, 1), f"{spec}: exit {rc}\n{out}{err}"
    (v,) = json.loads(out)["verdicts"]
    return rc, v


def _refused(spec: str, *extra: str, naming: str) -> dict:
    """Never certified: unverifiable (exit 1) with a one-line reason naming the path."""
    for search in (("--budget", "10"), ("--exhaustive", "2")):
        rc, v = _verdict(spec, *search, *extra)
        assert v["verdict"] == "unverifiable", v
        assert rc == 1, (rc, v)
        reason = str(v.get("reason"))
        assert "\n" not in reason and naming in reason, reason
    return v


def _answers(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


# -- 1. per-effect soundness ---------------------------------------------------------------------

@pytest.mark.db
def test_a_c_driver_beside_a_controlled_call_over_a_unix_socket_is_refused(toki_server):
    """psycopg2 to the embedded server's Unix socket: Linux counts no bytes on it, so its mere
    use during a run is refused."""
    pytest.importorskip("psycopg2")
    if "host=/" not in toki_server.dsn and "%2F" not in toki_server.dsn and "@/" not in toki_server.dsn:
        pytest.skip("the server is reached over TCP here (the TCP test covers it)")
    _refused("tests.plugins.mixed_paths:psycopg2_counter", "--dsn", toki_server.dsn, naming="Unix socket")


def test_a_c_driver_beside_a_controlled_call_over_tcp_is_refused():
    """psycopg2 to PostgreSQL on 127.0.0.1:5432: the connection's TCP byte counters move between
    two steps."""
    pytest.importorskip("psycopg2")
    if not _answers("127.0.0.1", 5432):
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    _refused("tests.plugins.mixed_paths:psycopg2_counter", "--dsn", "postgresql://postgres@127.0.0.1:5432/postgres",
             naming="TCP connection to ('127.0.0.1', 5432)")


@pytest.mark.db
def test_a_c_driver_connection_opened_used_and_closed_between_two_steps_is_refused():
    """No descriptor is left for the scan and no Python socket for the audit hook: the kernel's
    connect watch sees libpq's connect() on the agent's thread."""
    pytest.importorskip("psycopg2")
    if not _answers("127.0.0.1", 5432):
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    v = _refused("tests.plugins.mixed_paths:psycopg2_transient_counter", "--dsn",
                 "postgresql://postgres@127.0.0.1:5432/postgres", naming="127.0.0.1:5432")
    assert "agent A" in v["reason"] or "agent B" in v["reason"], v["reason"]
    assert "below Python" in v["reason"] and " at /" in v["reason"], v["reason"]


def test_a_connect_made_straight_through_libc_between_two_calls_is_refused():
    """No driver and no Python socket call: ctypes calls libc's connect() on the agent's thread."""
    v = _refused("tests.plugins.mixed_paths:ctypes_connect_counter", naming="127.0.0.1:")
    assert "below Python" in v["reason"] and "mixed_paths.py" in v["reason"], v["reason"]
    rc, v = _verdict("tests.plugins.mixed_paths:ctypes_connect_counter", "--exhaustive", "2", "--scenario", "log")
    assert (rc, v["verdict"]) == (1, "unverifiable") and "below Python" in v["reason"], v


def test_a_connect_below_python_by_a_worker_made_in_open_is_refused_without_a_traceback(capfd):
    """The engine's worker, started in open() (not from an agent, so not filtered at birth), does
    each agent's request: it is filtered when it first does one, and its connect is seen."""
    for scenario in ("log", "increment"):
        rc, v = _verdict("tests.plugins.mixed_paths:ctypes_worker_counter", "--exhaustive", "2", "--scenario", scenario)
        assert (rc, v["verdict"]) == (1, "unverifiable"), v
        assert "a thread working for an agent" in v["reason"] and "below Python" in v["reason"], v["reason"]
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.db
def test_a_c_driver_connection_on_a_thread_the_agent_starts_is_refused():
    pytest.importorskip("psycopg2")
    if not _answers("127.0.0.1", 5432):
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    v = _refused("tests.plugins.mixed_paths:psycopg2_worker_counter", "--dsn",
                 "postgresql://postgres@127.0.0.1:5432/postgres", naming="127.0.0.1:5432")
    assert "a thread an agent started" in v["reason"], v["reason"]


@pytest.mark.db
def test_the_intercepted_drivers_own_connects_are_no_effect_even_when_bound_at_import(toki_server):
    """psycopg 3 (every statement a step) with ``from psycopg import connect`` bound before any
    hook and a connection per call: certified, not refused for the connects."""
    rc, v = _verdict("tests.plugins.mixed_paths:psycopg3_bound_connect_counter", "--exhaustive", "2",
                     "--dsn", toki_server.dsn)
    assert (rc, v["verdict"], v["search"]["complete"]) == (0, "excludes", True), v
    assert "unwatched" not in v["search"], v


def _libc_connect(port: int) -> socket.socket:
    """A socket connected to 127.0.0.1:``port`` by libc's connect() through ctypes: below Python,
    where only the kernel's connect watch sees it."""
    import ctypes
    import struct

    s = socket.socket()
    addr = struct.pack("!HH4s8x", socket.AF_INET, port, socket.inet_aton("127.0.0.1"))
    ctypes.CDLL(None).connect(s.fileno(), ctypes.c_char_p(struct.pack("H", socket.AF_INET) + addr[2:]), len(addr))
    return s


@pytest.mark.parametrize("driver_handle_appears", [True, False])
def test_a_connect_is_judged_once_the_call_that_made_it_has_returned(monkeypatch, driver_handle_appears):
    """The kernel notes a connect before the call returns, and an intercepted driver's handle (by
    which a connect bound before the hooks is told apart) exists only after it has: the watch loop
    must leave a connect to its thread's next call instead of judging it while the thread is still
    in the driver (a loaded CI run refused a correct psycopg 3 plug-in that way). When no handle
    appears, the connect is refused at that next call, naming the agent."""
    import time

    from toki.harness import connect_watch
    from toki.harness.controller import Controller, SerialChooser, Unverifiable, current_agent

    if connect_watch.unavailable():
        pytest.skip(f"no connect watch here: {connect_watch.unavailable()}")
    handle: dict[str, int] = {}
    monkeypatch.setattr(connect_watch, "intercepted", lambda fd: handle.get("fd") == fd)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def agent():
        s = _libc_connect(port)
        try:
            t = time.perf_counter()
            while time.perf_counter() - t < 0.3:  # the driver still building its handle: the watch loop looks
                pass
            if driver_handle_appears:
                handle["fd"] = s.fileno()
            ctl, _ = current_agent()
            return ctl.step("sql-read", "select 1", lambda: 1)
        finally:
            s.close()

    try:
        ctl = Controller(SerialChooser(["A"]), step_limit_s=5)
        if driver_handle_appears:
            assert ctl.run({"A": agent}).results == {"A": 1}
        else:
            with pytest.raises(Unverifiable, match=r"agent A .*connected to 127\.0\.0\.1:\d+ .*below Python"):
                ctl.run({"A": agent})
    finally:
        listener.close()


def test_a_connect_whose_thread_never_comes_back_is_refused_not_called_a_hang():
    """The connect is left to its thread's next call, but a thread that never makes one (stuck
    after it, past the step limit) does not turn the refusal into "the engine hangs"."""
    import time

    from toki.harness import connect_watch
    from toki.harness.controller import Controller, SerialChooser, Unverifiable

    if connect_watch.unavailable():
        pytest.skip(f"no connect watch here: {connect_watch.unavailable()}")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def agent():
        s = _libc_connect(port)
        try:
            t = time.perf_counter()
            while time.perf_counter() - t < 2:  # stuck computing, past the step limit
                pass
        finally:
            s.close()

    try:
        with pytest.raises(Unverifiable, match=r"agent A .*connected to 127\.0\.0\.1:\d+"):
            Controller(SerialChooser(["A"]), step_limit_s=0.5).run({"A": agent})
    finally:
        listener.close()


def test_a_process_that_cannot_watch_connects_says_so_with_its_certificate():
    """Without the kernel's watch (here switched off) a C client's connect is not seen: the
    certificate carries that limit in its search object and its guarantee, never silently."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TOKI_CONNECT_WATCH": "off"}
    out = subprocess.run([sys.executable, "-c", "import sys; from toki.cli import entry; entry()", "certify",
                          "--engine-module", "tests.plugins.mixed_paths:ctypes_connect_counter", "--scenario", "log",
                          "--exhaustive", "2", "--step-limit", "5", "--json", "-"],
                         capture_output=True, text=True, env=env, timeout=120)
    (v,) = json.loads(out.stdout)["verdicts"]
    assert (out.returncode, v["verdict"], v["search"]["unwatched"]) == (0, "excludes", "TOKI_CONNECT_WATCH=off"), v
    assert "not watched" in v["search"]["guarantee"], v


@pytest.mark.parametrize("raw, says, allowed", [
    (b"\x02\x00\x15\x38\x7f\x00\x00\x01" + bytes(8), "127.0.0.1:5432", False),
    (b"\x02\x00\x00\x35\x0a\x00\x00\x01" + bytes(8), "10.0.0.1:53", True),
    (b"\x0a\x00\x15\x38" + bytes(4) + bytes(15) + b"\x01" + bytes(4), "[::1]:5432", False),
    (b"\x01\x00/var/run/postgresql/.s.PGSQL.5432\x00", "/var/run/postgresql/.s.PGSQL.5432", False),
    (b"\x01\x00/var/run/nscd/socket\x00", "nscd", True),
    (b"\x01\x00\x00toki-abstract\x00", "@toki-abstract", False),
    (b"\x10\x00" + bytes(10), "family 16", True),
    (b"", "unreadable", False),
])
def test_a_connects_address_is_named_and_only_name_service_lookups_pass(raw, says, allowed):
    from toki.harness.connect_watch import describe

    text, ok = describe(raw)
    assert says in text and ok is allowed, (text, ok)


def test_a_python_socket_client_beside_a_controlled_call_is_refused_naming_thread_and_code():
    pytest.importorskip("redis")
    if not _answers("127.0.0.1", 6379):
        pytest.skip("no Redis on 127.0.0.1:6379")
    v = _refused("tests.plugins.mixed_paths:redis_counter", naming="toki-agent-")
    assert "redis" in v["reason"] and "6379" in v["reason"], v["reason"]


def test_a_native_store_writing_outside_the_runs_folder_is_refused():
    pytest.importorskip("lmdb")
    _refused("tests.plugins.mixed_paths:lmdb_counter", naming="data.mdb")


def test_a_write_opened_outside_the_runs_folder_stops_the_run_where_it_happens(tmp_path):
    """The audit hook sees a file opened for writing outside the folder, in every run, and names
    the line that did it."""
    from toki.harness import Scenario
    from toki.harness.controller import Unverifiable
    from toki.harness.search import search
    from toki.harness.trial import TrialRunner

    outside = tmp_path / "elsewhere.json"

    class Elsewhere:
        name, version, executed = "elsewhere", "1.0", "real"
        scenarios = {}

        def open(self, location):
            return location

        def close(self, h):
            pass

        def state(self, h):
            return {"n": int((h / "n").read_text())} if (h / "n").exists() else {}

        def setup(self, h):
            (h / "n").write_text("0")

        def call(self, h, agent):
            n = int((h / "n").read_text())
            with open(outside, "w") as f:  # the line the message must name
                f.write(str(n))
            (h / "n").write_text(str(n + 1))

    eng = Elsewhere()
    eng.scenarios = {"increment": Scenario("increment", "", ("A", "B"), eng.call, setup=eng.setup)}
    with TrialRunner(eng, "increment") as runner:
        with pytest.raises(Unverifiable, match=r"opened .*elsewhere\.json for writing.*test_harness_effects\.py:\d+"):
            search(runner, budget=5, seed=0)


def test_the_descriptor_scan_counts_descriptors_that_can_write_and_not_reads_by_other_threads(tmp_path):
    """A host process's own threads (a Dask worker formatting a traceback) open sources for
    reading at any moment: that is no storage change. A file held open for writing outside the
    run's folder that grows between two scans is one."""
    from toki.harness.effects import DescriptorScan

    folder, outside = tmp_path / "run", tmp_path / "elsewhere.log"
    folder.mkdir()
    outside.write_text("")
    scan = DescriptorScan(folder)
    before = scan()
    with open(__file__, "rb"):  # read-only, outside the folder, appearing between two scans
        assert scan() == before
    with open(outside, "a") as w:
        held = scan()
        assert any("elsewhere.log" in k and "for writing" in k for k in held), held
        w.write("x")
        w.flush()
        assert scan() != held


def test_a_file_held_open_here_that_another_process_writes_is_not_this_processs_change(tmp_path):
    """pytest-xdist's workers inherit the controller's output file: the controller writes it while
    a worker runs a trial. A change made while this process made no write call is someone else's."""
    import subprocess
    import sys
    import time

    from toki.harness.effects import DescriptorScan

    folder, log = tmp_path / "run", tmp_path / "parent.log"
    folder.mkdir()
    log.write_text("")
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read(); open(sys.argv[1], 'a').write('y')",
                              str(log)], stdin=subprocess.PIPE)
    with open(log, "a"):
        scan = DescriptorScan(folder)
        before = scan()
        assert any("parent.log" in k for k in before), before
        child.stdin.close()  # the child writes now; this process makes no write call meanwhile
        while log.read_text() != "y":  # (not wait(): a reaped child's counts become the parent's)
            time.sleep(0.01)
        assert scan() == before
    assert child.wait(timeout=60) == 0


# -- 2. nothing ran, nothing certified -----------------------------------------------------------

def test_the_standard_streams_a_test_runner_saved_aside_are_the_runs_own_output():
    """pytest captures fd 1 and 2 by dup'ing the originals aside; under pytest-xdist those are the
    controller's output file, which it writes while this worker runs a trial (a write this process
    makes in the same window, a warning or a log line, made the scan call it a change)."""
    import os

    from toki.harness import effects

    saved = effects._saved_standard_streams()
    if not saved:
        pytest.skip("output is not captured at the descriptor level here (pytest -s)")
    scan = effects.DescriptorScan(Path(os.getcwd()))
    assert saved <= scan._allowed_fds()
    assert not any(f"descriptor {fd})" in k for k in scan() for fd in saved)


def test_a_scenario_whose_calls_fail_in_every_serial_order_is_unverifiable_naming_the_failure():
    rc, v = _verdict("tests.plugins.mixed_paths:seeded_once", "--budget", "10")
    assert rc == 1 and v["verdict"] == "unverifiable", v
    assert "failed in every serial order" in v["reason"] and "TypeError" in v["reason"], v["reason"]
    assert "storage_in_location" in v["reason"], v["reason"]


# -- 3. file locks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["flock", "polled"])
def test_a_counter_guarded_by_a_file_lock_is_certified_complete(how):
    if how == "polled":
        pytest.importorskip("filelock")
    rc, v = _verdict(f"tests.plugins.file_locked:{how}", "--exhaustive", "2")
    assert rc == 0 and v["verdict"] == "excludes", v
    assert v["search"]["complete"] is True, v["search"]


@pytest.mark.parametrize("how", ["racy", "lockf"])
def test_a_counter_without_a_lock_threads_respect_is_found(how):
    """``lockf`` is a per-process record lock: the agents are threads of one process, so it
    excludes nothing, and the lost update real threads show is found."""
    rc, v = _verdict(f"tests.plugins.file_locked:{how}", "--exhaustive", "2")
    assert rc == 1 and v["verdict"] == "admits", v


def test_a_blocking_file_lock_held_by_every_agent_in_turn_is_a_step_not_an_unseen_wait():
    from toki.harness.controller import SerialChooser
    from toki.harness.trial import TrialRunner
    from tests.plugins.file_locked import flock

    with TrialRunner(flock(), "increment") as runner:
        trace, out = runner.run(SerialChooser(("A", "B")))
    kinds = [s.kind for s in trace.steps]
    assert kinds.count("file-lock") == 4 and out.state == {"n": 2}, (kinds, out)


# -- 5. a detector that raises ---------------------------------------------------------------------

def test_a_detector_that_raises_is_a_one_line_plugin_error():
    rc, out, err = _toki("certify", "--engine-module", "tests.plugins.mixed_paths:raising_detector",
                         "--budget", "10", "--step-limit", "5")
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert rc == 2 and "Traceback" not in out + err, (rc, out, err)
    assert len(lines) == 1 and "detector 'lost-update' raised KeyError" in lines[0] and "state" in lines[0], lines


# -- 4. old import paths ---------------------------------------------------------------------------

def test_plugins_written_for_the_previous_release_still_import():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from toki.engines.locks import InstrumentedLock
        from toki.engines.trial import TrialRunner
        import toki.engines.controller as old
    import toki.harness.controller as new
    from toki.harness import InstrumentedLock as current
    from toki.harness.trial import TrialRunner as runner

    assert old is new and InstrumentedLock is current and TrialRunner is runner
    assert any(issubclass(w.category, DeprecationWarning) and "toki.harness.locks" in str(w.message) for w in caught)


# -- 8. fsync bound at import ----------------------------------------------------------------------

def test_an_fsync_bound_at_import_is_a_step(tmp_path):
    """A library that wrote ``fsync = os.fsync`` at import still has its fsyncs seen."""
    from toki.harness import Scenario
    from toki.harness.controller import SerialChooser
    from toki.harness.trial import TrialRunner
    from tests.plugins import fsync_alias

    eng = fsync_alias.engine()
    with TrialRunner(eng, "put") as runner:
        trace, _ = runner.run(SerialChooser(("A",)), agents=("A",))
    assert any(s.kind == "file-fsync" for s in trace.steps), [(s.kind, s.detail) for s in trace.steps]
    assert isinstance(eng.scenarios["put"], Scenario)


# -- 10. a library's own conflict error, declared a clean abort ------------------------------------

def test_a_librarys_conflict_error_is_a_failed_call_until_the_plugin_names_it_a_clean_abort():
    rc, v = _verdict("tests.plugins.optimistic:undeclared", "--exhaustive", "2")
    assert rc == 1 and v["verdict"] == "admits" and any(a.startswith("failed-call") for a in v["anomalies"]), v
    rc, v = _verdict("tests.plugins.optimistic:declared", "--exhaustive", "2")
    assert rc == 0 and v["verdict"] == "excludes" and v["search"]["complete"] is True, v


# -- 6, 9. what toki puts in place is drop-in, and every call that reaches the OS is a step ---------

def test_queue_factories_are_subscriptable_during_a_trial():
    import queue

    from toki.harness import threads

    with threads.installed():
        assert queue.SimpleQueue[int] is not None and queue.Queue[str] is not None


def test_a_seek_or_fileno_over_buffered_writes_is_a_step():
    """An object database writing through Python file objects: seek() and fileno() write the
    buffer out, so each is the write step (it was a change between steps, and a refusal)."""
    from toki.harness import Scenario
    from toki.harness.controller import SerialChooser
    from toki.harness.trial import TrialRunner

    class Seeker:
        name, version, executed = "seeker", "1.0", "real"

        def __init__(self):
            self.scenarios = {"put": Scenario("put", "", ("A",), self.call)}

        def open(self, location):
            return location

        def close(self, h):
            pass

        def state(self, h):
            return (h / "data").read_bytes().decode() if (h / "data").exists() else None

        def call(self, h, agent):
            with open(h / "data", "wb") as f:
                f.write(b"header")
                f.seek(0)
                f.write(b"H")
                os_fsync(f.fileno())

    import os
    os_fsync = os.fsync
    with TrialRunner(Seeker(), "put") as runner:
        trace, out = runner.run(SerialChooser(("A",)), agents=("A",))
    kinds = [s.kind for s in trace.steps]
    assert kinds.count("file-write") >= 2 and out.state == "Header", (kinds, out.state)



# -- 8. power loss with an fsync bound at import -----------------------------------------------------

@pytest.mark.parametrize("factory, lost", [("durable", 0), ("engine", 1)])
def test_power_loss_sees_fsyncs_bound_at_import(tmp_path, factory, lost):
    """With its directory fsynced (through ``from os import fsync``), no acknowledged put is lost;
    without, the file's creation may be: the alias's fsyncs are recorded either way (15 phantom
    "lost" states when they were missed)."""
    out = tmp_path / "pl.json"
    rc, o, e = _toki("faults", "--engine-module", f"tests.plugins.fsync_alias:{factory}", "--kind", "power-loss",
                     "--json", str(out))
    assert rc in (0, 1), (rc, o, e)
    (system,) = json.loads(out.read_text())["systems"]
    got = system["power_loss"]["put"]["lost"]
    assert (got == 0) if lost == 0 else (got >= 1), system["power_loss"]


# -- 7. a pool kept across runs ---------------------------------------------------------------------

@pytest.mark.db
def test_a_pool_kept_across_runs_is_named_as_the_cause_never_a_traceback(tmp_path, toki_server, capfd):
    """SQLAlchemy's pool kept from run to run (``discard`` does not dispose of it): the search is
    either complete or refused with the cause and the fix in one line; a replay either reproduces
    or says the same; no traceback of the harness's internals in either."""
    rc, out, err = _toki("certify", "--engine-module", "tests.plugins.pool_kept:for_update", "--exhaustive", "2",
                         "--step-limit", "5", "--dsn", toki_server.dsn, "--json", "-")
    assert "Traceback" not in out + err and "_Abandoned" not in out + err, err
    (v,) = json.loads(out)["verdicts"]
    assert v["verdict"] in ("excludes", "unverifiable"), v
    if v["verdict"] == "unverifiable":
        assert "keeps database connections across runs" in v["reason"] and "discard" in v["reason"], v["reason"]
    else:
        assert rc == 0 and v["search"]["complete"] is True, v
    w = tmp_path / "w.json"
    rc, out, err = _toki("certify", "--engine-module", "tests.plugins.pool_kept:racy", "--budget", "20",
                         "--step-limit", "5", "--dsn", toki_server.dsn, "--witness", str(w))
    assert rc == 1, (rc, out, err)
    rc, out, err = _toki("certify", "--replay", str(tmp_path / "w.credit.json"), "--times", "3", "--step-limit", "5",
                         "--dsn", toki_server.dsn)
    assert "Traceback" not in out + err and "_Abandoned" not in out + err, out + err
    assert rc == 1 or (rc == 2 and "keeps database connections across runs" in err), (rc, out, err)
    logged = capfd.readouterr().err  # what the library logged (SQLAlchemy's "Exception during reset")
    assert "_Abandoned" not in logged and "Traceback" not in logged, logged[-2000:]


# -- the shapes users bring: an object database on Python files, an async ORM on SQLite in WAL ------

def _found_and_replays(spec: str, tmp_path) -> None:
    w = tmp_path / "w.json"
    rc, v = _verdict(spec, "--exhaustive", "2", "--witness", str(w))
    assert rc == 1 and v["verdict"] == "admits" and v["replayed"] is True, v
    rc, out, err = _toki("certify", "--replay", str(tmp_path / "w.increment.json"), "--times", "3")
    assert rc == 1 and "reproduced the recorded outcome 3 of 3" in out, (rc, out, err)


@pytest.mark.slow  # about 10 s; the fast tier keeps the mechanism in a smaller test
def test_zodb_filestorage_lost_update_is_found_and_replays(tmp_path):
    """Every byte through Python file objects (seek, write, flush, fsync) and a zc.lockfile flock:
    all of it steps, none of it a refusal."""
    pytest.importorskip("ZODB")
    _found_and_replays("tests.plugins.zodb_counter:racy", tmp_path)


def test_zodb_conflict_detection_declared_a_clean_abort_is_certified_by_a_sample():
    pytest.importorskip("ZODB")
    rc, v = _verdict("tests.plugins.zodb_counter:mvcc", "--budget", "20")
    assert rc == 0 and v["verdict"] == "excludes", v


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["tests.plugins.zodb_counter:mvcc", "tests.plugins.async_orm:deferred",
                                  "tests.plugins.async_orm:immediate"])
def test_fixed_uses_are_certified_complete_at_two_preemptions(spec):
    pytest.importorskip("ZODB" if "zodb" in spec else "aiosqlite")
    rc, v = _verdict(spec, "--exhaustive", "2")
    assert rc == 0 and v["verdict"] == "excludes" and v["search"]["complete"] is True, v


def test_an_async_orm_importing_its_driver_lazily_in_wal_mode_is_found_and_replays(tmp_path):
    """In a fresh process, so that aiosqlite is first imported inside a trial (SQLAlchemy imports
    it when the engine first connects, in setup): it annotates with ``SimpleQueue[...]`` at import,
    and its connections close inside the call (a WAL checkpoint)."""
    pytest.importorskip("aiosqlite")
    import subprocess
    import sys

    w = tmp_path / "w.json"
    p = subprocess.run([sys.executable, "-c", "from toki.cli import entry; entry()", "certify", "--engine-module", "tests.plugins.async_orm:racy",
                        "--exhaustive", "2", "--witness", str(w), "--json", "-"],
                       capture_output=True, text=True, timeout=600, cwd=str(__import__("pathlib").Path(__file__).parents[1]))
    assert p.returncode == 1 and "Traceback" not in p.stderr, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    (v,) = json.loads(p.stdout)["verdicts"]
    assert v["verdict"] == "admits" and v["replayed"] is True, v
    rc, v = _verdict("tests.plugins.async_orm:deferred", "--budget", "20")
    assert rc == 0 and v["verdict"] == "excludes", v


def test_the_faults_summary_cell_ends_on_a_whole_word_with_a_mark():
    from toki.cli.faults_cmd import _clip

    text = ("not verified: the store's files (data.fs) are written by native code, whose writes and fsyncs toki "
            "does not see, so no crash state built from the recorded file operations would be sound")
    cell = _clip(text)
    assert cell.endswith(" …") and text.startswith(cell[:-2]) and cell[:-2].split()[-1] in text.split()
    assert _clip("short") == "short" and _clip(None) == ""


# -- a factory-made lock around diskcache; atomicwrites' fsync bound at import ---------------------

def test_diskcache_with_a_lock_made_in_the_factory_is_certified_and_without_it_found():
    pytest.importorskip("diskcache")
    rc, v = _verdict("tests.plugins.diskcache_counter:racy", "--exhaustive", "2")
    assert rc == 1 and v["verdict"] == "admits" and v["replayed"] is True, v
    rc, v = _verdict("tests.plugins.diskcache_counter:factory_lock", "--exhaustive", "2")
    assert rc == 0 and v["verdict"] == "excludes" and v["search"]["complete"] is True, v


def test_atomicwrites_fsyncs_bound_at_import_are_seen_by_power_loss(tmp_path):
    """atomicwrites binds ``_proper_fsync = os.fsync`` at import; missed, power loss reported 14
    acknowledged puts lost and 4 stores that do not open, none of which can happen."""
    pytest.importorskip("atomicwrites")
    out = tmp_path / "pl.json"
    rc, o, e = _toki("faults", "--engine-module", "tests.plugins.atomic_json:engine", "--kind", "power-loss",
                     "--json", str(out))
    (system,) = json.loads(out.read_text())["systems"]
    c = system["power_loss"]["two-puts"]
    assert rc == 0 and c["lost"] == 0 and c["unopenable"] == 0 and c["survived"] == c["explored"] > 0, (rc, c)


def test_power_loss_closes_the_agents_handles_before_it_reads_a_store_with_a_process_lock(tmp_path):
    """ZODB's FileStorage locks its file for the process: a second open while the agents' handle
    lived was refused, and the plug-in blamed (exit 2)."""
    pytest.importorskip("ZODB")
    rc, out, err = _toki("faults", "--engine-module", "tests.plugins.zodb_counter:mvcc", "--kind", "power-loss",
                         "--json", str(tmp_path / "pl.json"))
    assert rc in (0, 1) and "LockError" not in out + err, (rc, out[-1500:], err[-1500:])
    (system,) = json.loads((tmp_path / "pl.json").read_text())["systems"]
    assert system["power_loss"]["increment"]["explored"] > 0


def test_the_file_a_parent_writes_its_output_to_is_output_here_too(tmp_path):
    """A process whose parent writes its output to a file (a CI job's log) and that keeps that file
    on a descriptor of its own (execnet sets the worker's stdout aside so): the controller's writes
    to it during a trial are the run's own output, not storage (a CI run was refused so)."""
    import subprocess
    import sys

    child = ("import os, sys; fd = os.dup(1); os.dup2(os.open(os.devnull, os.O_WRONLY), 1); "
             "from toki.harness.effects import _parents_output; "
             "sys.stderr.write(repr((fd, sorted(_parents_output()))))")
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    with open(tmp_path / "ci.log", "w") as log:
        out = subprocess.run([sys.executable, "-c", parent], stdout=log, stderr=subprocess.PIPE, text=True,
                             timeout=60)
    fd, allowed = eval(out.stderr.strip().splitlines()[-1])  # noqa: S307 - our own repr of two ints
    assert fd in allowed, out.stderr
    # and a file the parent does not write its output to is not
    with open(tmp_path / "other.log", "w") as other:
        out = subprocess.run([sys.executable, "-c", parent], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, timeout=60, pass_fds=(other.fileno(),))
    fd, allowed = eval(out.stderr.strip().splitlines()[-1])  # noqa: S307
    assert fd not in allowed, out.stderr


def test_a_socket_owner_noted_before_is_known_without_walking_the_heap_and_an_unnoted_one_is_still_found(
        monkeypatch, tmp_path):
    """The descriptor scan asks the owners it met before (sockets as they are made, psycopg's
    handles as they connect) and walks every object only for a socket none of them owns."""
    import gc

    from toki.harness import effects

    scan = effects.DescriptorScan(tmp_path)
    noted, hidden = socket.socket(), socket.socket()
    try:
        effects.note_socket_owner(noted)
        effects._socket_owners.discard(hidden)  # as if made before the audit hook was installed
        walks = []
        real = gc.get_objects
        monkeypatch.setattr(gc, "get_objects", lambda *a: walks.append(1) or real(*a))
        assert noted.fileno() in scan._known_sockets({noted.fileno()}) and walks == []
        assert hidden.fileno() in scan._known_sockets({hidden.fileno()}) and walks == [1]
        assert hidden.fileno() in scan._known_sockets({hidden.fileno()}) and walks == [1]  # met now
        stray = socket.socket()
        fd = stray.detach()  # a descriptor no Python object owns: still unknown after the walk
        try:
            assert fd not in scan._known_sockets({fd}) and walks == [1, 1]
        finally:
            import os
            os.close(fd)
    finally:
        noted.close()
        hidden.close()
