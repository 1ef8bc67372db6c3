"""Campaigns on a Dask cluster (``--cluster ADDRESS``): shards, per-worker resources, lost workers.

Layer 7: imports only ``toki.errors`` (and Dask, lazily); used by the matrix engine, the engine
harness's command line and the experiments, which bring their own work to it.

``--cluster`` takes a Dask distributed scheduler address (``tcp://host:8786`` or ``host:8786``)
or ``local:N`` for a LocalCluster of N worker processes on this machine (one thread each: a
worker drives one database lane, and the scheduler it drives is single-threaded anyway).

Work is cut into shards whose boundaries and seeds depend only on the plan and ``--seed``,
never on the number of workers: every random choice inside a shard comes from an rng keyed by
(seed, what, where, trial), so a shard gives the same answer on any worker, and results are put
back in plan order. Hence the same seed gives the same result document at local:1, local:2 or
on forty machines, apart from timings and the fields naming the cluster.

Each worker process owns its lanes (a run schema and its connections, see
:func:`worker_local`) on its own server: the embedded PostgreSQL of the machine it runs on, or
the ``--dsn`` the campaign was given. A worker that dies (killed, out of memory, machine lost)
takes its lanes with it; the scheduler hands its shards to another worker, which re-runs them
from their seeds, so a lost worker changes the elapsed time and nothing else. The schemas a
killed worker leaves are dropped by the next ``resolve`` on that server (``toki db gc``).

Dask is an optional extra: ``pip install 'toki[cluster]'``. Remote workers need toki (the same
version) installed, since shards name toki's functions rather than ship code.
"""

from __future__ import annotations

import atexit
import os
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toki.errors import ConfigError

__all__ = ["Cluster", "ClusterSpec", "close_worker_locals", "parse", "shards_of", "worker_local"]


@dataclass(frozen=True)
class ClusterSpec:
    text: str  # as the user wrote it (recorded in provenance)
    local_workers: int | None  # N for local:N, None for a scheduler address
    address: str | None  # tcp://host:port for a scheduler

    @property
    def kind(self) -> str:
        return "local" if self.local_workers is not None else "scheduler"


_FIX = "pass --cluster local:2 (a LocalCluster of 2 worker processes) or a scheduler address such as tcp://10.0.0.5:8786"


def parse(text: str) -> ClusterSpec:
    """``local:N`` or a scheduler address; anything else is bad input (exit 2)."""
    raw = str(text).strip()
    if raw.lower().startswith("local"):
        m = re.fullmatch(r"local:(\d+)", raw, flags=re.IGNORECASE)
        if not m or int(m.group(1)) < 1:
            raise ConfigError(f"--cluster {raw!r}: local needs a worker count of at least 1", fix=_FIX)
        return ClusterSpec(raw, int(m.group(1)), None)
    m = re.fullmatch(r"(?:(tcp|tls|inproc|ucx|ws|wss)://)?([A-Za-z0-9_.\-\[\]:]+?):(\d{1,5})", raw)
    if not m or not 0 < int(m.group(3)) < 65536:
        raise ConfigError(f"--cluster {raw!r} is neither local:N nor a scheduler address host:port", fix=_FIX)
    return ClusterSpec(raw, None, f"{m.group(1) or 'tcp'}://{m.group(2)}:{m.group(3)}")


def _require_distributed():
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ConfigError("--cluster needs Dask distributed, which is not installed",
                          fix="pip install 'toki[cluster]' (dask and distributed)") from None


