"""The hot-row workload behind ``serializable-pilot`` and ``multi-writer`` (docs/tables/index.md).

One (subject, predicate) slot of ``agent_memory`` holds one current fact: the hot partition.
Its confidence is a counter. A writer reads the slot, keeps the confidence it saw (in a
transaction-local setting, as an application keeps a variable) and writes back
``seen + STEP``; then commits. ``STEP = 2**-10`` is exact in binary floating point, so the number
of increments that survived is exactly ``confidence / STEP``. A run *admits* a lost update when
that number is smaller than the number of writers that committed.

The same two statements run in both modes; only the scheduling differs:

* ``barrier``: a :class:`~toki.sched.Schedule` built in code and run by the barrier-controlled
  :class:`~toki.sched.Runner` on one :class:`~toki.sched.Lane` reused across runs: every writer
  begins and reads before any writes, then (in a seeded order) each writes and commits. The
  outcome is fixed by the isolation level, not by timing.
* ``free``: real threads, each with its own connection, released together by a
  :class:`threading.Barrier` and then running as fast as they can (optionally pausing
  ``think`` seconds between read and write, like an agent waiting for its LLM). Every attempt
  records client-side timestamps, so each abort can be traced to the overlapping commit that
  caused it.

Aborts are classified by SQLSTATE (40001 serialization failure, 40P01 deadlock); any other
database error stops the experiment with the SQLSTATE named.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime

import psycopg

from toki.db.server import Server
from toki.errors import ConfigError, DatabaseError
from toki.levels import Isolation, Level, parse_isolation
from toki.model import Fact
from toki.sched import Lane, Runner, Schedule, Step

STEP = 2.0 ** -10  # one increment of the hot row's confidence: exact in binary, so counts are exact
SUBJECT, PREDICATE = "agent:7", "preferred_contact"
HOT = Fact("hot", SUBJECT, PREDICATE, "Ms Lee", valid_from=datetime(2026, 1, 1), confidence=0.0)
_SLOT = (f"subject = '{SUBJECT}' and predicate = '{PREDICATE}' and row_kind = 'current'"
         " and system_time_end = '9999-12-31'")
#: read the hot partition; remember the confidence seen, as the application would
READ_SQL = f"select fact_id, set_config('toki.seen', confidence::text, true) as seen from agent_memory where {_SLOT}"
#: write back what was seen plus one step (the value the writer computed from its read)
WRITE_SQL = (f"update agent_memory set confidence = current_setting('toki.seen')::float8 + {STEP!r}"
             f" where fact_id = 'hot' and {_SLOT}")
ABORT_STATES = ("40001", "40P01")
LEVELS = (Isolation.RC, Isolation.SI, Isolation.SR)
WARMUP_RUNS = 5  # untimed runs before a timed cell (psycopg prepares a statement at its 5th execution)


# -- option parsing (bad input: ConfigError, exit 2) ------------------------------------------

def int_list(text: str, what: str, *, lo: int = 1, hi: int = 64) -> list[int]:
    try:
        values = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{what} must be a comma-separated list of integers, got {text!r}",
                          fix=f"write e.g. --{what} 1,2,4") from None
    if not values or any(not lo <= v <= hi for v in values):
        raise ConfigError(f"{what} {text!r}: every value must be between {lo} and {hi}",
                          fix=f"write e.g. --{what} 1,2,4")
    return values


def float_list(text: str, what: str) -> list[float]:
    try:
        values = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{what} must be a comma-separated list of numbers, got {text!r}",
                          fix=f"write e.g. --{what} 0,50") from None
    if not values or any(v < 0 or v > 10_000 for v in values):
        raise ConfigError(f"{what} {text!r}: values must be between 0 and 10000",
                          fix=f"write e.g. --{what} 0,50")
    return values


def level_list(text: str) -> list[Isolation]:
    out = []
    for part in str(text).split(","):
        if part.strip():
            iso = parse_isolation(part)
            if iso == Isolation.RU:
                iso = Isolation.RC  # PostgreSQL runs READ UNCOMMITTED as READ COMMITTED
            if iso not in out:
                out.append(iso)
    if not out:
        raise ConfigError(f"no isolation level in {text!r}", fix="write e.g. --levels rc,rr,sr")
    return out


def positive(value: int, what: str, *, lo: int = 1, hi: int = 100_000) -> int:
    if not lo <= int(value) <= hi:
        raise ConfigError(f"--{what} {value} is out of range", fix=f"give --{what} between {lo} and {hi}")
    return int(value)


# -- the hot row ---------------------------------------------------------------------------------

class HotRow:
    """The hot partition in a Lane's schema: created once (by the write path), reset per run."""

    def __init__(self, lane: Lane):
        self.lane = lane
        store = lane.ensure_store()
        if not store.current(SUBJECT, PREDICATE):
            store.write(HOT, operator="lww", level="read-committed")

    def reset(self) -> None:
        self.lane.admin.execute(f"update agent_memory set confidence = 0 where fact_id = 'hot' and {_SLOT}")

    def count(self) -> int:
        rows = self.lane.admin.execute(f"select confidence from agent_memory where {_SLOT}").fetchall()
        if len(rows) != 1:
            raise DatabaseError(f"the hot partition holds {len(rows)} current rows, expected 1", sqlstate=None,
                                fix="report this: a writer changed more than the counter")
        return round(rows[0][0] / STEP)


