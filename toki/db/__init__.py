"""Database layer (layer 5): server resolution, schema (SQLAlchemy Core), the store and the write path.

May import the pure layer, judges, levels and backends. Used by sched, matrix, engines, faults,
verify, cli, properties and experiments.
"""

from toki.db.server import Server, resolve, run_schema
from toki.db.store import Row, SchemaMode, Store, WriteOutcome, WriteTxn

__all__ = ["Row", "SchemaMode", "Server", "Store", "WriteOutcome", "WriteTxn", "resolve", "run_schema"]
