"""One exception root for everything toki raises on purpose.

Each class names a kind of problem; each message names the problem and how to fix it.
Database errors keep their SQLSTATE (DESIGN §3: classify by SQLSTATE, never by message).
"""

from __future__ import annotations


class TokiError(Exception):
    """Root of every error toki raises deliberately. The CLI maps it to exit status 2."""

    def __init__(self, message: str, *, fix: str | None = None):
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
    """A database error that aborted a write path; keeps the SQLSTATE."""

    def __init__(self, message: str, *, sqlstate: str | None, fix: str | None = None):
        self.sqlstate = sqlstate
        super().__init__(message, fix=fix)


class ScheduleError(TokiError):
    """A schedule file or a schedule run is malformed (names the file and the step)."""


class StepTimeout(ScheduleError):
    pass


class HistoryError(TokiError):
    """A history given to the checker is malformed (names the op index)."""
