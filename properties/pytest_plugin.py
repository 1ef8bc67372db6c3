"""pytest plugin: database fixtures for toki and for engines certified with it.

Options: ``--toki-dsn DSN`` (else $TOKI_DSN, else the embedded PostgreSQL).
Fixtures: ``toki_server`` (session-scoped :class:`toki.db.Server`) and ``toki_store`` (a fresh
:class:`toki.db.Store` in its own schema, dropped after the test).
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("toki")
    group.addoption("--toki-dsn", default=None,
                    help="PostgreSQL DSN for toki's database fixtures (default: $TOKI_DSN, else embedded)")


@pytest.fixture(scope="session")
def toki_server(request):
    from toki.db.server import resolve

    return resolve(request.config.getoption("--toki-dsn"))


@pytest.fixture
def toki_store(toki_server):
    from toki.db.store import Store

    store = Store.open(server=toki_server, label="test")
    try:
        yield store
    finally:
        store.close()
