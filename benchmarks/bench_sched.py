"""Benchmark the barrier-controlled runner (targets: median <= 10 ms per schedule; the schedule
without the conflict at most 1.3x bare psycopg running the same statements).

1. Median wall time of a two-session, ten-step schedule with one blocked step, run again and
   again on one reused Lane (connections and schema kept; setup re-seeds the table).
2. The runner's overhead per statement: the same ten statements without the blocking conflict,
   run (a) by the Runner and (b) by bare psycopg on two connections in the same order;
   overhead = (a - b) / 10. Plus the bare round trip of ``select 1``.

    .venv/bin/python benchmarks/bench_sched.py [--runs 200] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import statistics
import time

from toki.db.server import resolve
from toki.sched import Runner, parse_toml

SETUP = ["truncate bench", "insert into bench (id, value) values (1, 10), (2, 20)"]


def schedule(blocking: bool):
    row = 1 if blocking else 2  # T2 updates T1's row (blocks until T1 commits) or its own
    steps = [
        ("T1", "begin"), ("T2", "begin"),
        ("T1", "select value from bench where id = 1"), ("T2", "select value from bench where id = 2"),
        ("T1", "update bench set value = value + 1 where id = 1"),
        ("T2", f"update bench set value = value + 1 where id = {row}"),
        ("T1", "select value from bench where id = 1"),
        ("T1", "commit"), ("T2", "select value from bench order by id"), ("T2", "commit"),
    ]
    body = ",\n".join(f'{{ session = "{s}", sql = "{q}" }}' for s, q in steps)
    setup = ", ".join(f'"{q}"' for q in SETUP)
    return parse_toml(f'name = "bench"\nsetup = [{setup}]\nsteps = [\n{body}\n]\n', source="bench.toml"), steps


def median_ms(xs):
    return statistics.median(xs) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()
    server = resolve(args.dsn)
    runner = Runner(server, record_history=False)
    blocked, _ = schedule(True)
    free, free_steps = schedule(False)
    with runner.lane("bench") as lane:
        lane.admin.execute("create table bench (id int primary key, value int)")
        for s in (blocked, free):  # warm up: connections, plans
            for _ in range(10):
                runner.run(s, "read-committed", lane=lane)
        r = runner.run(blocked, "read-committed", lane=lane)
        assert [st.index for st in r.steps if st.blocked] == [5], "the benchmark schedule must block once"
        times = {"blocked": [], "free": []}
        for _ in range(args.runs):
            for name, s in (("blocked", blocked), ("free", free)):
                t0 = time.perf_counter()
                runner.run(s, "read-committed", lane=lane)
                times[name].append(time.perf_counter() - t0)
        # bare psycopg: the same setup and ten statements, in order, on two connections
        conns = {n: server.connect(schema=lane.schema) for n in ("T1", "T2")}
        bare = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            for q in SETUP:
                lane.admin.execute(q)
            for sess, q in free_steps:
                conns[sess].execute("begin isolation level read committed" if q == "begin" else q)
            bare.append(time.perf_counter() - t0)
        rt = []
        for _ in range(args.runs * 5):
            t0 = time.perf_counter()
            conns["T1"].execute("select 1")
            rt.append(time.perf_counter() - t0)
        for c in conns.values():
            c.close()
    blocked_ms, free_ms, bare_ms = median_ms(times["blocked"]), median_ms(times["free"]), median_ms(bare)
    print(f"backend: {server.backend} {server.version} ({server.how}); {args.runs} runs each")
    print(f"ten-step two-session schedule, one blocked step, reused lane: median {blocked_ms:.2f} ms "
          f"(p90 {statistics.quantiles(times['blocked'], n=10)[-1] * 1000:.2f} ms; target <= 10 ms)")
    print(f"same schedule without the conflict:                           median {free_ms:.2f} ms")
    print(f"bare psycopg, same setup + ten statements in order:           median {bare_ms:.2f} ms")
    print(f"runner overhead per statement: {(free_ms - bare_ms) / 10:.3f} ms "
          f"(bare 'select 1' round trip: {median_ms(rt):.3f} ms)")
    print(f"runner / bare psycopg: {free_ms / bare_ms:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
