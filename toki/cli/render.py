"""Shared output helpers: rich tables to a stream, JSON to a stream or a file."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table


def console(out: TextIO) -> Console:
    return Console(file=out, width=max(140, Console(file=out).width), highlight=False, soft_wrap=False)


def table(out: TextIO, title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
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
