"""One exception root for everything toki raises on purpose.

Each class names a kind of problem; each message names the problem and how to fix it.
Database errors keep their SQLSTATE (docs/design.md#decisions: classify by SQLSTATE, never by message).
"""

from __future__ import annotations

import re

# A password in a libpq/SQLAlchemy URI (scheme://user:SECRET@host), in a query parameter
# (?password=SECRET) or in a key-value DSN (password=SECRET or password='SE CRET').
_URI_SECRET = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s'\"\[\]]*:)(?P<secret>[^\s'\"/]*)(?=@)")
_PARAM_SECRET = re.compile(r"(?P<head>[?&;](?:password|pass|pwd|passwd)=)(?P<secret>[^&\s'\"]*)", re.I)
# A DSN without a scheme (user:SECRET@host, user:SECRET@host:5432/db), where one starts: at the start, or
# after a space, a quote, a bracket, "=" or ",". libpq reads it as a key-value string and quotes it whole
# in its error, so it reaches messages as often as a URI does.
_BARE_SECRET = re.compile(r"(?:^|(?<=[\s'\"(=,]))(?P<head>[A-Za-z0-9._%+~-]+:)(?P<secret>[^\s'\"/@:]*)"
                          r"(?=@[A-Za-z0-9.\[_-])")
_KV_SECRET = re.compile(r"(?P<head>\b(?:password|pass|pwd|passwd)\s*=\s*)(?P<secret>'(?:[^'\\]|\\.)*'|[^\s'\"&]+)",
                        re.I)
REDACTED = "***"


def redact(text: object) -> str:
    """``text`` with every DSN password replaced by ``***`` (messages, logs and result files
    must never carry a secret)."""
    s = str(text)
    if not any(c in s for c in ":="):
        return s
    for pat in (_URI_SECRET, _PARAM_SECRET, _KV_SECRET, _BARE_SECRET):
        s = pat.sub(lambda m: m.group("head") + (REDACTED if m.group("secret") else ""), s)
    return s


class TokiError(Exception):
    """Root of every error toki raises deliberately. The CLI maps it to exit status 2.

    Messages are redacted: a DSN quoted in one never shows its password."""

    def __init__(self, message: str, *, fix: str | None = None):
        message = redact(message)
        fix = redact(fix) if fix is not None else None
        self.problem = message
        self.fix = fix
        super().__init__(f"{message} ({fix})" if fix else message)


class InputError(TokiError, ValueError):
    """Bad input to a pure function: nothing was written anywhere."""


class InvalidConfidence(InputError):
    pass


class InvalidPeriod(InputError):
    pass


class InvalidFact(InputError):
    pass


class NotContradicting(InputError):
    pass


class InvalidVote(InputError):
    pass


class ProvenanceSyntaxError(InputError):
    pass


class WriteRefused(TokiError):
    """The write path refused to guess; the store was left untouched."""


class AmbiguousIncumbents(WriteRefused):
    pass


class ConcurrentClose(WriteRefused):
    """A row the write path meant to close was closed by someone else, and re-reading did not settle it."""


class ClosingClosedRow(WriteRefused):
    pass


class JudgeError(TokiError):
    """A judge failed (timeout, refusal, malformed answer): never turned into a guessed vote."""


class ConfigError(TokiError):
    """Bad configuration: level names, DSNs, options."""


class DatabaseUnavailable(TokiError):
    pass


class DatabaseError(TokiError):
    """A database error that aborted a write path; keeps the SQLSTATE and, where the database has
    one, its own error number (MySQL's ``errno``: 1213 is SQLSTATE 40001)."""

    def __init__(self, message: str, *, sqlstate: str | None, fix: str | None = None, errno: int | None = None):
        self.sqlstate = sqlstate
        self.errno = errno
        super().__init__(message, fix=fix)


class ScheduleError(TokiError):
    """A schedule file or a schedule run is malformed (names the file and the step)."""


class StepTimeout(ScheduleError):
    pass


class HistoryError(TokiError):
    """A history given to the checker is malformed (names the op index)."""
