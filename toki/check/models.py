"""Consistency models and anomalies as data, with their sources (Elle's vocabulary).

Everything here is data plus three small graph walks. The tables follow Jepsen's Elle
(``elle.consistency-model``, Kingsbury and Alvaro, VLDB 2020), which cites:

- Adya: Adya, "Weak Consistency" (PhD thesis, MIT 1999); Adya, Liskov, O'Neil, "Generalized
  Isolation Level Definitions" (ICDE 2000)
- Bailis: Bailis, Davidson, Fekete et al., "Highly Available Transactions" (VLDB 2014)
- Berenson: Berenson, Bernstein, Gray et al., "A Critique of ANSI SQL Isolation Levels"
  (SIGMOD 1995): P4 lost update, A5A read skew, A5B write skew
- Cerone: Cerone, Bernardi, Gotsman, "A Framework for Transactional Consistency Models with
  Atomic Visibility" (CONCUR 2015); Cerone-SI: Cerone, Gotsman, "Analysing Snapshot Isolation"
  (PODC 2016)
- Daudjee: Daudjee, Salem, "Lazy Database Replication with Ordering Guarantees" (ICDE 2004)
  and "... with Snapshot Isolation" (VLDB 2006)
- Bernstein: Bernstein, Hadzilacos, Goodman, "Concurrency Control and Recovery" (1987)
- Hermitage: Kleppmann, https://github.com/ept/hermitage
- Zuikeviciute: Zuikeviciute, Pedone, "Correctness Criteria for Database Replication"
- ROLA: Liu, Ölveczky et al., "ROLA: A New Distributed Transaction Protocol"
- Elle: Kingsbury, Alvaro, "Elle: Inferring Isolation Anomalies from Experimental
  Observations" (VLDB 2020) and its source, for the generalisations it introduces itself.

Two kinds of names exist, as in Elle: canonical (Adya's PL-1, PL-2, PL-3, PL-SI, PL-SS, ...)
used inside the graph, and friendly ones (read-uncommitted, serializable, ...) used in results.

The tables are those of Elle's current release (``src/elle/consistency_model.clj`` at commit
dda36d8 of jepsen-io/elle): parallel snapshot isolation implies *update-atomic* (Cerone's read
atomic plus NoConflict; Elle: "ROLA (which actually provides UA)"), which forbids lost updates and
implies read atomic. Elle's older releases had ROLA in that place; toki follows the current one, so
a lost update rules out exactly update-atomic and cursor-stability, as Elle's lost-update test
asserts. The conformance suite (``tests/elle_conformance/``) checks these tables against Elle's own
test expectations.

"Serializable" means conflict serializability (Bernstein), as in Elle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from toki.errors import ConfigError

# --- names --------------------------------------------------------------------------------

#: friendly name -> canonical name (Elle's canonical-model-names).
CANONICAL = {
    "consistent-view": "PL-2+",              # Adya
    "conflict-serializable": "PL-3",         # Adya
    "cursor-stability": "PL-CS",             # Adya
    "forward-consistent-view": "PL-FCV",     # Adya
    "monotonic-snapshot-read": "PL-MSR",     # Adya
    "monotonic-view": "PL-2L",               # Adya
    "read-committed": "PL-2",                # Adya (Elle: "I think Adya means this")
    "read-uncommitted": "PL-1",              # Adya (same caveat)
    "repeatable-read": "PL-2.99",            # Adya
    "serializable": "PL-3",                  # conflict serializable, Bernstein
    "snapshot-isolation": "PL-SI",           # Adya
    "strict-serializable": "PL-SS",          # Adya
    "strong-serializable": "PL-SS",          # Elle: strong = strict
    "update-serializable": "PL-3U",          # Adya
    "strong-session-read-uncommitted": "strong-session-PL-1",  # Elle
    "strong-session-read-committed": "strong-session-PL-2",    # Elle
    "strong-read-uncommitted": "strong-PL-1",                  # Elle
    "strong-read-committed": "strong-PL-2",                    # Elle
}

#: canonical -> friendly, as Elle's friendly-model-names: PL-3 is "serializable" (Elle sets it so),
#: and PL-SS is "strong-serializable": Elle inverts canonical-model-names into a hash map, where
#: strong-serializable wins over strict-serializable (Elle's consistency-model tests expect
#: strong-serializable in also-not). Both names are accepted as input.
FRIENDLY = {c: f for f, c in CANONICAL.items() if f not in ("conflict-serializable", "strict-serializable")}


def canonical(model: str) -> str:
    return CANONICAL.get(model, model)


def friendly(model: str) -> str:
    return FRIENDLY.get(model, model)


# --- the model lattice: a -> b means a history satisfying a also satisfies b ---------------
# Each entry: (stronger, weaker, source). Names as Elle writes them; canonicalised on load.
MODEL_EDGES: tuple[tuple[str, str, str], ...] = (
    ("causal-cerone", "read-atomic", "Cerone"),
    ("consistent-view", "cursor-stability", "Adya"),
    ("consistent-view", "monotonic-view", "Adya"),
    ("conflict-serializable", "view-serializable", "Bernstein"),
    ("cursor-stability", "read-committed", "Bailis"),
    ("cursor-stability", "PL-2", "Adya"),
    ("forward-consistent-view", "consistent-view", "Adya"),
    ("PL-2", "PL-1", "Adya"),
    ("PL-3", "repeatable-read", "Adya"),
    ("PL-3", "update-serializable", "Adya"),
    ("update-serializable", "forward-consistent-view", "Adya"),
    ("monotonic-atomic-view", "read-committed", "Bailis"),
    ("monotonic-view", "PL-2", "Adya"),
    ("monotonic-snapshot-read", "PL-2", "Adya"),
    ("parallel-snapshot-isolation", "causal-cerone", "Cerone"),
    ("parallel-snapshot-isolation", "update-atomic", "ROLA (which actually provides UA); Elle"),
    ("prefix", "causal-cerone", "Cerone"),
    ("read-atomic", "monotonic-atomic-view", "Cerone"),
    ("read-committed", "read-uncommitted", "SQL"),
    ("repeatable-read", "cursor-stability", "Adya"),
    ("repeatable-read", "monotonic-atomic-view", "Bailis"),
    ("update-atomic", "read-atomic", "Cerone"),
    ("serializable", "repeatable-read", "SQL"),
    ("serializable", "snapshot-isolation", "Bailis, Cerone"),
    ("serializable", "view-serializable", "Bernstein"),
    ("session-serializable", "1SR", "Zuikeviciute"),
    ("snapshot-isolation", "forward-consistent-view", "Adya"),
    ("snapshot-isolation", "monotonic-atomic-view", "Bailis"),
    ("snapshot-isolation", "monotonic-snapshot-read", "Adya"),
    ("snapshot-isolation", "parallel-snapshot-isolation", "Cerone"),
    ("snapshot-isolation", "prefix", "Cerone"),
    ("strict-serializable", "PL-3", "Adya"),
    ("strict-serializable", "serializable", "Bailis"),
    ("strict-serializable", "linearizable", "Bailis"),
    ("strict-serializable", "snapshot-isolation", "Adya"),
    ("strict-serializable", "strong-snapshot-isolation", "Elle (no citation)"),
    ("strict-serializable", "strong-session-serializable", "Daudjee"),
    ("strong-session-PL-1", "PL-1", "Elle"),
    ("strong-session-PL-2", "PL-2", "Elle"),
    ("strong-session-PL-2", "strong-session-PL-1", "Elle"),
    ("strong-PL-1", "strong-session-PL-1", "Elle"),
    ("strong-PL-2", "strong-session-PL-2", "Elle"),
    ("strong-PL-2", "strong-PL-1", "Elle"),
    ("strong-session-serializable", "serializable", "Daudjee"),
    ("strong-session-serializable", "strong-session-snapshot-isolation", "Elle"),
    ("strong-session-snapshot-isolation", "snapshot-isolation", "Daudjee-SI, Cerone-SI"),
    ("strong-session-snapshot-isolation", "strong-session-PL-2", "Daudjee-SI, Cerone-SI"),
    ("strong-serializable", "session-serializable", "Zuikeviciute"),
    ("strong-snapshot-isolation", "strong-session-snapshot-isolation", "Daudjee-SI"),
    ("strong-snapshot-isolation", "strong-PL-2", "Daudjee-SI"),
    ("linearizable", "sequential", "Bailis"),
    ("sequential", "causal", "Bailis"),
    ("causal", "writes-follow-reads", "Bailis"),
    ("causal", "PRAM", "Bailis"),
    ("PRAM", "monotonic-reads", "Bailis"),
    ("PRAM", "monotonic-writes", "Bailis"),
    ("PRAM", "read-your-writes", "Bailis"),
)

# --- which anomalies each model directly forbids (on top of weaker models it implies) -------
PROSCRIBED: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("causal-cerone", ("internal", "G1a"), "Cerone (incomplete)"),
    ("cursor-stability", ("G1", "G-cursor", "lost-update"), "Adya, Bailis"),
    ("monotonic-view", ("G1", "G-monotonic"), "Adya"),
    ("monotonic-snapshot-read", ("G1", "G-MSR"), "Adya"),
    ("consistent-view", ("G1", "G-single"), "Adya"),
    ("forward-consistent-view", ("G1", "G-SIb"), "Adya"),
    ("parallel-snapshot-isolation", ("internal", "G1a"), "Cerone (incomplete)"),
    ("PL-3", ("G1", "G2", "predicate-read-miss", "PL-3-cycle-exists"), "Adya"),
    ("PL-2", ("G1", "PL-2-cycle-exists"), "Adya"),
    ("PL-1", ("G0", "duplicate-elements", "cyclic-versions", "PL-1-cycle-exists"),
     "Adya; duplicate-elements and cyclic-versions: Elle (version orders are total)"),
    ("prefix", ("internal", "G1a"), "Cerone (incomplete)"),
    ("serializable", ("internal",), "Cerone (incomplete)"),
    ("snapshot-isolation", ("internal", "G1", "G-SI", "G-nonadjacent", "PL-SI-cycle-exists"),
     "Cerone, Adya; G-nonadjacent: Cerone-SI and Elle (generalized SI forbids cycles whose rw edges "
     "are all nonadjacent)"),
    ("read-atomic", ("internal", "G1a", "future-read"), "Cerone (incomplete)"),
    ("repeatable-read", ("G1", "G2-item", "PL-2.99-cycle-exists", "lost-update"), "Adya, Bailis"),
    ("strict-serializable", ("G1", "G1c-realtime", "G2-realtime", "PL-SS-cycle-exists"), "Adya"),
    ("strong-session-PL-1", ("strong-session-PL-1-cycle-exists", "G0-process"), "Elle"),
    ("strong-session-PL-2", ("strong-session-PL-2-cycle-exists", "G1c-process"), "Elle"),
    ("strong-PL-1", ("strong-PL-1-cycle-exists", "G0-realtime"), "Elle"),
    ("strong-PL-2", ("strong-PL-2-cycle-exists", "G1c-realtime"), "Elle"),
    ("strong-session-snapshot-isolation",
     ("internal", "G1-process", "G-nonadjacent-process", "strong-session-snapshot-isolation-cycle-exists"),
     "Elle (by analogy with Daudjee-SI)"),
    ("strong-snapshot-isolation",
     ("internal", "G1-realtime", "G-nonadjacent-realtime", "strong-snapshot-isolation-cycle-exists"),
     "Elle (by analogy with Daudjee-SI)"),
    ("strong-session-serializable",
     ("G1-process", "G2-process", "strong-session-serializable-cycle-exists"), "Daudjee; Alvaro (unpublished)"),
    ("update-serializable", ("G1", "G-update"), "Adya"),
    ("update-atomic", ("lost-update",), "Cerone (NoConflict)"),
)

# --- anomaly a -> b: seeing a means b is present too ----------------------------------------
IMPLIED_ANOMALIES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("G0", ("G1c", "G0-process"), "Adya; trivially a process variant"),
    ("G0-process", ("G1c-process", "G0-realtime"), "processes are single-threaded"),
    ("G0-realtime", ("G1c-realtime",), "Adya"),
    ("G1a", ("G1",), "Adya: G1 = G1a | G1b | G1c"),
    ("G1b", ("G1",), "Adya"),
    ("G1c", ("G1", "G1c-process"), "Adya"),
    ("G1c-process", ("G1c-realtime", "G1-process"), "processes are single-threaded"),
    ("G1c-realtime", ("G1-realtime",), "Adya"),
    ("G1", ("G1-process",), "trivial"),
    ("G1-process", ("G1-realtime",), "trivial"),
    ("G-single-item", ("G-single", "G-single-item-process", "G-nonadjacent-item"), "Elle"),
    ("G-single-item-process", ("G-single-process", "G-single-item-realtime", "G-nonadjacent-item-process"), "Elle"),
    ("G-single-item-realtime", ("G-single-realtime", "G-nonadjacent-item-realtime"), "Elle"),
    ("G-single", ("G-nonadjacent", "GSIb", "G-single-process"), "Adya; Elle"),
    ("G-single-process", ("G-nonadjacent-process", "G-single-realtime"), "Elle"),
    ("G-single-realtime", ("G-nonadjacent-realtime",), "Elle"),
    ("G-nonadjacent-item", ("G-nonadjacent", "G2-item", "G-nonadjacent-item-process"), "Elle"),
    ("G-nonadjacent-item-process", ("G-nonadjacent-process", "G2-item-process", "G-nonadjacent-item-realtime"), "Elle"),
    ("G-nonadjacent-item-realtime", ("G2-item-realtime", "G-nonadjacent-realtime"), "Elle"),
    ("G-nonadjacent", ("G2", "G-nonadjacent-process"), "Adya; Elle"),
    ("G-nonadjacent-process", ("G2-process", "G-nonadjacent-realtime"), "Elle"),
    ("G-nonadjacent-realtime", ("G2-realtime",), "Elle"),
    ("G2", ("G2-process",), "trivial"),
    ("G2-item", ("G2", "G2-item-process"), "Adya"),
    ("G2-item-process", ("G2-process", "G2-item-realtime"), "trivial"),
    ("G2-item-realtime", ("G2-realtime",), "trivial"),
    ("G2-process", ("G2-realtime",), "processes are single-threaded"),
    ("GSIa", ("GSI",), "Adya"),
    ("GSIb", ("GSI",), "Adya"),
    ("incompatible-order", ("G1a",), "Elle: two committed reads from different timelines imply a dirty read"),
    ("future-read", ("G1c",), "Elle: a trivial wr cycle T1 -> T1"),
    ("dirty-update", ("G1a",), "Elle: a dirty read that also affects writes"),
    ("lost-update", ("write-skew", "G2-item"), "Bailis; Adya H_lu"),
    ("write-skew", ("G2",), "Hermitage"),
)

#: Extra severity order used only to search the worst cycles first (Elle's anomaly-severity-graph).
SEVERITY: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("G0", ("G1c",)), ("G0-process", ("G1c-process",)), ("G0-realtime", ("G1c-realtime",)),
    ("G1c", ("G-single", "G2-item")), ("G1c-process", ("G-single-process", "G2-item-process")),
    ("G1c-realtime", ("G-single-realtime", "G2-item-realtime")),
    ("G2", ("G0-process",)), ("G2-process", ("G0-realtime",)),
)

#: Anomalies that make a result "unknown" rather than false (Elle's unknown-anomaly-types).
UNKNOWN_ANOMALIES = frozenset({"empty-transaction-graph", "cycle-search-timeout"})


# --- graph helpers --------------------------------------------------------------------------

def _adj(pairs: Iterable[tuple[str, str]]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    out: dict[str, set[str]] = {}
    inn: dict[str, set[str]] = {}
    for a, b in pairs:
        out.setdefault(a, set()).add(b)
        inn.setdefault(b, set()).add(a)
        out.setdefault(b, set())
        inn.setdefault(a, set())
    return out, inn


def _reach(adj: dict[str, set[str]], start: Iterable[str]) -> set[str]:
    seen = set(start)
    todo = deque(seen)
    while todo:
        for n in adj.get(todo.popleft(), ()):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


_MODEL_OUT, _MODEL_IN = _adj((canonical(a), canonical(b)) for a, b, _ in MODEL_EDGES)
_PROSCRIBES: dict[str, set[str]] = {}
_PROSCRIBED_BY: dict[str, set[str]] = {}
for _m, _as, _src in PROSCRIBED:
    for _a in _as:
        _PROSCRIBES.setdefault(canonical(_m), set()).add(_a)
        _PROSCRIBED_BY.setdefault(_a, set()).add(canonical(_m))
_ANOM_OUT, _ANOM_IN = _adj((a, b) for a, bs, _ in IMPLIED_ANOMALIES for b in bs)

ALL_MODELS = frozenset(_MODEL_OUT) | frozenset(_PROSCRIBES) | frozenset(CANONICAL) | frozenset(CANONICAL.values())
FRIENDLY_MODELS = sorted({friendly(m) for m in ALL_MODELS})


def _topo_depths() -> dict[str, int]:
    # Depth in the merged implication + severity graph: 0 = implied by nothing.
    edges = [(a, b) for a, bs, _ in IMPLIED_ANOMALIES for b in bs] + [(a, b) for a, bs in SEVERITY for b in bs]
    out, inn = _adj(edges)
    depth: dict[str, int] = {}
    indeg = {n: len(inn[n]) for n in out}
    todo = deque(n for n, d in indeg.items() if d == 0)
    for n in todo:
        depth[n] = 0
    while todo:
        n = todo.popleft()
        for m in out[n]:
            depth[m] = max(depth.get(m, 0), depth[n] + 1)
            indeg[m] -= 1
            if indeg[m] == 0:
                todo.append(m)
    for a in _PROSCRIBED_BY:
        depth.setdefault(a, 0)
    return depth


ANOMALY_DEPTH = _topo_depths()
ALL_ANOMALIES = tuple(sorted(ANOMALY_DEPTH, key=lambda a: (ANOMALY_DEPTH[a], a)))


def validate_models(models: Iterable[str]) -> list[str]:
    models = list(models)
    unknown = [m for m in models if m not in ALL_MODELS]
    if unknown:
        raise ConfigError(f"unknown consistency model {', '.join(map(repr, unknown))}",
                          fix="known models: " + ", ".join(FRIENDLY_MODELS))
    return models


def validate_anomalies(anomalies: Iterable[str]) -> list[str]:
    anomalies = list(anomalies)
    unknown = [a for a in anomalies if a not in ANOMALY_DEPTH]
    if unknown:
        raise ConfigError(f"unknown anomaly {', '.join(map(repr, unknown))}",
                          fix="known anomalies: " + ", ".join(ALL_ANOMALIES))
    return anomalies


def implied_models(models: Iterable[str]) -> set[str]:
    """Every (canonical) model implied by the given ones, themselves included."""
    return _reach(_MODEL_OUT, [canonical(m) for m in validate_models(models)])


def impossible_closure(models: Iterable[str]) -> set[str]:
    """Given models ruled out, every (canonical) model also ruled out (the stronger ones)."""
    return _reach(_MODEL_IN, [canonical(m) for m in validate_models(models)])


def anomalies_implying(anomalies: Iterable[str]) -> set[str]:
    """Every anomaly whose presence implies one of these (themselves included)."""
    return _reach(_ANOM_IN, anomalies)


def implied_anomalies(anomalies: Iterable[str]) -> set[str]:
    """Every anomaly implied by these (themselves included)."""
    return _reach(_ANOM_OUT, anomalies)


def anomalies_prohibited_by(models: Iterable[str]) -> set[str]:
    """Anomalies that cannot be present if all of these models hold."""
    direct = set()
    for m in implied_models(models):
        direct |= _PROSCRIBES.get(m, set())
    return anomalies_implying(direct)


def impossible_models(anomalies: Iterable[str]) -> set[str]:
    """(Canonical) models that cannot hold given these anomalies are present."""
    direct = set()
    for a in implied_anomalies(anomalies):
        direct |= _PROSCRIBED_BY.get(a, set())
    return _reach(_MODEL_IN, direct)


def weakest(models: set[str]) -> set[str]:
    """The members of a set of models that imply no other member (the weakest ones)."""
    return {m for m in models if not (_reach(_MODEL_OUT, [m]) - {m}) & models}


def boundary(anomalies: Iterable[str]) -> dict[str, list[str]]:
    """Elle's friendly boundary: ``not`` = weakest models ruled out, ``also_not`` = the stronger rest."""
    imp = impossible_models(anomalies)
    is_not = weakest(imp)
    return {"not": sorted({friendly(m) for m in is_not}),
            "also_not": sorted({friendly(m) for m in imp - is_not} - {friendly(m) for m in is_not})}


def _as_written(m: str) -> str:
    # a friendly name as the table writes it (strict-serializable stays so), a canonical one made friendly
    return m if m in CANONICAL else friendly(m)


def lattice() -> dict:
    """The whole lattice as plain data (for ``toki check --lattice`` and the docs)."""
    return {
        "models": [{"stronger": _as_written(a), "weaker": _as_written(b), "source": s} for a, b, s in MODEL_EDGES],
        "proscribes": [{"model": _as_written(m), "anomalies": list(a), "source": s} for m, a, s in PROSCRIBED],
        "implied_anomalies": [{"anomaly": a, "implies": list(b), "source": s} for a, b, s in IMPLIED_ANOMALIES],
        "canonical_names": dict(CANONICAL),
    }
