"""A DSN without a scheme (``user:SECRET@host``, which libpq reads as a key-value string and quotes
whole in its error) never prints its password: one test per command that printed it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from toki.cli import main
from toki.errors import redact

SECRET = "s3cretpw"
P4 = str(Path(__file__).resolve().parent.parent / "schedules" / "classic" / "p4.toml")


@pytest.mark.parametrize("text,want", [
    (f"user:{SECRET}@host", "user:***@host"),
    (f"malformed DSN 'u:{SECRET}@h:5432/db': missing \"=\" after \"u:{SECRET}@h:5432/db\"",
     "malformed DSN 'u:***@h:5432/db': missing \"=\" after \"u:***@h:5432/db\""),
    (f"dsn=u:{SECRET}@[::1]", "dsn=u:***@[::1]"),
    ("at 12:30, sqlite:///a/b and host:5432", "at 12:30, sqlite:///a/b and host:5432"),  # nothing to hide
    ("user@host", "user@host"),
])
def test_redact_a_dsn_without_a_scheme(text, want):
    assert redact(text) == want


@pytest.mark.parametrize("argv", [
    ["db", "info"],
    ["matrix", "--trials", "1"],
    ["run", P4, "--level", "rc"],
], ids=["db-info", "matrix", "run"])
@pytest.mark.parametrize("dsn", [f"user:{SECRET}@host", f"user:{SECRET}@127.0.0.1:1/db"])
def test_no_command_prints_the_password_of_a_schemeless_dsn(argv, dsn):
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--dsn", dsn], out=out, err=err)
    text = out.getvalue() + err.getvalue()
    assert code == 2, text
    assert SECRET not in text
    assert "user:***@" in text  # the DSN is still named, so the user sees which one failed