# -- barrier mode -------------------------------------------------------------------------------

def writer_names(w: int) -> list[str]:
    return [f"W{i + 1}" for i in range(w)]


def barrier_schedule(w: int, order: Sequence[str], pause_s: float = 0.0) -> Schedule:
    """Every writer begins and reads; (optional pause); then each writes and commits in ``order``."""
    names = writer_names(w)
    steps = [Step(n, sql="begin") for n in names] + [Step(n, sql=READ_SQL) for n in names]
    if pause_s > 0:
        steps.append(Step(names[0], op="sleep", args={"seconds": pause_s}))
    for n in order:
        steps += [Step(n, sql=WRITE_SQL), Step(n, sql="commit")]
    return Schedule(name=f"hot-row-{w}-writers", steps=steps, on_blocked="error",
                    description="every writer reads the hot row before any writes; then each writes seen+1 and "
                                "commits").validate()


@dataclass
class Round:
    writers: int
    committed: list[str]
    aborted: dict[str, str]  # writer -> SQLSTATE
    lost: int  # committed increments that did not survive
    order: list[str]


def _aborts(result) -> dict[str, str]:
    out = {}
    for st in result.steps:
        if st.status == "error":
            if st.sqlstate not in ABORT_STATES:
                raise DatabaseError(f"step {st.index} ({st.session}: {st.sql}) failed: {st.error}",
                                    sqlstate=st.sqlstate, fix="report this: the hot-row workload expects only "
                                                              "serialization failures and deadlocks")
            out.setdefault(st.session, st.sqlstate)
    return out


def barrier_round(runner: Runner, lane: Lane, hot: HotRow, w: int, level: Isolation, rng: random.Random,
                  pause_s: float = 0.0) -> Round:
    order = writer_names(w)
    rng.shuffle(order)
    before = hot.count()
    result = runner.run(barrier_schedule(w, order, pause_s), Level(level), lane=lane, check_expect=False)
    committed = [n for n, s in result.sessions.items() if s == "committed"]
    aborted = _aborts(result)
    for n, s in result.sessions.items():
        if s != "committed" and n not in aborted:
            raise DatabaseError(f"writer {n} ended {s!r} without an error", sqlstate=None,
                                fix="report this: a barrier round must commit or abort every writer")
    gained = hot.count() - before
    return Round(w, committed, aborted, len(committed) - gained, order)


# -- one attempt on a connection (free mode and retries) ------------------------------------------

@dataclass
class Attempt:
    writer: int
    write: int  # which of the writer's writes
    retry: int  # 0 for the first try
    t_begin: float
    t_read: float  # the read returned (the snapshot is taken by then)
    t_end: float  # commit returned or the error arrived
    status: str  # committed | aborted
    sqlstate: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def attempt(conn: psycopg.Connection, level: Isolation, writer: int, write: int, retry: int,
            think_s: float = 0.0, t0: float = 0.0) -> Attempt:
    """begin, read the hot partition, (think), write seen+1, commit; an abort is rolled back."""
    t_begin = time.perf_counter() - t0
    t_read = t_begin
    try:
        conn.execute(f"begin isolation level {level.sql}")
        conn.execute(READ_SQL).fetchall()
        t_read = time.perf_counter() - t0
        if think_s > 0:
            time.sleep(think_s)
        conn.execute(WRITE_SQL)
        conn.execute("commit")
        return Attempt(writer, write, retry, t_begin, t_read, time.perf_counter() - t0, "committed")
    except psycopg.Error as e:
        t_end = time.perf_counter() - t0
        try:
            conn.execute("rollback")
        except psycopg.Error:
            pass
        if e.sqlstate not in ABORT_STATES:
            raise DatabaseError(f"writer {writer} failed with SQLSTATE {e.sqlstate}: {str(e).strip()[:120]}",
                                sqlstate=e.sqlstate, fix="report this: only 40001 and 40P01 are expected") from e
        return Attempt(writer, write, retry, t_begin, t_read, t_end, "aborted", e.sqlstate)


@dataclass
class RetryPolicy:
    """Bounded retry with exponential backoff and full jitter (seeded)."""

    max_retries: int = 0
    backoff_s: float = 0.002

    def delay(self, k: int, rng: random.Random) -> float:
        """Sleep before retry ``k`` (1-based): uniform in [0, backoff * 2**(k-1)]."""
        return rng.uniform(0.0, self.backoff_s * 2 ** (k - 1))