class Cluster:
    """A Dask client on a LocalCluster or an existing scheduler; use as a context manager."""

    def __init__(self, spec: ClusterSpec | str, *, connect_timeout_s: float = 10.0):
        self.spec = parse(spec) if isinstance(spec, str) else spec
        self.connect_timeout_s = connect_timeout_s
        self.client = None
        self._local = None

    def __enter__(self) -> Cluster:
        _require_distributed()
        import logging

        from distributed import Client, LocalCluster

        if self.spec.local_workers is not None:
            # The dashboard on a free port (a fixed one collides with other runs); no memory limit (a lane's
            # connections and a pipeline's rows are small, and pausing a worker only stalls it).
            self._local = LocalCluster(n_workers=self.spec.local_workers, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", memory_limit=0, silence_logs=logging.ERROR)
            self.client = Client(self._local)
        else:
            try:
                self.client = Client(self.spec.address, timeout=self.connect_timeout_s)
            except (OSError, TimeoutError) as e:
                raise ConfigError(f"cannot reach the Dask scheduler at {self.spec.address}: {e}",
                                  fix="start one there ('dask scheduler', then 'dask worker ADDRESS' on each "
                                      "machine) or use --cluster local:N") from None
        # Each worker closes its lanes when it leaves (a killed one cannot: toki db gc cleans up).
        self.client.register_plugin(_lane_plugin_class()(), name="toki-lanes")
        return self

    def __exit__(self, *exc) -> None:
        if self.client is not None:
            self.client.close()
        if self._local is not None:
            self._local.close()

    @property
    def workers(self) -> int:
        return len(self.client.scheduler_info()["workers"])

    def worker_pids(self) -> dict[str, int]:
        """Worker address -> process id (tests kill one to check shards are re-run)."""
        return self.client.run(os.getpid)

    def describe(self) -> dict:
        import dask
        import distributed

        info = self.client.scheduler_info()
        threads = sorted({w.get("nthreads", 1) for w in info["workers"].values()})
        return {"address": self.spec.text, "kind": self.spec.kind, "workers": len(info["workers"]),
                "threads_per_worker": threads[0] if len(threads) == 1 else threads,
                "scheduler": info.get("address"), "dask": dask.__version__, "distributed": distributed.__version__}

    def map(self, fn: Callable, shards: Sequence, *args: Any,
            on_result: Callable[[int, Any], None] | None = None) -> list:
        """``fn(shard, *args)`` for every shard on the cluster; results in shard order.

        ``on_result(i, result)`` is called in the client as each shard finishes (in completion
        order), which is how progress streams back. A shard that raises stops the campaign with
        that error (after cancelling the rest); a shard whose worker died is re-run by the
        scheduler on another worker (up to distributed's allowed-failures, default 3).
        """
        from distributed import as_completed

        run = uuid.uuid4().hex[:8]
        futures = [self.client.submit(fn, shard, *args, key=f"toki-{run}-{i}", pure=False)
                   for i, shard in enumerate(shards)]
        index = {f.key: i for i, f in enumerate(futures)}
        out: list = [None] * len(futures)
        try:
            for fut, res in as_completed(futures, with_results=True, raise_errors=True):
                i = index[fut.key]
                out[i] = res
                if on_result:
                    on_result(i, res)
        except BaseException:
            self.client.cancel(futures)
            raise
        return out


# -- the worker's side ----------------------------------------------------------------------------

_LOCALS: dict[tuple, Any] = {}


def worker_local(key: tuple, make: Callable[[], Any]) -> Any:
    """This process's resource for ``key`` (made on first use, kept for the next shards).

    A campaign's lanes (a run schema and its connections) are costly to open, so a worker keeps
    them across shards. Works the same in a Dask worker, a ProcessPoolExecutor worker and the
    main process; whatever ``make`` returns must have ``close()``, called when the worker ends.
    """
    res = _LOCALS.get(key)
    if res is None:
        if not _LOCALS:
            atexit.register(close_worker_locals)
            # Pool workers leave through os._exit (no atexit); multiprocessing's finalizers do run.
            from multiprocessing.util import Finalize

            Finalize(None, close_worker_locals, exitpriority=10)
        res = _LOCALS[key] = make()
    return res


def close_worker_locals(prefix: tuple = ()) -> None:
    """Close this process's resources whose key starts with ``prefix`` (all by default)."""
    for key in [k for k in _LOCALS if k[:len(prefix)] == prefix]:
        try:
            _LOCALS.pop(key).close()
        except Exception:  # a lane whose server went away: nothing left to drop
            pass


def _lane_plugin_class() -> type:
    """The worker plugin that closes a worker's resources when it closes.

    Made on first use: importing distributed costs 0.7 s, which a matrix run's pool workers (which
    use :func:`worker_local` and no cluster) should not pay. Pickled by reference as
    ``toki.cluster._LanePlugin``; the module's ``__getattr__`` makes it on a worker too.
    """
    cls = globals().get("_LanePlugin")
    if cls is None:
        from distributed.diagnostics.plugin import WorkerPlugin

        class _LanePlugin(WorkerPlugin):
            """Drops the worker's lanes (run schemas, connections) when the worker closes."""

            def teardown(self, worker) -> None:
                close_worker_locals()

        _LanePlugin.__qualname__ = "_LanePlugin"  # so pickle finds it by name
        cls = globals()["_LanePlugin"] = _LanePlugin
    return cls


def __getattr__(name: str):
    if name == "_LanePlugin":
        return _lane_plugin_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def shards_of(items: Iterable, size: int) -> list[list]:
    """Consecutive chunks of ``size``: a plan's shards, independent of the number of workers."""
    items = list(items)
    return [items[i:i + size] for i in range(0, len(items), size)]
