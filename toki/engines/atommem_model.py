"""AtomMem (MINE-USTC/AtomMem), a faithful model of its published write path.

AtomMem has no package: toki runs this model of its code, executed = "model". Read on
2026-12-01 from the stored copy of the repository, at these commits (the newest stored version
of each file):

- ``src/fact_storage.py`` @7f65703 (``FactStorageManager.process_new_fact``, ``_is_duplicate``,
  ``_detect_conflict``, ``_llm_detect_conflict``, ``force_profile_extraction``,
  ``people_sets_compatible``);
- ``src/file_storage.py`` @4462c18 (``FileStorage``: ``facts_{id}.json``, ``events_{id}.json``,
  ``profiles_{id}.json`` under ``config.FACTS_DIR``, each a ``{"conversation_id", "<kind>": [...]}``
  object; ``load_*`` reads the whole file, ``save_*`` writes the whole list);
- ``src/utils.py`` @4462c18 (``load_json``: ``open(path, 'r')`` + ``json.load``, no error
  handling; ``save_json``: ``open(path, 'w')`` + ``json.dump(indent=2)``, truncate then write;
  ``generate_fact_id``/``generate_event_id``/``generate_profile_id``: prefix + largest number
  seen + 1; cosine and case-insensitive keyword Jaccard);
- ``src/event_manager.py`` @7f65703 (``process_event_attribution`` with the batch filter);
- ``src/profile_manager.py`` @4462c18 (``check_and_trigger_batch_extraction``,
  ``batch_extract_profiles``, ``force_extract_all_pending``);
- ``atommem_core/preextracted_pipeline.py`` @93856c3 (``process_all_facts``: the session's
  ``existing_facts`` list is loaded once at session start and fact ids come from it, not from
  the file at write time; each fact goes through ``process_new_fact(use_batch_event_filter=True)``;
  the session ends with ``force_profile_extraction``);
- ``config.py`` @9e248a0 (the thresholds and weights below are its defaults).

What one fact write does (``process_new_fact``): load the facts, events and profiles files
(three whole-file reads); duplicate if cosine > 0.95 against a fact whose people set is
compatible (both non-empty and disjoint is the only rejection); else candidates = compatible facts
scored 0.7 cosine + 0.3 keyword Jaccard, those above 0.6 (the score is written onto the stored
fact as ``similarity``), top 5 by score sent to the LLM, which names at most one conflicting fact;
that fact is overwritten in place (text, embedding, keywords, time; its id stays, no history)
and the list saved; otherwise the new fact is appended and the list saved, then event
attribution runs and facts and events are saved again, then the profile batch trigger
(10 pending facts) is checked. No lock, no transaction, no temp file.

Stand-ins, all deterministic:
- the embedder is a bag of words hashed into 32 buckets, unit length, rounded to 4 decimals
  (the real one is all-MiniLM-L6-v2, 384 floats; fewer floats keep each JSON file below
  Python's 8 KiB write buffer, so bytes reach the file at the close step, as the harness models);
- the metadata LLM (people, keywords, time, needs_profile_extraction) is the table ``CLAIMS``;
- the conflict LLM is a :mod:`toki.judges` judge (by default a greedy :class:`FixtureJudge`
  whose table marks which stored facts a new fact contradicts). The real prompt lists up to
  five candidates and gets one JSON answer; the model asks the judge once per candidate, in
  similarity order, about the pair (stored, new): a vote for the new fact (position B) is
  "has_conflict, conflict_fact_id = stored". Every vote is returned to the caller (the real code
  logs none: there is no judge log, so re-asking can change the answer: N1);
- the event LLMs: clustering joins the similar facts that share a non-person keyword with the
  new fact; the batch filter keeps every candidate event; summaries and keywords are the real
  code's own fallback (the first three texts joined, the keyword union), keywords sorted;
- the profile LLM makes one statement "<person>: <fact>" per pending fact, evidence = its id.

Simpler than the real code: retrieval (``search``) ranks facts by cosine only, top 5, where the
real ``LayeredRetriever`` also mixes events, profiles and a graph reranker (it loads the same
three files first, which is what the races concern); the temporal-profile version chain of
``atommem_core`` (``IncrementalTemporalProfileManager``) is not modelled, the plain
``ProfileManager`` is; set iteration in the real code (event ids, people) is sorted here so that
runs are reproducible across hash seeds; the entity-graph file is not written.

A JSON file read while another agent has truncated it (``open(..., 'w')`` done, ``close`` not
yet) is empty: ``json.load`` raises ``JSONDecodeError`` and the real code does not catch it, so
the call fails. The model does the same. Two writers that both open a file for writing before
either closes it each write from offset 0 through their own descriptor: when the second text is
shorter, the tail of the first stays behind it and the file is no longer JSON, so every later load
fails (a torn write; the state then reports the file as ``corrupt``).

``atommem-atomic`` is the fix: a lock held from the first load to the last save of
``process_new_fact`` and ``force_profile_extraction``, the new fact's id taken from the list
read under that lock, and every save written to a temporary file and moved over the old one
with ``os.replace``, so a lock-free reader sees the old or the new file, never an empty one.
The real fix would hold an OS file lock (``fcntl.flock`` on a lock file next to the JSON files,
which is what this module takes outside the harness); in the harness the lock is a
:class:`~toki.harness.locks.InstrumentedLock` handed in by ``prepare``, because the controller
does not intercept ``fcntl.flock``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import weakref
import zlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from toki.harness.engine import Detector, Scenario
from toki.harness.locks import InstrumentedLock
from toki.errors import ConfigError
from toki.judges.fixture import FixtureJudge
from toki.model import Fact

UPSTREAM = "MINE-USTC/AtomMem"
VERSION = ("model of MINE-USTC/AtomMem@7f65703 (src/fact_storage.py, src/event_manager.py), "
           "@4462c18 (src/file_storage.py, src/utils.py, src/profile_manager.py), "
           "@93856c3 (atommem_core/preextracted_pipeline.py), read 2026-12-01; toki model 1")

# config.py defaults (and the two constants fact_storage.py hard-codes)
DUPLICATE_THRESHOLD = 0.95
EMBEDDING_WEIGHT_ALPHA = 0.7
KEYWORD_WEIGHT_BETA = 0.3
CONFLICT_SCORE = 0.6  # hard-coded in _detect_conflict
CONFLICT_TOP_K = 5  # hard-coded in _detect_conflict
SIMILAR_FACTS_TOP_K = 10
PROFILE_BATCH_TRIGGER = 10
PROFILE_DUPLICATE_THRESHOLD = 0.95
MAIN_RECALL_TOP_K = 5
EVENT_BATCH_SIZE = 10

CONVERSATION_ID = "toki"
DIM = 32
PERSON = "Alice"


# -- src/utils.py ------------------------------------------------------------------------------

def load_json(path: str) -> Any:
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def save_json(data: Any, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=2)


def save_json_atomic(data: Any, path: str) -> None:
    """The fix's save: readers see the old file until the complete new one replaces it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"  # one writer at a time (the lock), so one temp name suffices
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=2)
    os.replace(tmp, path)


