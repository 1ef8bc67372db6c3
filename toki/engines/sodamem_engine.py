"""SodaMem (PyPI ``sodamem``), real and unmodified, offline.

SodaMem keeps one SQLite file per store (``SodaMem.open(data_dir)`` opens
``data_dir/memory.db``) behind one sqlite3 connection guarded by a ``threading.RLock``; each
Store method commits on its own. Its ingest maintainer (``GraphMaintainer.maintain``) reads the
user's facts, decides duplicate / contradiction / supersession in Python, upserts each
superseded loser, then upserts the new fact: no transaction spans the read and the writes.

What toki plugs in, all through SodaMem's own extension points:
- an embedder (any object with ``embed(texts)``): :class:`HashEmbedder`, deterministic;
- an extractor (any object with ``extract_session(spans, user_id=, session_date=)``):
  :class:`ScriptedExtractor`, which plays the LLM's part by returning, for each turn text,
  the ``FactEvent`` a model would have extracted, with ids and times derived from the input;
- the store's RLock is replaced by an instrumented lock (:mod:`toki.harness.locks`) so that
  waiting for it is seen by the controller.
Agents call the public API (``SodaMem.ingest``, ``Store.supersede_fact_event``,
``archive_fact_event``, ``delete_fact_event``); the state is read back with
``get_all_fact_events`` and ``get_fact_edges``.

``sodamem-fixed`` is the same engine with the smallest wrapper change that makes ingest
serializable: each agent's call runs inside one ``BEGIN IMMEDIATE`` transaction on the store's
connection (SodaMem's per-method commits are held until the call ends) while holding the store's
own lock, so the maintainer's candidate read and its writes are one atomic unit.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from toki.harness.engine import Detector, Scenario
from toki.harness.locks import InstrumentedLock
from toki.errors import ConfigError

USER = "alice"
DIM = 16
_PATCHING = threading.Lock()


def _require():
    try:
        import sodamem  # noqa: F401
    except ImportError:
        raise ConfigError("SodaMem is not installed", fix="pip install 'toki[engines]' (or pip install sodamem)") from None
    import sodamem

    return sodamem


def _ts(day: str) -> float:
    t = datetime.fromisoformat(day)
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


class HashEmbedder:
    """Deterministic unit vectors from a hash of the text: stable across runs and processes."""

    def embed(self, texts):
        out = []
        for t in texts:
            h = hashlib.sha256(str(t).encode()).digest()
            v = [(b - 127.5) for b in h[:DIM]]
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / n for x in v])
        return out


# What the stand-in LLM extracts from each utterance: (kind, modality, predicate, object, valid_from, cue).
CLAIMS: dict[str, dict] = {
    "I live in Berlin.": dict(kind="state", modality="current_state", predicate="lives_in", obj="Berlin",
                              valid_from="2026-01-01"),
    "I moved to Rome.": dict(kind="state", modality="current_state", predicate="lives_in", obj="Rome",
                             valid_from="2026-03-01"),
    "I moved to Paris.": dict(kind="state", modality="current_state", predicate="lives_in", obj="Paris",
                              valid_from="2026-05-01"),
    "I prefer tea.": dict(kind="preference", modality="preference", predicate="prefers_drink", obj="tea",
                          valid_from="2026-01-01"),
    "I now prefer coffee instead.": dict(kind="preference", modality="preference", predicate="prefers_drink",
                                         obj="coffee", valid_from="2026-03-01"),
    "I currently prefer mate.": dict(kind="preference", modality="preference", predicate="prefers_drink",
                                     obj="mate", valid_from="2026-05-01"),
    "I like juice.": dict(kind="preference", modality="preference", predicate="prefers_drink", obj="juice",
                          valid_from="2026-03-01"),
    "I like cocoa.": dict(kind="preference", modality="preference", predicate="prefers_drink", obj="cocoa",
                          valid_from="2026-05-01"),
    # What an LLM extractor really produced once (the object folded into the predicate).
    "I moved to Mangwon-dong.": dict(kind="state", modality="current_state", predicate="live_in_mangwon_dong",
                                     obj="Mangwon-dong", valid_from="2026-06-01"),
    "You live in Lisbon.": dict(kind="state", modality="current_state", predicate="lives_in", obj="Lisbon",
                                valid_from="2026-04-01"),
}


# A recorded workload (toki record) says "I live in CLAIM as of ISO-TIME." for a claim of a slot.
_RECORDED = "I live in "


def _recorded_claim(text: str) -> dict | None:
    if not (text.startswith(_RECORDED) and " as of " in text and text.endswith(".")):
        return None
    obj, _, when = text[len(_RECORDED):-1].rpartition(" as of ")
    return dict(kind="state", modality="current_state", predicate="lives_in", obj=obj, valid_from=when)


class ScriptedExtractor:
    """SodaMem's extractor port with a deterministic stand-in for the LLM behind it."""

    split_events = deepest_split = split_exhausted = high_budget_recovered = 0

    def usage_summary(self) -> dict:
        return {}  # no tokens spent: the stand-in is not a model

    def extract_session(self, spans, *, user_id: str, session_date: str = ""):
        from sodamem.models import FactEvent, FactKind, Modality, SourceType

        facts = []
        for span in spans:
            claim = CLAIMS.get(span.text.strip()) or _recorded_claim(span.text.strip())
            if claim is None:
                raise ConfigError(f"the scripted extractor has no extraction for {span.text!r}",
                                  fix="add it to toki.engines.sodamem_engine.CLAIMS")
            fid = "fact_" + hashlib.sha256(f"{span.span_id}|{span.text}".encode()).hexdigest()[:12]
            vf = _ts(claim["valid_from"])
            facts.append(FactEvent(
                user_id=user_id, kind=FactKind(claim["kind"]), source_span_ids=[span.span_id], fact_id=fid,
                predicate_raw=claim["predicate"].replace("_", " "), predicate_canonical=claim["predicate"],
                event_type=claim["predicate"], object_entity_ids=[claim["obj"].lower()],
                modality=Modality(claim["modality"]), valid_from=vf, document_time=vf,
                source_type=SourceType.EXPLICIT_TEXT, confidence=0.9,
                metadata={"support_text": span.text, "entity_roles": {"subject": "user", "value": claim["obj"]}},
                created_at=vf))
        return facts


