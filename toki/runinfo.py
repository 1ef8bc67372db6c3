"""How a result was made: commit, versions, backend, seed, options (docs/design.md#decisions)."""

from __future__ import annotations

import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import toki


def git_commit() -> str:
    """The commit of the checkout toki runs from, or 'unknown' for an installed copy."""
    here = Path(toki.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        if out.returncode == 0:
            dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def _v(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def _redacted(v):
    """Options as recorded, with every DSN password replaced (result files carry no secret)."""
    from toki.errors import redact

    if isinstance(v, str):
        return redact(v)
    if isinstance(v, dict):
        return {k: _redacted(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_redacted(x) for x in v]
    return v


def provenance(*, seed: int | None = None, options: dict | None = None, backend: dict | None = None,
               elapsed_s: float | None = None) -> dict:
    return {
        "toki_version": toki.__version__,
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {p: _v(p) for p in ("psycopg", "sqlalchemy", "hypothesis", "z3-solver", "numpy", "scipy")},
        "backend": backend,
        "seed": seed,
        "options": _redacted(options or {}),
        "elapsed_s": elapsed_s,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
