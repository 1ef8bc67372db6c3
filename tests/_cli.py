"""Running the command line in-process, as the tests of its contracts do."""

from __future__ import annotations

import io
import traceback

import pytest

from toki.cli import main


def toki(*argv: str) -> tuple[int, str, str]:
    """``toki ARGV``: (exit status, stdout, stderr). An exception that escapes is a traceback a user
    would see, so it fails the test with the command that raised it."""
    out, err = io.StringIO(), io.StringIO()
    try:
        rc = main(list(argv), out=out, err=err)
    except Exception as e:  # noqa: BLE001 - any exception here is a traceback a user would see
        from toki.errors import redact

        pytest.fail(f"toki {redact(' '.join(argv))} raised {type(e).__name__}: {e} instead of exiting with one line\n"
                    + "".join(traceback.format_exception(e))[-3000:], pytrace=False)
    return rc, out.getvalue(), err.getvalue()
