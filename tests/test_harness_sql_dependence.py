"""Finer dependence for PostgreSQL and MariaDB statements (toki.harness.sql_dependence): the
classifier on statement texts, and the soundness of the search with it on small programs over
the real servers (DPOR, its races-first probes and sleep sets each reach exactly the outcomes of
the full search).

Each program's rule was checked the other way too: made too fine (the trigger check dropped,
SERIALIZABLE given table-level footprints, the REPEATABLE READ snapshot not read as the whole
database, foreign keys not grouping, a table with two unique indexes keyed), the program's test
loses an outcome of the full search."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from tests._databases import mysql_dsn  # noqa: F401 - a fixture
from tests.test_harness_explore import _everything
from toki.harness import Scenario
from toki.harness import sql_dependence as dep
from toki.harness.sql_dependence import Catalog, Parsed, Table, parse
from toki.harness.steps import Footprint

# -- the classifier -------------------------------------------------------------------------------


@pytest.mark.parametrize("text,kind,tables,writes", [
    ("select v from t where id = %s", "select", ("t",), False),
    ("SELECT a.v FROM s.t AS a WHERE a.id = 1 FOR UPDATE", "select", ("t",), True),
    ("select * from t for share", "select", ("t",), True),
    ("select * from a join b on a.id = b.id where a.x = %s", "select", ("a", "b"), False),
    ("select * from a, b", "select", ("a", "b"), False),
    ("select count(*) from t", "select", ("t",), False),
    ("select 1", "select", (), False),
    ("insert into t (id, v) values (%s, %s)", "insert", ("t",), True),
    ("insert into t values (1, 2)", "insert", ("t",), True),
    ("update t set v = v + 1 where id = $1", "update", ("t",), True),
    ("delete from t where id = %(k)s returning id", "delete", ("t",), True),
    ('select "V" from "My Table"', "select", ("My Table",), False),
])
def test_plain_statements_name_their_tables(text, kind, tables, writes):
    p = parse(text, "pg", "%" in text or "$" in text)
    assert (p.kind, tuple(t[2] for t in p.tables), p.writes) == (kind, tables, writes)
    assert not p.ddl


@pytest.mark.parametrize("text,ddl", [
    ("select * from t where id in (select id from u)", False),  # a subquery
    ("with x as (select 1) select * from x", False),
    ("select * from t union select * from u", False),
    ("select nextval('s')", False),  # a sequence moves
    ("select pg_advisory_lock(1)", False),
    ("insert into t (id) values (nextval('s'))", False),
    ("select my_function(1)", True),  # anything may happen in a user function
    ("select public.lower('x')", True),  # not the built-in one
    ("create table x (a int)", True),
    ("alter table t add column c int", True),
    ("do $$ begin perform 1; end $$", True),
    ("call p()", True),
    ("select 1; select 2", True),  # two statements
    ("select * from my_rows(1, 3)", True),
    ("select * from generate_series(1, 3)", False),
    ("select * from (select 1) s", False),
    ("update t set v = 1 from u where t.id = u.id", False),
    ("delete from t using u where t.id = u.id", False),
    ("select * from t where v ~~~ 1", True),  # an operator of nobody's
    ("select x::mytype from t", True),
    ("select e'a\\nb'", True),
    ("select * from t for update of t", False),
    ("insert into t (id) select 1", False),
    ("update t set v = 1 where current of c", False),
    ("copy t from stdin", False),
    ("lock table t", False),
    ("explain analyze delete from t", False),
])
def test_statements_that_are_not_plain_are_the_whole_database(text, ddl):
    p = parse(text, "pg", False)
    assert p.kind in ("other", "set")
    assert p.ddl == ddl


@pytest.mark.parametrize("text,kind,level", [
    ("begin", "begin", None),
    ("BEGIN ISOLATION LEVEL REPEATABLE READ", "begin", "repeatable read"),
    ("start transaction isolation level serializable, read write", "begin", "serializable"),
    ("begin transaction isolation level read committed", "begin", "read committed"),
    ("start transaction with consistent snapshot", "begin", None),
    ("commit", "commit", None),
    ("end", "commit", None),
    ("rollback", "rollback", None),
    ("abort", "rollback", None),
    ("rollback to savepoint s", "rollback-to", None),
    ("savepoint s", "savepoint", None),
    ("release savepoint s", "release", None),
    ("set transaction isolation level serializable", "set-txn", "serializable"),
    ("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "set-txn", "read committed"),
    ("set local lock_timeout = '2s'", "harmless", None),
    ("set search_path to x", "set", None),
    ("set session characteristics as transaction isolation level serializable", "set", None),
    ("set default_transaction_isolation = 'serializable'", "set", None),
    ("reset all", "set", None),
    ("commit and chain", "other", None),
    ("show transaction_isolation", "show", None),
])
def test_transaction_control_and_settings(text, kind, level):
    p = parse(text, "pg", False)
    assert (p.kind, p.level) == (kind, level)
    assert p.session == (kind == "set")


def test_key_terms_are_the_equalities_of_a_conjunction():
    p = parse("update t set v = %s where id = %s and other > 2 and x.y = 3", "pg", True)
    assert p.eq == (("id", ("param", "#1")),)
    assert parse("select * from t where id = 1 or id = 2", "pg", False).eq == ()
    assert parse("select * from t where not id = 1", "pg", False).eq == ()
    assert parse("select * from t where 7 = id", "pg", False).eq == (("id", ("lit", "7", "num")),)
    assert parse("select * from t a where a.id = %s::int", "pg", True).eq == (("id", ("param", "#0")),)
    assert parse("select * from t where id = %s + 1", "pg", True).eq == ()
    # two tables: no key (either may be the one the column is of)
    assert parse("select * from t, u where id = 1", "pg", False).eq == ()


def test_mariadb_quoting():
    p = parse("select `v` from `t` where id = \"x\"", "my", False)
    assert p.kind == "select" and p.tables == ((None, False, "t", True),)
    assert p.eq == (("id", ("lit", "x", "str")),)
    assert parse("select * from t where a = 'x\\'y'", "my", False).kind == "other"
    assert parse("/*!40101 set x = 1 */ select 1", "my", False).kind == "other"
    assert parse("insert ignore into t (a) values (1) on duplicate key update a = values(a)", "my", False).sets == ("a",)


class _Run(dep._Run):
    pass


def _footprint(text, params=None, *, catalog=None, path=("public",), level="read committed", block=False,
               snapshot=False, family="pg", run=None):
    """The footprint of one statement in a transaction at ``level`` (``block``: of several
    statements; ``snapshot``: its snapshot already taken), over ``catalog``, in ``run``."""
    run = run or _Run()
    st = dep._Conn(None, path=path, known=True, default=level)
    txn = dep._Txn(level, block, snapshot=snapshot)
    parsed = parse(text, family, params is not None)
    fp = dep._plain(family, run, st, txn, parsed, params, catalog, False, frozenset())
    dep._took(st, True)  # it ran
    return fp, txn


def _cat(**tables) -> Catalog:
    return Catalog({("public", name): t for name, t in tables.items()})


KV = Table("public.kv", key=("id",), types=("int",))
TK = Table("public.tk", key=("k",), types=("text",))
UU = Table("public.uu", key=("id",), types=("uuid",))
PAIR = Table("public.pair", key=("a", "b"), types=("int", "text"))
FREE = Table("public.free")
LINKED_A, LINKED_B = Table("public.a"), Table("public.a")
TRIGGERED = Table("public.trig", coarse=True)


def test_tables_of_different_groups_are_different_resources_and_a_group_is_one():
    cat = _cat(free=FREE, a=LINKED_A, b=LINKED_B, kv=KV)
    run = _Run()
    a, _ = _footprint("update free set v = 1", catalog=cat, run=run)
    b, _ = _footprint("update a set v = 1", catalog=cat, run=run)
    c, _ = _footprint("select * from b", catalog=cat, run=run)
    assert not a.conflicts(b) and b.conflicts(c)
    assert not a.conflicts(c)


def test_a_table_with_a_trigger_or_an_unknown_name_is_the_whole_database():
    cat = _cat(trig=TRIGGERED, free=FREE)
    assert _footprint("insert into trig (x) values (1)", catalog=cat)[0] is None
    assert _footprint("select * from nowhere", catalog=cat)[0] is None
    assert _footprint("select * from other.free", catalog=cat)[0] is None
    assert _footprint("select * from free", catalog=cat, path=("pg_temp_3", "public"))[0] is None
    assert _footprint("select * from free", catalog=None)[0] is None


def test_keys_commute_when_different_and_nest_under_their_table():
    cat = _cat(kv=KV)
    run = _Run()
    one, _ = _footprint("update kv set v = v + 1 where id = %s", (1,), catalog=cat, run=run)
    two, _ = _footprint("update kv set v = v + 1 where id = 2", catalog=cat, run=run)
    again, _ = _footprint("delete from kv where id = %(k)s", {"k": 1}, catalog=cat, run=run)
    table, _ = _footprint("select * from kv where v = 3", catalog=cat, run=run)
    ins, _ = _footprint("insert into kv (id, v) values (%s, %s), (3, 4)", (2, 9), catalog=cat, run=run)
    assert not one.conflicts(two) and one.conflicts(again) and table.conflicts(one) and table.conflicts(two)
    assert ins.conflicts(two) and not ins.conflicts(one)


def test_what_takes_the_key_rule_away():
    cat = _cat(kv=KV, tk=TK, uu=UU, pair=PAIR)
    run = _Run()

    def touched(text, params=None):
        fp, _ = _footprint(text, params, catalog=cat, run=run)
        return {r[:2] if len(r) > 2 else r for r in fp.reads | fp.writes}, fp
    for text, params in [
        ("update kv set id = 3 where id = 1", None),  # moves the key
        ("insert into kv (id, v) values (1, 2) on conflict (id) do update set id = 5", None),
        ("insert into kv (v) values (2)", None),  # the key from a default
        ("select * from kv where id = '1'", None),  # a string for an integer column
        ("select * from kv where id = %s", ("1",)),
        ("select * from kv where id = %s", (True,)),
        ("select * from kv where id = 1.0", None),
        ("select * from kv where id = %s or id = 2", (1,)),
        ("select * from tk where k = 1", None),
        ("select * from pair where a = 1", None),  # half a key
    ]:
        got, fp = touched(text, params)
        assert all(len(r) == 2 for r in fp.reads | fp.writes), text
    got, fp = touched("select * from uu where id = %s", (uuid.UUID(int=5),))
    got2, fp2 = touched("select * from uu where id = %s", (str(uuid.UUID(int=5)).upper(),))
    assert fp.reads == fp2.reads and all(len(r) == 3 for r in fp.reads)
    p1, _ = _footprint("select * from pair where b = 'x' and a = 1", catalog=cat)
    assert all(len(r) == 3 for r in p1.reads)


def test_a_key_known_by_its_order_of_first_appearance():
    """A key is named by when the run first met it: the same grants meet the same keys in the same
    order, even when their values (uuid4) differ from run to run."""
    run = dep._Run()
    cat = _cat(uu=UU)
    st = dep._Conn(None, path=("public",), known=True, default="read committed")

    def fp(value):
        return dep._plain("pg", run, st, dep._Txn("read committed", False), parse(
            "delete from uu where id = %s", "pg", True), (value,), cat, False, frozenset())
    a, b = uuid.uuid4(), uuid.uuid4()
    assert fp(a).writes == {("pg", "t0", "k0")} and fp(b).writes == {("pg", "t0", "k1")}
    assert fp(a).writes == {("pg", "t0", "k0")}


def test_repeatable_read_snapshot_and_serializable():
    cat = _cat(free=FREE, kv=KV)
    first, txn = _footprint("select * from free", catalog=cat, level="repeatable read", block=True)
    assert ("pg",) in first.reads and txn.snapshot
    run, st, txn = dep._Run(), dep._Conn(None, path=("public",), known=True), dep._Txn("repeatable read", True)
    dep._plain("pg", run, st, txn, parse("select * from free", "pg", False), None, cat, False, frozenset())
    dep._took(st, False)  # failed (a parse error takes no snapshot): the next statement still reads everything
    assert not txn.snapshot
    later, _ = _footprint("select * from free", catalog=cat, level="repeatable read", block=True, snapshot=True)
    assert ("pg",) not in later.reads
    alone, _ = _footprint("select * from free", catalog=cat, level="repeatable read")
    assert ("pg",) not in alone.reads  # an autocommitted statement is its own snapshot
    rc, _ = _footprint("select * from free", catalog=cat, block=True)
    assert ("pg",) not in rc.reads
    for level in ("serializable", None):
        fp, txn = _footprint("select * from free", catalog=cat, level=level, block=True)
        assert fp is None and txn.coarse
        assert dep._ending(txn, "pg") is None


def test_an_end_writes_what_the_transaction_wrote():
    cat = _cat(free=FREE, kv=KV)
    run = dep._Run()
    st = dep._Conn(None, path=("public",), known=True, default="read committed")
    txn = dep._Txn("read committed", True)
    for text in ("update free set v = 1", "select * from kv where id = 1 for update", "select * from kv"):
        dep._plain("pg", run, st, txn, parse(text, "pg", False), None, cat, False, frozenset())
    assert dep._ending(txn, "pg") == Footprint(writes=frozenset({("pg", "t0"), ("pg", "t1", "k0")}))
    assert dep._ending(None, "pg") == Footprint()
    bad = dep._Txn("read committed", True)
    dep._plain("pg", run, st, bad, parse("select * from nowhere", "pg", False), None, cat, False, frozenset())
    assert dep._ending(bad, "pg") is None


def test_a_connection_two_agents_use_is_the_whole_database():
    """A footprint is made from the session before its step is granted: a second agent on the same
    connection could change that session first. Such a connection is the whole database from then
    on, and a finer footprint of the other agent's still waiting makes the run unverifiable."""
    from types import SimpleNamespace

    from toki.harness.controller import Unverifiable

    class Ctl:
        stopped = None

        def stop_with(self, err):
            self.stopped = err
    run, conn, ctl = dep._Run(), object(), Ctl()
    dep._local.maker = SimpleNamespace(name="A")
    st = dep._claim(ctl, run, conn)
    assert st is not None and dep._issued(st, Footprint()) is not None and st.inflight == "A"
    st.inflight = None  # A's statement ran
    dep._local.maker = SimpleNamespace(name="B")
    assert dep._claim(ctl, run, conn) is None  # shared now: the whole database
    dep._local.maker = SimpleNamespace(name="A")
    assert dep._claim(ctl, run, conn) is None
    run2 = dep._Run()
    dep._issued(dep._claim(ctl, run2, conn), Footprint())  # A's waits
    dep._local.maker = SimpleNamespace(name="B")
    with pytest.raises(Unverifiable, match="one database connection at once"):
        dep._claim(ctl, run2, conn)
    assert ctl.stopped is not None
    dep._local.maker = None


