"""What a PostgreSQL or MariaDB statement touches, finer than the whole database, and still sound.

A statement's footprint (:mod:`.steps`) is a set of resources under its driver family's name:
``("pg",)`` (or ``("my",)``) is the whole database; ``("pg", g)`` a *group* of tables, named by
its order of first appearance in the run (``"t0"``, ``"t1"``, ...: a schema per trial gives the
same table another name in every run); ``("pg", g, k)`` one key of the only unique index of a
table that is a group by itself (PostgreSQL only). Resources nest, so a table-level access
conflicts with every key under it. Anything this module cannot establish is the whole database,
as before.

**Groups.** Read from the catalog on a connection of the harness's own, opened with the agent
connection's parameters, once per database per run: tables linked by a foreign key (either
way: the check locks the parent row, a cascade writes the child), by inheritance or
partitioning, or by a sequence their defaults share, are one group. A statement on a table
with a user trigger, a rule, row-level security, a foreign table, a view, a column of a domain
type, or a default, check constraint, generated column or index expression that calls a
function outside ``pg_catalog`` is the whole database (MariaDB: triggers, views, non-InnoDB
tables, defaults or checks naming a stored function or a sequence). So is a name that does not
resolve to a table of that catalog through the session's own ``search_path`` (a temporary
table, one created since).

**Keys** (PostgreSQL only, at READ COMMITTED and REPEATABLE READ). A table whose only unique
index (its primary key, or one unique constraint) is plain (no expression, no predicate, not
deferrable, no exclusion constraint beside it), whose key columns are integers, text of a
deterministic collation or uuids, and which uses no sequence: ``SELECT``/``UPDATE``/``DELETE``
whose WHERE is a conjunction holding ``key column = literal or parameter`` for every key column
(other conjuncts only narrow the same row), and ``INSERT ... VALUES`` that gives every key
column, touch that key; an ``UPDATE`` or ``ON CONFLICT DO UPDATE`` that sets a key column, or
anything else, touches the table. A second unique index would let a row be reached by another
key (a delete by primary key makes room for an insert of the same unique email), so it takes
the key rule away. Key values are known to the footprint by their order of first appearance in
the run, as tables are: a uuid4 key differs between runs, but which keys are equal does not.
MariaDB has no key rule: InnoDB's gap and next-key locks at REPEATABLE READ make an insert wait
on a range another statement scanned, whatever its key.

**Transactions.** A transaction at SERIALIZABLE, or at a level not established, keeps the whole
database for every statement and its end: which transaction SSI aborts depends on the commit
order of three of them, across tables. The level is established from what the driver sends
(psycopg's ``isolation_level``, ``BEGIN``/``START TRANSACTION ISOLATION LEVEL``, ``SET
TRANSACTION``) over the session default, asked of the session itself whenever a statement
starts a transaction (PostgreSQL: through the connection's libpq handle, while it is idle;
MariaDB: ``@@tx_isolation`` on the same connection, outside a transaction). At REPEATABLE READ
the statement that takes the transaction's snapshot (PostgreSQL: its first; InnoDB: its first
consistent read, or ``START TRANSACTION WITH CONSISTENT SNAPSHOT``) also reads the whole
database, as it fixes what every later read sees. A commit or rollback writes every resource the
transaction wrote or locked. A round trip psycopg makes on its own (``transaction()``'s BEGIN and
COMMIT, COPY, pipelines) is the whole database and leaves its transaction whole-database too.

**One connection, one agent.** A footprint is made from the session before the step is granted;
a connection a second agent uses in the run is the whole database from then on (:func:`_claim`).

**DDL.** A statement that may change the catalog (DDL, a function not known to be pure, an
unknown command) is the whole database; when it has run (or its transaction ended) the catalog
is read again, and if what this module derives from it changed while another agent's statement
waited with a footprint computed from the old one, the run is unverifiable rather than judged
on a footprint that no longer holds.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import uuid
import weakref
from dataclasses import dataclass, field

from toki.harness.steps import Footprint

Resource = tuple[str, ...]

# False: every statement touches the whole database, as before this module (for measuring what
# the finer dependence saves; the tests compare both).
FINER = True

# -- the text: tokens ------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>\s+) | (?P<line>(--|\#)[^\n]*) | (?P<block>/\*) |
    (?P<num>(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?) |
    (?P<id>[A-Za-z_][A-Za-z0-9_$]*) |
    (?P<param>%(\([^)]+\))?[sbt]|\$\d+) |
    (?P<str>') | (?P<dq>") | (?P<bq>`) |
    (?P<punct>::|[(),;.\[\]]) |
    (?P<op>[-+*/<>=~!@%^&|?:\#]+)
""", re.X)