# -- the engine -------------------------------------------------------------------------------

class SodaMemEngine:
    executed = "real"

    def __init__(self, *, fixed: bool = False):
        self.fixed = fixed
        self.name = "sodamem-fixed" if fixed else "sodamem"
        self.scenarios = _scenarios(self)

    @property
    def version(self) -> str:
        return _require().__version__

    @property
    def system(self) -> str:
        """What the row stands for in verdict tables: the system and version."""
        return f"SodaMem {self.version}" + (" + transaction wrapper (a fix)" if self.fixed else "")

    @property
    def description(self) -> str:
        if self.fixed:
            return ("SodaMem with each agent call inside one BEGIN IMMEDIATE transaction under the store lock "
                    "(the smallest wrapper fix)")
        return "SodaMem, its unmodified code (SQLite store, ingest maintainer, PATCH supersede)"

    def open(self, location: Path):
        sodamem = _require()
        # Without chromadb (not needed: retrieval is not under test) every open logs a warning.
        logging.getLogger("sodamem.memory.storage.store").setLevel(logging.ERROR)
        return sodamem.SodaMem.open(Path(location), embedder=HashEmbedder(), extractor=ScriptedExtractor(),
                                    prompts={"extract_system": "toki scripted extractor"})

    def prepare(self, mem, controller) -> None:
        """Hand the store an instrumented lock in place of its RLock (and its rules sub-store too)."""
        store = mem.store
        lock = InstrumentedLock(f"Store._lock#{id(store) % 1000:03d}")
        store._lock = lock
        rules = getattr(store, "entity_rules", None)
        if rules is not None and hasattr(rules, "_lock"):
            rules._lock = lock

    def close(self, mem) -> None:
        mem.close()

    def state(self, mem) -> dict:
        store = mem.store
        facts = []
        for f in store.get_all_fact_events(USER, active_only=False):
            prov = f.provenance if isinstance(f.provenance, dict) else {}
            facts.append({"object": (f.object_entity_ids or [""])[0], "predicate": f.predicate_canonical,
                          "status": getattr(f.status, "value", f.status), "valid_until": f.valid_until,
                          "superseded_by": _obj_of(store, prov.get("superseded_by_fact_id")),
                          "merged": len(prov.get("merged_fact_ids", []))})
        edges = sorted({(_obj_of(store, e.src_fact_id), _obj_of(store, e.dst_id), getattr(e.edge_type, "value",
                                                                                          e.edge_type))
                        for e in store.get_fact_edges(USER)})
        facts.sort(key=lambda d: (d["predicate"], d["object"], d["status"]))
        return {"facts": facts, "edges": [list(e) for e in edges]}

    # -- toki record: worker processes on one SQLite file ---------------------------------------
    record_fresh_claims = True  # a re-added place is a new fact (a new valid time), by design
    def record_setup(self, store: str) -> None:
        """The store's file and schema, made once before the workers open it (SodaMem's own open
        refuses a store whose schema another process is still creating)."""
        self.close(self.open(Path(store)))

    def record_client(self, store: str) -> "SodaMemClient":
        """A memory client for ``toki record``: a slot is a SodaMem user's residence (one
        current-state predicate), a claim the place; each process opens the store's one file."""
        # The fix holds SodaMem's per-method commits until the call ends (run_call), which needs the
        # connection class toki's sqlite3 hook makes; outside any run its calls are plain ones.
        # Either way the connection waits up to 30 s for the others' transactions from its first
        # statement on: SodaMem's own open writes (its schema check), and four processes open at
        # once (sqlite3's default of 5 s ran out on a loaded machine: "database is locked").
        import sqlite3

        from toki.harness.sqlite_calls import controlled_connect

        def connect(*args, **kwargs):
            kwargs["timeout"] = 30.0
            conn = (controlled_connect if self.fixed else saved)(*args, **kwargs)
            conn.execute("pragma busy_timeout = 30000")
            return conn

        with _PATCHING:  # client threads open their stores at once: one patch at a time
            saved = sqlite3.connect
            sqlite3.connect = connect
            try:
                return SodaMemClient(self, self.open(Path(store)))
            finally:
                sqlite3.connect = saved

    # -- a trial as a memory history (toki.record.trial_history) -------------------------------
    def memory_history(self, scenario: str, outcome) -> dict | None:
        """The two-moves scenarios (each agent ingests one contradicting move over 'I live in
        Berlin'): slot ``alice/lives_in``, a claim is the place. An agent's op adds its place and
        retracts the places its fact superseded (``superseded_by`` names it); a place that lost at
        once to the other agent's (older by valid time) is retracted by the op of the place that
        superseded it (the state does not say which ingest closed it; a serial order with that op
        after the loser's explains it either way). The final read is ``state()``'s
        facts: the active places (current) and every place (history, in valid-time order, the
        order SodaMem supersedes by)."""
        if scenario not in ("double-supersede", "double-supersede-shared") or not isinstance(outcome.state, dict) \
                or "facts" not in outcome.state:
            return None
        slot = "alice/lives_in"
        claim_of = {"A": "rome", "B": "paris"}
        facts = [f for f in outcome.state["facts"] if f["predicate"] == "lives_in"]
        places = {f["object"] for f in facts}
        agents: dict[str, list] = {}
        for agent, claim in claim_of.items():
            if claim not in places and agent not in outcome.completed:
                agents[agent] = [["add", slot, claim]]  # never happened (it fails or ends info)
                continue
            mops = [["retract", slot, f["object"]] for f in facts if f["superseded_by"] == claim]
            agents[agent] = mops + [["add", slot, claim]]
        order = sorted(facts, key=lambda f: CLAIMS_BY_OBJECT[f["object"]]["valid_from"])
        final = [["current", slot, sorted(f["object"] for f in facts if f["status"] == "active")],
                 ["history", slot, [f["object"] for f in order]]]
        return {"setup": [["add", slot, "berlin"]], "agents": agents, "final": final}

    # -- what one agent does ------------------------------------------------------------------
    def run_call(self, mem, what: tuple) -> Any:
        if not self.fixed:
            return _perform(mem, what)
        store = mem.store
        conn = store._conn
        with store._lock:
            conn.execute("BEGIN IMMEDIATE")
            conn.hold_commits = 1
            try:
                result = _perform(mem, what)
            except BaseException:
                conn.hold_commits = 0
                conn.rollback()
                raise
            conn.hold_commits = 0
            conn.commit()
            return result