def cosine_similarity(a: list[float], b: list[float]) -> float:
    if not a or not b:
        return 0.0
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def jaccard_similarity(l1: list[str], l2: list[str]) -> float:
    if not l1 or not l2:
        return 0.0
    s1, s2 = {x.lower() for x in l1}, {x.lower() for x in l2}
    union = len(s1 | s2)
    return len(s1 & s2) / union if union else 0.0


def _next_id(prefix: str, key: str, items: list[dict]) -> str:
    if not items:
        return f"{prefix}1"
    top = 0
    for it in items:
        v = it.get(key, f"{prefix}0")
        if v.startswith(prefix):
            with contextlib.suppress(ValueError):
                top = max(top, int(v[1:]))
    return f"{prefix}{top + 1}"


def generate_fact_id(facts: list[dict]) -> str:
    return _next_id("F", "fact_id", facts)


def generate_event_id(events: list[dict]) -> str:
    return _next_id("E", "event_id", events)


def generate_profile_id(profiles: list[dict]) -> str:
    return _next_id("P", "profile_id", profiles)


def people_sets_compatible(left: set, right: set) -> bool:
    return not left or not right or bool(left & right)


# -- deterministic stand-ins ---------------------------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+")


def embed(text: str) -> list[float]:
    """Bag of words hashed into DIM buckets: shared words give cosine overlap, like a sentence model."""
    v = [0.0] * DIM
    for tok in _TOKEN.findall(text.lower()):
        v[int.from_bytes(hashlib.sha256(tok.encode()).digest()[:4], "big") % DIM] += 1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [round(x / n, 4) for x in v]


# What the metadata LLM (fact_metadata_extraction_prompt) returns for each fact text:
# (people, keywords, event date, needs_profile_extraction).
CLAIMS: dict[str, tuple[list[str], list[str], str, bool]] = {
    "Alice lives in Berlin.": ([PERSON], [PERSON, "residence", "Berlin"], "2026-01-05", True),
    "Alice has a cat.": ([PERSON], [PERSON, "pet", "cat"], "2026-01-05", False),
    "Alice lives in Paris.": ([PERSON], [PERSON, "residence", "Paris"], "2026-03-01", True),
    "Alice lives in Rome.": ([PERSON], [PERSON, "residence", "Rome"], "2026-05-01", True),
    "Alice works at Acme.": ([PERSON], [PERSON, "job", "Acme"], "2026-02-01", True),
    "Alice plays the violin.": ([PERSON], [PERSON, "music", "violin"], "2026-02-01", False),
    "Alice has a dog.": ([PERSON], [PERSON, "pet", "dog"], "2026-02-01", False),
}

RESIDENCES = ("Alice lives in Berlin.", "Alice lives in Paris.", "Alice lives in Rome.")


def jid(text: str) -> str:
    """The judge's key for a fact: its text, because AtomMem ids collide under races."""
    return "am-" + hashlib.sha256(text.encode()).hexdigest()[:10]


def conflict_table(p: float = 0.0) -> dict[tuple[str, str], float]:
    """P(the stored fact stands) for (stored, new) pairs that contradict; absent pairs: no conflict."""
    return {(jid(a), jid(b)): p for a in RESIDENCES for b in RESIDENCES if a != b}


def fixture_judge(agent: str) -> FixtureJudge:
    """The default conflict LLM: greedy, so a contradiction is always judged the same way."""
    return FixtureJudge(conflict_table(0.0), seed=zlib.crc32(agent.encode()), temperature=0.0,
                        default=1.0, model="atommem-conflict-fixture")


def wobbling_judge(p: float = 0.5, seed: int = 0) -> Callable[[str], FixtureJudge]:
    """A conflict LLM that re-judges the same contradiction differently (temperature 1)."""
    def make(agent: str) -> FixtureJudge:
        return FixtureJudge(conflict_table(p), seed=seed * 7919 + zlib.crc32(agent.encode()), temperature=1.0,
                            default=1.0, model="atommem-conflict-wobbling")
    return make


def judge_fact(f: dict) -> Fact:
    people = f.get("people") or ["?"]
    day = (f.get("time") or [""])[0] or "2026-01-01"
    return Fact(jid(f["fact"]), people[0], "atommem:fact", f["fact"], datetime.fromisoformat(day))


# -- src/file_storage.py -----------------------------------------------------------------------

