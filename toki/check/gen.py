"""Histories from simulated databases, for tests and benchmarks (``toki gen history``).

Clients (``concurrency`` processes) each run one transaction at a time: invoke, one step per
micro-op, then commit. A scheduler picks the next process to step uniformly at random (seeded),
so transactions overlap. Transactions are 1-5 micro-ops (reads or writes, half each) over a
rotating pool of ``keys`` active keys, as in Elle's generator: a key that has taken
``max_writes_per_key`` writes is retired and replaced by a fresh one, so lists stay short.
Written values are unique per key (1, 2, 3, ...).

Simulated databases:

- ``serializable``: the whole transaction takes effect atomically at its commit step (between
  its invocation and completion), so histories are strict serializable;
- ``snapshot-isolation``: reads see the snapshot taken at the invocation (plus the
  transaction's own writes); at commit, first committer wins: if another transaction committed
  a write to a key this one writes after the snapshot, this one fails. Admits write skew (G2-item),
  never G-single-item;
- ``read-committed``: each read sees the latest committed state, or the transaction's own
  version of a key it wrote; a write takes a row lock (no-wait: a transaction that finds the
  key locked by another fails) and builds the transaction's own version on the latest committed
  one, installed at commit. Never G0/G1, but admits lost updates, G-single-item and G2-item.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TextIO

import numpy as np

from toki.errors import ConfigError

DATABASES = ("serializable", "snapshot-isolation", "read-committed")
WORKLOADS = ("list-append", "rw-register")
#: anomalies :func:`plant` can put into a history
PLANTS = ("g2-item",)
#: planted keys sit far above the generator's own (which count up from 0)
PLANT_KEY = 1 << 40
#: ... and so do their processes
PLANT_PROCESS = 1 << 30


class _Key:
    __slots__ = ("next_value", "versions", "writes")

    def __init__(self, init):
        self.versions = [(0, init)]  # (commit timestamp, value)
        self.next_value = 1
        self.writes = 0


def generate(*, workload: str = "list-append", txns: int = 1000, keys: int = 10, db: str = "serializable",
             seed: int = 0, concurrency: int = 10, min_txn_length: int = 1, max_txn_length: int = 5,
             max_writes_per_key: int = 32, read_fraction: float = 0.5) -> Iterator[dict]:
    """Yield the ops of a history, in order (invocations and completions).

    Options are checked here, before the first op is produced, so a bad option writes nothing."""
    if workload not in WORKLOADS:
        raise ConfigError(f"unknown workload {workload!r}", fix="use list-append or rw-register")
    if db not in DATABASES:
        raise ConfigError(f"unknown simulated database {db!r}", fix="use " + ", ".join(DATABASES))
    if txns < 0 or keys < 1 or concurrency < 1 or not 1 <= min_txn_length <= max_txn_length:
        raise ConfigError("bad generator options", fix="txns >= 0, keys >= 1, concurrency >= 1, "
                          "1 <= min-txn-length <= max-txn-length")
    return _ops(workload, txns, keys, db, seed, concurrency, min_txn_length, max_txn_length, max_writes_per_key,
                read_fraction)


def _ops(workload, txns, keys, db, seed, concurrency, min_txn_length, max_txn_length, max_writes_per_key,
         read_fraction) -> Iterator[dict]:
    rng = np.random.default_rng(seed)
    append = workload == "list-append"
    wf = "append" if append else "w"
    init = () if append else None
    store: dict[int, _Key] = {}
    active = list(range(keys))
    next_key = keys
    for k in active:
        store[k] = _Key(init)
    ts = 0  # commit counter
    index = 0
    started = 0
    done = 0
    # per process state: None (idle) or [mops, step, snapshot_ts, buffer(dict), reads(list)]
    state: list = [None] * concurrency
    locks: dict[int, int] = {}
    buf_r = rng.random(1 << 16)
    buf_i = rng.integers(0, 1 << 30, 1 << 16)
    bp = 0

    def rnd():
        nonlocal bp, buf_r, buf_i
        if bp >= len(buf_r):
            buf_r = rng.random(1 << 16)
            buf_i = rng.integers(0, 1 << 30, 1 << 16)
            bp = 0
        bp += 1
        return buf_r[bp - 1], int(buf_i[bp - 1])

    def read_at(k: int, snap: int | None):
        vs = store[k].versions
        if snap is None:
            return vs[-1][1]
        for cts, v in reversed(vs):
            if cts <= snap:
                return v
        return init

    def new_txn():
        nonlocal next_key
        _, n = rnd()
        length = min_txn_length + n % (max_txn_length - min_txn_length + 1)
        mops = []
        for _ in range(length):
            x, n = rnd()
            k = active[n % len(active)]
            if x < read_fraction:
                mops.append(["r", k, None])
            else:
                key = store[k]
                v = key.next_value
                key.next_value += 1
                key.writes += 1
                mops.append([wf, k, v])
                if key.writes >= max_writes_per_key:
                    # retire the key; it stays readable by transactions that already chose it
                    active[active.index(k)] = next_key
                    store[next_key] = _Key(init)
                    next_key += 1
        return mops

    def own_view(k, base, buffer):
        if k not in buffer:
            return base
        if append:
            return tuple(base) + tuple(buffer[k])
        return buffer[k]

    while done < txns:
        _, n = rnd()
        p = n % concurrency
        st = state[p]
        if st is None:
            if started >= txns:
                continue
            mops = new_txn()
            started += 1
            snap = ts if db == "snapshot-isolation" else None
            state[p] = [mops, 0, snap, {}, [None] * len(mops)]
            yield {"index": index, "time": index, "type": "invoke", "process": p, "f": "txn",
                   "value": [list(m) for m in mops]}
            index += 1
            continue
        mops, step, snap, buffer, reads = st
        ok = True
        if step < len(mops):
            if db == "snapshot-isolation":
                f, k, v = mops[step]
                if f == "r":
                    reads[step] = own_view(k, read_at(k, snap), buffer)
                elif append:
                    buffer.setdefault(k, []).append(v)
                else:
                    buffer[k] = v
            elif db == "read-committed":
                f, k, v = mops[step]
                if f == "r":
                    reads[step] = buffer[k] if k in buffer else read_at(k, None)
                elif locks.get(k, p) != p:
                    ok = False  # no-wait row lock: fail now
                else:
                    locks[k] = p
                    if append:
                        buffer[k] = tuple(buffer[k] if k in buffer else read_at(k, None)) + (v,)
                    else:
                        buffer[k] = v
            if ok:
                st[1] = step + 1
                continue
        # commit (or abort)
        state[p] = None
        done += 1
        for k in [k for k, q in locks.items() if q == p]:
            del locks[k]
        if db == "serializable":
            buffer = {}
            for i, (f, k, v) in enumerate(mops):
                if f == "r":
                    reads[i] = own_view(k, read_at(k, None), buffer)
                elif append:
                    buffer.setdefault(k, []).append(v)
                else:
                    buffer[k] = v
        elif db == "snapshot-isolation":
            ok = all(store[k].versions[-1][0] <= snap for k in buffer)
        if ok and buffer:
            ts += 1
            for k, v in buffer.items():
                if append and db != "read-committed":
                    v = tuple(store[k].versions[-1][1]) + tuple(v)
                store[k].versions.append((ts, v))
        value = []
        for i, (f, k, v) in enumerate(mops):
            if f == "r":
                r = reads[i] if ok else None
                value.append(["r", k, list(r) if (append and r is not None) else r])
            else:
                value.append([f, k, v])
        yield {"index": index, "time": index, "type": "ok" if ok else "fail", "process": p, "f": "txn",
               "value": value}
        index += 1


def plant(ops: Iterator[dict], anomaly: str, *, at: int, workload: str = "list-append") -> Iterator[dict]:
    """The ops of a history with one anomaly planted after its ``at``-th op, re-indexed.

    ``g2-item`` is a write skew on two keys no other transaction touches: two new processes each
    read one key (empty / nil) and write the other, concurrently, and both commit. Each read
    misses the other's write: an rw edge each way, a G2-item cycle of two transactions, and no
    other anomaly."""
    if anomaly not in PLANTS:
        raise ConfigError(f"cannot plant {anomaly!r}", fix="plant one of " + ", ".join(PLANTS))
    if workload not in WORKLOADS:
        raise ConfigError(f"unknown workload {workload!r}", fix="use list-append or rw-register")
    wf, nil = ("append", []) if workload == "list-append" else ("w", None)
    x, y = PLANT_KEY, PLANT_KEY + 1
    index = 0
    planted = False
    for op in ops:
        op["index"] = op["time"] = index
        index += 1
        yield op
        if not planted and index > at:
            planted = True
            yield from _write_skew(x, y, wf, nil, index)
            index += 4
    if not planted:
        yield from _write_skew(x, y, wf, nil, index)


def _write_skew(x, y, wf, nil, index) -> list[dict]:
    p = PLANT_PROCESS
    a = [["r", x, None], [wf, y, 1]]
    b = [["r", y, None], [wf, x, 1]]
    done_a = [["r", x, nil], [wf, y, 1]]
    done_b = [["r", y, nil], [wf, x, 1]]
    ops = [("invoke", p, a), ("invoke", p + 1, b), ("ok", p, done_a), ("ok", p + 1, done_b)]
    return [{"index": index + i, "time": index + i, "type": t, "process": q, "f": "txn", "value": v}
            for i, (t, q, v) in enumerate(ops)]


def write_json(ops: Iterator[dict], out: TextIO) -> int:
    """Stream ops as a JSON array, one op per line. Returns the number of ops."""
    n = 0
    out.write("[")
    for op in ops:
        out.write(("\n" if n == 0 else ",\n") + json.dumps(op, separators=(",", ":")))
        n += 1
    out.write("\n]\n")
    return n


def write_edn(ops: Iterator[dict], out: TextIO) -> int:
    """Jepsen's history.edn style: one op map per line, keywords for type/f/micro-op names."""
    n = 0
    for op in ops:
        mops = " ".join(f"[:{f} {k} {_edn(v)}]" for f, k, v in op["value"])
        out.write(f"{{:index {op['index']}, :time {op['time']}, :type :{op['type']}, :process {op['process']}, "
                  f":f :txn, :value [{mops}]}}\n")
        n += 1
    return n


def _edn(v) -> str:
    if v is None:
        return "nil"
    if isinstance(v, list):
        return "[" + " ".join(_edn(x) for x in v) + "]"
    return json.dumps(v)