class SodaMemClient:
    """SodaMem's public API as memory micro-ops. ``add`` ingests "I live in CLAIM as of NOW." for
    the slot's user (the stand-in extractor makes it a current-state fact valid from now, so a
    later add supersedes an earlier one, as SodaMem orders by valid time); ``current`` lists the
    user's active residence facts, ``history`` every residence fact, superseded ones included,
    in the order they were made. The fixed variant runs each add inside one BEGIN IMMEDIATE."""

    def __init__(self, engine: "SodaMemEngine", mem):
        self.engine, self.mem = engine, mem
        self.mem.store._conn.execute("pragma busy_timeout = 30000")  # processes wait for each other's writes

    def add(self, slot: str, claim: str) -> list[str]:
        """Ingest the claim; return the places SodaMem superseded with it (its losers name the new
        fact in ``provenance.superseded_by_fact_id``), and the claim itself when the new fact lost
        at once (it is dated before the current one: SodaMem orders by valid time)."""
        now = datetime.now(timezone.utc).isoformat(timespec="microseconds")
        text = f"{_RECORDED}{claim} as of {now}."
        # The read-back is part of the call (inside the fix's transaction), so what it reports is
        # what this ingest did, not what a later one did since.
        return self.engine.run_call(self.mem, ("ingest-recorded", slot, text, claim))

    def _facts(self, slot: str, active_only: bool) -> list[str]:
        # SodaMem lists a user's facts in the order it stored them (rowid): the audit history's order.
        facts = [f for f in self.mem.store.get_all_fact_events(slot, active_only=active_only)
                 if f.predicate_canonical == "lives_in"]
        return [(f.object_entity_ids or [""])[0] for f in facts]

    def current(self, slot: str) -> list[str]:
        return self._facts(slot, True)

    def history(self, slot: str) -> list[str]:
        return self._facts(slot, False)

    def close(self) -> None:
        self.mem.close()


