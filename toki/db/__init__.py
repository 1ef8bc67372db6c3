"""Database layer: server resolution, schema, and the write path (DESIGN §2, layer 4)."""

from toki.db.server import Server, resolve, run_schema
from toki.db.store import Row, SchemaMode, Store, WriteOutcome, WriteTxn

__all__ = ["Row", "SchemaMode", "Server", "Store", "WriteOutcome", "WriteTxn", "resolve", "run_schema"]