@functools.lru_cache(maxsize=4096)
def tokens(text: str, family: str, params: bool) -> tuple[tuple[str, str], ...] | None:
    """``(kind, value)`` pairs: ``id`` (as written), ``qid`` (a quoted identifier), ``str``,
    ``num``, ``param`` (``%s``, ``%(name)s``, ``$1``; only with ``params``), ``p`` (punctuation),
    ``op``. None for what this tokenizer does not take apart (dollar quotes, backslashes in
    strings, MySQL's executable comments, two statements): the caller's whole database."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    positional = 0
    if n > 20000:
        return None
    while i < n:
        m = _TOKEN.match(text, i)
        if m is None:
            return None
        kind = m.lastgroup
        if kind == "ws" or kind == "line":
            if kind == "line" and text[i] == "#" and family != "my":
                return None
            i = m.end()
            continue
        if kind == "block":
            if text.startswith("/*!", i) or text.startswith("/*M!", i):
                return None
            end = text.find("*/", i + 2)
            if end < 0 or "/*" in text[i + 2:end]:
                return None
            i = end + 2
            continue
        if kind in ("str", "dq", "bq"):
            q = text[i]
            if kind == "dq" and family == "my":
                kind = "str"  # a string in MariaDB's default mode
            j, buf = i + 1, []
            while True:
                k = text.find(q, j)
                if k < 0:
                    return None
                buf.append(text[j:k])
                if k + 1 < n and text[k + 1] == q:
                    buf.append(q)
                    j = k + 2
                    continue
                break
            value = "".join(buf)
            if "\\" in value or (kind == "str" and out and out[-1] in (("id", "E"), ("id", "e")) and i > 0
                                 and text[i - 1] in "Ee"):
                return None
            if kind == "bq" and family != "my":
                return None
            out.append(("str" if kind == "str" else "qid", value))
            i = k + 1
            continue
        value = m.group(kind)
        if kind == "param":
            if not params or (family == "my" and value.startswith("$")):
                return None
            if not value.startswith(("$", "%(")):
                value = f"#{positional}"  # the n-th positional placeholder: params[n]
                positional += 1
        elif kind == "op" and "$" in value:
            return None
        elif kind == "op" and "%" in value and params:
            return None  # %% and placeholders of kinds not handled
        if kind == "punct":
            kind = "p"
        out.append((kind, value))
        i = m.end()
    while out and out[-1] == ("p", ";"):
        out.pop()
    if ("p", ";") in out:
        return None
    if "$" in text and family == "pg" and any(k == "id" and "$" in v for k, v in out):
        return None
    return tuple(out)


# -- the text: what a statement is ---------------------------------------------------------------

# Built-in functions that read nothing but their arguments and write nothing.
PURE = frozenset("""
count sum min max avg coalesce nullif greatest least lower upper length char_length character_length octet_length
abs round floor ceil ceiling trunc mod power sqrt exp ln log sign substr substring trim btrim ltrim rtrim replace
concat concat_ws left right position strpos split_part md5 encode decode to_char to_timestamp to_date to_number now
clock_timestamp statement_timestamp transaction_timestamp date_trunc extract date_part age make_interval
jsonb_build_object json_build_object jsonb_build_array json_build_array to_jsonb to_json jsonb_agg json_agg
jsonb_object_agg json_object_agg array_agg string_agg bool_and bool_or every array_length array_position cardinality
unnest jsonb_set jsonb_extract_path jsonb_extract_path_text jsonb_array_length jsonb_typeof jsonb_strip_nulls
generate_series row_number rank dense_rank lag lead first_value last_value gen_random_uuid random format quote_ident quote_literal
regexp_replace regexp_match starts_with timezone array_to_string string_to_array array_remove array_append
array_cat jsonb_path_exists jsonb_path_query ifnull if json_extract json_object json_array json_value json_unquote
unix_timestamp from_unixtime uuid utc_timestamp current_timestamp sysdate curdate curtime date datediff
timestampdiff group_concat instr locate lcase ucase char hex unhex
""".split())
# Functions with an effect beyond their result (a sequence, an advisory or named lock, a setting).
EFFECT = frozenset("""
nextval setval currval lastval set_config pg_notify pg_sleep get_lock release_lock release_all_locks is_free_lock
is_used_lock last_insert_id sleep
""".split()) | frozenset(f"pg_{t}advisory_{x}lock{s}" for t in ("", "try_") for x in ("", "xact_")
                        for s in ("", "_shared")) | frozenset({"pg_advisory_unlock", "pg_advisory_unlock_shared",
                                                              "pg_advisory_unlock_all"})
# Words that may stand before "(" without calling a function.
_PAREN_WORDS = frozenset("""
in values exists any all some array cast over filter group conflict using on and or not as key when then else case
is between like ilike set where returning select row distinct lateral only interval into table update from join
by partition within
""".split())
# Operators of the built-in types (and pgvector's distances), which call built-in functions.
_OPS = frozenset("""
= <> != < > <= >= + - * / % || ~~ !~~ ~~* !~~* ~ ~* !~ !~* @> <@ && ? ?| ?& -> ->> #> #>> #- @? @@ <-> <=> <#> <+>
""".split())
_CAST_TYPES = frozenset("""
text varchar char int int2 int4 int8 integer smallint bigint numeric decimal real float float4 float8 double
precision boolean bool date time timestamp timestamptz interval uuid json jsonb bytea vector halfvec sparsevec
regclass with without zone character varying
""".split())
_LEVELS = {("read", "committed"): "read committed", ("read", "uncommitted"): "read uncommitted",
           ("repeatable", "read"): "repeatable read", ("serializable",): "serializable"}
# SET of these changes nothing another session sees and nothing this module reads.
_HARMLESS_SET = frozenset("""
lock_timeout statement_timeout idle_in_transaction_session_timeout application_name client_min_messages work_mem
maintenance_work_mem jit synchronous_commit innodb_lock_wait_timeout lock_wait_timeout max_statement_time names
character_set_client character_set_results character_set_connection timezone time_zone datestyle intervalstyle
extra_float_digits
""".split())
# Commands that change no catalog (anything else may: DDL, DO, CALL, EXECUTE of a prepared one ...).
_NOT_DDL = frozenset("""
select insert update delete with values table lock explain copy begin start commit end abort rollback savepoint
release set show reset vacuum analyze checkpoint listen notify unlisten fetch move close declare discard replace
handler
""".split())
_CLAUSE_END = frozenset(("where", "group", "having", "order", "limit", "offset", "for", "window", "fetch", "returning",
                         "lock", "union", "intersect", "except", "on", "using", "set"))
_JOIN = frozenset(("join", "inner", "left", "right", "full", "cross", "natural", "outer", "lateral", "straight_join"))

Value = tuple  # ("lit", text, "str" | "num") | ("param", index or name) | ("expr",) | ("default",)


@dataclass(frozen=True)
class Parsed:
    """What a statement's text says, the catalog aside."""

    kind: str  # select insert update delete begin commit rollback rollback-to savepoint release set-txn
    #            set harmless show nothing other
    tables: tuple[tuple[str | None, str, bool], ...] = ()  # (schema, name, quoted) of each table it touches
    writes: bool = False  # writes or locks its tables
    level: str | None = None  # BEGIN, SET TRANSACTION: the level it names
    snapshot: bool = False  # START TRANSACTION WITH CONSISTENT SNAPSHOT
    ddl: bool = False  # may change the catalog
    effect: bool = False  # calls a function with an effect (a sequence, an advisory lock): whole database
    session: bool = False  # may change the session's settings (search_path, the default level)
    eq: tuple[tuple[str, Value], ...] = ()  # WHERE column = value conjuncts (single-table statements)
    cols: tuple[str, ...] = ()  # INSERT's columns
    rows: tuple[tuple[Value, ...], ...] = ()  # INSERT's rows
    sets: tuple[str, ...] = ()  # columns assigned (UPDATE SET, ON CONFLICT / ON DUPLICATE KEY UPDATE)
    conflict: tuple[str, ...] | None = None  # ON CONFLICT (columns)
    consistent: bool = False  # a plain read (makes InnoDB's read view)


OTHER = Parsed("other", ddl=True)


def _low(t: tuple[str, str]) -> str:
    return t[1].lower() if t[0] == "id" else ""


def _calls(toks) -> tuple[bool, bool, bool]:
    """(unknown function, function with an effect, setting changed) among the calls in ``toks``."""
    unknown = effect = session = False
    for i in range(len(toks) - 1):
        k, v = toks[i]
        if k not in ("id", "qid") or toks[i + 1] != ("p", "("):
            continue
        name = v.lower() if k == "id" else v
        if k == "id" and name in _PAREN_WORDS:
            continue
        if i > 0 and _low(toks[i - 1]) in ("into", "table"):
            continue  # a table's column list
        qualified = i > 0 and toks[i - 1] == ("p", ".")
        schema = _low(toks[i - 2]) if qualified and i > 1 else None
        if k == "id" and (not qualified or schema == "pg_catalog") and name in PURE:
            continue
        if k == "id" and (not qualified or schema == "pg_catalog") and name in EFFECT:
            effect = True
            session |= name == "set_config"
            continue
        unknown = True
    return unknown, effect, session


def _ops_known(toks) -> bool:
    for i, (k, v) in enumerate(toks):
        if k == "op" and v not in _OPS:
            return False
        if (k, v) == ("p", "::"):
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            if nxt is None or _low(nxt) not in _CAST_TYPES:
                return False
    return True


def _split(toks, word: str) -> list[list]:
    """``toks`` split at depth-0 ``word`` (a keyword or a punctuation mark)."""
    parts: list[list] = [[]]
    depth = 0
    for t in toks:
        if t in (("p", "("), ("p", "[")):
            depth += 1
        elif t in (("p", ")"), ("p", "]")):
            depth -= 1
        if depth == 0 and (_low(t) == word or t == ("p", word) or t == ("op", word)):
            parts.append([])
            continue
        parts[-1].append(t)
    return parts


def _value(toks) -> Value:
    """A literal or a parameter, possibly cast; anything else an expression."""
    if len(toks) >= 3 and toks[-2] == ("p", "::"):
        toks = toks[:-2]
    if len(toks) == 1:
        k, v = toks[0]
        if k in ("str", "num"):
            return ("lit", v, k)
        if k == "param":
            return ("param", v)
        if _low(toks[0]) == "default":
            return ("default",)
    return ("expr",)


