"""Loading a schedule file of either format: TOML (:mod:`toki.sched.schedule`) or PostgreSQL's
isolationtester ``.spec`` (:mod:`toki.sched.spec`, which builds on the TOML model). Kept apart
so that neither format's module imports the other's."""

from __future__ import annotations

from pathlib import Path

from toki.errors import ScheduleError
from toki.sched.schedule import Schedule, parse_toml
from toki.sched.spec import SpecFile, parse_spec


def load(path: str | Path) -> Schedule | SpecFile:
    """Load a ``.toml`` schedule or an isolationtester ``.spec`` file."""
    p = Path(path)
    if not p.exists():
        raise ScheduleError(f"{p}: no such file", fix="give the path of a .toml schedule or a .spec file")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScheduleError(f"{p}: not UTF-8 text (byte {e.start})",
                            fix="give a .toml schedule or a .spec file saved as UTF-8") from None
    if p.suffix == ".spec":
        return parse_spec(text, source=str(p))
    if p.suffix != ".toml":
        raise ScheduleError(f"{p}: unknown schedule format {p.suffix!r}", fix="use a .toml schedule or a .spec file")
    return parse_toml(text, source=str(p))