def test_mariadb_read_view_and_no_keys():
    cat = Catalog({("db", "kv"): Table("db.kv"), ("db", "free"): Table("db.free")})
    run = dep._Run()
    st = dep._Conn(None, path=("db",), known=True, default="repeatable read")
    txn = dep._Txn("repeatable read", True)

    def fp(text, ok=True):
        got = dep._plain("my", run, st, txn, parse(text, "my", False), None, cat, False, frozenset())
        dep._took(st, ok)
        return got
    locking = fp("select * from kv where id = 5 for update")
    assert ("my",) in fp("select * from free", ok=False).reads  # failed: made no read view
    assert ("my",) in locking.reads and locking.writes == {("my", "t0")}  # no key: InnoDB locks the gap
    assert ("my",) in fp("select * from free").reads  # the first consistent read makes the read view
    assert ("my",) not in fp("select * from kv").reads


def test_the_catalog_groups_and_the_key_rule(pg_conn):
    """The catalog of a real database, read as dependence reads it."""
    s = f"tkdep_cat_{uuid.uuid4().hex[:8]}"
    ddl = f"""
    create schema {s};
    create table {s}.parent (id int primary key);
    create table {s}.child (id int primary key, p int references {s}.parent(id) on delete cascade);
    create table {s}.kv (id int primary key, v int);
    create table {s}.two (id int primary key, email text unique);
    create table {s}.ser (id serial primary key, v int);
    create table {s}.items (x int);
    create table {s}.tally (n int);
    create function {s}.count_it() returns trigger language plpgsql as $$ begin update {s}.tally set n = n + 1;
      return new; end $$;
    create trigger counted after insert on {s}.items for each row execute function {s}.count_it();
    create view {s}.v as select * from {s}.kv;
    create table {s}.logged (id int primary key, at text default {s}.stamp_it());
    create table {s}.parted (id int, v int) partition by range (id);
    create table {s}.part1 partition of {s}.parted for values from (0) to (10);
    create sequence {s}.shared;
    create table {s}.s1 (id int default nextval('{s}.shared'));
    create table {s}.s2 (id int default nextval('{s}.shared'));
    create table {s}.ruled (id int);
    create rule nope as on insert to {s}.ruled do instead nothing;
    create table {s}.secret (id int primary key);
    alter table {s}.secret enable row level security;
    create table {s}.ts (t timestamp primary key);
    """.replace("create table " + s + ".logged", f"create function {s}.stamp_it() returns text language sql as "
                f"$$ select 'x' $$; create table {s}.logged")
    try:
        pg_conn.execute(ddl)
        cat = dep.read_pg_catalog(pg_conn)
        t = {name: cat.tables[(s, name)] for schema, name in cat.tables if schema == s}
        assert t["parent"].group == t["child"].group and t["parent"].key is None
        assert t["kv"].key == ("id",) and t["kv"].types == ("int",) and not t["kv"].coarse
        assert t["two"].key is None and not t["two"].coarse
        assert t["ser"].key is None
        assert t["items"].coarse and not t["tally"].coarse
        assert t["v"].coarse and t["logged"].coarse and t["ruled"].coarse and t["secret"].coarse
        assert t["parted"].group == t["part1"].group
        assert t["s1"].group == t["s2"].group
        assert t["ts"].key is None
        assert len({t[n].group for n in ("parent", "kv", "two", "items", "tally")}) == 5
    finally:
        pg_conn.execute(f"drop schema {s} cascade")


