"""The tables, defined once with SQLAlchemy Core and created with psycopg (docs/design.md#the-papers-data-model, docs/design.md#decisions).

``agent_memory`` is exactly docs/design.md#the-papers-data-model: 12 columns, PK (fact_id, system_time_start), five CHECKs,
and a partial index that finds the open current rows of a (subject, predicate) slot.
``judge_log`` comes in two forms: ``append`` (read-then-append; admits N1 below SR) and
``unique`` (one vote per key and epoch; the second insert is a unique violation).
"""

from __future__ import annotations

from functools import cache

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

from toki.errors import ConfigError

SENTINEL_SQL = "'9999-12-31 00:00:00'"
JUDGE_LOG_FORMS = ("append", "unique")


def build_metadata(judge_log_form: str = "unique") -> MetaData:
    if judge_log_form not in JUDGE_LOG_FORMS:
        raise ConfigError(f"unknown judge log form {judge_log_form!r}", fix="use 'append' or 'unique'")
    md = MetaData()
    memory = Table(
        "agent_memory", md,
        Column("fact_id", Text, nullable=False),
        Column("subject", Text, nullable=False),
        Column("predicate", Text, nullable=False),
        Column("object", Text, nullable=False),
        Column("valid_from", DateTime, nullable=False),
        Column("valid_to", DateTime, nullable=False),
        Column("system_time_start", DateTime, nullable=False),
        Column("system_time_end", DateTime, nullable=False),
        Column("provenance_id", Text, nullable=False),
        Column("confidence", Float(precision=53), nullable=False),
        Column("resolution_strategy_id", Text, nullable=False),
        Column("row_kind", Text, nullable=False, server_default=text("'current'")),
        PrimaryKeyConstraint("fact_id", "system_time_start", name="agent_memory_pk"),
        CheckConstraint("confidence between 0 and 1", name="confidence_in_unit"),
        CheckConstraint("row_kind in ('current', 'audit')", name="row_kind_known"),
        CheckConstraint("valid_from < valid_to", name="valid_period_nonempty"),
        CheckConstraint("system_time_start < system_time_end", name="system_period_nonempty"),
        CheckConstraint("resolution_strategy_id in ('lww', 'evi', 'await', 'rule')", name="strategy_known"),
    )
    Index("agent_memory_open_slot", memory.c.subject, memory.c.predicate,
          postgresql_where=text(f"row_kind = 'current' and system_time_end = {SENTINEL_SQL}"))

    judge_cols = [
        Column("judge_key", Text, nullable=False),
        Column("epoch", Integer, nullable=False, server_default=text("0")),
        Column("read_set", Text, nullable=False),
        Column("theta", Text, nullable=False),
        Column("vote", Integer, nullable=False),
        Column("probability", Float(precision=53)),
        Column("reason", Text, nullable=False, server_default=text("'first'")),
        Column("session", Text),
        Column("logged_at", DateTime, nullable=False, server_default=text("clock_timestamp()")),
        CheckConstraint("reason in ('first', 'new-evidence', 'model-change', 'appeal')", name="reason_known"),
    ]
    if judge_log_form == "unique":
        judge_cols.append(UniqueConstraint("judge_key", "epoch", name="judge_log_key"))
    judge_log = Table("judge_log", md, Column("seq", Integer, primary_key=True, autoincrement=True), *judge_cols)
    Index("judge_log_by_key", judge_log.c.judge_key)

    Table(
        "callback_log", md,
        Column("request_hash", Text, primary_key=True),
        Column("read_set_hash", Text, nullable=False),
        Column("chosen_index", Integer),
        Column("status", Text, nullable=False, server_default=text("'pending'")),
        Column("delivered_at", DateTime),
        CheckConstraint("status in ('pending', 'delivered', 'expired')", name="callback_status_known"),
    )

    policy = Table(
        "policy", md,
        Column("policy_id", Text, primary_key=True),
        Column("set_key", Text, nullable=False),
        Column("chosen_index", Integer, nullable=False),
        Column("active", Boolean, nullable=False, server_default=text("true")),
        Column("source", Text),
        Column("created_at", DateTime, nullable=False, server_default=text("clock_timestamp()")),
    )
    Index("policy_by_set", policy.c.set_key)

    # The belief cache of N2 (docs/design.md#anomalies-and-guards): one row per (subject, predicate) partition.
    Table(
        "belief_cache", md,
        Column("subject", Text, nullable=False),
        Column("predicate", Text, nullable=False),
        Column("object", Text),
        Column("score", Float(precision=53)),
        PrimaryKeyConstraint("subject", "predicate", name="belief_cache_pk"),
    )
    return md


@cache
def ddl(judge_log_form: str = "unique") -> tuple[str, ...]:
    """CREATE statements for PostgreSQL, compiled once from the Core metadata."""
    md = build_metadata(judge_log_form)
    dialect = postgresql.dialect()
    out = []
    for table in md.sorted_tables:
        out.append(str(CreateTable(table).compile(dialect=dialect)).strip())
        for index in table.indexes:
            out.append(str(CreateIndex(index).compile(dialect=dialect)).strip())
    return tuple(out)


@cache
def ddl_for(dialect: str, judge_log_form: str = "unique") -> tuple[str, ...]:
    """The same tables on MariaDB/MySQL, SQLite or DuckDB (see toki.backends.portable)."""
    if dialect == "postgresql":
        return ddl(judge_log_form)
    from toki.backends.portable import compile_ddl

    return compile_ddl(build_metadata(judge_log_form), dialect)


TABLES = ("agent_memory", "judge_log", "callback_log", "policy", "belief_cache")


def create_all(conn, judge_log_form: str = "unique") -> None:
    """Create every table in the connection's current schema (its search path)."""
    with conn.transaction():
        for stmt in ddl(judge_log_form):
            conn.execute(stmt)


def truncate_all(conn) -> None:
    """Reset state between trials: far cheaper than dropping and re-creating."""
    conn.execute("truncate " + ", ".join(TABLES) + " restart identity")