def _column(toks, aliases: set[str]) -> str | None:
    """A column reference: ``col`` or ``alias.col``."""
    if len(toks) == 1 and toks[0][0] in ("id", "qid"):
        return toks[0][1].lower() if toks[0][0] == "id" else toks[0][1]
    if len(toks) == 3 and toks[1] == ("p", ".") and toks[2][0] in ("id", "qid") and (
            (toks[0][1].lower() if toks[0][0] == "id" else toks[0][1]) in aliases):
        return toks[2][1].lower() if toks[2][0] == "id" else toks[2][1]
    return None


def _eq_terms(where, aliases: set[str]) -> tuple[tuple[str, Value], ...]:
    """The ``column = literal or parameter`` conjuncts of a WHERE that is a conjunction."""
    if len(_split(where, "or")) > 1:
        return ()
    out = []
    for term in _split(where, "and"):
        ops = [k for k, t in enumerate(term) if t[0] == "op"]
        if len(ops) != 1 or term[ops[0]] != ("op", "="):
            continue
        a, b = term[:ops[0]], term[ops[0] + 1:]
        for x, y in ((a, b), (b, a)):
            col, val = _column(x, aliases), _value(y)
            if col is not None and val[0] in ("lit", "param"):
                out.append((col, val))
                break
    return tuple(out)


def _name(toks, i) -> tuple[tuple | None, int]:
    """A table name at ``toks[i]``, ``name`` or ``schema.name``, as (schema or None, schema
    quoted, name, name quoted); (None, i) if none there."""
    def ident(t):
        return (t[1], t[0] == "qid") if t[0] in ("id", "qid") else None
    first = ident(toks[i]) if i < len(toks) else None
    if first is None:
        return None, i
    if i + 2 < len(toks) and toks[i + 1] == ("p", ".") and ident(toks[i + 2]) is not None:
        second = ident(toks[i + 2])
        return (first[0], first[1], second[0], second[1]), i + 3
    return (None, False, first[0], first[1]), i + 1


def _alias(toks, i) -> tuple[str | None, int]:
    if i < len(toks) and _low(toks[i]) == "as":
        i += 1
    if i < len(toks) and toks[i][0] in ("id", "qid") and (toks[i][0] == "qid" or (
            _low(toks[i]) not in _CLAUSE_END and _low(toks[i]) not in _JOIN and _low(toks[i]) != "natural")):
        return (toks[i][1].lower() if toks[i][0] == "id" else toks[i][1]), i + 1
    return None, i


def _from_list(toks) -> tuple[list, set[str]] | None:
    """The tables of a FROM list (joins included) and the names they go by; None if not plain."""
    tables, names = [], set()
    i = 0
    while i < len(toks):
        if _low(toks[i]) == "only":
            i += 1
        if i < len(toks) and toks[i] == ("p", "("):
            return None  # a subquery or a parenthesised join
        name, j = _name(toks, i)
        if name is None or (j < len(toks) and toks[j] == ("p", "(")):
            return None  # a function in FROM
        tables.append(name)
        names.add(name[2].lower() if not name[3] else name[2])
        alias, j = _alias(toks, j)
        if alias:
            names.add(alias)
        depth = 0
        while j < len(toks):  # up to the next table: ON / USING conditions are expressions
            t = toks[j]
            if t == ("p", "("):
                depth += 1
            elif t == ("p", ")"):
                depth -= 1
            elif depth == 0 and (t == ("p", ",") or _low(t) == "join"):
                j += 1
                break
            j += 1
        while j < len(toks) and _low(toks[j]) in _JOIN:
            j += 1
        i = j
    return tables, names


def _clauses(toks, start: int, stop_words) -> tuple[list, int]:
    j, depth = start, 0
    while j < len(toks):
        t = toks[j]
        if t == ("p", "("):
            depth += 1
        elif t == ("p", ")"):
            depth -= 1
        elif depth == 0 and _low(t) in stop_words:
            break
        j += 1
    return list(toks[start:j]), j


def _level(toks, i) -> str | None:
    words = [_low(t) for t in toks[i:i + 2]]
    for key, name in _LEVELS.items():
        if tuple(words[:len(key)]) == key:
            return name
    return None


@functools.lru_cache(maxsize=8192)
def parse(text: str, family: str, params: bool) -> Parsed:
    """What the statement ``text`` is (see :class:`Parsed`); :data:`OTHER` when not plain."""
    toks = tokens(text, family, params)
    if toks is None:
        return OTHER
    if not toks:
        return Parsed("nothing")
    head = _low(toks[0])
    unknown, effect, session = _calls(toks)
    if unknown or not _ops_known(toks):  # an operator or a type of the user's calls functions of the user's
        return OTHER
    if head not in _NOT_DDL:
        return OTHER
    words = [_low(t) for t in toks]
    if head in ("begin", "start"):
        rest = words[1:]
        if head == "start" and (not rest or rest[0] != "transaction"):
            return OTHER
        level = None
        if "isolation" in rest:
            k = rest.index("isolation")
            if k + 1 >= len(rest) or rest[k + 1] != "level":
                return OTHER
            level = _level(toks, k + 3)
            if level is None:
                return OTHER
        allowed = {"transaction", "work", "isolation", "level", "read", "write", "only", "committed", "uncommitted",
                   "repeatable", "serializable", "deferrable", "not", "with", "consistent", "snapshot", ""}
        if any(w not in allowed for w in rest):
            return OTHER
        return Parsed("begin", level=level, snapshot="snapshot" in rest)
    if head in ("commit", "end", "abort", "rollback"):
        rest = words[1:]
        if head == "rollback" and "to" in rest:
            return Parsed("rollback-to")
        if any(w not in ("work", "transaction", "") for w in rest):
            return OTHER  # AND CHAIN, RELEASE, PREPARED
        return Parsed("rollback" if head in ("rollback", "abort") else "commit")
    if head == "savepoint":
        return Parsed("savepoint")
    if head == "release":
        return Parsed("release")
    if head in ("set", "reset"):
        rest = words[1:]
        if head == "set" and rest[:1] == ["transaction"]:
            if rest[1:3] != ["isolation", "level"] or _level(toks, 4) is None:
                return Parsed("set", session=True)
            return Parsed("set-txn", level=_level(toks, 4))
        if head == "set" and rest[:1] in (["local"], ["session"]) and len(rest) > 1:
            rest = rest[1:]
        var = rest[0] if rest else ""
        if var in _HARMLESS_SET or (var == "" and False):
            return Parsed("harmless")
        return Parsed("set", session=True)
    if head == "show":
        return Parsed("show")
    if effect:
        return Parsed("other", effect=True, session=session)
    if "select" in words[1:] or any(w in ("union", "intersect", "except") for w in words):
        return Parsed("other")  # a subquery
    if head == "select":
        return _select(toks, words)
    if head == "insert":
        return _insert(toks, words, family)
    if head == "update":
        return _update(toks, words)
    if head == "delete":
        return _delete(toks, words)
    return Parsed("other")


def _locking(tail_words) -> bool:
    return ("for" in tail_words and any(w in ("update", "share") for w in tail_words)) or (
        "lock" in tail_words and "share" in tail_words)


def _select(toks, words) -> Parsed:
    if "into" in words:
        return OTHER  # SELECT INTO makes a table
    body, j = _clauses(toks, 1, ("from",) + tuple(_CLAUSE_END - {"on", "using", "set", "lock", "for"}))
    if j >= len(toks) or words[j] != "from":
        tail = words[j:]
        return Parsed("select", writes=_locking(tail), consistent=True)
    frm, k = _clauses(toks, j + 1, _CLAUSE_END - {"on", "using", "set"})
    got = _from_list(frm)
    if got is None:
        return Parsed("other")
    tables, names = got
    where: list = []
    if k < len(toks) and words[k] == "where":
        where, k = _clauses(toks, k + 1, _CLAUSE_END - {"on", "using", "set", "where"})
    tail = words[k:]
    if "for" in tail and "of" in tail:
        return Parsed("other")  # FOR UPDATE OF some of the tables: coarse is simpler than right
    locking = _locking(tail)
    return Parsed("select", tables=tuple(tables), writes=locking,
                  eq=_eq_terms(where, names) if len(tables) == 1 else (), consistent=not locking)


