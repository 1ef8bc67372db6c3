"""The command line: help, version, demo, db info, and one-line errors with exit 2."""

import io
import json

import pytest

import toki
from toki.cli import main


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(argv, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_help_lists_the_commands(capsys):
    rc, out, _ = run(["--help"])
    text = out + capsys.readouterr().out
    assert rc == 0 and "demo" in text and "db" in text and "exit status" in text


def test_no_command_prints_help_and_exits_2():
    rc, out, _ = run([])
    assert rc == 2 and "usage: toki" in out


def test_version(capsys):
    rc, _, _ = run(["--version"])
    assert rc == 0 and capsys.readouterr().out.strip() == f"toki {toki.__version__}"


@pytest.mark.parametrize("argv", [["demo", "--help"], ["db", "info", "--help"], ["db", "gc", "--help"]])
def test_subcommands_have_their_own_help(argv, capsys):
    rc, _, _ = run(argv)
    assert rc == 0 and "usage: toki " + argv[0] in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["nonsense"], ["demo", "--operator", "max"], ["demo", "--mode", "triple"],
                                  ["db", "info", "--bogus"]])
def test_usage_errors_are_one_line_and_exit_2(argv, capsys):
    rc, _, _ = run(argv)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("toki: error:") and "--help" in err


@pytest.mark.db
def test_no_database_is_one_line_and_exit_2():
    rc, out, err = run(["db", "info", "--dsn", "postgresql://postgres@127.0.0.1:1/postgres"])
    assert rc == 2 and out == "" and err.count("\n") == 1 and "cannot connect" in err and "unset --dsn" in err
    rc, _, err = run(["demo", "--dsn", "not a dsn"])
    assert rc == 2 and err.count("\n") == 1 and "malformed DSN" in err


@pytest.mark.db
def test_db_info_json(toki_server):
    rc, out, _ = run(["db", "info", "--json", "--dsn", toki_server.dsn])
    d = json.loads(out)
    assert rc == 0 and d["name"] == "postgresql" and d["version"] == toki_server.version
    assert d["how"] == "--dsn" and d["where"] and isinstance(d["superuser"], bool)
    rc, out, _ = run(["db", "info", "--dsn", toki_server.dsn])
    assert rc == 0 and "version" in out and toki_server.version in out


@pytest.mark.db
def test_db_gc(toki_server):
    rc, out, _ = run(["db", "gc", "--dsn", toki_server.dsn])
    assert rc == 0 and "stale run schema" in out
    rc, out, _ = run(["db", "gc", "--json", "--dsn", toki_server.dsn])
    assert rc == 0 and isinstance(json.loads(out)["dropped"], list)


@pytest.mark.slow
@pytest.mark.db
def test_demo_json_runs_every_operator_in_every_mode(toki_server):
    rc, out, _ = run(["demo", "--json", "--dsn", toki_server.dsn])
    assert rc == 0
    d = json.loads(out)
    assert d["backend"]["name"] == "postgresql"
    got = {(r["operator"], r["mode"]): r for r in d["results"]}
    assert set(got) == {(o, m) for o in ("lww", "evi", "await", "rule") for m in ("audit_row", "dual_row", "base")}
    for (op, mode), r in got.items():
        o = r["outcome"]
        # lww: later write; evi: 0.9 > 0.6; await: the confirmed callback; rule: the policy row
        assert (o["action"], o["winner_id"], o["loser_id"]) == ("superseded", "rx-2", "rx-1"), (op, mode)
        assert o["vote_source"] == {"lww": None, "evi": None, "await": "callback", "rule": "policy"}[op]
        objs = lambda rows: sorted(row[3] for row in rows)  # noqa: E731
        assert objs(r["as_of_may1_now"]) == ["amoxicillin"]
        if mode == "base":
            assert r["audit"] == [] and objs(r["current"]) == ["amoxicillin"]
            assert r["as_of_march20_now"] == []  # overwritten in place: the past is gone
        else:
            assert len(r["audit"]) == (1 if mode == "audit_row" else 0)
            assert objs(r["as_of_march20_now"]) == ["penicillin"] == objs(r["as_of_march20_believed_april1"])


@pytest.mark.db
def test_demo_tables(toki_server):
    rc, out, _ = run(["demo", "--operator", "lww", "--mode", "audit_row", "--dsn", toki_server.dsn])
    assert rc == 0 and "lww / audit_row: superseded, winner rx-2" in out and "rx-1#pre" in out
    assert "as_of(2026-03-20, now): penicillin" in out


def test_unwritable_output_path_is_one_line_and_exit_2(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    rc, _, err = run(["experiment", "order-swap", "--json", str(blocker / "out.json")])
    assert rc == 2 and err.count("\n") == 1 and err.startswith("toki: error: cannot use") and "a-file" in err