@pytest.fixture
def pg_conn():
    import psycopg

    from toki.db.server import resolve
    import os

    dsn = os.environ.get("TOKI_DSN") or resolve(None).dsn
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


# -- soundness on real servers: small programs -----------------------------------------------------

_SAFE = re.compile(r"[^a-z0-9_]")


class _Program:
    """A small SQL program on PostgreSQL (or MariaDB with ``family="my"``): ``ddl`` makes a schema
    (database) of its own once, its INSERTs seed it afresh for every trial, and each agent is a
    list of statements run on a connection of its own, autocommitted unless they begin a
    transaction. An agent returns what its reads returned, and the SQLSTATE (MariaDB: error
    number) of a statement that failed, after which it rolls back and stops: both are part of
    the outcome."""

    version, executed = "1.0", "model"
    storage_in_location = False

    def __init__(self, name: str, ddl: str, agents: dict[str, list], family: str = "pg"):
        self.name, self.programs, self.family = f"toy-sql-{name}", agents, family
        parts = [p for p in ddl.split(";\n") if p.strip()]
        every = ("insert", "drop")  # run for every trial (the rest once)
        self.create = [p for p in parts if not p.lstrip().lower().startswith(every)]
        self.seed = [p for p in parts if p.lstrip().lower().startswith(every)]
        self.schema = f"tkdep_{_SAFE.sub('_', name)}_{uuid.uuid4().hex[:6]}"
        self.dsn: str | None = None
        self.made = False
        self.scenarios = {name: Scenario(name, f"SQL program {name}", tuple(agents), self.call, setup=self.setup,
                                         observe=True)}

    def use_dsn(self, dsn: str) -> None:
        self.dsn = dsn

    def _connect(self, schema: str | None):
        if self.family == "pg":
            import psycopg

            kw = {"options": f"-c search_path={schema}"} if schema else {}
            return psycopg.connect(self.dsn, autocommit=True, **kw)
        import pymysql

        from toki.backends.mysql import parse_dsn

        p = parse_dsn(self.dsn)
        return pymysql.connect(host=p["host"], port=p["port"], user=p["user"], password=p["password"],
                               database=schema or p["database"], autocommit=True)

    def open(self, location):
        if not self.made:
            admin = self._connect(None)
            try:
                self._run(admin, f"create {'schema' if self.family == 'pg' else 'database'} {self.schema}")
            finally:
                admin.close()
            conn = self._connect(self.schema)
            try:
                for sql in self.create:
                    self._run(conn, sql)
            finally:
                conn.close()
            self.made = True
        return self._connect(self.schema)

    def drop(self) -> None:
        if self.made:
            admin = self._connect(None)
            try:
                self._run(admin, f"drop {'schema' if self.family == 'pg' else 'database'} {self.schema}"
                          + (" cascade" if self.family == "pg" else ""))
            finally:
                admin.close()
            self.made = False

    def close(self, conn) -> None:
        conn.close()

    def _run(self, conn, sql, params=None):
        if self.family == "pg":
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else None
        cur = conn.cursor()
        cur.execute(sql, params)
        return list(cur.fetchall()) if cur.description else None

    def _tables(self, conn) -> list[str]:
        if self.family == "pg":
            return [r[0] for r in conn.execute(
                "select table_name from information_schema.tables where table_schema = %s and "
                "table_type = 'BASE TABLE' order by 1", (self.schema,))]
        return sorted(r[0] for r in self._run(conn, "show full tables where table_type = 'BASE TABLE'"))

    def setup(self, conn) -> None:
        names = self._tables(conn)
        if self.family == "pg":
            self._run(conn, "truncate " + ", ".join(names))
        else:
            self._run(conn, "set foreign_key_checks = 0")
            for n in names:
                self._run(conn, f"delete from {n}")
            self._run(conn, "set foreign_key_checks = 1")
        for sql in self.seed:
            self._run(conn, sql)

    def state(self, conn):
        return {n: sorted([list(map(str, r)) for r in self._run(conn, f"select * from {n}")])
                for n in self._tables(conn)}

    def call(self, conn, agent):
        out = []
        for step in self.programs[agent]:
            sql, params = step if isinstance(step, tuple) else (step, None)
            try:
                got = self._run(conn, sql, params)
            except Exception as e:  # noqa: BLE001 - the error is the outcome
                code = getattr(getattr(e, "diag", None), "sqlstate", None) or (e.args[0] if e.args else repr(e))
                out.append(f"error {code}")
                try:
                    if self.family == "pg":
                        conn.execute("rollback")
                    else:
                        conn.rollback()
                except Exception:  # noqa: BLE001
                    pass
                break
            if got is not None:
                out.append([list(map(str, r)) for r in got])
        return out


