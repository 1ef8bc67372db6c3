"""A SQLAlchemy 2 ORM app on PostgreSQL (psycopg 3): each agent credits account 1 by 10 in a Session.

The app: an ``Account(id, balance)`` mapped class; an agent does::

    with Session(engine) as session:
        acc = session.get(Account, 1)
        acc.balance += 10
        session.commit()

- ``racy``: at READ COMMITTED; both sessions can read 100 and both write 110 (a lost update).
- ``for_update``: the same, reading the row with ``select(Account).where(Account.id == 1)
  .with_for_update()``: the second agent's SELECT waits on the first one's row lock.
- ``repeatable_read``: the racy code unchanged, on an engine at REPEATABLE READ: the second commit
  fails with a serialization failure (a clean abort; that agent's credit is not applied and it
  would retry).

Storage: each trial's ``location`` is a new folder; its accounts table lives in a schema of its
own named after the plug-in instance and ``location.name``, which ``setup`` fills afresh and
``discard`` drops. One SQLAlchemy ``Engine`` (a connection pool) per plug-in instance, created in
``use_dsn``; ``discard`` disposes of its pooled connections so that they do not pile up.
"""

from __future__ import annotations

import re
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy
import sqlalchemy.exc
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from toki.harness import Detector, Scenario

AGENTS = ("A", "B")
START, CREDIT = 100, 10


class Base(DeclarativeBase):
    pass


class Account(Base):
    __tablename__ = "accounts"

    id: Mapped[int] = mapped_column(primary_key=True)
    balance: Mapped[int]


def lost_update(state, errors) -> list[str]:
    want = START + CREDIT * (len(AGENTS) - len(errors))
    return [f"account {a['id']} has balance {a['balance']} after {len(AGENTS) - len(errors)} completed credits "
            f"of {CREDIT} (expected {want})" for a in state if a["balance"] < want]


@dataclass
class Handle:
    engine: Engine  # the plug-in's engine with this location's schema in place of the default one
    schema: str


def _drop_schema(engine: Engine, schema: str) -> bool:
    """Drop one trial's schema; False when a session that never ended still holds a lock on it."""
    try:
        with engine.begin() as c:
            c.execute(text("SET LOCAL lock_timeout = '2s'"))
            c.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        return True
    except sqlalchemy.exc.OperationalError:
        return False


def _drop_schemas(engine: Engine, schemas: set[str]) -> None:
    """Drop what discard could not (a run that stopped early): at exit or when the plug-in is collected."""
    try:
        for s in list(schemas):
            if _drop_schema(engine, s):
                schemas.discard(s)
    except Exception:  # noqa: BLE001 - best effort at interpreter exit
        pass
    engine.dispose()


class AccountsApp:
    executed = "real"
    version = sqlalchemy.__version__

    MODES = {"racy": "READ COMMITTED", "for-update": "READ COMMITTED", "repeatable-read": "REPEATABLE READ"}

    def __init__(self, mode: str = "racy"):
        if mode not in self.MODES:
            raise ValueError(f"mode {mode!r}: one of {', '.join(self.MODES)}")
        self.mode = mode
        self.name = "sqlalchemy-accounts" + ("" if mode == "racy" else "-" + mode)
        self.isolation = self.MODES[mode]
        self._engine: Engine | None = None
        self._prefix = f"sa_{uuid.uuid4().hex[:8]}"
        self._schemas: set[str] = set()
        how = {"racy": "session.get, then += and commit",
               "for-update": "select(...).with_for_update(), then += and commit",
               "repeatable-read": "session.get, then += and commit"}[mode]
        self.scenarios = {"credit": Scenario(
            "credit", f"two sessions credit account 1 by {CREDIT} at {self.isolation} ({how})", AGENTS,
            self.credit, setup=self.seed, detectors=(Detector("lost-update", lost_update),),
            anomalies=("lost-update",))}

    # -- where the app's database is ---------------------------------------------------------
    def use_dsn(self, dsn: str) -> None:
        if self._engine is not None:
            self._engine.dispose()
        url = make_url(dsn).set(drivername="postgresql+psycopg")
        self._engine = create_engine(url, isolation_level=self.isolation, pool_size=3)
        with self._engine.connect():  # the dialect's first-connect checks, before any agent runs
            pass
        weakref.finalize(self, _drop_schemas, self._engine, self._schemas)  # also runs at exit

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError(f"{self.name}: use_dsn() was not called, so there is no database to use")
        return self._engine

    def _schema(self, location: Path) -> str:
        return self._prefix + "_" + re.sub(r"[^a-z0-9_]", "_", Path(location).name.lower())

    # -- the plug-in protocol ---------------------------------------------------------------
    def open(self, location: Path) -> Handle:
        schema = self._schema(location)
        if schema not in self._schemas:
            with self.engine.begin() as c:
                c.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
            self._schemas.add(schema)
        return Handle(self.engine.execution_options(schema_translate_map={None: schema}), schema)

    def close(self, h: Handle) -> None:
        pass  # sessions are closed by the calls; the pool is the plug-in's

    def discard(self, location: Path) -> None:
        schema = self._schema(location)
        if self._engine is not None:
            if _drop_schema(self._engine, schema):  # else it is dropped at exit
                self._schemas.discard(schema)
            self._engine.dispose()  # the pooled connections: none pile up across trials

    def seed(self, h: Handle) -> None:
        Base.metadata.drop_all(h.engine)
        Base.metadata.create_all(h.engine)
        with Session(h.engine) as session:
            session.add(Account(id=1, balance=START))
            session.commit()

    def state(self, h: Handle):
        with Session(h.engine) as session:
            return [{"id": a.id, "balance": a.balance}
                    for a in session.scalars(select(Account).order_by(Account.id))]

    # -- what an agent does -----------------------------------------------------------------
    def credit(self, h: Handle, agent: str) -> None:
        with Session(h.engine) as session:
            if self.mode == "for-update":
                acc = session.execute(select(Account).where(Account.id == 1).with_for_update()).scalar_one()
            else:
                acc = session.get(Account, 1)
            acc.balance += CREDIT
            session.commit()


def racy() -> AccountsApp:
    return AccountsApp("racy")


def for_update() -> AccountsApp:
    return AccountsApp("for-update")


def repeatable_read() -> AccountsApp:
    return AccountsApp("repeatable-read")