def _superseded_by(mem, slot: str, claim: str) -> list[str]:
    """The places the fact just made for ``claim`` superseded (its losers name it), and the claim
    itself when it lost at once to a fact stored before it (dated later: SodaMem orders by valid
    time).

    Only losers stored before the new fact count: those its ingest closed. A loser stored after it
    was closed by its own ingest (it lost at once, and its own op reports that); without the
    fix's transaction around the call, this read-back can run after such a later ingest and would
    otherwise claim the later op's retraction too (two ops retracting one claim, the second
    before it was added: a G0 the recorder made, not SodaMem). Inside the fix's transaction no
    fact stored after this one exists yet, so there this changes nothing."""
    facts = mem.store.get_all_fact_events(slot, active_only=False)  # in the order stored
    place = lambda f: (f.object_entity_ids or [""])[0]  # noqa: E731
    at = {f.fact_id: i for i, f in enumerate(facts)}
    mine = [f for f in facts if place(f) == claim.lower()]
    ids = {f.fact_id for f in mine}
    prov = lambda f: f.provenance if isinstance(f.provenance, dict) else {}  # noqa: E731
    out = [place(f) for f in facts if prov(f).get("superseded_by_fact_id") in ids
           and at[f.fact_id] < at[prov(f)["superseded_by_fact_id"]]]
    if any(at.get(prov(f).get("superseded_by_fact_id"), len(facts)) < at[f.fact_id] for f in mine):
        out.append(claim)
    return out


