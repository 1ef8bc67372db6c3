"""The ``toki`` command line: thin, it parses arguments, calls the layers and renders results.

Each subcommand lives in its own module ``toki.cli.<name>_cmd`` exposing
``register(subparsers)``; it sets ``func(args, out) -> int`` on its parser. Conventions:
errors are one line naming the problem and the fix, exit status 2; ``--json`` on every command
that reports results; output streams are arguments so the CLI is testable in-process.

Exit status: 0 success, 1 a check or expectation failed, 2 bad input or no database.

Layer 10, the top: may import every layer and the experiments; nothing in the library imports it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TextIO

from toki.errors import TokiError


class _Version(argparse.Action):
    """``--version``, reading the installed version only when asked (importlib.metadata is slow)."""

    def __call__(self, parser, namespace, values, option_string=None):
        import toki

        print(f"toki {toki.__version__}")
        parser.exit()

# Order is the order shown in --help.
COMMANDS = ("demo", "db", "run", "matrix", "experiment", "check", "gen", "prove", "certify", "engines", "faults",
            "conformance", "record")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's usage errors are bad input too: exit 2
        self.exit(2, f"toki: error: {message} (see '{self.prog} --help')\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with command ``only`` alone (its module is the only one
    imported: `toki check FILE` does not pay for the other commands' imports)."""
    parser = _Parser(prog="toki", description="Certify the isolation contracts of agent-memory write paths "
                     "on real databases (TOKI, arXiv 2606.06240).",
                     epilog="exit status: 0 ok, 1 a check or expectation failed, 2 bad input or no database")
    parser.add_argument("--version", action=_Version, nargs=0, help="show toki's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        if only is not None and name != only:
            continue
        try:
            module = importlib.import_module(f"toki.cli.{name}_cmd")
        except ModuleNotFoundError as e:
            if e.name == f"toki.cli.{name}_cmd":
                continue  # command not built yet
            raise
        module.register(sub)
    return parser


def add_dsn_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dsn", help="database DSN: postgresql://..., mysql://... or mariadb://..., sqlite:///PATH, duckdb:///PATH "
                   "(default: $TOKI_DSN, else the embedded PostgreSQL)")


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if not getattr(args, "func", None):
        parser.print_help(out)
        return 2
    try:
        return int(args.func(args, out) or 0)
    except TokiError as e:
        # One line, whatever a parser put in the message (EDN errors quote the input), no secret.
        from toki.errors import redact

        err.write("toki: error: " + " ".join(redact(e).split()) + "\n")
        return 2
    except OSError as e:
        if _on_a_given_path(args, e):  # a path we cannot read or write (--json, --png, --junit, --out): bad input too
            err.write(f"toki: error: cannot use {e.filename}: {e.strerror or e} (check the path; outputs need a "
                      "writable folder)\n")
        else:  # not a path the user gave: do not send them looking for one
            err.write(f"toki: error: {type(e).__name__}: {' '.join(str(e).split())} (raised by code toki ran, not on a "
                      "path given on the command line; if an engine plug-in raised it, fix the plug-in)\n")
        return 2
    except KeyboardInterrupt:
        err.write("toki: interrupted\n")
        return 130


def _on_a_given_path(args: argparse.Namespace, e: OSError) -> bool:
    """Did ``e`` come from a path given on the command line: the path itself, a folder it goes in,
    or a file under a folder given (an output directory)?"""
    import os
    from pathlib import Path

    def paths(values):
        for v in values:
            if isinstance(v, str) and v and v != "-":
                yield Path(os.path.abspath(v))
            elif isinstance(v, (list, tuple)):
                yield from paths(v)

    given = list(paths(vars(args).values()))
    for f in (e.filename, e.filename2):
        if isinstance(f, (str, bytes, os.PathLike)):
            f = Path(os.path.abspath(os.fsdecode(f)))
            if any(f == g or f in g.parents or g in f.parents for g in given):
                return True
    return False


def entry() -> None:  # pragma: no cover
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `toki ... | head`: the reader left; not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)
