"""`toki certify`: catches the unsafe adapter (with a replayable witness and JUnit XML), passes
a safe one, rejects bad input with exit 2; the pytest helper gates an engine's own tests."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import pytest

from toki.cli import main

pytestmark = pytest.mark.db


def _certify(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(["certify", *argv], out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_certify_catches_the_unsafe_adapter_with_a_replayable_witness(tmp_path):
    junit, wit = tmp_path / "junit.xml", tmp_path / "witness.toml"
    rc, out, err = _certify("--adapter", "tests.unsafe_adapter:unsafe", "--level", "RC", "--budget", "60",
                            "--seed", "0", "--junit", str(junit), "--witness", str(wit))
    assert rc == 1, out + err
    assert "VIOLATED" in out and "P4" in out and "replay reproduced" in out
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.get("type") == "P4" and "[[steps]]" in failure.text
    # the printed witness is plain SQL: toki run replays it to the same outcome
    out2, err2 = io.StringIO(), io.StringIO()
    assert main(["run", str(wit), "--level", "read-committed"], out=out2, err=err2) == 0, out2.getvalue() + err2.getvalue()
    assert "expectation: met" in out2.getvalue()


def test_certify_passes_the_locking_adapter_at_rc(tmp_path):
    junit = tmp_path / "junit.xml"
    rc, out, err = _certify("--adapter", "tests.unsafe_adapter:locking", "--level", "rc", "--budget", "25",
                            "--junit", str(junit))
    assert rc == 0, out + err
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "0" and suite.find("testcase/failure") is None


@pytest.mark.slow
def test_certify_passes_tokis_own_write_path_at_its_precondition_json():
    rc, out, err = _certify("--adapter", "toki.properties.adapter:toki_rule", "--level", "SR", "--budget", "25",
                            "--json")
    assert rc == 0, out + err
    doc = json.loads(out)
    v = doc["verdict"]
    assert (v["operator"], v["level"], v["status"], v["anomaly"]) == ("rule", "SR", "holds", "P3")
    assert v["examples"] >= 25 and doc["provenance"]["seed"] == 0


@pytest.mark.slow
def test_certify_below_the_precondition_finds_the_anomaly():
    rc, out, err = _certify("--adapter", "toki.properties.adapter:toki_rule", "--level", "SI", "--budget", "200")
    assert rc == 1 and "below rule's precondition SR" in out and "P3" in out


@pytest.mark.parametrize("argv,needle", [
    (["--adapter", "no_such_module_x:f", "--level", "rc"], "cannot import adapter module"),
    (["--adapter", "tests.unsafe_adapter", "--level", "rc"], "module:factory"),
    (["--adapter", "tests.unsafe_adapter:nothing", "--level", "rc"], "has no attribute"),
    (["--adapter", "tests.unsafe_adapter:unsafe", "--level", "bogus"], "unknown isolation level"),
    (["--adapter", "tests.unsafe_adapter:unsafe", "--level", "rc", "--budget", "0"], "at least 1"),
])
def test_certify_bad_input_exits_2(argv, needle):
    rc, out, err = _certify(*argv)
    assert rc == 2 and needle in err, err


@pytest.mark.slow
def test_pytest_helper_gates_on_the_contract(toki_certify):
    from tests.unsafe_adapter import locking, unsafe

    assert toki_certify(locking(), "RC", budget=20).contract_holds
    v = toki_certify(unsafe(), "RC", budget=60, expect="violated")
    assert v.witness is not None and v.witness.replayed


def test_certify_fails_closed_on_an_adapter_that_reports_no_outcome():
    """The unsafe adapter whose write() returns None: told nothing, the check must not pass."""
    rc, out, err = _certify("--adapter", "tests.unsafe_adapter:silent", "--level", "RC", "--budget", "100",
                            "--seed", "0")
    assert rc == 1, out + err
    assert "UNVERIFIABLE" in out or "VIOLATED" in out
    assert "holds" not in out.split("┃")[-1]


def test_certify_adapter_needs_a_level():
    rc, out, err = _certify("--adapter", "tests.unsafe_adapter:unsafe")
    assert rc == 2 and "--level" in err