def _insert(toks, words, family) -> Parsed:
    i = 1
    if family == "my" and i < len(words) and words[i] == "ignore":
        i += 1
    if i >= len(words) or words[i] != "into":
        return Parsed("other")
    name, i = _name(toks, i + 1)
    if name is None:
        return Parsed("other")
    alias, i = (None, i)
    if i < len(words) and words[i] == "as":
        alias, i = _alias(toks, i)
    if i >= len(toks) or toks[i] != ("p", "("):
        return Parsed("insert", tables=(name,), writes=True)
    cols_toks, i = _paren(toks, i)
    if cols_toks is None:
        return Parsed("other")
    cols = []
    for part in _split(cols_toks, ","):
        c = _column(part, set())
        if c is None:
            return Parsed("other")
        cols.append(c)
    if i >= len(words) or words[i] != "values":
        return Parsed("other")
    i += 1
    rows = []
    while i < len(toks) and toks[i] == ("p", "("):
        inner, i = _paren(toks, i)
        if inner is None:
            return Parsed("other")
        vals = tuple(_value(p) for p in _split(inner, ","))
        if len(vals) != len(cols):
            return Parsed("other")
        rows.append(vals)
        if i < len(toks) and toks[i] == ("p", ","):
            i += 1
    sets: list[str] = []
    conflict = None
    rest = words[i:]
    if rest[:2] == ["on", "conflict"]:
        i += 2
        if i < len(toks) and toks[i] == ("p", "("):
            inner, i = _paren(toks, i)
            if inner is None:
                return Parsed("other")
            conflict = tuple(_column(p, set()) or "" for p in _split(inner, ","))
        if words[i:i + 2] == ["do", "nothing"]:
            i += 2
        elif words[i:i + 3] == ["do", "update", "set"]:
            body, i = _clauses(toks, i + 3, ("where", "returning"))
            got = _assigned(body)
            if got is None:
                return Parsed("other")
            sets = got
            if i < len(words) and words[i] == "where":
                _, i = _clauses(toks, i + 1, ("returning",))
        else:
            return Parsed("other")
    elif rest[:4] == ["on", "duplicate", "key", "update"]:
        got = _assigned(list(toks[i + 4:]))
        if got is None:
            return Parsed("other")
        sets, i = got, len(toks)
    if i < len(words) and words[i] != "returning":
        return Parsed("other")
    return Parsed("insert", tables=(name,), writes=True, cols=tuple(cols), rows=tuple(rows), sets=tuple(sets),
                  conflict=conflict)


def _paren(toks, i) -> tuple[list | None, int]:
    depth = 0
    for j in range(i, len(toks)):
        if toks[j] == ("p", "("):
            depth += 1
        elif toks[j] == ("p", ")"):
            depth -= 1
            if depth == 0:
                return list(toks[i + 1:j]), j + 1
    return None, len(toks)


def _assigned(body) -> list[str] | None:
    out = []
    for part in _split(body, ","):
        sides = _split(part, "=")
        if len(sides) < 2:
            return None
        c = _column(sides[0], set())
        if c is None:
            return None
        out.append(c)
    return out


def _target(toks, words, i: int):
    """The table an UPDATE or DELETE names at ``i`` (after an optional ONLY), with the names its
    WHERE may qualify columns by (the table's and its alias); None when not taken apart."""
    if i < len(words) and words[i] == "only":
        i += 1
    name, i = _name(toks, i)
    if name is None:
        return None
    names = {name[2].lower() if not name[3] else name[2]}
    alias, i = _alias(toks, i)
    if alias:
        names.add(alias)
    return name, names, i


def _where(toks, words, i: int) -> list | None:
    """The WHERE clause at ``i`` (empty when there is none); None for ``WHERE CURRENT OF`` (a
    cursor's row, which the text does not name)."""
    if i >= len(words) or words[i] != "where":
        return []
    where, _ = _clauses(toks, i + 1, ("returning", "order", "limit"))
    return None if [_low(t) for t in where][:2] == ["current", "of"] else where


def _update(toks, words) -> Parsed:
    got = _target(toks, words, 1)
    if got is None:
        return Parsed("other")
    name, names, i = got
    if i >= len(words) or words[i] != "set":
        return Parsed("other")  # a multi-table UPDATE
    body, i = _clauses(toks, i + 1, ("where", "returning", "from", "order", "limit"))
    sets = _assigned(body)
    if sets is None or (i < len(words) and words[i] == "from"):
        return Parsed("other")
    where = _where(toks, words, i)
    if where is None:
        return Parsed("other")
    return Parsed("update", tables=(name,), writes=True, eq=_eq_terms(where, names), sets=tuple(sets))


def _delete(toks, words) -> Parsed:
    if words[1:2] != ["from"]:
        return Parsed("other")
    got = _target(toks, words, 2)
    if got is None:
        return Parsed("other")
    name, names, i = got
    if i < len(words) and words[i] == "using":
        return Parsed("other")
    where = _where(toks, words, i)
    if where is None:
        return Parsed("other")
    return Parsed("delete", tables=(name,), writes=True, eq=_eq_terms(where, names))


# -- the catalog -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Table:
    """What the catalog says about one table, as dependence reads it."""

    group: str  # the group's name: its first member's "schema.table"
    coarse: bool = False  # a statement on it touches the whole database
    key: tuple[str, ...] | None = None  # the columns of its only unique index, when the key rule applies
    types: tuple[str, ...] = ()  # their types: "int", "text" or "uuid"


@dataclass
class Catalog:
    tables: dict[tuple[str, str], Table] = field(default_factory=dict)  # (schema, name) -> table

    def find(self, name: tuple, path: tuple[str, ...], family: str) -> Table | None:
        """The table a name stands for in a session whose search path (MariaDB: database) is
        ``path``; None when not known (a temporary table may shadow it, or it is not there)."""
        schema, sq, rel, rq = name
        if family == "pg":
            rel = rel if rq else rel.lower()
            schema = schema if schema is None or sq else schema.lower()
        if schema is not None:
            return None if schema.startswith("pg_temp") else self.tables.get((schema, rel))
        if family == "pg" and rel.startswith("pg_"):
            return None  # perhaps one of pg_catalog's, which comes first in every path
        for s in path:
            if s.startswith("pg_temp"):
                return None
            t = self.tables.get((s, rel))
            if t is not None:
                return t
        return None


def _groups(names: list[str], links: list[tuple[str, str]]) -> dict[str, str]:
    parent = {n: n for n in names}

    def root(n):
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n
    for a, b in links:
        if a in parent and b in parent:
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    return {n: root(n) for n in names}