_MADE: list[_Program] = []


@pytest.fixture(autouse=True, scope="module")
def _drop_programs():
    yield
    while _MADE:
        _MADE.pop().drop()


def _make(name, ddl, agents, family="pg"):
    def make():
        from toki.harness.engine import connect_database

        eng = _Program(name, ddl, agents, family)
        _MADE.append(eng)
        if family == "pg":
            connect_database(eng, None)
        else:
            from tests._databases import MYSQL_DSN

            eng.use_dsn(MYSQL_DSN)
        return eng
    return make


def _coarse(make):
    """The same program with every statement the whole database (as before this module)."""
    def run(*a, **kw):
        dep.FINER = False
        try:
            return _everything(make, *a, **kw)
        finally:
            dep.FINER = True
    return run


def _sound(make, scenario, bound=2):
    full = _everything(make, scenario, bound, reduce=False)
    dpor = _everything(make, scenario, bound)
    probed = _everything(make, scenario, bound, probe=True)
    sleep = _everything(make, scenario, bound, dpor=False)
    assert full.complete and dpor.complete and probed.complete and sleep.complete
    assert dpor.outcomes == full.outcomes == probed.outcomes == sleep.outcomes, (
        full.outcomes - dpor.outcomes, full.outcomes - probed.outcomes, full.outcomes - sleep.outcomes)
    return full, dpor


