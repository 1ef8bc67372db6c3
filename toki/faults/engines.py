"""Faults in the engines of the harness: the process killed at a storage call, a torn file write.

A scenario's agents run one after another (a serial order: concurrency is not under test
here, failure is) under the harness's controller, in a *forked child process*. The child
SIGKILLs itself right before grant ``k`` (every storage call is a grant, so ``k`` ranges over
every point between two storage calls of the engine): no ``finally`` runs, nothing buffered in
Python reaches a file, open SQLite transactions and PostgreSQL sessions die with the process, as
when the operating system kills an agent. A ``torn`` fault at a grant that writes a file
(``write``/``close`` of a file opened for writing) lets half of the bytes reach the file first:
a process that dies in the middle of writing a large buffer. (The harness's file hook hands the
bytes to the OS at flush and close, which is what Python does for files below its 8 KiB buffer;
the child keeps them in Python until then, so the half written is a prefix of the whole.)

Recovery is what each engine documents: open the storage again (a restarted process) and read
it through the engine's public API. Checked:

- *recoverable*: the engine opens and answers (not a truncated or unparseable file);
- *atomic and durable calls*: the state is the serial state of the calls that returned before
  the crash, or of those plus the call in flight, nothing in between (a half-done call is named
  by the scenario's own detectors when they recognise it);
- *retry*: the client, not knowing whether its call applied, calls it again, then the remaining
  agents run; the state must equal the fault-free run's (a retried write duplicated, or a call
  that can no longer succeed, shows here).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from toki.harness.controller import Controller, SerialChooser
from toki.harness.trial import TrialRunner, canonical, hooks_installed, open_agents
from toki.errors import TokiError
from toki.faults.child import in_child, killed, wait_child
from toki.faults.proxy import FaultTimeout

KINDS = ("kill", "torn", "power-loss")
CHILD_LIMIT_S = 60.0


@dataclass
class EngineFault:
    system: str
    case: str  # the scenario
    kind: str
    point: int  # crash before grant `point`; == len(grants) means after the last call returned
    statement: str  # the storage call at the point
    reported: str = "killed"
    survived: bool = True
    findings: list[str] = field(default_factory=list)
    retried: str | None = None
    seconds: float = 0.0
    skipped: str | None = None
    detail: dict | None = None  # power loss: the crash state, its trace, the calls that had returned

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in ("system", "case", "kind", "point", "statement", "reported",
                                             "survived", "findings", "retried", "seconds", "skipped")}
        if self.detail is not None:
            out["detail"] = self.detail
        return out


class _CrashAt(Controller):
    """A controller that kills its own process before grant ``k`` (or tears the write at ``k``)."""

    def __init__(self, chooser, k: int, torn: bool, **kw):
        super().__init__(chooser, **kw)
        self.k, self.torn = k, torn

    def _grant(self, a) -> None:
        if len(self.grants) == self.k:
            if self.torn and a.pending is not None and a.pending.kind == "file-write":
                _TORN.add(a.name)  # the file hook writes half, then kills
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        super()._grant(a)


_TORN: set[str] = set()


def _install_torn_writes() -> None:
    """In the child only: file writes reach the OS at flush/close (as the harness models them),
    and a torn one stops half-way and kills the process."""
    from toki.harness import file_calls
    from toki.harness.controller import current_agent

    cf = file_calls.ControlledFile

    def write(self, data):
        self._dirty = True
        self.__dict__.setdefault("_held", []).append(data)
        return len(data)

    def writelines(self, lines):
        for x in lines:
            write(self, x)

    def _push(self):
        held = self.__dict__.pop("_held", [])
        if not held:
            return
        data = held[0][:0].join(held)
        me = current_agent()
        if me is not None and me[1].name in _TORN:
            self._f.write(data[: len(data) // 2])
            self._f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        self._f.write(data)

    def flush(self):
        if not self._dirty:
            return self._f.flush()
        self._dirty = False
        return self._step("file-write", f"write {self._label}", lambda: (_push(self), self._f.flush())[1])

    def close(self):
        if self._f.closed:
            return None
        if self._dirty:
            self._dirty = False
            return self._step("file-write", f"write+close {self._label}", lambda: (_push(self), self._f.close())[1])
        return self._f.close()

    cf.write, cf.writelines, cf.flush, cf.close = write, writelines, flush, close


def _in_child(fn, *, eng, limit_s: float = CHILD_LIMIT_S) -> dict:
    """``fn()`` in a forked process: ``{"ok": value}``, ``{"error": text}`` or ``{"signal": name}``."""
    kind, value = in_child(fn, limit_s, before=lambda: forget_parent_connections(eng))
    if kind == "timeout":
        raise FaultTimeout(f"recovery after the crash did not finish within {limit_s:g} s",
                           fix="the engine hangs reopening its storage")
    return {kind: value}


def forget_parent_connections(eng) -> None:
    """In the forked child: never touch a connection the parent process holds.

    A PostgreSQL connection inherited across fork shares its socket with the parent; a statement
    sent through it would interleave with the parent's protocol stream (and a SIGKILL mid-query
    would leave the parent reading a half answer). So the child's copies are pointed at
    /dev/null (the parent's stay intact), its pools are replaced by fresh ones on the same
    conninfo, and its observer is dropped: the child opens its own connections, as a restarted
    process would.
    """
    import gc

    import psycopg

    devnull = os.open(os.devnull, os.O_RDWR)
    kinds = (psycopg.Connection, psycopg.AsyncConnection)
    classes, todo = [], list(kinds)
    while todo:  # a user's subclass of a connection class too
        c = todo.pop()
        if c not in classes:
            classes.append(c)
            todo.extend(c.__subclasses__())
    # The connections found through what refers to their classes (an instance of a Python class
    # refers to it), not by a walk over every object: such a walk takes a new reference to each
    # object, and in a forked child every reference count written copies its page from the parent
    # (0.4 s a child at 10^6 objects against 0.06 s; one child per fault point).
    for obj in gc.get_referrers(*classes):
        # type(), not isinstance(): isinstance reads obj.__class__, which some lazy proxies (openai's
        # module clients, loaded with graphiti) answer by importing their whole module tree, 4.5 s
        # in every forked child
        if issubclass(type(obj), kinds):
            with contextlib.suppress(Exception):
                if not obj.closed:
                    os.dup2(devnull, obj.pgconn.socket)
    try:
        from psycopg_pool import ConnectionPool
    except ImportError:
        ConnectionPool = None
    for name, value in list(vars(eng).items()):
        if ConnectionPool is not None and isinstance(value, ConnectionPool):
            setattr(eng, name, ConnectionPool(value.conninfo, kwargs=value.kwargs, min_size=1,
                                              max_size=max(value.max_size, 2), open=True))
        elif isinstance(value, (psycopg.Connection, psycopg.AsyncConnection)):
            setattr(eng, name, None)


def call_to_completion(fn, *args):
    """``fn(*args)``, awaited on a loop of its own when it returns an awaitable (an async engine's call)."""
    r = fn(*args)
    if inspect.isawaitable(r):
        async def go():
            return await r
        r = asyncio.run(go())
    return r


class EngineFaults:
    """Crash points of one scenario of one engine."""

    def __init__(self, engine, scenario: str, *, step_limit_s: float = 10.0):
        self.engine = engine
        self.runner = TrialRunner(engine, scenario, step_limit_s=step_limit_s)
        self.scenario = self.runner.scenario
        self.order = tuple(self.scenario.agents)
        self._ref: tuple[list[str], list[Any], list[Any]] | None = None
        self._n = 0

    def close(self) -> None:
        self.runner.close()

    def __enter__(self) -> "EngineFaults":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def system(self) -> str:
        return self.engine.name

    def reference(self) -> tuple[list[str], list, list]:
        """The grants and steps of the fault-free serial run, and the state after each prefix."""
        if self._ref is None:
            trace, _ = self.runner.run(SerialChooser(self.order))
            # A call that fails in the fault-free run (a delete before a supersede of the same fact)
            # is expected to fail when it is retried after a crash, too.
            self.expected_errors = {a: type(e).__name__ for a, e in trace.errors.items()}
            states = []
            for j in range(len(self.order) + 1):
                _, out = self.runner.run(SerialChooser(self.order[:j]), agents=self.order[:j])
                states.append(out.state)
            # What recovery ends at is compared with the same calls made the same way, one after
            # another on a reopened store, without a crash (the harness's serial order starts
            # every agent up to its first storage call first, which some engines notice).
            self.final_direct = self._direct_final()
            labels = {s.seq: f"{s.agent}: {s.kind} {s.detail}"[:90] for s in trace.steps}
            self._ref = (list(trace.grants), [labels.get(i, f"{g}: start") for i, g in enumerate(trace.grants)],
                         states)
        return self._ref

    def _seed(self, loc) -> None:
        """Seed the storage, and open it once here: an engine whose storage is not in the folder
        names it on first open (a table per location), and a name taken in a child process would
        be taken again by the parent's next open, which never heard of it."""
        self.runner._seed(loc)
        if not getattr(self.engine, "storage_in_location", True):
            h = self.engine.open(loc)
            self.engine.close(h)

    @contextlib.contextmanager
    def _fresh_location(self, prefix: str):
        """A seeded storage folder for one run, removed (and discarded by the engine) afterwards."""
        self._n += 1
        loc = self.runner.workdir / f"{prefix}{self._n}"
        shutil.rmtree(loc, ignore_errors=True)
        loc.mkdir(parents=True)
        try:
            self._seed(loc)
            yield loc
        finally:
            shutil.rmtree(loc, ignore_errors=True)
            discard = getattr(self.engine, "discard", None)
            if callable(discard):
                with contextlib.suppress(Exception):
                    discard(loc)

    def _direct_final(self):
        with self._fresh_location("direct") as loc:
            res = EngineFault(self.system, self.scenario.name, "", 0, "")
            return _in_child(lambda: self._direct_state(loc, res), eng=self.engine).get("ok")

    def _direct_state(self, loc, res: EngineFault):
        with hooks_installed(loc):
            return self._retry_rest(loc, self.order, None, res)

    def points(self, kind: str) -> list[int]:
        grants, labels, _ = self.reference()
        if kind == "torn":
            return [i for i, lab in enumerate(labels) if ": file-write " in lab]
        return list(range(len(grants) + 1))

    def run(self, kind: str, point: int) -> EngineFault:
        grants, labels, states = self.reference()
        res = EngineFault(self.system, self.scenario.name, kind, point,
                          labels[point] if point < len(labels) else "after the last call returned")
        t0 = time.perf_counter()
        with self._fresh_location("fault") as loc:
            self._crash(loc, kind, point, res)
            done = sum(1 for a in self.order if max(i for i, g in enumerate(grants) if g == a) < point)
            # Recovery runs in a process of its own too: an engine that crashes reopening what a
            # crash left (a native library's segfault) is a finding, not the end of the run.
            got = _in_child(lambda: self._recovery(loc, done, states), eng=self.engine)
            if "signal" in got:
                res.findings.append(f"the engine itself crashed ({got['signal']}) reopening or retrying after the "
                                    "crash")
                res.retried = f"crashed: {got['signal']}"
            elif "error" in got:
                res.findings.append(f"recovery failed: {got['error']}")
            else:
                res.findings.extend(got["ok"]["findings"])
                res.retried = got["ok"]["retried"]
        res.seconds = round(time.perf_counter() - t0, 3)
        res.survived = not res.findings
        return res

    # -- the crash, in a child ------------------------------------------------------------------
    def _crash(self, loc, kind: str, point: int, res: EngineFault) -> None:
        eng, sc = self.engine, self.scenario
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child: runs until it kills itself
            code = 3
            try:
                forget_parent_connections(eng)
                if kind == "torn":
                    _install_torn_writes()
                observer = getattr(eng, "pg_observer", None)
                ctl = _CrashAt(SerialChooser(self.order), point, kind == "torn",
                               step_limit_s=self.runner.step_limit_s, pg_observer=observer)
                with hooks_installed(loc):
                    ctl.run(open_agents(eng, sc, loc, self.order, ctl, []))  # as a trial opens and binds them
                os.kill(os.getpid(), signal.SIGKILL)  # the point after the last call returned
            except BaseException:
                code = 4
            os._exit(code)
        status = wait_child(pid, CHILD_LIMIT_S, 0.002,
                            f"the agent process of {self.system}/{sc.name} neither reached grant {point} nor "
                            f"died within {CHILD_LIMIT_S:g} s", fix="the engine hangs before this point")
        if not killed(status):
            res.reported = f"the agent process exited {os.WEXITSTATUS(status)} before the point"
            res.findings.append(res.reported)

    # -- after the crash ------------------------------------------------------------------------
    def _recovery(self, loc, done: int, states: list) -> dict:
        """Reopen, judge the state, retry (in the recovery process); findings as JSON values."""
        res = EngineFault(self.system, self.scenario.name, "", 0, "")
        state = self._reopen(loc, res)
        if state is not None:
            allowed = {canonical(states[done])}
            if done < len(self.order):
                allowed.add(canonical(states[done + 1]))
            earlier = [j for j in range(done) if canonical(states[j]) == canonical(state)
                       and canonical(states[j]) != canonical(states[done])]
            if corrupt_files(state):
                pass  # named by _reopen; the scenario's detectors would guess a concurrent cause
            elif earlier:
                res.findings.append(f"lost: the calls of {', '.join(self.order[earlier[0]:done])} returned "
                                    "before the crash and are gone after it")
            elif canonical(state) not in allowed:
                res.findings.append("half-done: " + self._name_state(state, states[min(done + 1, len(states) - 1)]))
            # Either fault-free serial run is a right end: the harness's (every agent started up to
            # its first storage call first) or the plain one (each call after the previous returned).
            self._recover(loc, done, (states[-1], self.final_direct), res)
        return {"findings": res.findings, "retried": res.retried}

    def _reopen(self, loc, res: EngineFault):
        eng = self.engine
        try:
            h = eng.open(loc)
        except Exception as e:  # noqa: BLE001 - an engine that cannot reopen its storage is the finding
            res.findings.append(f"cannot reopen the storage: {type(e).__name__}: {str(e)[:100]}")
            return None
        try:
            state = eng.state(h)
        except Exception as e:  # noqa: BLE001
            res.findings.append(f"the storage does not read back: {type(e).__name__}: {str(e)[:100]}")
            return None
        finally:
            with contextlib.suppress(Exception):
                eng.close(h)
        bad = corrupt_files(state)
        if bad:
            res.findings.append(f"unreadable after the crash: {bad}")
        return state

    def _name_state(self, state, want) -> str:
        names = _shapes(state)
        for d in self.scenario.detectors:
            if getattr(d, "always", False):
                continue  # a property of the design holds in the fault-free run too: it names nothing here
            with contextlib.suppress(Exception):
                msgs = d.check(state, {}, {}) if d.observes else d.check(state, {})
                names.extend(f"{d.anomaly}: {m}" for m in msgs)
        if names:
            return "; ".join(names)[:300]
        return f"a state no prefix of the calls leaves ({state_diff(state, want)})"[:300]

    def _recover(self, loc, done: int, final, res: EngineFault) -> None:
        """Reopen, retry the call in flight (the client cannot know it applied), run the rest."""
        rest = self.order[done:]
        # The harness's hooks stay installed (calls from this thread pass straight through): an
        # engine wrapper may rely on the connection class they install (sodamem-fixed does).
        with hooks_installed(loc):
            self._retry_rest(loc, rest, final, res)

    def _retry_rest(self, loc, rest, final, res: EngineFault) -> None:
        eng, sc = self.engine, self.scenario
        try:
            h = eng.open(loc)
        except Exception as e:  # noqa: BLE001
            res.retried = f"cannot reopen: {type(e).__name__}"
            res.findings.append(f"cannot reopen the storage to retry: {type(e).__name__}: {str(e)[:100]}")
            return
        try:
            for a in rest:
                try:
                    call_to_completion(sc.call, h, a)
                except Exception as e:  # noqa: BLE001
                    if self.expected_errors.get(a) != type(e).__name__:
                        raise
            res.retried = "ok" if rest else "nothing to retry"
            state = eng.state(h)
        except Exception as e:  # noqa: BLE001 - a retry that fails is the finding
            res.retried = f"failed: {type(e).__name__}"
            res.findings.append(f"the retry of {', '.join(rest)} failed: {type(e).__name__}: {str(e)[:100]}")
            return
        finally:
            with contextlib.suppress(Exception):
                eng.close(h)
        finals = [f for f in (final if isinstance(final, tuple) else (final,)) if f is not None]
        if finals and canonical(state) not in {canonical(f) for f in finals}:
            res.findings.append("after recovery and retry: " + self._name_state(state, finals[0]))
        return state


def _shapes(state) -> list[str]:
    """Half-written shapes named on a read-out of facts with a status (SodaMem's, the models'):
    a closed incumbent with no winner, an edge to a fact that does not exist."""
    out: list[str] = []
    facts = state.get("facts") if isinstance(state, dict) else None
    if isinstance(facts, list) and all(isinstance(f, dict) for f in facts):
        by_pred: dict[str, list[dict]] = {}
        for f in facts:
            by_pred.setdefault(str(f.get("predicate")), []).append(f)
        for pred, fs in sorted(by_pred.items()):
            closed = [f for f in fs if f.get("status") == "superseded"]
            if closed and not any(f.get("status") == "active" for f in fs):
                out.append(f"a closed incumbent with no winner: {closed[0].get('object')} superseded, no current "
                           f"{pred}")
    edges = state.get("edges") if isinstance(state, dict) else None
    if isinstance(edges, list):
        dangling = [e for e in edges if isinstance(e, list) and any(str(x).startswith("<deleted") for x in e)]
        if dangling:
            out.append(f"an edge to a fact that does not exist: {dangling[0]}")
    return out


def corrupt_files(state) -> str | None:
    """A state that reports files it could not parse (an engine's read-out lists them under
    ``corrupt``, as the AtomMem model does)."""
    if isinstance(state, dict) and state.get("corrupt"):
        return f"{', '.join(map(str, state['corrupt']))} file(s) empty or not valid JSON"
    return None


def state_diff(got, want) -> str:
    """What differs between two engine states, key by key, short enough for a finding."""
    if isinstance(got, dict) and isinstance(want, dict):
        parts = []
        for k in sorted(set(got) | set(want), key=str):
            g, w = got.get(k), want.get(k)
            if canonical(g) != canonical(w):
                if isinstance(g, list) and isinstance(w, list):
                    extra = [x for x in g if x not in w]
                    missing = [x for x in w if x not in g]
                    parts.append(f"{k}: extra {canonical(extra)[:80]}, missing {canonical(missing)[:80]}")
                else:
                    parts.append(f"{k}: {canonical(g)[:60]} vs {canonical(w)[:60]}")
        return "; ".join(parts)
    return f"{canonical(got)[:80]} vs {canonical(want)[:80]}"


__all__ = ["EngineFault", "EngineFaults", "KINDS", "TokiError"]