class FileStorage:
    def __init__(self, facts_dir: Path, conversation_id: str, *, atomic: bool = False):
        self.conversation_id = conversation_id
        d = str(facts_dir)
        self.facts_file = os.path.join(d, f"facts_{conversation_id}.json")
        self.events_file = os.path.join(d, f"events_{conversation_id}.json")
        self.profiles_file = os.path.join(d, f"profiles_{conversation_id}.json")
        self._save = save_json_atomic if atomic else save_json
        os.makedirs(d, exist_ok=True)
        for path, kind in ((self.facts_file, "facts"), (self.events_file, "events"),
                           (self.profiles_file, "profiles")):
            if not os.path.exists(path):
                save_json({"conversation_id": conversation_id, kind: []}, path)

    def load_facts(self) -> list[dict]:
        return load_json(self.facts_file).get("facts", [])

    def save_facts(self, facts: list[dict]) -> None:
        self._save({"conversation_id": self.conversation_id, "facts": facts}, self.facts_file)

    def load_events(self) -> list[dict]:
        return load_json(self.events_file).get("events", [])

    def save_events(self, events: list[dict]) -> None:
        self._save({"conversation_id": self.conversation_id, "events": events}, self.events_file)

    def load_profiles(self) -> list[dict]:
        return load_json(self.profiles_file).get("profiles", [])

    def save_profiles(self, profiles: list[dict]) -> None:
        self._save({"conversation_id": self.conversation_id, "profiles": profiles}, self.profiles_file)


# -- the handle: one agent's FactStorageManager + pipeline state ---------------------------------