TWO_TABLES = "create table a (id int primary key, v int);\ncreate table b (id int primary key, v int);\n" \
             "insert into a values (1, 0);\ninsert into b values (1, 0)"

PROGRAMS = {
    # A writes a, B writes b, R reads a: B's statements commute with everything else. R reads once:
    # a read between A's two updates (1) is the outcome only an interleaving gives.
    "unlinked": (TWO_TABLES, {
        "A": ["update a set v = v + 1 where v >= 0", "update a set v = v + 10 where v >= 0"],
        "B": ["update b set v = v + 1 where v >= 0", "update b set v = v + 10 where v >= 0"],
        "R": ["select v from a"]}),
    # A trigger on items writes tally, which R reads: A's inserts name no table R names.
    "trigger": ("create table items (x int);\ncreate table tally (n int);\ninsert into tally values (0);\n"
                "create function count_it() returns trigger language plpgsql as "
                "'begin update tally set n = n + 1; return new; end';\n"
                "create trigger counted after insert on items for each row execute function count_it()", {
                    "A": ["insert into items values (1)", "insert into items values (2)"],
                    "R": ["select n from tally", "select n from tally"]}),
    # A child row's insert checks its parent, which B deletes.
    "foreign-key": ("create table parent (id int primary key);\n"
                    "create table child (id int primary key, p int references parent(id));\n"
                    "insert into parent values (1)", {
                        "A": ["insert into child values (1, 1)"],
                        "B": ["delete from parent where id = 1"]}),
    # Deleting the parent deletes its children, which R counts.
    "cascade": ("create table parent (id int primary key);\n"
                "create table child (id int primary key, p int references parent(id) on delete cascade);\n"
                "insert into parent values (1);\ninsert into child values (1, 1), (2, 1)", {
                    "A": ["delete from parent where id = 1"],
                    "R": ["select count(*) from child", "select count(*) from child"]}),
    # Two keys of one table, each updated twice by its agent; R reads A's key once (0, 1 or 10).
    "different-keys": ("create table kv (id int primary key, v int);\ninsert into kv values (1, 0), (2, 0)", {
        "A": [("update kv set v = v + 1 where id = %s", (1,)), ("update kv set v = v * 10 where id = %s", (1,))],
        "B": [("update kv set v = v + 2 where id = %s", (2,)), ("update kv set v = v * 10 where id = %s", (2,))],
        "R": [("select v from kv where id = %s", (1,))]}),
    "same-key": ("create table kv (id int primary key, v int);\ninsert into kv values (1, 0), (2, 0)", {
        "A": [("update kv set v = v + 1 where id = %s", (1,)), ("update kv set v = v * 10 where id = %s", (1,))],
        "B": [("update kv set v = v + 2 where id = %s", (1,)), ("update kv set v = v * 10 where id = %s", (1,))]}),
    # Two inserts with different primary keys and the same unique email: one of them fails.
    "unique": ("create table u (id int primary key, email text unique)", {
        "A": ["insert into u (id, email) values (1, 'x')"],
        "B": ["insert into u (id, email) values (2, 'x')"]}),
    # R reads b, then at REPEATABLE READ a and b again: what its transaction sees of b is fixed by
    # its first read, of a. W's update between R's first read of b and that one is the only way
    # to see b old, then new.
    "repeatable-read": (TWO_TABLES, {
        "R": ["select v from b", "begin isolation level repeatable read", "select v from a", "select v from b",
              "commit"],
        "W": ["update b set v = v + 1 where id = 1"]}),
    # Write skew at SERIALIZABLE over keys no statement of the other touches: SSI's predicate
    # locks (on index pages) abort one when the two overlap, and the commit order decides which.
    "serializable": ("create table x (id int primary key, v int);\ncreate table y (id int primary key, v int);\n"
                     "insert into x values (1, 0);\ninsert into y values (1, 0)", {
                         "A": ["begin isolation level serializable", "select v from x where id = 1",
                               "insert into y (id, v) values (2, 0)", "commit"],
                         "B": ["begin isolation level serializable", "select v from y where id = 1",
                               "insert into x (id, v) values (2, 0)", "commit"]}),
}


