"""What a step is and what it touches: :class:`StepKind` and :class:`Footprint`, made where the
step is made.

Each interception module knows what its call touches (``file_calls`` the file, ``sqlite_calls``,
``pg_calls`` and ``mysql_calls`` the database and the tables the statement names, ``locks`` and
``sync`` the lock) and hands the controller a footprint with the call; the controller keeps it on
the :class:`~toki.harness.controller.StepRecord`, and the exhaustive search (:mod:`.explore`)
reads dependence from it, never from the display string ``detail``.

A footprint is the set of *resources* a step reads and the set it writes. A resource is a path
of names, coarse to fine: ``("file", "notes.json")`` is one file under the run's folder,
``("file",)`` every file (an ``fsync`` names a descriptor, not a file), ``("sql",)`` the
database a driver family talks to, ``()`` everything. Two resources overlap when one is a prefix
of the other. Two steps *conflict* (may fail to commute) iff some resource one writes overlaps
one the other reads or writes (:meth:`Footprint.conflicts`). A step whose footprint is not known
(a plug-in's own step made without one, a wait enabled by code between steps) touches
:data:`ANYTHING`, which conflicts with every step that touches something: the sound default.

SQLite statements touch the file their connection opened, split into its write lock and its data
(:func:`toki.harness.sqlite_calls.connection_footprint`): inside a transaction that holds the
write lock, reads and writes touch only the data, so another connection's ``BEGIN IMMEDIATE``
commutes with them; a commit gives the lock back (:attr:`Footprint.releases`). Tables do not
make two statements commute (SQLite locks the whole file; triggers and foreign keys touch tables
the text does not name): the tables a statement names travel as a hint (:attr:`Footprint.tables`)
that conflicts do not read, and that the search's races-first probes use.

PostgreSQL and MariaDB statements touch what :mod:`toki.harness.sql_dependence` establishes from
the statement's text, its transaction (its isolation level, asked of the session) and the
database's catalog: ``("pg", g)`` a group of tables that foreign keys, inheritance or a shared
sequence link, ``("pg", g, k)`` one key of a table's only unique index (PostgreSQL at READ
COMMITTED and REPEATABLE READ), and ``("pg",)`` (``("my",)``) the whole database for anything not
established: a SERIALIZABLE transaction, a table with a trigger, rule or row-level security, a
statement it does not take apart, DDL. The statement that takes a REPEATABLE READ snapshot also
reads the whole database; a commit writes what its transaction wrote.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

Resource = tuple[str, ...]


class StepKind(enum.StrEnum):
    """What kind of call a step is. A ``str``: it prints, compares and serialises as its value
    (``"sql-read"``), as step kinds did when they were strings; a plug-in's own step may still
    carry a kind of its own (a plain string, e.g. ``"cypher"``)."""

    START = "start"  # an agent runs up to its first storage call
    RESUME = "resume"  # an agent runs on after its statement waited in the database
    SLEEP = "sleep"  # time.sleep on an agent: virtual time, a point where the others run
    WAIT = "wait"  # a condition or event wait
    HANDOFF = "handoff"  # an agent hands work to a worker thread other agents share
    LOCK = "lock"  # acquiring an instrumented lock or semaphore
    FILE_OPEN = "file-open"  # open for reading
    FILE_OPEN_W = "file-open-w"  # open truncating ("w", O_TRUNC)
    FILE_OPEN_A = "file-open-a"  # open for writing without truncating ("a", "x", "+", O_WRONLY, ...)
    FILE_READ = "file-read"
    FILE_WRITE = "file-write"  # bytes reaching the OS: flush, close, truncate, os.write, ...
    FILE_RENAME = "file-rename"  # os.replace, os.rename, os.remove, os.unlink
    FILE_FSYNC = "file-fsync"
    FILE_LOCK = "file-lock"  # fcntl.flock, fcntl.lockf
    SQL_OPEN = "sql-open"  # sqlite3.connect creating its file
    SQL_READ = "sql-read"
    SQL_WRITE = "sql-write"
    SQL_TXN = "sql-txn"  # BEGIN, ROLLBACK, SAVEPOINT ...
    SQL_COMMIT = "sql-commit"
    SQL_SCRIPT = "sql-script"
    SQL_CLOSE = "sql-close"
    PG_READ = "pg-read"
    PG_WRITE = "pg-write"
    PG_TXN = "pg-txn"
    PG_COMMIT = "pg-commit"
    PG_ROLLBACK = "pg-rollback"
    MY_READ = "my-read"
    MY_WRITE = "my-write"
    MY_TXN = "my-txn"
    MY_BEGIN = "my-begin"
    MY_COMMIT = "my-commit"
    MY_ROLLBACK = "my-rollback"


def step_kind(kind: str) -> StepKind | str:
    """``kind`` as a :class:`StepKind` when it is one; a plug-in's own kind stays its string."""
    if isinstance(kind, StepKind):  # as the interception modules pass it: no lookup
        return kind
    try:
        return StepKind(kind)
    except ValueError:
        return kind