# Every query leaves out pg_catalog (a name starting pg_ is not known: it may be one of its relations).
_USER = "not in (select oid from pg_namespace where nspname in ('pg_catalog', 'information_schema'))"
_PG_TABLES = f"""
select c.oid, n.nspname, c.relname, c.relkind, c.relrowsecurity
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'p', 'v', 'm', 'f') and c.relnamespace {_USER} and n.nspname not like 'pg_toast%'
"""
_PG_COARSE = f"""
select tgrelid from pg_trigger where not tgisinternal
union select ev_class from pg_rewrite where rulename <> '_RETURN'
union select ad.adrelid from pg_attrdef ad join pg_depend d on d.classid = 'pg_attrdef'::regclass and d.objid = ad.oid
  join pg_proc p on d.refclassid = 'pg_proc'::regclass and p.oid = d.refobjid
  where p.pronamespace <> 'pg_catalog'::regnamespace
union select co.conrelid from pg_constraint co join pg_depend d on d.classid = 'pg_constraint'::regclass
  and d.objid = co.oid join pg_proc p on d.refclassid = 'pg_proc'::regclass and p.oid = d.refobjid
  where p.pronamespace <> 'pg_catalog'::regnamespace and co.connamespace {_USER}
union select i.indrelid from pg_index i join pg_depend d on d.classid = 'pg_class'::regclass and d.objid = i.indexrelid
  join pg_proc p on d.refclassid = 'pg_proc'::regclass and p.oid = d.refobjid
  where p.pronamespace <> 'pg_catalog'::regnamespace
union select a.attrelid from pg_class c join pg_attribute a on a.attrelid = c.oid
  join pg_type t on t.oid = a.atttypid
  where c.relkind in ('r', 'p', 'v', 'm', 'f') and c.relnamespace {_USER}
    and a.attnum > 0 and not a.attisdropped and t.typtype not in ('b', 'p', 'e')
    and t.typnamespace <> 'pg_catalog'::regnamespace
"""
# Tables linked: by a foreign key, by inheritance or partitioning, by a sequence their defaults share.
_PG_SEQ = """
  select ad.adrelid rel, d.refobjid seq from pg_attrdef ad join pg_depend d on d.classid = 'pg_attrdef'::regclass
    and d.objid = ad.oid and d.refclassid = 'pg_class'::regclass
  union select d.refobjid, d.objid from pg_depend d join pg_class s on s.oid = d.objid and s.relkind = 'S'
    where d.classid = 'pg_class'::regclass and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i')
"""
_PG_LINKS = f"""
with seq as ({_PG_SEQ})
select conrelid, confrelid, 'l' from pg_constraint where contype = 'f'
union all select inhrelid, inhparent, 'l' from pg_inherits
union all select a.rel, b.rel, 'l' from seq a join seq b on a.seq = b.seq and a.rel < b.rel
union all select rel, rel, 's' from seq
"""
_PG_UNIQUE = f"""
select i.indrelid, i.indexprs is not null or i.indpred is not null or coalesce(co.condeferrable, false)
         or not i.indimmediate,
       array(select a.attname || ':' || t.typname || ':' ||
                    coalesce((select collisdeterministic::text from pg_collation where oid = a.attcollation), 'true')
             from unnest(i.indkey::int2[]) with ordinality k(n, o)
             join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.n
             join pg_type t on t.oid = a.atttypid order by k.o)
from pg_index i join pg_class c on c.oid = i.indrelid and c.relnamespace {_USER}
  left join pg_constraint co on co.conindid = i.indexrelid and co.contype in ('p', 'u')
where i.indisunique
union all select conrelid, true, array[]::text[] from pg_constraint where contype = 'x'
"""
_KEY_TYPES = {"int2": "int", "int4": "int", "int8": "int", "text": "text", "varchar": "text", "uuid": "uuid"}


def read_pg_catalog(conn) -> Catalog:
    """The catalog of the database ``conn`` is on, as dependence reads it (see the module's notes)."""
    def rows(sql):
        return conn.execute(sql, prepare=True).fetchall()  # the connection is kept: planned once
    tables = rows(_PG_TABLES)
    names = {oid: f"{s}.{n}" for oid, s, n, _k, _r in tables}
    coarse = {r[0] for r in rows(_PG_COARSE)}
    links, sequenced = [], set()
    for a, b, how in rows(_PG_LINKS):
        if how == "s":
            sequenced.add(a)
        elif a != b:
            links.append((names.get(a), names.get(b)))
    linked_out = {x for pair in links for x in pair if None in pair} - {None}
    groups = _groups(sorted(names.values()), [p for p in links if None not in p])
    unique: dict[int, list] = {}
    for rel, odd, cols in rows(_PG_UNIQUE):
        unique.setdefault(rel, []).append((odd, cols))
    members: dict[str, int] = {}
    for g in groups.values():
        members[g] = members.get(g, 0) + 1
    cat = Catalog()
    for oid, schema, name, kind, rls in tables:
        full = names[oid]
        bad = (kind in ("v", "m", "f") or rls or oid in coarse or full in linked_out or schema.startswith("pg_temp")
               or name.startswith("pg_"))
        key = types = None
        idx = unique.get(oid, [])
        if (not bad and members[groups[full]] == 1 and oid not in sequenced and len(idx) == 1 and not idx[0][0]
                and idx[0][1]):
            parts = [c.split(":") for c in idx[0][1]]
            if all(len(p) == 3 and _KEY_TYPES.get(p[1]) and p[2] == "true" for p in parts):
                key, types = tuple(p[0] for p in parts), tuple(_KEY_TYPES[p[1]] for p in parts)
        cat.tables[(schema, name)] = Table(groups[full], bad, key, types or ())
    return cat


def read_my_catalog(conn, db: str) -> Catalog:
    """The catalog of MariaDB database ``db`` (tables, foreign keys, triggers, views), as
    dependence reads it; tables are grouped, never keyed."""
    cur = conn.cursor()

    def rows(sql, *args):
        cur.execute(sql, args)
        return cur.fetchall()
    tables = rows("select table_name, table_type, coalesce(engine, '') from information_schema.tables "
                  "where table_schema = %s", db)
    links, out_of_db = [], set()
    for t, rs, rt in rows("select table_name, unique_constraint_schema, referenced_table_name "
                          "from information_schema.referential_constraints where constraint_schema = %s", db):
        if rs != db:
            out_of_db.add(t)
        links.append((t, rt))
    coarse = {r[0] for r in rows("select event_object_table from information_schema.triggers "
                                 "where event_object_schema = %s", db)}
    routines = {r[0].lower() for r in rows("select routine_name from information_schema.routines "
                                           "where routine_schema = %s", db)}
    for t, d, g in rows("select table_name, coalesce(column_default, ''), coalesce(generation_expression, '') "
                        "from information_schema.columns where table_schema = %s", db):
        text = f"{d} {g}".lower()
        if "nextval" in text or any(r in text for r in routines):
            coarse.add(t)
    with contextlib.suppress(Exception):
        for t, clause in rows("select table_name, check_clause from information_schema.check_constraints "
                              "where constraint_schema = %s", db):
            if any(r in (clause or "").lower() for r in routines):
                coarse.add(t)
    names = [t for t, _ty, _e in tables]
    groups = _groups(sorted(names), links)
    cat = Catalog()
    for t, ty, engine in tables:
        bad = ty != "BASE TABLE" or engine.lower() != "innodb" or t in coarse or t in out_of_db
        cat.tables[(db, t)] = Table(f"{db}.{groups[t]}", bad)
    return cat


# -- per run: catalogs, names, connections ---------------------------------------------------------

@dataclass
class _Txn:
    level: str | None  # None: not established (as serializable)
    block: bool  # a transaction of several statements (not one autocommitted statement)
    snapshot: bool = False  # its snapshot (InnoDB: its read view) was taken
    coarse: bool = False
    written: set = field(default_factory=set)
    ddl: bool = False


@dataclass
class _Conn:
    conn: object
    txn: _Txn | None = None
    path: tuple[str, ...] = ()  # search_path as the session resolves names (MariaDB: its database)
    known: bool = False  # path and default level read from the session
    default: str | None = None  # the session's default level
    view: bool = False  # MariaDB: a consistent read ran in this transaction
    taking: object = None  # the snapshot (read view) the statement under way takes, once it succeeds
    lost: bool = False  # MariaDB: SET TRANSACTION (for the next transaction) was sent: levels not known
    recheck: bool = False  # DDL may have run: read the catalog again once the transaction is over
    owner: str | None = None  # the agent that used it first in the run
    shared: bool = False  # another agent used it too: its session state is no one agent's to follow
    inflight: str | None = None  # the agent whose finer footprint on it is not yet used up


