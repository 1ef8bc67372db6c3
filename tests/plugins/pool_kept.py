"""The SQLAlchemy accounts app with its connection pool kept across runs: ``discard`` drops the
run's schema but does not dispose of the pool (the shape a new user writes first)."""

from __future__ import annotations

from pathlib import Path

from tests.plugins.sqlalchemy_accounts import AccountsApp, _drop_schema


class PoolKept(AccountsApp):
    def discard(self, location: Path) -> None:
        schema = self._schema(location)
        if self._engine is not None and _drop_schema(self._engine, schema):
            self._schemas.discard(schema)


def racy() -> PoolKept:
    app = PoolKept("racy")
    app.name = "pool-kept"
    return app


def for_update() -> PoolKept:
    app = PoolKept("for-update")
    app.name = "pool-kept-for-update"
    return app
