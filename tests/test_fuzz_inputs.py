"""Every file toki reads, fuzzed with Hypothesis: malformed input exits 2 with one line naming the
problem, never a traceback, never a partial result file.

Inputs: schedule TOML, isolationtester ``.spec``, Jepsen histories (JSON and EDN), engine
witness files, fault files. Each is fuzzed from real files (random byte edits, cuts and splices,
which reach deep into the parsers) and from structured values of the wrong shape. The budget is
bounded: the ``ci`` profile is derandomised, and each input gets ``EXAMPLES`` examples.

Files that happen to stay valid are parsed, not run (running them needs a database and is the
other tests' business), except histories, which ``toki check`` checks in memory.
"""

from __future__ import annotations

import atexit
import io
import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toki.cli import main
from toki.errors import TokiError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = int(os.environ.get("TOKI_FUZZ_EXAMPLES", "40"))
fuzz = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

SEEDS = {
    "toml": [ROOT / "schedules/classic/g0.toml", ROOT / "schedules/witnesses/p4.toml"],
    "spec": [ROOT / "tests/data/specs/deadlock-simple.spec", ROOT / "tests/data/specs/simple-write-skew.spec"],
    "json": [ROOT / "tests/data/histories/la-g0.json", ROOT / "tests/data/histories/la-g-single.json"],
    "edn": [ROOT / "tests/data/histories/la-g2-item.edn"],
    "witness": [ROOT / "docs/engines/atommem-add-add.witness.json"],
}
FAULT = json.dumps({"toki_faults": 1, "system": "atommem", "case": "add-add", "kind": "kill", "point": 3,
                    "statement": "A: file-read", "options": {}, "findings": []}).encode()


def _mutate(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    """Apply (position, cut length, inserted bytes) edits: flips, deletions, splices."""
    b = bytearray(data)
    for pos, cut, ins in edits:
        if not b:
            b.extend(ins)
            continue
        p = pos % len(b)
        b[p:p + cut] = ins
    return bytes(b)


EDIT = st.tuples(st.integers(0, 10**6), st.integers(0, 40),
                 st.one_of(st.binary(max_size=6), st.sampled_from(
                     [b"", b"{", b"}", b"[", b"]", b'"', b"=", b"\n", b"\x00", b"\xff", b"nan", b"-1", b"1e999",
                      b"true", b"null", b":", b",", b"#", b"'", b"step", b"session", b"permutation", b"\\"])))


def mutated(kind: str):
    seeds = [p.read_bytes() for p in SEEDS[kind] if p.exists()] or [b""]
    return st.builds(_mutate, st.sampled_from(seeds), st.lists(EDIT, min_size=1, max_size=6))


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                       lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                       max_leaves=12)


_TMP = Path(tempfile.mkdtemp(prefix="toki-fuzz-"))
atexit.register(shutil.rmtree, _TMP, True)
_N = itertools.count()


def _write(data: bytes, suffix: str) -> Path:
    """The input in a folder of its own (its result file goes next to it)."""
    d = _TMP / str(next(_N))
    d.mkdir()
    p = d / f"input{suffix}"
    p.write_bytes(data)
    return p


def _cli_bad_input(argv: list[str], result: Path) -> None:
    """The CLI on an input known to be bad: exit 2, one named problem, no result file."""
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--json", str(result)], out=out, err=err)  # a traceback fails the test by itself
    assert code == 2, (code, err.getvalue(), out.getvalue()[:200])
    msg = err.getvalue()
    assert msg.startswith("toki: error: ") and msg.count("\n") == 1, msg
    assert not result.exists(), "a result file was written for bad input"


def _parses(fn, path: Path) -> bool:
    try:
        fn(path)
        return True
    except TokiError:
        return False


@pytest.mark.slow
@fuzz
@given(st.one_of(mutated("toml"), st.binary(max_size=200),
                 st.builds(lambda d: json.dumps(d).encode(), JSONISH)))
def test_schedule_toml(data):
    from toki.sched import load

    p = _write(data, ".toml")
    if not _parses(load, p):
        _cli_bad_input(["run", str(p), "--level", "rc"], p.with_name("result.json"))