@dataclass
class _Run:
    catalogs: dict = field(default_factory=dict)
    names: dict = field(default_factory=dict)
    conns: dict = field(default_factory=dict)
    # what each name used so far resolved to, per catalog: all a footprint read of the catalog
    resolved: dict = field(default_factory=dict)
    agents: set = field(default_factory=set)  # the agents whose steps got a footprint from here


_runs: "weakref.WeakKeyDictionary[object, _Run]" = weakref.WeakKeyDictionary()
_catalog_conns: dict = {}  # where -> the harness's own connection, kept across runs


def _here():
    """(controller, run state) when the calling thread makes an agent's step now; else None."""
    from toki.harness.controller import acting_outside_call

    me = acting_outside_call() if FINER else None
    if me is None:  # not an agent's step of its own (a driver call inside one, the harness's own)
        return None
    ctl = me[0]
    run = _runs.get(ctl)
    if run is None:
        run = _runs[ctl] = _Run()
    run.agents.add(me[1].name)
    _local.maker = me[1]
    return ctl, run


# The agent whose step's footprint this thread made last (set by _here, read by _asking and _claim
# in the same call): a note of this module's, not the harness's binding of threads to agents,
# which only the controller writes (controller.act_for).
_local = threading.local()


@contextlib.contextmanager
def _asking():
    """The harness's own round trips on an agent's thread (a session's settings, the catalog): the
    controller takes an agent that sleeps outside any call for a quarter of a second for one
    waiting on something it does not control, and a loaded server can take that long. Marked as
    the wait for a worker is; the step limit still holds."""
    agent = getattr(_local, "maker", None)
    was = getattr(agent, "handoff_wait", None)
    if agent is not None:
        agent.handoff_wait = True
    try:
        yield
    finally:
        if agent is not None:
            agent.handoff_wait = was


def _state(run: _Run, conn) -> _Conn:
    got = run.conns.get(id(conn))
    if got is None or got.conn is not conn:
        got = run.conns[id(conn)] = _Conn(conn)
    return got


def _claim(ctl, run: _Run, conn) -> _Conn | None:
    """The connection's state, for the calling agent; None when several agents use it. A
    footprint is made before its step is granted, from the session as it is then: only the agent
    that made it may change that session before it runs. A connection two agents use gets the
    whole database from then on; if the other agent's statement on it waits with a finer
    footprint, the run is unverifiable (that footprint may no longer hold)."""
    st = _state(run, conn)
    me = getattr(getattr(_local, "maker", None), "name", None)
    if st.owner is None:
        st.owner = me
    elif st.owner != me:
        st.shared = True
    if not st.shared:
        return st
    if st.inflight is not None and st.inflight != me:
        from toki.harness.controller import Unverifiable

        err = Unverifiable(f"agents {st.inflight} and {me} use one database connection at once, and {st.inflight}'s "
                           "statement waits with a footprint made from the session before "
                           f"{me}'s statement, which may change it", fix="give each agent a connection of its own")
        ctl.stop_with(err)
        raise err
    return None


def _issued(st: _Conn, fp: Footprint | None) -> Footprint | None:
    if fp is not None:  # (touching nothing is a claim too: a BEGIN's, that it changes nothing another sees)
        st.inflight = st.owner
    return fp


def _name_of(run: _Run, kind: str, real) -> str:
    key = (kind, real)
    got = run.names.get(key)
    if got is None:
        got = run.names[key] = f"{kind}{sum(1 for k in run.names if k[0] == kind)}"
    return got


def _normal(value: Value, typ: str, params):
    """A key value as the column compares it; None when not sure."""
    if value[0] == "lit":
        v, lit = value[1], value[2]
    elif value[0] == "param":
        p = value[1]
        try:
            if p.startswith("$"):
                v = params[int(p[1:]) - 1]
            elif p.startswith("%("):
                v = params[p[2:p.index(")")]]
            else:
                v = params[int(p[1:])]
        except (LookupError, TypeError, ValueError):
            return None
        if isinstance(params, dict) != p.startswith("%("):
            return None
        lit = None
    else:
        return None
    if typ == "int":
        if lit == "num" and re.fullmatch(r"-?\d+", v):
            return int(v)
        if lit is None and isinstance(v, int) and not isinstance(v, bool):
            return v
        return None
    if typ == "text":
        return v if isinstance(v, str) and (lit in (None, "str")) else None
    if typ == "uuid":
        try:
            if isinstance(v, uuid.UUID):
                return str(v)
            return str(uuid.UUID(v)) if isinstance(v, str) and lit in (None, "str") else None
        except ValueError:
            return None
    return None


# -- PostgreSQL: the session, the catalog ---------------------------------------------------------

_PG_LEVELS = {1: "read uncommitted", 2: "read committed", 3: "repeatable read", 4: "serializable"}


def _pg_probe(st: _Conn) -> None:
    """The session's default level and search_path, read through its libpq handle while idle."""
    st.known = False
    try:
        pg = st.conn.pgconn
        with _asking():
            res = pg.exec_(b"select current_setting('default_transaction_isolation'), "
                           b"array_to_string(current_schemas(true), ',')")
        if res.status != 2 or res.ntuples != 1:  # TUPLES_OK
            return
        st.default = res.get_value(0, 0).decode()
        st.path = tuple(res.get_value(0, 1).decode().split(","))
        st.known = True
    except Exception:  # noqa: BLE001 - not known: the whole database
        st.known = False


def _pg_where(conn):
    from toki.harness.observers import pg_where

    return pg_where(conn)


def _catalog(run: _Run, family: str, where, db: str | None = None) -> Catalog | None:
    key = (family, repr(where), db)
    if key in run.catalogs:
        return run.catalogs[key]
    cat = _read_catalog(family, where, db)
    run.catalogs[key] = cat
    return cat


_KEPT = 4  # catalog connections kept open at most (one per server and database in use)


def _server(family: str, where, db) -> tuple:
    """The server and database ``where`` reaches: connections that differ only in their options
    (a search_path per trial) share one catalog connection."""
    if family == "my":
        return ("my", where.get("host"), where.get("port"), where.get("unix_socket"), where.get("user"), db)
    try:
        from psycopg.conninfo import conninfo_to_dict

        d = conninfo_to_dict(where[0])
    except Exception:  # noqa: BLE001 - kept apart by its whole string
        return ("pg", where[0])
    return ("pg", d.get("host"), d.get("hostaddr"), d.get("port"), d.get("user"), d.get("dbname"))


def _read_catalog(family: str, where, db: str | None) -> Catalog | None:
    from toki.harness.controller import uncontrolled

    key = _server(family, where, db)
    with uncontrolled(), _asking():
        for attempt in (0, 1):
            conn = _catalog_conns.pop(key, None)
            try:
                if conn is None:
                    conn = _open(family, where, db)
                cat = read_pg_catalog(conn) if family == "pg" else read_my_catalog(conn, db)
            except Exception:  # noqa: BLE001 - a dead connection: once more on a new one, then not known
                with contextlib.suppress(Exception):
                    conn.close()
                continue
            _catalog_conns[key] = conn  # the most recently used last
            while len(_catalog_conns) > _KEPT:
                with contextlib.suppress(Exception):
                    _catalog_conns.pop(next(iter(_catalog_conns))).close()
            return cat
    return None


