"""Would a well-kept JSON decoder do the loader's work with less code than toki's scanner?

For a list-append history (the ``lines`` layout that ``bench_check.py`` caches), this times, in
one process with the garbage collector off (as toki's loader runs):

- the scanner (``toki.check.reading.json_scan.scan_file``): file to columns, both cores;
- msgspec typed structs (if msgspec is installed: ``pip install msgspec``): decoding, then the
  least flattening that gives the same columns (op type, index, process, time, micro-op f, key,
  value, list length, read elements), without any of the checks the scanner makes;
- orjson: decoding to dicts alone.

Best of ``--repeat`` runs each. A script, not a test: it asserts only that msgspec's columns
have the scanner's lengths.

    .venv/bin/python benchmarks/bench_check.py --sizes 100000 --layouts lines   # caches the file
    .venv/bin/python benchmarks/bench_decoders.py /tmp/toki-bench-check/list-append-serializable-100000-k100-m32-s42.json
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

import numpy as np


def _msgspec_columns(data: bytes):
    import msgspec

    class Op(msgspec.Struct, gc=False):
        type: str
        process: int | str
        value: list[tuple[str, int, int | list[int] | None]] | None = None
        index: int = 0
        time: int | None = None
        f: str | None = None

    t0 = time.perf_counter()
    ops = msgspec.json.decode(data, type=list[Op])
    t1 = time.perf_counter()
    types, fs = {"ok": 0, "info": 1, "fail": 2, "invoke": 3}, {"r": 0, "append": 1, "w": 2}
    n = len(ops)
    cols = {"type": np.fromiter((types[o.type] for o in ops), np.int8, n),
            "index": np.fromiter((o.index for o in ops), np.int64, n),
            "process": np.fromiter((o.process if type(o.process) is int else 0 for o in ops), np.int64, n),
            "time": np.fromiter((o.time or 0 for o in ops), np.int64, n),
            "m_count": np.fromiter((len(o.value) if o.value else 0 for o in ops), np.int64, n)}
    mops = [m for o in ops if o.value for m in o.value]
    m = len(mops)
    cols.update(m_f=np.fromiter((fs[x[0]] for x in mops), np.int8, m),
                m_key=np.fromiter((x[1] for x in mops), np.int64, m),
                m_val=np.fromiter((x[2] if type(x[2]) is int else 0 for x in mops), np.int64, m),
                m_len=np.fromiter((len(x[2]) if type(x[2]) is list else 0 for x in mops), np.int64, m),
                elem=np.fromiter((e for x in mops if type(x[2]) is list for e in x[2]), np.int64))
    return t1 - t0, time.perf_counter() - t1, cols


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="a list-append JSON history")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    from toki.check.reading import json_scan
    from toki.check.accel.allocator import fast_malloc

    fast_malloc()
    gc.disable()
    scan_s, ms, oj = [], [], []
    sc = None
    for _ in range(args.repeat):
        t = time.perf_counter()
        sc = json_scan.scan_file(args.path)
        scan_s.append(time.perf_counter() - t)
        with open(args.path, "rb") as f:
            data = f.read()
        try:
            dec, flat, cols = _msgspec_columns(data)
            assert len(cols["m_f"]) == len(sc.m_f) and len(cols["elem"]) == len(sc.elem)
            ms.append((dec + flat, dec, flat))
            del cols
        except ImportError:
            pass
        import orjson

        t = time.perf_counter()
        ops = orjson.loads(data)
        oj.append(time.perf_counter() - t)
        del ops, data
    print(f"scanner (file to columns):                   {min(scan_s):.2f} s")
    if ms:
        tot, dec, flat = min(ms)
        print(f"msgspec typed structs, decode + flatten:     {tot:.2f} s ({dec:.2f} + {flat:.2f})")
    else:
        print("msgspec: not installed (pip install msgspec)")
    print(f"orjson, decode to dicts only:                {min(oj):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
