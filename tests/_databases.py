"""Where the tests find the databases beyond PostgreSQL.

SQLite and DuckDB are embedded: every test gets a fresh file. MariaDB/MySQL is a server: the
tests marked ``mysql`` use ``$TOKI_MYSQL_DSN`` (default ``mysql://root@127.0.0.1:3306/test``) and
are skipped when nothing answers there, unless ``$TOKI_REQUIRE_MYSQL`` is set (CI), where a
missing server is a failure.
"""

from __future__ import annotations

import os

import pytest

MYSQL_DSN = os.environ.get("TOKI_MYSQL_DSN", "mysql://root@127.0.0.1:3306/test")
_answer: str | None | bool = False  # False: not asked yet; None: answers; str: why not


def mysql_unavailable() -> str | None:
    """Why MariaDB/MySQL cannot be used (None when it answers); asked once per session."""
    global _answer
    if _answer is False:
        from toki.backends.mysql import MysqlBackend
        from toki.errors import TokiError

        try:
            MysqlBackend(MYSQL_DSN).connect().close()
            _answer = None
        except TokiError as e:
            _answer = str(e)
    return _answer  # type: ignore[return-value]


@pytest.fixture
def mysql_dsn() -> str:
    why = mysql_unavailable()
    if why:
        if os.environ.get("TOKI_REQUIRE_MYSQL"):
            pytest.fail(f"TOKI_REQUIRE_MYSQL is set but MariaDB/MySQL does not answer: {why}")
        pytest.skip(f"no MariaDB/MySQL at {MYSQL_DSN} ({why}); set TOKI_MYSQL_DSN=mysql://user@host:port/db "
                    "to run these tests against one")
    return MYSQL_DSN


@pytest.fixture
def sqlite_dsn(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/toki.db"  # tmp_path is absolute: sqlite:////tmp/...


@pytest.fixture
def duckdb_dsn(tmp_path) -> str:
    return f"duckdb:///{tmp_path}/toki.duckdb"