def _case(name, slow=False):
    return pytest.param(name, id=name, marks=[pytest.mark.db] + ([pytest.mark.slow] if slow else []))


@pytest.mark.parametrize("name", [_case("foreign-key"), _case("trigger", slow=True), _case("cascade", slow=True),
                                  _case("unique", slow=True), _case("repeatable-read", slow=True),
                                  _case("serializable", slow=True), _case("different-keys", slow=True),
                                  _case("same-key", slow=True), _case("unlinked", slow=True)])
def test_the_reduced_search_reaches_every_outcome_of_the_full_one_on_postgresql(name):
    ddl, agents = PROGRAMS[name]
    _sound(_make(name, ddl, agents), name)


@pytest.mark.db
def test_statements_on_unlinked_tables_commute():
    """A and B write different tables: fewer interleavings than with every statement the whole
    database, the same outcomes (the three-agent program, with R reading a, is in the slow tier)."""
    name = "unlinked"
    ddl, agents = PROGRAMS[name]
    agents = {"A": agents["A"], "B": agents["B"][:1]}
    make = _make(name, ddl, agents)
    fine = _everything(make, name, 2)
    coarse = _coarse(make)(name, 2)
    assert fine.complete and coarse.complete and fine.outcomes == coarse.outcomes
    assert fine.explored < coarse.explored, (fine.explored, coarse.explored)


