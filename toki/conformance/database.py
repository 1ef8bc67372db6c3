"""What a conformance table was measured on: the database, its version, and the settings that
change the answers, read from the connection the runs used (not from the DSN alone: a SQLite
file keeps the journal mode it was last given, a MariaDB server has its own default)."""

from __future__ import annotations

import contextlib


def _one(lane, sql: str):
    if lane.server.is_postgres:
        return lane.admin.execute(sql).fetchone()
    rows = lane.execute(lane.admin, sql)[0]
    return rows[0] if rows else None


def describe(server, lane) -> dict:
    d = server.describe()
    out = {"name": d["name"], "version": str(d["version"]), "levels": d.get("levels"), "how": d.get("how"),
           "where": d.get("where")}
    settings: dict = {}
    kind = "postgresql" if server.is_postgres else server.seam.name
    if kind == "postgresql":
        full, iso = _one(lane, "select version(), current_setting('default_transaction_isolation')")
        out["full_version"] = full
        settings["default_transaction_isolation"] = iso
        settings["read uncommitted"] = "runs as read committed (PostgreSQL has no dirty reads)"
    elif kind == "mysql":
        out["full_version"] = d.get("full_version")
        settings["innodb_snapshot_isolation"] = bool(_one(lane, "select @@session.innodb_snapshot_isolation")[0]) \
            if d["name"] == "mariadb" else None
        with contextlib.suppress(Exception):
            settings["server_innodb_snapshot_isolation"] = bool(_one(lane, "select @@global.innodb_snapshot_isolation")[0])
        for var in ("transaction_isolation", "tx_isolation"):  # MariaDB before 11.1 knows only tx_isolation
            try:
                settings["default_isolation"] = _one(lane, f"select @@global.{var}")[0]
                break
            except Exception:  # noqa: BLE001 - the older name is tried next
                continue
        settings["innodb_lock_wait_timeout"] = int(_one(lane, "select @@session.innodb_lock_wait_timeout")[0])
        settings["repeatable read"] = d.get("repeatable_read")
    elif kind == "sqlite":
        settings["journal_mode"] = _one(lane, "pragma journal_mode")[0]
        settings["begin"] = server.seam.begin_mode
        settings["busy_timeout"] = "0: a statement that would wait fails SQLITE_BUSY and toki re-issues it"
    elif kind == "duckdb":
        settings["concurrency"] = d.get("concurrency")
    out["settings"] = settings
    out["config"] = label(out)
    return out


def label(db: dict) -> str:
    """A short name for a column or a title: the database, its version and what sets it apart."""
    name = {"postgresql": "PostgreSQL", "mariadb": "MariaDB", "mysql": "MySQL", "sqlite": "SQLite",
            "duckdb": "DuckDB"}.get(db["name"], db["name"])
    s = db.get("settings", {})
    extra = ""
    if db["name"] == "sqlite":
        extra = " (WAL)" if str(s.get("journal_mode")).lower() == "wal" else " (rollback journal)"
        if s.get("begin") not in (None, "deferred"):
            extra = extra[:-1] + f", begin {s['begin']})"
    elif s.get("innodb_snapshot_isolation") is not None:
        extra = f" (innodb_snapshot_isolation={'ON' if s['innodb_snapshot_isolation'] else 'OFF'})"
    return f"{name} {db['version']}{extra}"
