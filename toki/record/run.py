"""``toki record``: drive a memory engine from several worker processes and record its history.

Each worker process loads the engine itself (a shipped one by name, or a plug-in by
``module:factory``), is given the database (``--dsn``, else the embedded PostgreSQL, as certify
does), and runs ``--clients`` client threads. Every client has its own Jepsen process id and a
memory client from the engine (``engine.record_client(store)``); all of them share one store
(``store`` names it: a folder, and for a database engine a schema derived from it). A client draws
its operations from a seeded mix (add, retract, recall, history, decide) over a few slots and
claims, so that clients collide, and records each as an invoke and a completion in the shared
:class:`~toki.record.history.History`.

Real concurrency, not the harness's: nothing is scheduled, so a race shows only as often as the
machine makes it happen; the point is the deployment's own shape (processes, a shared server),
checked afterwards by ``toki check --workload memory``.

``--nemesis kill`` kills a worker process mid-operation now and then (its in-flight ops stay
invoke-only, which the checker reads as info) and starts a fresh one with new process ids.
``--cluster local:N|ADDRESS`` runs the workers on Dask (the history file must be reachable by
every worker: on a remote cluster, a shared file system).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from toki.errors import ConfigError
from toki.harness.engine import optional
from toki.record.history import History

MIX = {"add": 4.0, "retract": 1.0, "recall": 2.0, "history": 2.0, "decide": 1.0}
_NEEDS = {"add": "add", "retract": "retract", "recall": "current", "history": "history", "decide": "decide"}


def parse_mix(text: str | None) -> dict[str, float]:
    """``add=4,recall=2,history=2`` -> weights (unnamed kinds get 0); None: the default mix."""
    if not text:
        return dict(MIX)
    out = {k: 0.0 for k in MIX}
    for part in text.split(","):
        name, _, w = part.partition("=")
        name = name.strip()
        if name not in MIX:
            raise ConfigError(f"--mix: unknown operation {name!r}", fix="use add, retract, recall, history, decide")
        try:
            out[name] = float(w) if w else 1.0
        except ValueError:
            raise ConfigError(f"--mix: {part!r} has no numeric weight", fix="e.g. --mix add=4,recall=2") from None
        if out[name] < 0:
            raise ConfigError(f"--mix: {name} has a negative weight", fix="weights are >= 0")
    if not any(out.values()):
        raise ConfigError("--mix gives every operation weight 0", fix="e.g. --mix add=4,recall=2")
    return out


@dataclass
class Plan:
    engine: str | None
    module: str | None
    out: str
    processes: int = 2
    clients: int = 2
    ops: int | None = 200  # per client; None: until the duration ends
    duration: float | None = None
    mix: dict[str, float] = field(default_factory=lambda: dict(MIX))
    seed: int = 0
    slots: int = 2
    claims: int = 3
    nemesis: str | None = None
    dsn: str | None = None
    store: str = ""


def _engine(plan: Plan):
    from toki.engines.registry import load_engine
    from toki.harness.engine import connect_database

    eng = load_engine(plan.engine, plan.module)
    if not callable(optional(eng, "record_client")):
        raise ConfigError(f"engine {eng.name} has no record_client(store) method, so toki cannot drive it",
                          fix="give the plug-in record_client(store) returning an object with add(slot, claim), "
                              "current(slot) and history(slot) (and optionally retract, decide, close); see the "
                              "memory histories docs")
    connect_database(eng, plan.dsn)
    return eng


def _ops_of(client, mix: dict[str, float]) -> tuple[list[str], list[float]]:
    kinds = [k for k, w in mix.items() if w > 0 and callable(getattr(client, _NEEDS[k], None))]
    if not kinds:
        raise ConfigError("the engine's client offers none of the operations in the mix",
                          fix="a client needs add(slot, claim) and current(slot) at least")
    return kinds, [mix[k] for k in kinds]


def _client_loop(plan: Plan, eng, history: History, process: int, deadline: float | None, stop: threading.Event):
    rng = random.Random(f"{plan.seed}:{process}")
    # An engine that keeps every add as a new fact (it does not deduplicate a re-added claim by
    # design) gets claims no other add uses, so that a claim shown twice is a race, not a re-add.
    # A single-valued engine's add is a supersede: it retracts what was current. Its invocation does
    # not know what (null); the client's add returns the claims it retracted, for the completion.
    # Such an engine keeps a claim added again as a new fact, so its adds get fresh claims too.
    supersedes = not optional(eng, "record_multi_valued")
    fresh = supersedes or optional(eng, "record_fresh_claims")
    client = eng.record_client(plan.store)
    try:
        kinds, weights = _ops_of(client, plan.mix)
        n = 0
        while not stop.is_set() and (plan.ops is None or n < plan.ops) and (deadline is None or time.time() < deadline):
            n += 1
            slot = f"s{rng.randrange(plan.slots)}"
            kind = rng.choices(kinds, weights)[0]
            claim = f"{slot}=p{process}.{n}" if fresh and kind == "add" else f"{slot}=v{rng.randrange(plan.claims)}"
            if kind == "add":
                value = ([["retract", slot, None]] if supersedes else []) + [["add", slot, claim]]
            elif kind == "retract":
                value = [["retract", slot, claim]]
            elif kind == "recall":
                value = [["current", slot, None]]
            elif kind == "history":
                value = [["history", slot, None]]
            else:
                considered = sorted({claim, f"{slot}=v{rng.randrange(plan.claims)}"})
                value = [["decide", f"{slot}?", considered, None]]
            op = history.invoke(process, value)
            try:
                if kind == "add":
                    retracted = client.add(slot, claim)
                    if supersedes:
                        if not isinstance(retracted, (list, tuple)):
                            op.info(error="the client's add did not return the claims it superseded")
                            continue
                        # the claims it superseded, its own add, and the claim itself if it lost at once
                        op.value = ([["retract", slot, c] for c in retracted if c != claim] + [["add", slot, claim]]
                                    + ([["retract", slot, claim]] if claim in retracted else []))
                elif kind == "retract":
                    client.retract(slot, claim)
                elif kind == "recall":
                    op.read(0, client.current(slot))
                elif kind == "history":
                    op.read(0, client.history(slot))
                else:
                    op.read(0, client.decide(f"{slot}?", value[0][2]))
            except Exception as e:  # noqa: BLE001 - the engine's error: the op may or may not have happened
                op.info(error=f"{type(e).__name__}: {str(e)[:200]}")
                continue
            op.ok()
    finally:
        close = getattr(client, "close", None)
        if callable(close):
            close()


def run_worker(plan_d: dict, first_process: int, deadline: float | None = None) -> dict:
    """One worker process: ``plan.clients`` client threads with process ids from ``first_process``."""
    plan = Plan(**plan_d)
    eng = _engine(plan)
    history = History(plan.out)
    stop = threading.Event()
    errors: list[str] = []

    def client(p: int):
        try:
            _client_loop(plan, eng, history, p, deadline, stop)
        except Exception as e:  # noqa: BLE001 - reported to the parent in one line
            errors.append(f"process {p}: {type(e).__name__}: {str(e)[:200]}")

    threads = [threading.Thread(target=client, args=(first_process + k,), name=f"toki-record-{first_process + k}")
               for k in range(plan.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history.close()
    return {"first_process": first_process, "errors": errors}


def _worker_main(plan_d: dict, first_process: int, deadline: float | None, out_q) -> None:
    try:
        out_q.put(run_worker(plan_d, first_process, deadline))
    except BaseException as e:  # noqa: BLE001 - one line to the parent
        out_q.put({"first_process": first_process, "errors": [f"{type(e).__name__}: {str(e)[:300]}"]})


def record(plan: Plan, *, cluster: str | None = None, progress=None) -> dict:
    """Run the recording; return a summary (ops by type, processes, elapsed, errors)."""
    if plan.processes < 1 or plan.clients < 1:
        raise ConfigError("--processes and --clients must be at least 1", fix="e.g. --processes 4 --clients 2")
    if plan.ops is None and plan.duration is None:
        raise ConfigError("say how long to record", fix="pass --ops N (per client) or --duration SECONDS")
    if plan.nemesis not in (None, "kill"):
        raise ConfigError(f"--nemesis {plan.nemesis}: not a nemesis toki record has", fix="use --nemesis kill")
    if plan.nemesis and cluster:
        raise ConfigError("--nemesis kill kills worker processes of this machine, not Dask workers",
                          fix="drop --cluster, or drop --nemesis")
    out = Path(plan.out)
    if out.exists() and out.stat().st_size:
        raise ConfigError(f"{out} already holds a history", fix="choose a new --out file (a history is appended to)")
    eng = _engine(plan)  # fails here, in one line, before any worker starts
    if not plan.store:
        plan.store = str(Path(tempfile.mkdtemp(prefix="toki-record-")) / f"store_{secrets.token_hex(3)}")
        Path(plan.store).mkdir(parents=True, exist_ok=True)
    setup = optional(eng, "record_setup")
    if callable(setup):
        setup(plan.store)
    out.parent.mkdir(parents=True, exist_ok=True)
    if optional(eng, "record_multi_valued"):  # an engine that keeps several claims current by design
        with History(out) as h:
            h.header(multi_valued=[f"s{i}" for i in range(plan.slots)], engine=getattr(eng, "name", "?"))
    t0 = time.time()
    deadline = t0 + plan.duration if plan.duration else None
    plan_d = asdict(plan)
    errors: list[str] = []
    kills = 0
    try:
        if cluster:
            from toki.cluster import Cluster

            with Cluster(cluster) as c:
                firsts = [i * plan.clients for i in range(plan.processes)]
                for res in c.map(_cluster_worker, firsts, plan_d, deadline):
                    errors.extend(res["errors"])
        else:
            errors, kills = _local_workers(plan, plan_d, deadline, progress)
    finally:
        cleanup = optional(eng, "record_cleanup")
        if callable(cleanup):
            cleanup(plan.store)
    counts: dict[str, int] = {}
    with open(out) as f:
        for line in f:
            if line.strip():
                t = json.loads(line).get("type")
                counts[t] = counts.get(t, 0) + 1
    return {"out": str(out), "ops": counts, "processes": plan.processes, "clients": plan.clients,
            "killed": kills, "elapsed_s": round(time.time() - t0, 2), "errors": errors,
            "engine": getattr(eng, "name", "?"), "version": str(getattr(eng, "version", "?")),
            "options": {k: v for k, v in plan_d.items() if k not in ("out", "store")}}


def _cluster_worker(first_process: int, plan_d: dict, deadline: float | None) -> dict:
    return run_worker(plan_d, first_process, deadline)


def _local_workers(plan: Plan, plan_d: dict, deadline: float | None, progress) -> tuple[list[str], int]:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # the parent may hold threads and a server: never fork it
    q = ctx.Queue()
    rng = random.Random(f"{plan.seed}:nemesis")
    next_process = 0
    live: dict[int, Any] = {}

    def start() -> None:
        nonlocal next_process
        p = ctx.Process(target=_worker_main, args=(plan_d, next_process, deadline, q), daemon=True)
        p.start()
        live[next_process] = p
        next_process += plan.clients

    for _ in range(plan.processes):
        start()
    kills, results = 0, []
    # A kill every few seconds, at a seeded moment, while work remains; the victim's ops stay open.
    next_kill = time.time() + rng.uniform(2.0, 5.0) if plan.nemesis == "kill" else None
    while any(p.is_alive() for p in live.values()):
        time.sleep(0.05)
        while not q.empty():
            results.append(q.get())
        if next_kill is not None and time.time() >= next_kill:
            alive = [k for k, p in live.items() if p.is_alive()]
            if alive and (deadline is None or time.time() < deadline - 1):
                victim = live.pop(rng.choice(sorted(alive)))
                os.kill(victim.pid, signal.SIGKILL)
                victim.join()
                kills += 1
                start()
            next_kill = time.time() + rng.uniform(2.0, 5.0)
        if progress is not None:
            progress()
    for p in live.values():
        p.join()
    while not q.empty():
        results.append(q.get())
    return [e for r in results for e in r["errors"]], kills