@pytest.mark.db
def test_different_keys_commute_and_the_same_key_does_not():
    ddl, agents = PROGRAMS["different-keys"]
    agents = {"A": agents["A"], "B": agents["B"]}
    diff = _everything(_make("different-keys", ddl, agents), "different-keys", 2)
    ddl, agents = PROGRAMS["same-key"]
    same = _everything(_make("same-key", ddl, agents), "same-key", 2)
    assert diff.complete and same.complete and diff.explored < same.explored, (diff.explored, same.explored)


@pytest.mark.db
def test_ddl_that_changes_a_waiting_statements_footprint_makes_the_run_unverifiable():
    """A creates a trigger on items while B's insert into items waits with a footprint made
    before it (no trigger: items alone): the catalog read again after A's DDL differs for a name
    B's footprint used, so the run is unverifiable rather than judged on a footprint that no
    longer holds."""
    from toki.harness.controller import Unverifiable

    name = "ddl"
    ddl = ("create table items (x int);\ncreate table tally (n int);\n"
           "create function count_it() returns trigger language plpgsql as "
           "'begin update tally set n = n + 1; return new; end';\n"
           "drop trigger if exists counted on items;\ninsert into tally values (0)")
    agents = {"B": ["insert into items values (1)"],
              "A": ["create trigger counted after insert on items for each row execute function count_it()"]}
    with pytest.raises(Unverifiable, match="changed the database's catalog"):
        _everything(_make(name, ddl, agents), name, 1, reduce=False)