def _obj_of(store, fact_id):
    if not fact_id:
        return None
    f = store.get_fact_event(fact_id)
    if f is not None:
        return (f.object_entity_ids or [fact_id])[0]
    return f"<deleted {fact_id}>" if str(fact_id).startswith("fact_") else fact_id  # entities, spans: stable ids


def _session(text: str) -> str:
    return "s_" + hashlib.sha256(text.encode()).hexdigest()[:8]


def _ingest(mem, text: str, role: str = "user", session: str = ""):
    day = CLAIMS[text]["valid_from"]
    return mem.ingest([{"role": role, "content": text}], user_id=USER, session_id=_session(text + session),
                      session_time=f"{day}T12:00:00")


def _fact_id_of(mem, obj: str) -> str:
    for f in mem.store.get_all_fact_events(USER, active_only=False):
        if (f.object_entity_ids or [""])[0] == obj.lower():
            return f.fact_id
    raise LookupError(f"no fact about {obj}")


def _perform(mem, what: tuple):
    op, *args = what
    if op == "ingest":
        r = _ingest(mem, *args)
        return {"facts": r.counts.get("fact_events")}
    if op == "ingest-session":  # the same utterance in a session of its own (another conversation)
        r = _ingest(mem, args[0], session=args[1])
        return {"facts": r.counts.get("fact_events")}
    if op == "ingest-recorded":  # toki record: (slot, utterance, claim); returns what the ingest superseded
        slot, text, claim = args
        mem.ingest([{"role": "user", "content": text}], user_id=slot, session_id=_session(text),
                   session_time=text.rsplit(" as of ", 1)[1][:-1])
        return _superseded_by(mem, slot, claim)
    if op == "ingest-in-order":  # several sessions, one after another, in the order given
        return [_ingest(mem, t).counts.get("fact_events") for t in args]
    if op == "ingest_assistant":
        r = _ingest(mem, args[0], role="assistant")
        return {"facts": r.counts.get("fact_events")}
    if op == "supersede":
        loser, winner = (_fact_id_of(mem, x) for x in args)
        return mem.store.supersede_fact_event(loser, winner, user_id=USER)["superseded"]
    if op == "current":  # what an agent reading the slot through the public API is told is true now
        return sorted((f.object_entity_ids or [""])[0] for f in mem.store.get_all_fact_events(USER)
                      if f.predicate_canonical == args[0])
    if op == "archive":
        return mem.store.archive_fact_event(_fact_id_of(mem, args[0]), user_id=USER)["deleted"]
    if op == "delete":
        return mem.store.delete_fact_event(_fact_id_of(mem, args[0]), user_id=USER).get("deleted")
    raise ConfigError(f"unknown SodaMem call {op!r}", fix="use ingest, ingest-session, supersede, archive or delete")


# -- detectors on SodaMem's own state ----------------------------------------------------------

def _active(state, predicate):
    return sorted(f["object"] for f in state["facts"] if f["predicate"] == predicate and f["status"] == "active")


def several_current(predicate: str) -> Detector:
    def check(state, errors):
        act = _active(state, predicate)
        return [f"slot (alice, {predicate}) has {len(act)} current values {act}"] if len(act) > 1 else []
    return Detector("double-supersede", check)


def no_current(predicate: str) -> Detector:
    def check(state, errors):
        return [] if _active(state, predicate) else [f"slot (alice, {predicate}) has no current value"]
    return Detector("lost-update", check)


