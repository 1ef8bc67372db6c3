"""Shared output helpers: rich tables to a stream, progress bars, JSON to a stream or a file.

Layer 1: imports nothing from toki; used by the command line, the experiments and the benchmarks.
rich is imported by the functions that draw, not with the module: JSON output (``toki check
--json``) does not pay for it, a tenth of a small check's time."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def console(out: TextIO) -> Console:
    from rich.console import Console

    return Console(file=out, width=max(140, Console(file=out).width), highlight=False, soft_wrap=False)


def progress(con: Console | None = None, *, unit: str | None = None, eta: bool = False) -> Progress:
    """A progress bar for long work: description, bar, done/total, elapsed (and ``unit``, time left).

    Without ``con`` it draws on stderr, only when stderr is a terminal, and vanishes when done, so
    piped output and JSON on stdout stay clean; with ``con`` it stays on that console.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    cols = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
    if unit:
        cols.append(TextColumn(unit))
    cols.append(TimeElapsedColumn())
    if eta:
        cols.append(TimeRemainingColumn())
    if con is not None:
        return Progress(*cols, console=con)
    return Progress(*cols, console=Console(file=sys.stderr), transient=True, disable=not sys.stderr.isatty())


def table(out: TextIO, title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(str(c))
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r))
    console(out).print(t)


def _default(o: Any) -> Any:
    if isinstance(o, (datetime, date)):
        return o.isoformat()
    if hasattr(o, "__dict__"):
        return vars(o)
    return str(o)


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=_default, ensure_ascii=False)


def emit_json(obj: Any, out: TextIO, path: str | None = None) -> None:
    """Write JSON to ``path`` (creating folders) or, when path is '-' or None, to ``out``."""
    text = dumps(obj)
    if path and path != "-":
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")
    else:
        out.write(text + "\n")