# -- MariaDB ---------------------------------------------------------------------------------------

MY_PROGRAMS = {
    # A's locking read of a range at REPEATABLE READ locks the gap B inserts into: B waits for A's
    # commit, and A's count (its first consistent read) then cannot see B's row.
    "gap-lock": ("create table g (id int primary key, v int) engine=innodb;\ninsert into g values (1, 0), (10, 0)", {
        "A": ["begin", "select v from g where id between 2 and 8 for update", "select count(*) from g", "commit"],
        "B": ["insert into g values (5, 0)"]}),
    "unlinked": ("create table a (id int primary key, v int) engine=innodb;\n"
                 "create table b (id int primary key, v int) engine=innodb;\n"
                 "insert into a values (1, 0);\ninsert into b values (1, 0)", {
                     "A": ["update a set v = v + 1 where id = 1", "update a set v = v + 10 where id = 1"],
                     "B": ["update b set v = v + 1 where id = 1"],
                     "R": ["select v from a"]}),
}


@pytest.mark.mysql
@pytest.mark.slow
@pytest.mark.parametrize("name", ["gap-lock", "unlinked"])
def test_the_reduced_search_reaches_every_outcome_of_the_full_one_on_mariadb(name, mysql_dsn):
    ddl, agents = MY_PROGRAMS[name]
    # unlinked: each of its outcomes (R reads 0, 1 or 11) takes at most one preemption, and its full
    # search at two is 92 runs of MariaDB (16 s) against 30
    _sound(_make(name, ddl, agents, "my"), name, bound=1 if name == "unlinked" else 2)