@fuzz
@given(st.one_of(mutated("spec"), st.binary(max_size=200)))
def test_isolationtester_spec(data):
    from toki.sched import load

    p = _write(data, ".spec")
    if not _parses(load, p):
        _cli_bad_input(["run", str(p), "--level", "rc"], p.with_name("result.json"))
    else:
        load(p).schedules()  # the permutations are built without a database: they must not crash


@fuzz
@given(st.one_of(mutated("json"), st.builds(lambda d: json.dumps(d).encode(), JSONISH),
                 st.builds(lambda ops: json.dumps(ops).encode(), st.lists(
                     st.fixed_dictionaries({"type": st.sampled_from(["invoke", "ok", "fail", "info", "x", 3]),
                                            "process": st.one_of(st.integers(-2, 3), st.text(max_size=2)),
                                            "f": st.sampled_from(["txn", None, 1]),
                                            "value": JSONISH}), max_size=6))))
def test_jepsen_history_json(data):
    p = _write(data, ".json")
    res = p.with_name("result.json")
    for workload in ("list-append", "rw-register"):
        out, err = io.StringIO(), io.StringIO()
        code = main(["check", str(p), "--workload", workload, "--json", str(res)], out=out, err=err)
        assert code in (0, 1, 2)
        if code == 2:
            assert err.getvalue().startswith("toki: error: ") and err.getvalue().count("\n") == 1, err.getvalue()
            assert not res.exists()
        else:
            assert json.loads(res.read_text())["valid"] in (True, False, "unknown")
            res.unlink()


@fuzz
@given(st.one_of(mutated("edn"), st.binary(max_size=120)))
def test_jepsen_history_edn(data):
    p = _write(data, ".edn")
    res = p.with_name("result.json")
    out, err = io.StringIO(), io.StringIO()
    code = main(["check", str(p), "--workload", "list-append", "--json", str(res)], out=out, err=err)
    assert code in (0, 1, 2)
    if code == 2:
        assert err.getvalue().startswith("toki: error: ") and err.getvalue().count("\n") == 1, err.getvalue()
        assert not res.exists()


@fuzz
@given(st.one_of(mutated("witness"), st.builds(lambda d: json.dumps(d).encode(), JSONISH),
                 st.builds(lambda d: json.dumps({"toki_witness": 1, **d}).encode(),
                           st.dictionaries(st.sampled_from(["engine", "scenario", "grants", "steps", "seed", "budget",
                                                            "version", "engine_module"]), JSONISH, max_size=6))))
def test_engine_witness(data):
    from toki.harness.witness import Witness

    p = _write(data, ".json")
    if not _parses(Witness.load, p):
        _cli_bad_input(["certify", "--replay", str(p)], p.with_name("result.json"))


@fuzz
@given(st.one_of(st.builds(_mutate, st.just(FAULT), st.lists(EDIT, min_size=1, max_size=4)),
                 st.builds(lambda d: json.dumps(d).encode(), JSONISH),
                 st.builds(lambda d: json.dumps({"toki_faults": 1, **d}).encode(),
                           st.dictionaries(st.sampled_from(["system", "case", "kind", "point", "options", "findings"]),
                                           JSONISH, max_size=6))))
def test_fault_file(data):
    from toki.faults.report import load

    p = _write(data, ".json")
    if not _parses(load, p):
        _cli_bad_input(["faults", "--replay", str(p)], p.with_name("result.json"))


@pytest.mark.parametrize("suffix,argv", [(".toml", ["run"]), (".spec", ["run"]), (".json", ["check"]),
                                         (".edn", ["check"]), (".json", ["certify", "--replay"]),
                                         (".json", ["faults", "--replay"])])
def test_unreadable_and_missing_files(tmp_path, suffix, argv):
    binary = tmp_path / f"b{suffix}"
    binary.write_bytes(b"\xff\xfe\x00bad")
    folder = tmp_path / f"dir{suffix}"
    folder.mkdir()
    for p in (binary, folder, tmp_path / f"missing{suffix}"):
        extra = ["--level", "rc"] if argv == ["run"] else []
        res = tmp_path / "r.json"
        out, err = io.StringIO(), io.StringIO()
        code = main([*argv, str(p), *extra, "--json", str(res)], out=out, err=err)
        if argv == ["check"] and p == binary:
            assert code in (1, 2)  # a few bytes may still read as an (invalid) history
        else:
            assert code == 2, (p, err.getvalue())
        assert "Traceback" not in err.getvalue()
        if code == 2:
            assert not res.exists()