def lost_write(kind: str) -> Detector:
    """A supersede's provenance or closing time that is not the one any serial order leaves."""
    def check(state, errors):
        out = []
        sup = [f for f in state["facts"] if f["status"] == "superseded"]
        winners = {e[1]: [] for e in state["edges"]}
        for src, dst, typ in state["edges"]:
            if typ == "SUPERSEDES":
                winners.setdefault(dst, []).append(src)
        for f in sup:
            ws = winners.get(f["object"], [])
            if len(ws) > 1:
                out.append(f"{f['object']} was superseded by {len(ws)} writers {sorted(ws)}; its row records only "
                           f"{f['superseded_by']}, closed at {f['valid_until']}: one writer's update was lost")
        return out
    return Detector(kind, check)


def resurrected(obj: str) -> Detector:
    def check(state, errors):
        hit = [f for f in state["facts"] if f["object"] == obj.lower()]
        dangling = [e for e in state["edges"] if str(e[1]).startswith("<deleted")]
        out = []
        if hit and errors == {}:
            out.append(f"{obj} was deleted and is back ({hit[0]['status']}): a concurrent supersede wrote its stale "
                       "copy over the delete")
        out.extend(f"edge {e} points at a deleted fact" for e in dangling)
        return out
    return Detector("lost-delete", check)


_PREFS = ("I prefer tea.", "I like juice.", "I like cocoa.")
CLAIMS_BY_OBJECT = {c["obj"].lower(): c for c in CLAIMS.values()}


def older_survives(predicate: str) -> Detector:
    """The current value is not the one with the latest valid time (ordering by ingestion)."""
    def check(state, errors):
        facts = [f for f in state["facts"] if f["predicate"] == predicate]
        active = [f["object"] for f in facts if f["status"] == "active"]
        newest = max(facts, key=lambda f: CLAIMS_BY_OBJECT[f["object"]]["valid_from"])["object"] if facts else None
        return [f"{active} current, but {newest} is the newest"] if facts and active != [newest] else []
    return Detector("stale-survives", check, always=True)


def same_slot_two_names() -> Detector:
    """Two current values of one real-world slot under different predicate names (toki.slots)."""
    from toki.slots import HeadVerb

    def check(state, errors):
        hv, groups = HeadVerb(), {}
        for f in state["facts"]:
            if f["status"] == "active":
                groups.setdefault(hv.slot(f["predicate"]), []).append(f)
        return [f"slot {slot} holds {sorted(x['object'] for x in fs)} under {sorted({x['predicate'] for x in fs})}, "
                "all current" for slot, fs in groups.items() if len({x["predicate"] for x in fs}) > 1]
    return Detector("slot-drift", check, always=True)


def belief_read(predicate: str, reader: str) -> Detector:
    """N2 on SodaMem: a reader told something no serial order of the same calls shows."""
    def check(state, errors, observed):
        seen = observed.get(reader)
        if seen is None:
            return []
        if not seen:
            return [f"{reader} read slot (alice, {predicate}) while a supersede was half done and was told it has "
                    "no current value (serially it sees the old value or the new one)"]
        if len(seen) > 1:
            return [f"{reader} was told {seen} are all current"]
        return []
    return Detector("N2", check, observes=True)


def duplicate_active() -> Detector:
    """One fact current twice: a restatement that serially merges into the stored fact (duplicate)."""
    def check(state, errors):
        seen: dict[tuple, int] = {}
        for f in state["facts"]:
            if f["status"] == "active":
                seen[(f["predicate"], f["object"])] = seen.get((f["predicate"], f["object"]), 0) + 1
        return [f"({p}, {o}) is current {n} times: both ingests read the facts before either wrote, so neither "
                "found the other's fact to merge into" for (p, o), n in sorted(seen.items()) if n > 1]
    return Detector("duplicate-insert", check)


def rewon(predicate: str) -> Detector:
    """N1 on SodaMem: two adjudications of one contradiction with different winners (SUPERSEDES edges
    both ways between two values, or the older value current beside a fact that superseded it)."""
    def check(state, errors):
        sup = {(e[0], e[1]) for e in state["edges"] if e[2] == "SUPERSEDES"}
        objs = {f["object"] for f in state["facts"] if f["predicate"] == predicate}
        out = [f"{a} superseded {b} and {b} superseded {a}: one contradiction decided both ways"
               for a, b in sorted(sup) if a < b and (b, a) in sup and a in objs]
        # a value "superseding" the same value is a duplicate merged the wrong way (duplicate-insert's
        # finding), not a contradiction decided twice
        out += [f"{b} is current although {a} superseded it" for a, b in sorted(sup)
                if a != b and b in _active(state, predicate) and a in objs]
        return out
    return Detector("N1", check)


