"""Hermitage's published table (github.com/ept/hermitage, README.md), for the two databases it
shares with toki, and where a measured table differs from it and why.

Hermitage's marks: ✓ prevented, — not prevented, R/O prevented for read-only transactions only.
Its PostgreSQL tests were run on 9.3.5 and its MySQL tests on MySQL 5.6.21 with InnoDB; toki's
MariaDB is InnoDB too, so the MySQL column is the one to compare it with.
"""

from __future__ import annotations

from toki.conformance.cases import CASES

SOURCE = {"repository": "https://github.com/ept/hermitage", "file": "README.md",
          "commit": "000346ffae2963d257553bc34a67cbbee23c3d0b"}


def _row(text: str) -> dict[str, str]:
    marks = text.split()
    assert len(marks) == len(CASES)
    return dict(zip(CASES, marks))


PUBLISHED = {
    "postgresql": {"title": "PostgreSQL 9.3.5", "rows": {
        "read-committed": _row("✓ ✓ ✓ ✓ ✓ — — — — —"),
        "repeatable-read": _row("✓ ✓ ✓ ✓ ✓ ✓ ✓ ✓ — —"),
        "serializable": _row("✓ ✓ ✓ ✓ ✓ ✓ ✓ ✓ ✓ ✓"),
    }},
    "mysql": {"title": "MySQL 5.6.21 (InnoDB)", "rows": {
        "read-uncommitted": _row("✓ — — — — — — — — —"),
        "read-committed": _row("✓ ✓ ✓ ✓ ✓ — — — — —"),
        "repeatable-read": _row("✓ ✓ ✓ ✓ ✓ R/O — R/O — —"),
        "serializable": _row("✓ ✓ ✓ ✓ ✓ ✓ ✓ ✓ ✓ ✓"),
    }},
}

_SNAPSHOT_WHY = ("innodb_snapshot_isolation is ON: InnoDB's REPEATABLE READ then fails a locking read or write "
                 "of a row changed since the transaction's snapshot (error 1020) instead of acting on the latest "
                 "version, so it is snapshot isolation. MariaDB added the variable in 10.6.18 and 10.11.8 (ON "
                 "by default from 11.6.2); MySQL 5.6, which Hermitage ran, has no such mode.")


def column_for(db: dict) -> str | None:
    return {"postgresql": "postgresql", "mariadb": "mysql", "mysql": "mysql"}.get(db["name"])


def _known_reason(db: dict, case: str, level: str, published: str, measured: str) -> str | None:
    s = db.get("settings", {})
    if (db["name"] == "mariadb" and s.get("innodb_snapshot_isolation") and level == "repeatable-read"
            and case in ("PMP", "P4", "G-single") and measured == "✓"):
        return _SNAPSHOT_WHY
    return None


def compare(db: dict, cells: list[dict]) -> dict | None:
    """Agreement with Hermitage's column for this database (None when Hermitage has none)."""
    key = column_for(db)
    if key is None:
        return None
    pub = PUBLISHED[key]
    agree, differ, unpublished = 0, [], sorted({c["level"] for c in cells if c["level"] not in pub["rows"]})
    for c in cells:
        want = pub["rows"].get(c["level"], {}).get(c["case"])
        if want is None:
            continue
        c["hermitage"] = want
        if want == c["label"]:
            agree += 1
            continue
        why = _known_reason(db, c["case"], c["level"], want, c["label"])
        c["differs_from_hermitage"] = why or "not explained"
        differ.append({"case": c["case"], "level": c["level"], "published": want, "measured": c["label"],
                       "why": why or "not explained: read the cell's forms"})
    return {"source": SOURCE, "column": pub["title"], "compared": agree + len(differ), "agree": agree,
            "differ": differ, "levels_not_in_hermitage": unpublished}