def _overlap(a: Resource, b: Resource) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


@dataclass(frozen=True)
class Footprint:
    """The resources a step reads and writes (see the module's notes)."""

    reads: frozenset[Resource] = frozenset()
    writes: frozenset[Resource] = frozenset()
    # The tables a SQL statement names, as its text shows (a hint for a finer dependence; not read
    # by conflicts, and not part of equality: two runs compare footprints by what conflicts read).
    tables: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    # Locks it gives back (a SQLite commit gives back the file's write lock). Giving back conflicts
    # with taking, as a write does, but the two are no race to reverse: the taking could not have
    # gone first (see :func:`toki.harness.explore.races`).
    releases: frozenset[Resource] = frozenset()

    @classmethod
    def reading(cls, *resources: Resource, tables=frozenset()) -> "Footprint":
        return cls(reads=frozenset(resources), tables=frozenset(tables))

    @classmethod
    def writing(cls, *resources: Resource, tables=frozenset()) -> "Footprint":
        return cls(writes=frozenset(resources), tables=frozenset(tables))

    def conflicts(self, other: "Footprint") -> bool:
        """May the two steps (of different agents) fail to commute? Some resource one writes (or
        gives back) overlaps one the other reads, writes or gives back."""
        mine, theirs = self.writes | self.releases, other.writes | other.releases
        return (any(_overlap(w, r) for w in mine for r in other.reads | theirs)
                or any(_overlap(w, r) for w in theirs for r in self.reads))

    def reversible(self, later: "Footprint") -> bool:
        """Do this step and a ``later`` one of another agent conflict other than by this one
        giving back a lock the later one then takes or tries (a race DPOR may reverse)?"""
        return Footprint(self.reads, self.writes).conflicts(later)

    @property
    def space(self) -> str | None:
        """The coarsest name it touches: ``"file"``, ``"sql"``, ``"pg"``, ``"my"``, ``"lock"``;
        ``"*"`` for anything, None for nothing (as error messages name a step's footprint)."""
        touched = self.reads | self.writes | self.releases
        if not touched:
            return None
        if () in touched:
            return "*"
        return min(r[0] for r in touched)

    def renamed(self, space: str, name: str) -> "Footprint":
        """The same access with every resource of ``space`` named ``name`` (an object known by a
        name that differs from run to run gets a stable one)."""
        def rename(rs: frozenset[Resource]) -> frozenset[Resource]:
            return frozenset((space, name) if r[:1] == (space,) else r for r in rs)
        return Footprint(rename(self.reads), rename(self.writes), self.tables, rename(self.releases))


    def as_read(self) -> "Footprint":
        """What a call that was refused (answered busy) touched: it read what it would have written."""
        return Footprint(reads=self.reads | self.writes | self.releases, tables=self.tables)

    def aliased(self, space: str, alias) -> "Footprint":
        """The same access with the second name of every resource of ``space`` (a database
        file's path, different in every run's folder) replaced by ``alias(name)``."""
        def rename(rs: frozenset[Resource]) -> frozenset[Resource]:
            return frozenset((r[0], alias(r[1]), *r[2:]) if r[:1] == (space,) and len(r) > 1 else r for r in rs)
        return Footprint(rename(self.reads), rename(self.writes), self.tables, rename(self.releases))


NOTHING = Footprint()  # starting an agent: runs code that touches no storage
ANYTHING = Footprint(writes=frozenset({()}))  # unknown: conflicts with every step that touches something


def file_footprint(kind: str, *labels: str | None) -> Footprint:
    """A file call on the files ``labels`` (paths under the run's folder): opening for reading
    and reading read them, everything else writes them; no label (an ``fsync`` of a descriptor)
    is any file."""
    names = frozenset(("file", lab) for lab in labels if lab) or frozenset({("file",)})
    if kind in (StepKind.FILE_OPEN, StepKind.FILE_READ):
        return Footprint(reads=names)
    return Footprint(writes=names)


def lock_footprint(name: str) -> Footprint:
    """Acquiring the lock ``name`` (an acquisition changes who holds it: a write)."""
    return Footprint.writing(("lock", name))