def loser_kept(*objects: str) -> list[Detector]:
    """N3 on SodaMem: every value ingested is still readable, and a superseded one says by whom
    (``superseded_by`` or a SUPERSEDES edge). Checked on serial orders (design) and races alike."""
    def check(state, errors):
        out = []
        have = {f["object"]: f for f in state["facts"]}
        winners = {e[1] for e in state["edges"] if e[2] == "SUPERSEDES"}
        for obj in objects:
            f = have.get(obj.lower())
            if f is None:
                out.append(f"{obj} is gone: a loser destroyed without trace")
            elif f["status"] == "superseded" and not f["superseded_by"] and obj.lower() not in winners:
                out.append(f"{obj} is superseded with no record of its winner")
        return out
    return [Detector("N3", check, always=True), Detector("N3", check)]


def _scenarios(engine: SodaMemEngine) -> dict[str, Scenario]:
    def ingest_setup(*texts):
        def setup(mem):
            for t in texts:
                _ingest(mem, t)
        return setup

    def calls(plan: dict[str, tuple]):
        def call(mem, agent):
            return engine.run_call(mem, plan[agent])
        return call

    move = {"A": ("ingest", "I moved to Rome."), "B": ("ingest", "I moved to Paris.")}
    sc = [
        Scenario("double-supersede", "two stores on one file; each agent ingests a contradicting current-state fact "
                 "of the slot lives_in (Berlin is current): serially the later one (Paris) is the only current value",
                 ("A", "B"), calls(move), ingest_setup("I live in Berlin."), False,
                 (several_current("lives_in"), lost_write("lost-update")), ("double-supersede",)),
        Scenario("double-supersede-shared", "the same two ingests through one store shared by two threads "
                 "(its RLock guards each method, not the maintainer's read-then-write)",
                 ("A", "B"), calls(move), ingest_setup("I live in Berlin."), True,
                 (several_current("lives_in"), lost_write("lost-update")), ("double-supersede",)),
        Scenario("supersede-keeps-loser", "N3: agents A and B ingest contradicting moves (Rome, Paris) over "
                 "'I live in Berlin': whatever the order or interleaving, is every loser still readable, "
                 "with its winner recorded (status SUPERSEDED, superseded_by, a SUPERSEDES edge)?",
                 ("A", "B"), calls(move), ingest_setup("I live in Berlin."), False,
                 tuple(loser_kept("Berlin", "Rome", "Paris")), ("N3",)),
        Scenario("same-move-twice", "agents A and B each ingest 'I moved to Rome' in a session of their own over "
                 "'I live in Berlin' (two conversations saying the same): serially the second is a duplicate "
                 "merged into the first's fact, and both adjudicate (Berlin, Rome) the same way (no judge: the "
                 "order key is valid time, said time, content hash)",
                 ("A", "B"), calls({"A": ("ingest-session", "I moved to Rome.", "A"),
                                    "B": ("ingest-session", "I moved to Rome.", "B")}),
                 ingest_setup("I live in Berlin."), False,
                 (duplicate_active(), rewon("lives_in")), ("duplicate-insert", "N1")),
        Scenario("preference-cue", "two preference updates with an update cue (now/instead, currently) over "
                 "'I prefer tea': supersession applies, as for current state",
                 ("A", "B"), calls({"A": ("ingest", "I now prefer coffee instead."),
                                    "B": ("ingest", "I currently prefer mate.")}),
                 ingest_setup("I prefer tea."), False, (several_current("prefers_drink"),), ("double-supersede",)),
        Scenario("preference-no-cue", "two preferences without an update cue: SodaMem keeps every one current by "
                 "design, in every order (a control: nothing to find)",
                 ("A", "B"), calls({"A": ("ingest", "I like juice."), "B": ("ingest", "I like cocoa.")}),
                 ingest_setup("I prefer tea."), False, (), ()),
        Scenario("assistant-vs-user", "a user's move (Rome) and an assistant-authored claim (Lisbon) on the same "
                 "slot: assistant facts never supersede user facts",
                 ("A", "B"), calls({"A": ("ingest", "I moved to Rome."), "B": ("ingest_assistant", "You live in Lisbon.")}),
                 ingest_setup("I live in Berlin."), False, (several_current("lives_in"),), ("double-supersede",)),
        Scenario("patch-supersede", "two PATCH calls (Store.supersede_fact_event) close 'tea' in favour of "
                 "'juice' and of 'cocoa' (three preferences without a cue, all current): each reads the loser, "
                 "then writes its whole row back",
                 ("A", "B"), calls({"A": ("supersede", "tea", "juice"), "B": ("supersede", "tea", "cocoa")}),
                 ingest_setup(*_PREFS), False,
                 (lost_write("lost-update"),), ("lost-update",)),
        Scenario("read-during-supersede", "agent A ingests 'I moved to Rome' over 'I live in Berlin' while agent R "
                 "asks which lives_in facts are current (get_all_fact_events): serially R sees Berlin or Rome",
                 ("A", "R"), calls({"A": ("ingest", "I moved to Rome."), "R": ("current", "lives_in")}),
                 ingest_setup("I live in Berlin."), False, (belief_read("lives_in", "R"),), ("N2",), observe=True),
        Scenario("two-moves-and-a-reader", "agents A and B ingest contradicting moves (Rome, Paris) over 'I live in "
                 "Berlin' while agent R asks which lives_in facts are current: serially one move ends current and "
                 "R sees Berlin, Rome or Paris alone (two writers and a reader: the shape of N2)",
                 ("A", "B", "R"), calls({**move, "R": ("current", "lives_in")}), ingest_setup("I live in Berlin."),
                 False, (several_current("lives_in"), belief_read("lives_in", "R")), ("double-supersede", "N2"),
                 observe=True),
        Scenario("out-of-order-ingest", "one agent ingests the newer move (Paris, May) before the older one (Rome, "
                 "March), as a reported race claims ingestion order can make the older win; SodaMem orders by "
                 "event time", ("A",), calls({"A": ("ingest-in-order", "I moved to Paris.", "I moved to Rome.")}),
                 ingest_setup("I live in Berlin."), False, (older_survives("lives_in"),), ("stale-survives",)),
        Scenario("predicate-drift", "the extractor names the move 'live_in_mangwon_dong' instead of lives_in: "
                 "SodaMem's slot test (same canonical predicate) never meets the old address",
                 ("A",), calls({"A": ("ingest", "I moved to Mangwon-dong.")}), ingest_setup("I live in Berlin."),
                 False, (same_slot_two_names(),), ("slot-drift",)),
        Scenario("archive-vs-supersede", "one agent archives 'tea' while another PATCH-supersedes it with 'juice'",
                 ("A", "B"), calls({"A": ("archive", "tea"), "B": ("supersede", "tea", "juice")}),
                 ingest_setup(*_PREFS), False, (), ("lost-update",)),
        Scenario("delete-vs-supersede", "one agent purges 'tea' (delete_fact_event) while another "
                 "PATCH-supersedes it with 'juice': the supersede writes back the row it read",
                 ("A", "B"), calls({"A": ("delete", "tea"), "B": ("supersede", "tea", "juice")}),
                 ingest_setup(*_PREFS), False, (resurrected("tea"),),
                 ("lost-delete",)),
    ]
    return {s.name: s for s in sc}


def sodamem() -> SodaMemEngine:
    return SodaMemEngine()


def sodamem_fixed() -> SodaMemEngine:
    return SodaMemEngine(fixed=True)