class AtomMemHandle:
    """What one AtomMem process holds: its storage, its session's fact list, its LLM clients."""

    def __init__(self, model: "AtomMemModel", location: Path):
        self.model = model
        self.location = Path(location)
        self.storage = FileStorage(self.location, CONVERSATION_ID, atomic=model.atomic)
        self.lock: InstrumentedLock | None = None
        self.agent: str | None = None
        self.judge = None
        self.existing_facts: list[dict] | None = None  # PreExtractedFactsPipeline.process_all_facts
        self.votes: list[dict] = []

    def bind(self, agent: str) -> None:
        if self.agent != agent:
            self.agent, self.judge = agent, self.model.judge_factory(agent)

    @contextlib.contextmanager
    def guard(self):
        """The fix's critical section (nothing in the unfixed model)."""
        if not self.model.atomic:
            yield
            return
        if self.lock is not None:
            with self.lock:
                yield
            return
        import fcntl

        # outside the harness: the OS file lock the real fix would take (os.open: not a step)
        fd = os.open(os.path.join(str(self.location), f".{CONVERSATION_ID}.lock"), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


# -- src/fact_storage.py: FactStorageManager ----------------------------------------------------

def process_new_fact(h: AtomMemHandle, new_fact: dict, use_batch_event_filter: bool = True,
                     skip_post_processing: bool = False) -> dict:
    st = h.storage
    with h.guard():
        all_facts = st.load_facts()
        all_events = st.load_events()
        all_profiles = st.load_profiles()
        if _is_duplicate(new_fact, all_facts):
            return {"action": "IGNORE", "fact_id": None}
        conflict = _detect_conflict(h, new_fact, all_facts)
        if conflict:
            conflict["fact"] = new_fact["fact"]
            conflict["embedding"] = new_fact["embedding"]
            conflict["keywords"] = new_fact["keywords"]
            conflict["time"] = new_fact["time"]
            st.save_facts(all_facts)
            return {"action": "CONFLICT_RESOLVED", "fact_id": conflict["fact_id"]}
        if h.model.atomic:
            new_fact["fact_id"] = generate_fact_id(all_facts)  # the fix: the id from the list read under the lock
        all_facts.append(new_fact)
        st.save_facts(all_facts)
        if skip_post_processing:
            return {"action": "CREATE", "fact_id": new_fact["fact_id"], "event_ids": []}
        event_ids = process_event_attribution(new_fact, all_facts, all_events, use_batch_event_filter)
        new_fact["event_ids"] = event_ids
        st.save_facts(all_facts)
        st.save_events(all_events)
        triggered = check_and_trigger_batch_extraction(all_facts, all_profiles)
        if triggered:
            st.save_facts(all_facts)
            st.save_profiles(all_profiles)
        return {"action": "CREATE", "fact_id": new_fact["fact_id"], "event_ids": event_ids,
                "profile_triggered": triggered}


def _is_duplicate(new_fact: dict, existing: list[dict]) -> bool:
    new_people = set(new_fact.get("people", []))
    for f in existing:
        if not people_sets_compatible(new_people, set(f.get("people", []))):
            continue
        if cosine_similarity(f["embedding"], new_fact["embedding"]) > DUPLICATE_THRESHOLD:
            return True
    return False


def _detect_conflict(h: AtomMemHandle, new_fact: dict, existing: list[dict]) -> dict | None:
    new_people = set(new_fact.get("people", []))
    cands = [f for f in existing if people_sets_compatible(new_people, set(f.get("people", [])))]
    if not cands:
        return None
    high = []
    for f in cands:
        sim = (EMBEDDING_WEIGHT_ALPHA * cosine_similarity(f["embedding"], new_fact["embedding"])
               + KEYWORD_WEIGHT_BETA * jaccard_similarity(f.get("keywords", []), new_fact.get("keywords", [])))
        if sim > CONFLICT_SCORE:
            f["similarity"] = sim  # written back with the list, as the real code does
            high.append(f)
    if not high:
        return None
    high.sort(key=lambda x: x["similarity"], reverse=True)
    return _llm_detect_conflict(h, new_fact, high[:CONFLICT_TOP_K])


def _llm_detect_conflict(h: AtomMemHandle, new_fact: dict, candidates: list[dict]) -> dict | None:
    """The conflict LLM's answer, one judge vote per listed candidate (see the module docstring)."""
    new_j = judge_fact(new_fact)
    for c in candidates:
        pair = (judge_fact(c), new_j)
        vote = h.judge.vote(pair)
        conflict = vote.index == 1
        h.votes.append({"stored": c["fact"], "new": new_fact["fact"], "conflict": conflict,
                        "read_set": sorted(f.fact_id for f in pair), "theta": h.judge.theta()})
        if conflict:
            return c
    return None


def force_profile_extraction(h: AtomMemHandle) -> None:
    st = h.storage
    with h.guard():
        all_facts = st.load_facts()
        all_profiles = st.load_profiles()
        force_extract_all_pending(all_facts, all_profiles)
        st.save_facts(all_facts)
        st.save_profiles(all_profiles)


# -- src/event_manager.py -----------------------------------------------------------------------

def _topic(f: dict) -> set[str]:
    people = {p.lower() for p in f.get("people", [])}
    return {k.lower() for k in f.get("keywords", [])} - people


def process_event_attribution(new_fact: dict, all_facts: list[dict], all_events: list[dict],
                              use_batch_filter: bool = False) -> list[str]:
    similar = _retrieve_similar_facts(new_fact, all_facts)
    if not similar:
        return []
    # stand-in for _llm_judge_clustering: cluster with the similar facts on the same topic
    selected = [f["fact_id"] for f in similar if _topic(f) & _topic(new_fact)]
    if not selected:
        return []
    candidate_event_ids = set()
    for fid in selected:
        f = next((x for x in all_facts if x["fact_id"] == fid), None)
        if f and f.get("event_ids"):
            candidate_event_ids.update(f["event_ids"])
    if not candidate_event_ids or (use_batch_filter and not _batch_filter(candidate_event_ids, all_events)):
        sel_facts = [f for f in all_facts if f["fact_id"] in selected]
        ev = _create_new_event(new_fact, sel_facts, all_events)
        for f in sel_facts:
            f.setdefault("event_ids", []).append(ev["event_id"])
        all_events.append(ev)
        return [ev["event_id"]]
    ids = _batch_filter(candidate_event_ids, all_events) if use_batch_filter else sorted(candidate_event_ids)
    for eid in ids:
        ev = next((e for e in all_events if e["event_id"] == eid), None)
        if ev:
            ev["fact_ids"].append(new_fact["fact_id"])
            _update_event_info(ev, new_fact)
    return ids


def _batch_filter(candidate_event_ids: set, all_events: list[dict]) -> list[str]:
    # stand-in for _llm_judge_relevant_events: every candidate event that exists is relevant
    return [e for e in sorted(candidate_event_ids) if any(x["event_id"] == e for x in all_events)]


def _retrieve_similar_facts(new_fact: dict, all_facts: list[dict]) -> list[dict]:
    new_people = set(new_fact.get("people", []))
    cands = [f for f in all_facts
             if f["fact_id"] != new_fact.get("fact_id") and new_people & set(f.get("people", []))]
    for f in cands:
        f["score"] = (EMBEDDING_WEIGHT_ALPHA * cosine_similarity(f["embedding"], new_fact["embedding"])
                      + KEYWORD_WEIGHT_BETA * jaccard_similarity(f.get("keywords", []), new_fact.get("keywords", [])))
    cands.sort(key=lambda x: x["score"], reverse=True)
    return cands[:SIMILAR_FACTS_TOP_K]


def _create_new_event(new_fact: dict, related: list[dict], all_events: list[dict]) -> dict:
    facts = [new_fact] + related
    summary = " ".join(f["fact"] for f in facts[:3])
    times = [f.get("time", ["", ""])[0] for f in facts if f.get("time", ["", ""])[0]]
    return {"event_id": generate_event_id(all_events), "summary": summary,
            "fact_ids": [f["fact_id"] for f in facts],
            "people": sorted({p for f in facts for p in f.get("people", [])}),
            "keywords": sorted({k for f in facts for k in f.get("keywords", [])})[:6],
            "time": [min(times), max(times)] if times else ["", ""], "embedding": embed(summary)}


def _update_event_info(ev: dict, new_fact: dict) -> None:
    ev["summary"] = f"{ev.get('summary', '')} {new_fact['fact']}".strip()
    ev["keywords"] = sorted(set(ev.get("keywords", [])) | set(new_fact.get("keywords", [])))[:6]
    ev["embedding"] = embed(ev["summary"])
    ev["people"] = sorted(set(ev.get("people", [])) | set(new_fact.get("people", [])))
    t = new_fact.get("time", ["", ""])[0]
    if t:
        et = ev.get("time", ["", ""])
        if not et[0] or t < et[0]:
            et[0] = t
        if not et[1] or t > et[1]:
            et[1] = t
        ev["time"] = et


# -- src/profile_manager.py ---------------------------------------------------------------------

def check_and_trigger_batch_extraction(all_facts: list[dict], all_profiles: list[dict]) -> bool:
    pending = [f for f in all_facts if f.get("needs_profile_extraction", False)]
    if len(pending) >= PROFILE_BATCH_TRIGGER:
        batch_extract_profiles(pending, all_facts, all_profiles)
        return True
    return False


def force_extract_all_pending(all_facts: list[dict], all_profiles: list[dict]) -> None:
    pending = [f for f in all_facts if f.get("needs_profile_extraction", False)]
    if pending:
        batch_extract_profiles(pending, all_facts, all_profiles)


def batch_extract_profiles(pending: list[dict], all_facts: list[dict], all_profiles: list[dict]) -> None:
    by_person: dict[str, list[dict]] = {}
    for f in pending:
        for p in f.get("people", []):
            by_person.setdefault(p, []).append(f)
    for person, facts in by_person.items():
        existing = [p for p in all_profiles if p["person"] == person]
        # stand-in for _llm_extract_profiles: one statement per pending fact
        for data in ({"content": f"{person}: {f['fact']}", "keywords": f.get("keywords", []),
                      "evidence": [f["fact_id"]]} for f in facts):
            if _is_duplicate_profile(data["content"], data["keywords"], existing):
                continue
            all_profiles.append({"profile_id": generate_profile_id(all_profiles), "person": person,
                                 "content": data["content"], "embedding": embed(data["content"]),
                                 "keywords": data["keywords"], "evidence": data["evidence"]})
    for f in pending:
        f["needs_profile_extraction"] = False


def _is_duplicate_profile(content: str, keywords: list[str], existing: list[dict]) -> bool:
    if not existing:
        return False
    e = embed(content)
    return any(EMBEDDING_WEIGHT_ALPHA * cosine_similarity(e, p["embedding"])
               + KEYWORD_WEIGHT_BETA * jaccard_similarity(keywords, p.get("keywords", []))
               > PROFILE_DUPLICATE_THRESHOLD for p in existing)


# -- atommem_core/preextracted_pipeline.py: one session's turn ----------------------------------

def build_fact_tuple(text: str, existing_facts: list[dict]) -> dict:
    if text not in CLAIMS:
        raise ConfigError(f"the metadata stand-in has no entry for {text!r}",
                          fix="add it to toki.engines.atommem_model.CLAIMS")
    people, keywords, day, profile = CLAIMS[text]
    return {"fact_id": generate_fact_id(existing_facts), "fact": text, "embedding": embed(text),
            "people": list(people), "keywords": list(keywords), "time": [day, day],
            "dia_id": "D" + hashlib.sha256(text.encode()).hexdigest()[:6], "event_ids": [],
            "needs_profile_extraction": profile}


def add_fact(h: AtomMemHandle, text: str) -> dict:
    if h.existing_facts is None:  # session start: process_all_facts loads the facts once
        h.existing_facts = list(h.storage.load_facts())
    fact = build_fact_tuple(text, h.existing_facts)
    result = process_new_fact(h, fact, use_batch_event_filter=True)
    if result["action"] != "IGNORE":
        h.existing_facts.append(fact)
    return result


def search(h: AtomMemHandle, query: str) -> list[str]:
    """Retrieval's storage reads (facts, events, profiles), then a cosine top-5 over the facts."""
    facts = h.storage.load_facts()
    h.storage.load_events()
    h.storage.load_profiles()
    q = embed(query)
    ranked = sorted(facts, key=lambda f: (-cosine_similarity(q, f["embedding"]), f["fact_id"]))
    return [f["fact"] for f in ranked[:MAIN_RECALL_TOP_K]]


# -- the engine ---------------------------------------------------------------------------------

class AtomMemModel:
    executed = "model"
    version = VERSION

    def __init__(self, *, atomic: bool = False, judge: Callable[[str], Any] | None = None):
        self.atomic = atomic
        self.name = "atommem-atomic" if atomic else "atommem"
        self.judge_factory = judge or fixture_judge
        self._locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.scenarios = _scenarios(self)

    @property
    def system(self) -> str:
        """What the row stands for in verdict tables."""
        return "AtomMem @7f65703" + (" + lock and atomic replace (a fix)" if self.atomic else "")

    @property
    def description(self) -> str:
        if self.atomic:
            return ("a model of AtomMem with the fix: one lock from load to save (an OS file lock in production), "
                    "the new fact's id read under it, saves through a temp file and os.replace")
        return ("a model of AtomMem's published write path: three JSON files per namespace, each fact write "
                "loads them whole, decides duplicate/conflict (LLM)/append, and truncates and rewrites them; "
                "no lock, no transaction")

    def open(self, location: Path) -> AtomMemHandle:
        return AtomMemHandle(self, Path(location))

    def prepare(self, h: AtomMemHandle, controller) -> None:
        """Every handle of one run shares one instrumented lock: the model of the fix's file lock."""
        if not self.atomic:
            return  # AtomMem takes no lock
        lock = self._locks.get(controller)
        if lock is None:
            lock = self._locks[controller] = InstrumentedLock(f"flock(.{CONVERSATION_ID}.lock)", reentrant=False)
        h.lock = lock

    def close(self, h: AtomMemHandle) -> None:
        h.lock = None

    def state(self, h: AtomMemHandle) -> dict:
        out: dict[str, Any] = {}
        corrupt = []
        for kind, load in (("facts", h.storage.load_facts), ("events", h.storage.load_events),
                           ("profiles", h.storage.load_profiles)):
            try:
                out[kind] = load()
            except (json.JSONDecodeError, OSError):
                out[kind] = []
                corrupt.append(kind)
        st = {
            "facts": sorted([f["fact_id"], f["fact"], sorted(f.get("people", [])), list(f.get("time", [])),
                             sorted(f.get("event_ids", [])), bool(f.get("needs_profile_extraction"))]
                            for f in out["facts"]),
            "events": sorted([e["event_id"], sorted(e.get("fact_ids", [])), e.get("summary", ""),
                              sorted(e.get("people", []))] for e in out["events"]),
            "profiles": sorted([p["profile_id"], p["person"], p["content"], sorted(p.get("evidence", []))]
                               for p in out["profiles"]),
        }
        if corrupt:
            st["corrupt"] = corrupt
        return st

    # -- a trial as a memory history (toki.record.trial_history) -------------------------------
    def memory_history(self, scenario: str, outcome, returned: dict | None = None) -> dict | None:
        """Alice's residence as one single-valued slot ``alice/residence`` (its facts contradict
        each other), every other fact text its own slot (``alice/Alice has a dog.``), a claim a
        fact's text. What each add did comes from what it returned: CREATE read no fact of its
        text (the duplicate check) and, for a residence, none the conflict LLM picked, and appended
        its own; CONFLICT_RESOLVED read the fact its conflict vote names, retracted it and added its
        text (the overwrite in place); IGNORE read its own text. Every vote is a ``decide`` over
        (stored, new). A search (top 5 of at most 5 facts here: every fact) is a current read of
        each slot. The final reads are the facts file's texts, each slot's as a current read (the
        file keeps no earlier version: there is no history to read).

        None for the profile scenarios (the profiles are a cache derived from the facts; what a
        batch read and wrote is not in the state or its return), for a search that could not have
        returned every fact, for a run in which an adding call failed (a torn read, maybe after
        its whole-file save: what that save wrote back and dropped is stated by no op, and an op
        that failed states no writes a checker can hold it to), and for a return these rules do
        not explain. A facts file that no longer parses (a torn
        write) gives no final read."""
        sc = self.scenarios.get(scenario)
        plan = getattr(getattr(sc, "call", None), "plan", None)
        if not plan or not isinstance(outcome.state, dict) or "facts" not in outcome.state:
            return None
        if any(op == "end_session" for steps in plan.values() for op, *_ in steps):
            return None
        returned = returned or {}
        seed = list(getattr(sc.setup, "texts", ()))
        planned = [a[0] for steps in plan.values() for op, *a in steps if op == "add"]
        slots = sorted({_slot(t) for t in seed + planned})
        agents: dict[str, list] = {}
        for agent, steps in plan.items():
            got = returned.get(agent) if agent in outcome.completed else None
            if not isinstance(got, dict):
                if any(op == "add" for op, *_ in steps):
                    # a torn read failed the call, maybe after a whole-file save: what that save
                    # wrote back (and dropped) is no op's, and an op that failed states no writes
                    return None
                agents[agent] = [["current", sl, None] for sl in slots]
                continue
            votes = list(got.get("votes", []))
            mops: list = []
            for (op, *args), res in zip(steps, got.get("results", [])):
                if op == "search":
                    if len(res) >= MAIN_RECALL_TOP_K:
                        return None  # the top 5 need not be every fact
                    mops += [["current", sl, sorted(t for t in res if _slot(t) == sl)] for sl in slots]
                    continue
                text = args[0]
                mine = [v for v in votes if v["new"] == text]
                votes = [v for v in votes if v["new"] != text]
                add = _add_mops(text, res, mine)
                if add is None:
                    return None
                mops += add
            agents[agent] = mops
        if "facts" in outcome.state.get("corrupt", []):
            return {"setup": [["add", _slot(t), t] for t in seed], "agents": agents, "final": []}
        held = [f[1] for f in outcome.state["facts"]]
        # A whole-file save writes back the list its call loaded: a fact another call added after
        # that load is dropped by the save. Two agents here, so a fact an acknowledged add put in
        # the file and the file no longer holds was dropped by the other writer's save (the state
        # does not say which save came last, only that one did): a retract in that writer's op.
        writers = [a for a in agents if any(m[0] == "add" for m in agents[a])]
        for agent in writers:
            for m in [m for m in agents[agent] if m[0] == "add"]:
                if m[2] in held or any(x[0] == "retract" and x[2] == m[2] for ops in agents.values() for x in ops):
                    continue
                others = [b for b in writers if b != agent]
                if len(others) != 1:
                    return None
                # the save wrote the slot back as its call had loaded it, and it was the last save:
                # what it loaded of the slot is what the file holds of it
                agents[others[0]] += [["current", m[1], sorted(t for t in held if _slot(t) == m[1])],
                                      ["retract", m[1], m[2]]]
        final = [["current", sl, sorted(t for t in held if _slot(t) == sl)] for sl in slots]
        return {"setup": [["add", _slot(t), t] for t in seed], "agents": agents, "final": final}

    # -- what one agent does --------------------------------------------------------------------
    def run_plan(self, h: AtomMemHandle, agent: str, plan: tuple) -> dict:
        h.bind(agent)
        results = []
        for op, *args in plan:
            if op == "add":
                results.append(add_fact(h, args[0]))
            elif op == "search":
                results.append(search(h, args[0]))
            elif op == "end_session":
                force_profile_extraction(h)
                results.append({"action": "PROFILES"})
            else:
                raise ConfigError(f"unknown AtomMem call {op!r}", fix="use add, search or end_session")
        return {"results": results, "votes": list(h.votes)}


# -- a trial as a memory history ----------------------------------------------------------------

def _slot(text: str) -> str:
    """The residence facts contradict each other (one belief); any other fact is a belief of its own."""
    return "alice/residence" if text in RESIDENCES else f"alice/{text}"


def _add_mops(text: str, res: dict, votes: list[dict]) -> list | None:
    """One add as micro-ops, from its action and its votes (see AtomMemModel.memory_history)."""
    slot = _slot(text)
    out: list = [["decide", f"{v['stored']} | {text}", sorted([v["stored"], text]),
                  text if v["conflict"] else v["stored"]] for v in votes]
    won = [v["stored"] for v in votes if v["conflict"]]
    action = res.get("action")
    if action == "IGNORE":
        return out + [["current", slot, [text]]]
    if action == "CONFLICT_RESOLVED":
        if len(won) != 1 or _slot(won[0]) != slot:
            return None
        return out + [["current", slot, [won[0]]], ["retract", slot, won[0]], ["add", slot, text]]
    if action == "CREATE" and not won:
        kept = sorted(v["stored"] for v in votes if _slot(v["stored"]) == slot)  # judged, and it stays
        return out + [["current", slot, kept], ["add", slot, text]]
    return None


# -- detectors on the model's state --------------------------------------------------------------

def _texts(state) -> list[str]:
    return [f[1] for f in state["facts"]]


def lost_facts(*texts: str) -> Detector:
    def check(state, errors):
        have = _texts(state)
        if errors:  # a failed add never saved its fact: that is the failure, reported by torn_read
            return []
        return [f"{t!r} is not in the facts file although its write returned: another agent's whole-file save "
                "wrote back a list loaded before it" for t in texts if t not in have]
    return Detector("lost-update", check)


def overwrite_undone(old: str, new: str) -> Detector:
    def check(state, errors):
        have = _texts(state)
        if old in have and new not in have:
            fid = next(f[0] for f in state["facts"] if f[1] == old)
            return [f"{fid} says {old!r} again: its in-place overwrite by {new!r} was lost to a concurrent "
                    "save of a list loaded before it"]
        return []
    return Detector("lost-update", check)


def erased(old: str) -> Detector:
    """N3 by design: an in-place overwrite leaves no trace of the fact it replaced (every order)."""
    def check(state, errors):
        return [] if old in _texts(state) else [f"{old!r} was overwritten in place: no fact, history or audit "
                                                "record keeps it"]
    return Detector("N3", check, always=True)


def id_collision() -> Detector:
    def check(state, errors):
        seen: dict[str, list[str]] = {}
        for f in state["facts"]:
            seen.setdefault(f[0], []).append(f[1])
        return [f"fact id {fid} names {len(ts)} facts {ts}: both writers took 'largest id + 1' from their "
                "session's stale list" for fid, ts in sorted(seen.items()) if len(ts) > 1]
    return Detector("id-collision", check)


def duplicate_facts() -> Detector:
    def check(state, errors):
        ts = _texts(state)
        return [f"{t!r} is stored {ts.count(t)} times" for t in sorted(set(ts)) if ts.count(t) > 1]
    return Detector("duplicate-insert", check)


def duplicate_events() -> Detector:
    def check(state, errors):
        seen: dict[str, list[str]] = {}
        for e in state["events"]:
            seen.setdefault(json.dumps(e[1]), []).append(e[0])
        return [f"events {ids} group the same facts {json.loads(k)}: both writers created the event"
                for k, ids in sorted(seen.items()) if len(ids) > 1]
    return Detector("duplicate-insert", check)


def dangling_events() -> Detector:
    def check(state, errors):
        back = {}
        for f in state["facts"]:
            back.setdefault(f[0], set()).update(f[4])
        out = []
        for eid, fids, _, _ in state["events"]:
            for fid in fids:
                if fid not in back:
                    out.append(f"event {eid} lists {fid}, which is not in the facts file")
                elif eid not in back[fid]:
                    out.append(f"event {eid} lists {fid}, whose event_ids {sorted(back[fid])} do not name it: "
                               "the facts and events files were saved from different loads")
        return out
    return Detector("lost-update", check)


def torn_read() -> Detector:
    def check(state, errors):
        return [f"agent {a} failed with {e}: it read a JSON file another agent had truncated (open 'w') and not "
                "yet written; load_json does not catch it" for a, e in sorted(errors.items())
                if e == "JSONDecodeError"]
    return Detector("torn-read", check)


def torn_write() -> Detector:
    def check(state, errors):
        return [f"{kind}_{CONVERSATION_ID}.json is no longer valid JSON: two writers truncated it and wrote from "
                "offset 0 through their own descriptors, the shorter text over the longer; every later load "
                "fails" for kind in state.get("corrupt", [])]
    return Detector("torn-write", check)


def pending_but_profiled() -> Detector:
    def check(state, errors):
        cited = {fid for p in state["profiles"] for fid in p[3]}
        return [f"{f[0]} {f[1]!r} is still marked needs_profile_extraction although profile(s) cite it: the "
                "session-end batch's flag clear was overwritten; the next batch extracts it again"
                for f in state["facts"] if f[5] and f[0] in cited]
    return Detector("lost-update", check)


def superseded_twice(old: str) -> Detector:
    """Both agents' conflict LLM judged against ``old`` and both overwrote it: two supersessions of one
    current fact, each unaware of the other (serially the second judges the first's new text)."""
    def check(state, errors, observed):
        by = sorted(a for a, res in (observed or {}).items()
                    if any(v["stored"] == old and v["conflict"] for v in (res or {}).get("votes", [])))
        if len(by) < 2:
            return []
        kept = next((f[1] for f in state["facts"] if f[0] == "F1"), None)
        return [f"agents {', '.join(by)} each replaced {old!r} (each judged against it, not against the other's "
                f"new text); F1 now says {kept!r} and the other replacement left no trace"]
    return Detector("double-supersede", check, observes=True)


def profile_drift(fid: str) -> list[Detector]:
    """N2 on AtomMem: the profiles (the belief cache, made by the session-end batch from the facts)
    cite a fact whose text has changed since, and the fact is not marked for re-extraction, so no
    later batch mends the profile. Checked on serial orders (design) and races alike."""
    def check(state, errors):
        fact = next((f for f in state["facts"] if f[0] == fid), None)
        if fact is None or fact[5]:
            return []
        return [f"profile {p[0]} says {p[2]!r} from {fid}, which now says {fact[1]!r}, and {fid} is not pending "
                "profile extraction: the belief drifted from the facts with nothing to re-derive it"
                for p in state["profiles"] if fid in p[3] and fact[1] not in p[2]]
    return [Detector("N2", check, always=True), Detector("N2", check)]


# -- scenarios ------------------------------------------------------------------------------------

BERLIN, CAT, PARIS, ROME = RESIDENCES[0], "Alice has a cat.", RESIDENCES[1], RESIDENCES[2]
ACME, VIOLIN, DOG = "Alice works at Acme.", "Alice plays the violin.", "Alice has a dog."

N3_NOTE = ("N3 by design, in every order: the overwritten fact keeps its id and loses its text, with no history "
           "or audit row, so the loser leaves no trace (not a race: not counted as an anomaly)")


def _scenarios(engine: AtomMemModel) -> dict[str, Scenario]:
    def seeded(*texts):
        def setup(h):
            engine.run_plan(h, "setup", tuple(("add", t) for t in texts))
        setup.texts = texts  # the seed, for the trial's memory history
        return setup

    def calls(plan: dict[str, tuple]):
        def call(h, agent):
            return engine.run_plan(h, agent, plan[agent])
        call.plan = plan  # what each agent does, for the trial's memory history
        return call

    sc = [
        Scenario("add-add", "two agents (two pipelines on one namespace) each add a different new fact about "
                 "Alice: both take id F3 from their session's list, and the second whole-file save writes back "
                 "a list without the first fact",
                 ("A", "B"), calls({"A": (("add", ACME),), "B": (("add", VIOLIN),)}), seeded(BERLIN, CAT), False,
                 (torn_write(), torn_read(), lost_facts(ACME, VIOLIN), id_collision()), ("lost-update", "id-collision")),
        Scenario("contradict-same-fact", "two agents contradict 'Alice lives in Berlin' (F1) with Paris and Rome; "
                 "each overwrites F1 in place. The loser of the race is erased, but the final state is the one a "
                 "serial order leaves (the last overwrite), so the lost overwrite is invisible in the state; what "
                 "the race adds is a torn write (both truncate, the shorter text lands over the longer). "
                 + N3_NOTE,
                 ("A", "B"), calls({"A": (("add", PARIS),), "B": (("add", ROME),)}), seeded(BERLIN, CAT), False,
                 (torn_write(), id_collision(), erased(BERLIN)), ("N3",)),
        Scenario("contradict-vs-add", "one agent overwrites F1 (Berlin -> Paris) while another appends 'Alice "
                 "works at Acme': whichever saves last writes back its stale copy of the other's change. " + N3_NOTE,
                 ("A", "B"), calls({"A": (("add", PARIS),), "B": (("add", ACME),)}), seeded(BERLIN, CAT), False,
                 (torn_write(), torn_read(), overwrite_undone(BERLIN, PARIS), lost_facts(ACME), id_collision()),
                 ("lost-update",)),
        Scenario("duplicate-add", "two agents add the same fact ('Alice has a dog', on the topic of the stored "
                 "cat): a fact cannot be stored twice (a load after the other's save sees the duplicate, a load "
                 "before it is overwritten), but the event file can: both create an event for (dog, cat)",
                 ("A", "B"), calls({"A": (("add", DOG),), "B": (("add", DOG),)}), seeded(BERLIN, CAT), False,
                 (torn_write(), duplicate_facts(), duplicate_events(), dangling_events(), id_collision()),
                 ("duplicate-insert",)),
        Scenario("search-vs-add", "a reader's search loads the three files while a writer truncates and rewrites "
                 "them: the reader can read an empty file and fail with JSONDecodeError (a read-only call that "
                 "fails is a clean abort, so the harness counts the outcome as serializable)",
                 ("R", "W"), calls({"R": (("search", "Where does Alice live?"),), "W": (("add", ACME),)}),
                 seeded(BERLIN, CAT), False, (torn_write(), torn_read()), ("torn-read",)),
        Scenario("add-search-vs-add", "an agent adds a fact and then searches (one call), while a writer adds "
                 "another: a torn read in the search fails the call after its fact was saved, so the failure is "
                 "not a clean abort; whole-file saves also lose either fact",
                 ("S", "W"), calls({"S": (("add", VIOLIN), ("search", "What does Alice play?")),
                                    "W": (("add", ACME),)}),
                 seeded(BERLIN, CAT), False,
                 (torn_write(), torn_read(), lost_facts(VIOLIN, ACME), id_collision()), ("torn-read", "lost-update")),
        Scenario("double-supersede", "two agents contradict 'Alice lives in Berlin' (F1) with Paris and Rome, and "
                 "what each conflict LLM was shown is observed: serially the second judges the first's new text; "
                 "concurrently both judge Berlin and both overwrite F1 in place",
                 ("A", "B"), calls({"A": (("add", PARIS),), "B": (("add", ROME),)}), seeded(BERLIN, CAT), False,
                 (superseded_twice(BERLIN), torn_write()), ("double-supersede",), observe=True),
        Scenario("profile-vs-revision", "N2's shape on AtomMem: the session-end profile batch P (reads the facts, "
                 "writes the profiles: the belief cache) and a contradiction W that overwrites F1 (Berlin -> Paris; "
                 "the model's conflict path, as the published code, leaves F1's needs_profile_extraction as it "
                 "was): can the profiles end up citing a text F1 no longer holds, with F1 not pending?",
                 ("P", "W"), calls({"P": (("end_session",),), "W": (("add", PARIS),)}), seeded(BERLIN, CAT), False,
                 (*profile_drift("F1"), torn_write(), torn_read()), ("N2",)),
        Scenario("profile-batch-vs-add", "the session-end profile batch (load facts and profiles, extract, clear "
                 "the pending flags, save both) races a fact add: the batch's save can erase the new fact, or the "
                 "add's save can restore the flags the batch cleared",
                 ("P", "W"), calls({"P": (("end_session",),), "W": (("add", ACME),)}), seeded(BERLIN, CAT), False,
                 (torn_write(), torn_read(), lost_facts(ACME), pending_but_profiled(), id_collision()), ("lost-update",)),
        Scenario("rejudge", "two agents add the same contradiction of F1 ('Alice lives in Paris'): serially the "
                 "second sees a duplicate and asks no LLM; concurrently both ask it about (Berlin, Paris). With a "
                 "temperature > 0 judge (engine option judge=wobbling_judge()) the two answers can differ: N1, "
                 "no judge log. " + N3_NOTE,
                 ("A", "B"), calls({"A": (("add", PARIS),), "B": (("add", PARIS),)}), seeded(BERLIN, CAT), False,
                 (torn_write(), duplicate_facts(), id_collision()), ("N1",)),
    ]
    return {s.name: s for s in sc}


def atommem() -> AtomMemModel:
    return AtomMemModel()


def atommem_atomic() -> AtomMemModel:
    return AtomMemModel(atomic=True)