def with_retries(conn: psycopg.Connection, level: Isolation, writer: int, write: int, policy: RetryPolicy,
                 rng: random.Random, think_s: float, t0: float, first: Attempt | None = None) -> list[Attempt]:
    """Run (or continue after ``first``) one logical write until it commits or retries run out."""
    tries = [first] if first is not None else [attempt(conn, level, writer, write, 0, think_s, t0)]
    while tries[-1].status == "aborted" and len(tries) <= policy.max_retries:
        time.sleep(policy.delay(len(tries), rng))
        tries.append(attempt(conn, level, writer, write, len(tries), think_s, t0))
    return tries


def retry_round(conns: dict[str, psycopg.Connection], rnd: Round, level: Isolation, policy: RetryPolicy,
                rng_for, think_s: float, t0: float) -> list[list[Attempt]]:
    """Aborted writers of a barrier round retry concurrently, each in its own thread."""
    results: dict[str, list[Attempt]] = {}
    errors: list[BaseException] = []

    def go(name: str) -> None:
        i = int(name[1:])
        first = Attempt(i, 0, 0, 0.0, 0.0, 0.0, "aborted", rnd.aborted[name])
        try:
            results[name] = with_retries(conns[name], level, i, 0, policy, rng_for(i), think_s, t0, first)[1:]
        except BaseException as e:  # re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=go, args=(n,), name=f"toki-retry-{n}") for n in rnd.aborted]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [results[n] for n in rnd.aborted]


# -- free mode -----------------------------------------------------------------------------------

@dataclass
class FreeRun:
    attempts: list[Attempt] = field(default_factory=list)
    lost: int = 0
    elapsed_s: float = 0.0

    @property
    def committed(self) -> int:
        return sum(a.status == "committed" for a in self.attempts)

    @property
    def aborted(self) -> int:
        return sum(a.status == "aborted" for a in self.attempts)


class FreeWriters:
    """``w`` threads with one connection each, reused across runs of a cell."""

    def __init__(self, server: Server, schema: str, w: int, deadlock_timeout_ms: int = 20):
        self.conns = [server.connect(schema=schema, deadlock_timeout_ms=deadlock_timeout_ms,
                                     application_name=f"toki-free-W{i + 1}") for i in range(w)]

    def close(self) -> None:
        for c in self.conns:
            try:
                c.close()
            except Exception:
                pass

    def __enter__(self) -> "FreeWriters":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, hot: HotRow, level: Isolation, writes: Sequence[int], *, think_s: float = 0.0,
            policy: RetryPolicy | None = None, rngs: Sequence[random.Random] | None = None) -> FreeRun:
        """Writer i performs ``writes[i]`` logical writes back to back (each retried per ``policy``)."""
        w = len(self.conns)
        policy = policy or RetryPolicy()
        rngs = rngs or [random.Random(i) for i in range(w)]
        per: list[list[Attempt]] = [[] for _ in range(w)]
        errors: list[BaseException] = []
        gate = threading.Barrier(w + 1)
        clock = [0.0]  # set by this thread just before it releases the gate

        def go(i: int) -> None:
            try:
                gate.wait()
                for k in range(writes[i]):
                    per[i].extend(with_retries(self.conns[i], level, i + 1, k, policy, rngs[i], think_s, clock[0]))
            except BaseException as e:
                errors.append(e)

        before = hot.count()
        threads = [threading.Thread(target=go, args=(i,), name=f"toki-free-W{i + 1}") for i in range(w)]
        for t in threads:
            t.start()
        clock[0] = time.perf_counter()
        gate.wait()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - clock[0]
        if errors:
            raise errors[0]
        run = FreeRun([a for p in per for a in p], elapsed_s=elapsed)
        run.lost = run.committed - (hot.count() - before)
        return run


def overlap_report(attempts: Sequence[Attempt]) -> dict:
    """How aborts relate to concurrency (client-side clocks bracket the server's events).

    An attempt is *concurrent* when its lifetime (begin sent .. commit or error returned)
    intersects that of a committed attempt by another writer. Only concurrent attempts can lose
    an update (RC) or be aborted by first-updater-wins (RR) or SSI (SR); a serial attempt
    always commits and never loses anything.
    """
    commits = [a for a in attempts if a.status == "committed"]
    conc_aborted = conc_committed = 0
    for a in attempts:
        hit = any(c.writer != a.writer and c.t_begin < a.t_end and a.t_begin < c.t_end for c in commits)
        if hit and a.status == "aborted":
            conc_aborted += 1
        elif hit:
            conc_committed += 1
    n = len(attempts)
    windows = sorted(a.t_end - a.t_begin for a in attempts)
    return {
        "attempts": n,
        "aborted": sum(a.status == "aborted" for a in attempts),
        "aborted_concurrent": conc_aborted,
        "committed_concurrent": conc_committed,
        "concurrent_fraction": round((conc_aborted + conc_committed) / n, 4) if n else None,
        "median_txn_ms": round(1000 * windows[len(windows) // 2], 3) if windows else None,
        "sqlstates": dict(Counter(a.sqlstate for a in attempts if a.sqlstate)),
    }


def split_writes(total: int, w: int) -> list[int]:
    """``total`` writes over ``w`` writers, as evenly as possible (the first ones take the rest)."""
    return [total // w + (1 if i < total % w else 0) for i in range(w)]
