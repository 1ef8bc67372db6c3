"""The SQL toki writes, spoken on every database: one connection facade and the toki tables' DDL.

toki's own SQL (the matrix's transaction programs, its detectors, the toki tables) is written
once, in PostgreSQL's spelling with psycopg's ``%s`` parameters, and kept to a small subset that
the other databases share once a few spellings are rewritten here:

============================================  ================================================
PostgreSQL                                    rewritten as
============================================  ================================================
``%s`` parameters                             ``?`` (SQLite, DuckDB); PyMySQL takes ``%s``
``clock_timestamp()[::timestamp]``            ``now(6)`` (MySQL), ``strftime(...)`` (SQLite),
                                              ``now()::timestamp`` (DuckDB)
``insert ... on conflict do nothing``         ``insert ignore ...`` (MySQL)
``on conflict (k) do update set c = excluded.c``  ``on duplicate key update c = values(c)`` (MySQL)
``text`` key columns                          ``varchar(255)`` (MySQL cannot index TEXT)
============================================  ================================================

Hand-written schedules are not rewritten: their SQL is sent as written (see the README's notes
on dialects), so what a file says is what the database runs.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

_CLOCK = re.compile(r"clock_timestamp\(\)(::timestamp)?", re.I)
_DO_NOTHING = re.compile(r"^\s*insert\s+into\s+(.*?)\s+on\s+conflict\s+do\s+nothing\s*$", re.I | re.S)
_DO_UPDATE = re.compile(r"\s+on\s+conflict\s*\([^)]*\)\s*do\s+update\s+set\s+(.*)$", re.I | re.S)
_EXCLUDED = re.compile(r"excluded\.(\w+)", re.I)
_NOW = {"mysql": "now(6)", "sqlite": "strftime('%Y-%m-%d %H:%M:%f', 'now')", "duckdb": "now()::timestamp"}


@cache
def translate(sql: str, dialect: str, params: bool) -> str:
    if dialect == "postgresql":
        return sql
    out = _CLOCK.sub(_NOW[dialect].replace("%", "%%") if dialect == "mysql" and params else _NOW[dialect], sql)
    if dialect == "mysql":
        m = _DO_NOTHING.match(out)
        if m:
            out = "insert ignore into " + m.group(1)
        out = _DO_UPDATE.sub(lambda m: " on duplicate key update " + _EXCLUDED.sub(r"values(\1)", m.group(1)), out)
    elif params:
        out = out.replace("%s", "?")
    return out


class _Result:
    """What psycopg's ``execute`` returns, as far as toki uses it: rows fetched at once."""

    def __init__(self, rows: list, description):
        self._rows, self.description, self._i = rows, description, 0

    def fetchone(self):
        if self._i >= len(self._rows):
            return None
        self._i += 1
        return self._rows[self._i - 1]

    def fetchall(self):
        rest, self._i = self._rows[self._i:], len(self._rows)
        return rest


class PortableConnection:
    """A connection to MariaDB/MySQL, SQLite or DuckDB with psycopg's ``execute(sql, params)``."""

    def __init__(self, raw: Any, dialect: str):
        self.raw, self.dialect = raw, dialect

    def execute(self, sql: str, params: Any = None) -> _Result:
        text = translate(sql, self.dialect, params is not None)
        if self.dialect == "mysql":
            with self.raw.cursor() as cur:
                cur.execute(text, params)
                return _Result(list(cur.fetchall()) if cur.description else [], cur.description)
        cur = self.raw.execute(text, params) if params is not None else self.raw.execute(text)
        if cur.description is None:
            return _Result([], None)
        return _Result(cur.fetchall(), cur.description)

    def executescript(self, sql: str) -> None:
        """Several statements separated by ``;`` (no literal semicolons inside them)."""
        for stmt in sql.split(";"):
            if stmt.strip():
                self.execute(stmt)

    def close(self) -> None:
        self.raw.close()


def compile_ddl(metadata, dialect: str) -> tuple[str, ...]:
    """CREATE statements for ``metadata`` (toki.db.schema's tables) on mysql, sqlite or duckdb."""
    from sqlalchemy.dialects import mysql, postgresql, sqlite
    from sqlalchemy.schema import CreateIndex, CreateTable

    compiler = {"mysql": mysql.dialect(), "sqlite": sqlite.dialect(), "duckdb": postgresql.dialect()}[dialect]
    out: list[str] = []
    for table in metadata.sorted_tables:
        stmt = str(CreateTable(table).compile(dialect=compiler)).strip()
        stmt = _CLOCK.sub({"mysql": "CURRENT_TIMESTAMP(6)", "sqlite": "CURRENT_TIMESTAMP",
                           "duckdb": "current_timestamp"}[dialect], stmt)
        if dialect == "mysql":
            stmt = re.sub(r"\bTEXT\b", "VARCHAR(255)", stmt)
            stmt = re.sub(r"\bDATETIME\b", "DATETIME(6)", stmt)
            stmt += " ENGINE=InnoDB"
        if dialect == "duckdb" and " SERIAL " in stmt:
            seq = f"{table.name}_seq"
            out.append(f"create sequence {seq}")
            stmt = stmt.replace(" SERIAL NOT NULL", f" INTEGER DEFAULT nextval('{seq}') NOT NULL")
        out.append(stmt)
        if dialect == "duckdb":
            continue  # DuckDB has no partial indexes, and these tables stay tiny
        for index in table.indexes:
            out.append(str(CreateIndex(index).compile(dialect=compiler)).strip())
    return tuple(out)