def _open(family: str, where, db):
    from toki.harness import connect_watch

    # the kernel's watch would take this connect, made on an agent's thread, for the agent's own
    was = connect_watch.inside(True)
    try:
        return _connect(family, where, db)
    finally:
        connect_watch.inside(was)


def _connect(family: str, where, db):
    if family == "pg":
        import psycopg

        dsn, password = where
        kw = {"password": password} if password else {}
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10, **kw)
        # compiling the catalog queries, and starting parallel workers for them (a server whose
        # catalog statistics are stale), took 100-250 ms a read on PostgreSQL 15
        conn.execute("set jit = off; set max_parallel_workers_per_gather = 0")
        return conn
    import pymysql

    return pymysql.connect(**where, database=db, autocommit=True, connect_timeout=10)


def close_catalog_connections() -> None:
    """Close the connections the catalog was read on (they are kept across runs)."""
    for conn in list(_catalog_conns.values()):
        with contextlib.suppress(Exception):
            conn.close()
    _catalog_conns.clear()


import atexit  # noqa: E402 - beside what it closes

atexit.register(close_catalog_connections)


def _resources(family: str, run: _Run, parsed: Parsed, params, cat: Catalog | None, path, keyed: bool):
    """(reads, writes) of a plain statement; None when it touches the whole database."""
    if cat is None:
        return None
    found = []
    used = run.resolved.setdefault(id(cat), {})
    for name in parsed.tables:
        t = cat.find(name, path, family)
        used[(name, path)] = t
        if t is None or t.coarse:
            return None
        found.append(t)
    res = {(family, _name_of(run, "t", t.group)) for t in found}
    if keyed and family == "pg" and len(found) == 1 and found[0].key is not None:
        keys = _keys(parsed, params, found[0])
        if keys is not None:
            g = next(iter(res))[1]
            res = {(family, g, _name_of(run, "k", (found[0].group, k))) for k in keys}
    return (frozenset(), frozenset(res)) if parsed.writes else (frozenset(res), frozenset())


def _keys(parsed: Parsed, params, t: Table) -> list | None:
    """The keys a statement touches, each a tuple of normalised values; None: the table."""
    if parsed.kind == "insert":
        if set(parsed.sets) & set(t.key) or not parsed.rows:
            return None
        if parsed.conflict is not None and set(parsed.conflict) != set(t.key):
            return None
        idx = [parsed.cols.index(c) if c in parsed.cols else -1 for c in t.key]
        if -1 in idx:
            return None
        out = []
        for r, row in enumerate(parsed.rows):
            key = tuple(_normal(row[i], ty, params) for i, ty in zip(idx, t.types))
            if None in key:
                return None
            out.append(key)
        return out
    if parsed.kind == "update" and set(parsed.sets) & set(t.key):
        return None
    eq = {}
    for c, v in parsed.eq:
        eq.setdefault(c, v)
    if not all(c in eq for c in t.key):
        return None
    key = tuple(_normal(eq[c], ty, params) for c, ty in zip(t.key, t.types))
    return None if None in key else [key]




_FINE = ("read committed", "read uncommitted", "repeatable read")
_SNAPSHOT_TAKERS = ("select", "insert", "update", "delete", "other")
_NOTHING = Footprint()


def _fine(txn: _Txn) -> bool:
    return not txn.coarse and txn.level in _FINE


def _ending(txn: _Txn | None, family: str) -> Footprint | None:
    """What ending ``txn`` touches: what it wrote or locked (None: the whole database)."""
    if txn is None:
        return _NOTHING
    if not _fine(txn):
        return None
    return Footprint(writes=frozenset(txn.written))


def _plain(family: str, run: _Run, st: _Conn, txn: _Txn, parsed: Parsed, params, cat, many: bool,
           hint) -> Footprint | None:
    """A SELECT, INSERT, UPDATE or DELETE in ``txn`` (its own when autocommitted)."""
    first = txn.block and not txn.snapshot
    if family == "pg" and parsed.kind in _SNAPSHOT_TAKERS and not txn.snapshot:
        st.taking = txn  # taken once it has run (a statement that fails in parsing takes none)
    if not _fine(txn) or not st.known:
        txn.coarse = True
        return None
    res = _resources(family, run, parsed, params, cat, st.path, keyed=not many and family == "pg")
    if res is None:
        txn.coarse = True
        return None
    reads, writes = res
    if family == "pg":
        if first and txn.level == "repeatable read":
            reads |= {(family,)}  # its snapshot decides what every later read of the transaction sees
    elif txn.block and txn.level == "repeatable read" and not st.view:
        reads |= {(family,)}  # InnoDB's read view: made by the first consistent read
        if parsed.consistent and parsed.tables:
            st.taking = "view"
    txn.written |= writes
    return Footprint(reads=reads, writes=writes, tables=hint)


# -- PostgreSQL ------------------------------------------------------------------------------------

def pg_statement(conn, text: str, params, many: bool, hint) -> Footprint | None:
    """What ``text`` run on psycopg connection ``conn`` now touches; None when no finer
    footprint is established (the caller then uses the whole database, as before)."""
    here = _here()
    if here is None:
        return None
    ctl, run = here
    st = _claim(ctl, run, conn)
    if st is None:
        return None
    return _issued(st, _pg_statement(run, st, conn, text, params, many, hint))


def _pg_statement(run: _Run, st: _Conn, conn, text: str, params, many: bool, hint) -> Footprint | None:
    try:
        pg = conn.pgconn
        status, pipeline = int(pg.transaction_status), int(pg.pipeline_status)
        autocommit, psy_level = conn.autocommit, conn.isolation_level
    except Exception:  # noqa: BLE001 - a closed connection: the call fails on its own
        return None
    parsed = parse(text, "pg", params is not None)
    st.recheck |= parsed.ddl
    if pipeline:
        if st.txn is not None:
            st.txn.coarse = True
        return None
    if status == 0:  # idle: this statement begins a transaction
        st.txn = None
        _pg_probe(st)
    elif status == 3:  # in a failed transaction: only its end does anything
        if parsed.kind in ("commit", "rollback", "rollback-to"):
            return _ending(st.txn, "pg")
        return _NOTHING
    elif st.txn is None:  # begun by a round trip not seen here
        st.txn = _Txn(None, True, coarse=True)
    kind = parsed.kind
    txn = st.txn
    if txn is None:
        default = st.default if st.known else None
        if not autocommit:  # psycopg sends BEGIN [ISOLATION LEVEL ...] first
            level = _PG_LEVELS.get(int(psy_level)) if psy_level is not None else default
            txn = st.txn = _Txn(level, True)
        elif kind == "begin":
            st.txn = _Txn(parsed.level or default, True)
            return _NOTHING if _fine(st.txn) else None
        elif kind in ("commit", "rollback", "rollback-to", "savepoint", "release", "set-txn", "nothing", "show",
                      "harmless"):
            return _NOTHING  # outside a transaction: a warning or an error, nothing else
        else:
            txn = _Txn(default, False)  # this statement alone
    if kind in ("commit", "rollback", "rollback-to"):
        return _ending(txn, "pg")
    if kind in ("begin", "savepoint", "release", "nothing", "show", "harmless"):
        return _NOTHING if _fine(txn) else None
    if kind == "set-txn":
        if not txn.snapshot:
            txn.level = parsed.level
        return _NOTHING if _fine(txn) else None
    if kind in ("set", "other"):
        txn.coarse = True  # (a coarse transaction needs no snapshot kept)
        txn.ddl |= parsed.ddl
        if parsed.session or kind == "set":
            st.known = False
        return None
    return _plain("pg", run, st, txn, parsed, params, _catalog(run, "pg", _pg_where(conn)) if st.known else None,
                  many, hint)


