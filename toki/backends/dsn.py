"""From a DSN to its backend. Kept apart from :mod:`toki.backends.base` so that the concrete
backends import the base and only this module imports them (no cycle)."""

from __future__ import annotations

from toki.backends.base import Backend
from toki.errors import ConfigError


def scheme_of(dsn: str) -> str:
    # Only the scheme: a malformed rest (postgresql://[bad) is the driver's to report.
    scheme = dsn.split("://", 1)[0].lower() if "://" in dsn else ""
    return {"postgres": "postgresql", "mariadb": "mysql", "mysql+pymysql": "mysql"}.get(scheme, scheme)


def for_dsn(dsn: str) -> Backend:
    """The backend a DSN names, by scheme (postgresql://, sqlite:///PATH, ...)."""
    scheme = scheme_of(dsn)
    if scheme == "postgresql":
        from toki.backends.postgres import PostgresBackend

        return PostgresBackend(dsn)
    if scheme == "sqlite":
        from toki.backends.sqlite import SqliteBackend

        return SqliteBackend.from_dsn(dsn)
    if scheme == "mysql":
        try:
            from toki.backends.mysql import MysqlBackend
        except ImportError:
            raise ConfigError("no MySQL/MariaDB backend in this installation",
                              fix="install toki with its default dependencies (PyMySQL)") from None
        return MysqlBackend(dsn)
    if scheme == "duckdb":
        try:
            from toki.backends.duckdb import DuckdbBackend
        except ImportError:
            raise ConfigError("no DuckDB backend in this installation",
                              fix="install toki with its default dependencies (duckdb)") from None
        return DuckdbBackend.from_dsn(dsn)
    raise ConfigError(f"unknown database scheme {scheme!r}",
                      fix="use postgresql://..., mysql://..., mariadb://..., sqlite:///PATH or duckdb:///PATH")
