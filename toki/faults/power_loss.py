"""Power loss: the crash states a scenario's file operations allow, reopened and judged.

A process kill leaves every byte the process handed to the operating system; a power loss or a
kernel crash leaves only what was made durable, and what was not may be gone, torn or persisted
out of order. As ALICE (OSDI 2014) does, without a kernel module: the scenario's agents run one
after another once, in a process of its own, with every file operation under the storage folder
recorded (:mod:`toki.faults.fs_trace`); the crash states the trace allows are built
(:mod:`toki.faults.crash_states`); each distinct one is written into a fresh folder and reopened
through the engine's API in a fresh process. It must open, and its state must be the serial state
of the calls that had returned at the crash, or of those plus the call in flight:

- ``lost``: the state of an earlier prefix of the calls (a call returned and is gone);
- ``does not open``: the engine cannot open or read it back (an empty or torn JSON file);
- ``half-done``: any other state (a call half applied, or something no serial run leaves).

SQLite's own files are written by its C library, which the recording does not see: an engine
whose files are all SQLite's is *not verified* here (never "survived"), and the settings it runs
SQLite with are reported with what SQLite documents for them (:data:`SQLITE_DOCS`).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass

from toki.errors import ConfigError
from toki.faults.child import in_child
from toki.faults.crash_states import CrashState, Image, Op, materialize, states_at
from toki.faults.engines import EngineFault, call_to_completion, corrupt_files, forget_parent_connections, state_diff
from toki.harness.trial import TrialRunner, canonical, hooks_installed

KIND = "power-loss"
CHILD_LIMIT_S = 60.0

# What https://www.sqlite.org/pragma.html says each setting promises after a power loss.
SQLITE_SYNC = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
SQLITE_DOCS = {
    "OFF": "the database might become corrupted if the operating system crashes or the computer loses power "
           "before that data has been written to the disk surface",
    "NORMAL/wal": "WAL mode is always consistent with synchronous=NORMAL, but a transaction committed in WAL "
                  "mode with synchronous=NORMAL might roll back following a power loss or system crash",
    "NORMAL": "in rollback-journal mode there is a very small (though non-zero) chance that a power failure at "
              "just the wrong time could corrupt the database (older filesystems)",
    "FULL/wal": "WAL mode with synchronous=FULL: durable and consistent across a power loss",
    "FULL": "ensures that an operating system crash or power failure will not corrupt the database",
    "EXTRA": "like FULL, and also syncs the directory after the rollback journal is unlinked: durable across a "
             "power loss right after the commit",
    "journal/off": "journal_mode=OFF: no atomic commit or rollback; a crash in the middle of a transaction will "
                   "very likely corrupt the database",
    "journal/memory": "journal_mode=MEMORY: a crash in the middle of a transaction will very likely corrupt the "
                      "database",
}


def sqlite_verdict(settings: dict) -> str:
    """What SQLite documents for one file's settings, in a line."""
    mode, sync = settings["journal_mode"], SQLITE_SYNC.get(settings["synchronous"], str(settings["synchronous"]))
    if mode in ("off", "memory"):
        return SQLITE_DOCS[f"journal/{mode}"]
    if sync in ("NORMAL", "FULL") and mode == "wal":
        return SQLITE_DOCS[f"{sync}/wal"]
    return SQLITE_DOCS.get(sync, "no documented promise")


def describe_sqlite(files: set[str], settings: dict[str, dict]) -> str:
    if not settings:
        return (f"SQLite files ({', '.join(sorted(files))}) whose connections toki did not see open: settings "
                "unknown")
    parts = [f"{f}: journal_mode={s['journal_mode']}, synchronous={SQLITE_SYNC.get(s['synchronous'], s['synchronous'])}"
             f" (SQLite: {sqlite_verdict(s)})" for f, s in sorted(settings.items())]
    return "; ".join(parts)


@dataclass(frozen=True)
class _Unbuilt:
    why: str


@dataclass
class Trace:
    ops: list[Op]
    returns: list[tuple[int, str]]
    base: Image
    errors: dict[str, str]
    sqlite_files: set[str]
    sqlite_settings: dict[str, dict]
    native_files: set[str]

    def done(self, point: int) -> int:
        """How many calls had returned when the crash came after ``point`` operations. A call that
        returned right at the point counts as returned: it was acknowledged, so it must be there."""
        return sum(1 for k, _ in self.returns if k <= point)


def _child(fn, limit_s: float = CHILD_LIMIT_S, eng=None):
    """``fn()`` in a fresh forked process (:func:`toki.faults.child.in_child`); a timeout is an
    error like any other here. With ``eng``, the child first lets go of the database connections
    it inherited (it opens its own): a statement sent on the parent's socket would corrupt the
    parent's session (mem0's pool)."""
    kind, value = in_child(fn, limit_s, before=None if eng is None else (lambda: forget_parent_connections(eng)))
    return ("error", value) if kind == "timeout" else (kind, value)