def pg_ending(conn) -> Footprint | None:
    """``conn.commit()`` or ``conn.rollback()``."""
    here = _here()
    if here is None:
        return None
    ctl, run = here
    st = _claim(ctl, run, conn)
    if st is None:
        return None
    try:
        status = int(conn.pgconn.transaction_status)
    except Exception:  # noqa: BLE001
        return None
    if status == 0:
        return _NOTHING  # psycopg sends nothing
    return None if st.txn is None else _issued(st, _ending(st.txn, "pg"))


def pg_round_trip(conn) -> None:
    """A round trip psycopg made on its own (a transaction() block's BEGIN or COMMIT, COPY, a
    pipeline's sync): its transaction is not known statement by statement any more."""
    here = _here()
    if here is None:
        return
    st = _claim(here[0], here[1], conn)
    if st is None:
        return
    if st.txn is None:
        st.txn = _Txn(None, True, coarse=True)
    else:
        st.txn.coarse = True
    st.recheck = True  # COPY or a pipeline may have carried DDL


def _took(st: _Conn, ok: bool) -> None:
    if st.taking is not None and ok:
        if st.taking == "view":
            st.view = True
        else:
            st.taking.snapshot = True
    st.taking = None


def pg_after(conn, ok: bool) -> None:
    """After a statement or an end (``ok``: it succeeded): its snapshot is taken; read the
    catalog again where DDL may have changed it."""
    here = _here_after()
    if here is None:
        return
    ctl, run = here
    st = run.conns.get(id(conn))
    if st is None or st.conn is not conn:
        return
    _took(st, ok)
    st.inflight = None
    try:
        status = int(conn.pgconn.transaction_status)
    except Exception:  # noqa: BLE001
        return
    if st.recheck and status == 0:
        st.recheck = False
        _recheck(ctl, run, "pg", _pg_where(conn), None)


def _here_after():
    from toki.harness.controller import acting_outside_call

    me = acting_outside_call()
    if me is None:
        return None
    run = _runs.get(me[0])
    return None if run is None else (me[0], run)


def _recheck(ctl, run: _Run, family: str, where, db) -> None:
    """The catalog again, after DDL may have changed it. Footprints computed from the old one and
    not yet used would be wrong: the run is then unverifiable."""
    key = (family, repr(where), db)
    old = run.catalogs.get(key)
    if key not in run.catalogs:
        return
    new = _read_catalog(family, where, db)
    used = run.resolved.pop(id(old), {})
    run.catalogs[key] = new
    if new is not None and old is not None and all(
            new.find(name, path, family) == t for (name, path), t in used.items()):
        run.resolved[id(new)] = used
        return
    from toki.harness.controller import Unverifiable, current_agent

    got = current_agent()
    me = got[1].name if got else None
    for name in sorted(run.agents):
        if name == me:
            continue
        rec = ctl.pending_step(name)
        fp = getattr(rec, "touches", None)
        if fp is not None and any(r[:1] == (family,) and len(r) > 1 for r in fp.reads | fp.writes | fp.releases):
            err = Unverifiable(
                f"agent {me} changed the database's catalog (DDL) while agent {name}'s statement waited with a "
                "footprint computed from the catalog before it", fix="create tables, triggers and keys in setup, "
                "before the agents run")
            ctl.stop_with(err)
            raise err


# -- MariaDB ---------------------------------------------------------------------------------------

_my_query = None  # PyMySQL's Connection.query as it was before the hook (set by mysql_calls)


def set_my_query(query) -> None:
    global _my_query
    _my_query = query


def _my_where(conn):
    from toki.harness.observers import mysql_where

    return mysql_where(conn)


def _my_probe(st: _Conn) -> bool | None:
    """Is a transaction open on the session (``@@in_transaction``)? With its level and database
    (None: not known). Asked on the agent's own connection, with PyMySQL's query as it was
    before the hook: a variable read opens no transaction and makes no read view."""
    conn = st.conn
    st.known = False
    try:
        result = getattr(conn, "_result", None)
        if _my_query is None or (result is not None and getattr(result, "unbuffered_active", False)):
            return None
        var = "tx_isolation" if "mariadb" in str(conn.get_server_info()).lower() else "transaction_isolation"
        from toki.harness.controller import uncontrolled

        with uncontrolled(), _asking():  # the harness's own question, no effect of the agent's
            _my_query(conn, f"select @@in_transaction, @@session.{var}, database()")
        (in_txn, level, db), = conn._result.rows
    except Exception:  # noqa: BLE001 - not known: the whole database
        return None
    if db is None:
        return None
    st.default = str(level).lower().replace("-", " ")
    st.path = (db,)
    st.known = True
    return bool(in_txn)


def my_statement(conn, text: str, params, many: bool, hint) -> Footprint | None:
    """What ``text`` run on PyMySQL connection ``conn`` now touches (None: the whole database)."""
    here = _here()
    if here is None:
        return None
    ctl, run = here
    st = _claim(ctl, run, conn)
    if st is None:
        return None
    parsed = parse(text, "my", params is not None)
    return _issued(st, _my(run, st, parsed, parsed.kind, params, many, hint))


def my_txn(conn, kind: str) -> Footprint | None:
    """PyMySQL's ``begin()``, ``commit()``, ``rollback()``."""
    here = _here()
    if here is None:
        return None
    st = _claim(here[0], here[1], conn)
    if st is None:
        return None
    return _issued(st, _my(here[1], st, Parsed(kind), kind, None, False, frozenset()))


def _my(run: _Run, st: _Conn, parsed: Parsed, kind: str, params, many: bool, hint) -> Footprint | None:
    conn = st.conn
    st.recheck |= parsed.ddl
    in_txn = _my_probe(st)
    if in_txn is None or st.lost:
        if st.txn is not None:
            st.txn.coarse = True
        return None
    if not in_txn:
        st.txn, st.view = None, False
    elif st.txn is None:
        st.txn = _Txn(None, True, coarse=True)
    if kind == "set-txn":
        st.lost = True  # the next transaction's level, which no variable shows
        return None
    try:
        autocommit = conn.get_autocommit()
    except Exception:  # noqa: BLE001
        return None
    txn = st.txn
    if kind == "begin":
        if txn is not None:
            txn.coarse = True
            return None  # BEGIN commits the open transaction first
        st.txn = _Txn(parsed.level or st.default, True)
        if parsed.snapshot and _fine(st.txn):
            st.view = True
            return Footprint(reads=frozenset({("my",)}))
        return _NOTHING if _fine(st.txn) else None
    if txn is None:
        if kind in ("commit", "rollback", "rollback-to", "savepoint", "release", "nothing", "harmless"):
            return _NOTHING
        txn = _Txn(st.default, not autocommit)
        if not autocommit:
            st.txn = txn
    if kind in ("commit", "rollback", "rollback-to"):
        return _ending(txn, "my")
    if kind in ("savepoint", "release", "nothing", "harmless"):
        return _NOTHING if _fine(txn) else None
    if kind in ("set", "other", "show"):
        txn.coarse = True
        st.recheck |= kind == "other"
        return None
    return _plain("my", run, st, txn, parsed, params, _catalog(run, "my", _my_where(conn), st.path[0]), many, hint)


def my_after(conn, ok: bool) -> None:
    """After a statement or an end (``ok``: it succeeded): its read view is made; read the
    catalog again where DDL may have changed it (DDL commits implicitly in MariaDB: at once)."""
    here = _here_after()
    if here is None:
        return
    ctl, run = here
    st = run.conns.get(id(conn))
    if st is None or st.conn is not conn:
        return
    _took(st, ok)
    st.inflight = None
    if not st.recheck or not st.path:
        return
    st.recheck = False
    _recheck(ctl, run, "my", _my_where(conn), st.path[0])