class PowerLossFaults:
    """Power-loss crash states of one scenario of one engine."""

    def __init__(self, engine, scenario: str, *, step_limit_s: float = 10.0, explicit: bool = True):
        self.engine = engine
        self.runner = TrialRunner(engine, scenario, step_limit_s=step_limit_s)
        self.scenario = self.runner.scenario
        self.order = tuple(self.scenario.agents)
        self.explicit = explicit  # asked for by --kind: a case it cannot judge then fails
        self.loc = self.runner.workdir / "power"
        self._trace: Trace | None = None
        self._states: list[tuple[CrashState, int]] | None = None
        self._serial: list | None = None
        self.constructed = 0

    def close(self) -> None:
        self.runner.close()

    @property
    def system(self) -> str:
        return self.engine.name

    # -- the fault-free run, recorded ----------------------------------------------------------
    @contextlib.contextmanager
    def _location(self):
        """The one storage folder every run and every crash state uses (engines may keep paths)."""
        shutil.rmtree(self.loc, ignore_errors=True)
        self.loc.mkdir(parents=True)
        try:
            yield self.loc
        finally:
            shutil.rmtree(self.loc, ignore_errors=True)

    def _handles(self, loc):
        eng, sc = self.engine, self.scenario
        if sc.shared:
            h = eng.open(loc)
            return {a: h for a in self.order}
        return {a: eng.open(loc) for a in self.order}

    def _close(self, per: dict) -> None:
        """Close the agents' handles before anything reopens the store: a store with a process
        lock (or one open handle per process) refuses a second open while they live."""
        for h in {id(h): h for h in per.values()}.values():
            self.engine.close(h)

    def trace(self) -> Trace:
        if self._trace is None:
            from toki.faults.fs_trace import Recorder

            def record():
                rec = Recorder(self.loc)
                errors = {}
                with hooks_installed(self.loc), rec.installed():
                    per = self._handles(self.loc)
                    rec.look()
                    for a in self.order:
                        rec.agent = a
                        try:
                            call_to_completion(self.scenario.call, per[a], a)
                        except Exception as e:  # noqa: BLE001 - part of the fault-free run's outcome
                            errors[a] = type(e).__name__
                        rec.returned(a)
                    rec.sqlite_now()
                self._close(per)
                return Trace(rec.ops, rec.returns, rec.base, errors, rec.sqlite_files, rec.sqlite_settings,
                             rec.native_files)

            with self._location() as loc:
                self.runner._seed(loc)
                got = _child(record, eng=self.engine)
            if got[0] != "ok":
                raise ConfigError(f"engine {self.system}, scenario {self.scenario.name}: the recorded run failed: "
                                  f"{got[1]}", fix="the scenario must run to the end without faults (toki certify "
                                  "runs it too)")
            self._trace = got[1]
        return self._trace

    def serial(self) -> list:
        """The state after each prefix of the calls (made the same way, no crash), read back in a
        fresh process."""
        if self._serial is None:
            out = []
            for j in range(len(self.order) + 1):
                def run(j=j):
                    with hooks_installed(self.loc):
                        per = self._handles(self.loc)
                        for a in self.order[:j]:
                            try:
                                call_to_completion(self.scenario.call, per[a], a)
                            except Exception:  # noqa: BLE001 - the recorded run failed the same way
                                pass
                        self._close(per)
                    h = self.engine.open(self.loc)
                    try:
                        return self.engine.state(h)
                    finally:
                        self.engine.close(h)

                with self._location() as loc:
                    self.runner._seed(loc)
                    got = _child(run, eng=self.engine)
                if got[0] != "ok":
                    raise ConfigError(f"engine {self.system}, scenario {self.scenario.name}: the serial run of "
                                      f"{', '.join(self.order[:j]) or 'no call'} failed: {got[1]}",
                                      fix="the plug-in's open/state must work on the store its calls leave")
                out.append(got[1])
            self._serial = out
        return self._serial

    # -- crash states --------------------------------------------------------------------------
    def applicable(self) -> str | None:
        """Why this scenario's storage cannot be crashed here (None when it can)."""
        t = self.trace()
        native = sorted(t.native_files - t.sqlite_files)
        if native:
            where = ", ".join(native[:4]) + (" ..." if len(native) > 4 else "")
            if t.ops or t.sqlite_files:
                return (f"unverifiable: the store mixes files native code writes ({where}: toki sees neither their "
                        "writes nor their fsyncs) with files Python writes")
            return (f"not verified: the store's files ({where}) are written by native code, whose writes and "
                    "fsyncs toki does not see")
        if t.sqlite_files and t.ops:
            return ("unverifiable: the store mixes SQLite files (written by SQLite's C library, which toki does "
                    "not see) with files Python writes: " + describe_sqlite(t.sqlite_files, t.sqlite_settings))
        if t.sqlite_files:
            return ("not verified: SQLite's own files are written by its C library, which toki does not see; "
                    + describe_sqlite(t.sqlite_files, t.sqlite_settings))
        if not t.ops:
            return ("not applicable: the scenario made no file operation under its storage folder (its storage "
                    "is a database server, or is written where toki does not look): there is nothing to crash")
        states = {canonical(x) for x in self.serial()}
        if len(states) == 1:  # a check told nothing never passes
            return ("unverifiable: the engine's read-out is the same before and after every call (state() tells "
                    "nothing), so no crash state can be judged: make state() return what the engine stores")
        return None

    def states(self) -> list[tuple[CrashState, int]]:
        """The distinct crash states (as folders, and by how many calls had returned), in order."""
        if self._states is None:
            t = self.trace()
            seen, out, n = set(), [], 0
            for p in range(len(t.ops) + 1):
                done = t.done(p)
                for cs in states_at(t.ops, p):
                    n += 1
                    key = (cs.image(t.base, t.ops).digest(), done)
                    if key not in seen:
                        seen.add(key)
                        out.append((cs, done))
            self.constructed, self._states = n, out
        return self._states

    def stats(self) -> dict:
        why = self.applicable()
        if why is not None:
            return {"why": why, "constructed": 0, "distinct": 0, "operations": 0}
        return {"why": None, "constructed": len(self.states()) and self.constructed, "distinct": len(self.states()),
                "operations": len(self.trace().ops)}

    def points(self) -> list[int]:
        if self.applicable() is not None:
            return [0]
        return list(range(len(self.states())))

    def run(self, point: int, crash: CrashState | None = None) -> EngineFault:
        why = self.applicable()
        if why is None:
            self.serial()  # once per case, before the clock of the first state starts
        t0 = time.perf_counter()
        if why is not None:
            res = EngineFault(self.system, self.scenario.name, KIND, 0, "the whole scenario", reported="-")
            t = self.trace()
            res.detail = {"sqlite": t.sqlite_settings or None, "sqlite_files": sorted(t.sqlite_files)}
            if self.explicit or why.startswith("unverifiable"):
                res.findings.append(why)
                res.survived = False
            else:
                res.skipped = why
            return res
        t = self.trace()
        if crash is None:
            crash, done = self.states()[point]
        else:
            done = t.done(crash.point)
        states = self.serial()
        img = crash.image(t.base, t.ops)
        desc = (f"after #{crash.point - 1} {t.ops[crash.point - 1].label()}" if crash.point else "before any write")
        res = EngineFault(self.system, self.scenario.name, KIND, point, f"{crash.how} crash {desc}"[:120],
                          reported="power lost")
        res.detail = {"crash": crash.to_json(), "trace": crash.trace(t.ops), "returned": list(self.order[:done]),
                      "ops": [o.label() for o in t.ops[:crash.point]]}

        def reopen():
            try:
                materialize(img, self.loc)
            except OSError as e:  # not the engine's doing: the state is unjudged, never survived
                return _Unbuilt(f"{type(e).__name__}: {e}")
            h = self.engine.open(self.loc)
            try:
                return self.engine.state(h)
            finally:
                with contextlib.suppress(Exception):
                    self.engine.close(h)

        # Only a plug-in that talks to a server can hold connections here; scanning for them costs
        # as much as a third of a small store's state, so file stores skip it.
        server = callable(getattr(self.engine, "use_dsn", None)) or callable(getattr(self.engine, "use_server", None))
        with self._location():
            got = _child(reopen, eng=self.engine if server else None)
        if got[0] == "ok" and isinstance(got[1], _Unbuilt):
            res.findings.append(f"unverifiable: the crash state could not be written out ({got[1].why})")
        elif got[0] == "signal":
            res.findings.append(f"does not open: the engine itself crashed ({got[1]}) reopening it")
        elif got[0] == "error":
            res.findings.append(f"does not open: {got[1]}")
        else:
            state = got[1]
            allowed = {canonical(states[done])}
            if done < len(self.order):
                allowed.add(canonical(states[done + 1]))
            earlier = [j for j in range(done) if canonical(states[j]) == canonical(state)]
            bad = corrupt_files(state)
            if bad:
                res.findings.append(f"does not open: {bad}")
            elif canonical(state) in allowed:
                pass
            elif earlier:
                res.findings.append(f"lost: the calls of {', '.join(self.order[earlier[-1]:done])} returned "
                                    "before the power loss and are gone after it")
            else:
                res.findings.append("half-done: a state no prefix of the calls leaves ("
                                    + state_diff(state, states[min(done + 1, len(states) - 1)]) + ")")
        res.survived = not res.findings
        res.seconds = round(time.perf_counter() - t0, 4)
        return res


__all__ = ["KIND", "PowerLossFaults", "describe_sqlite", "sqlite_verdict"]
