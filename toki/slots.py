"""Slots: when two facts are about the same thing (pure: no I/O).

A write path resolves a contradiction only between facts of one slot, (subject, predicate).
Extractors (often LLMs) name predicates freely: ``lives_in``, ``live_in``,
``live_in_mangwon_dong``. A :class:`Canonicalizer` maps a predicate to its slot name; given
to :meth:`toki.db.store.Store.write` it makes such facts meet. :func:`several_current_by_slot`
is the detector for the failure it prevents: two current values of one real-world slot kept
under different predicate names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

from toki.model import SENTINEL


@runtime_checkable
class Canonicalizer(Protocol):
    def slot(self, predicate: str) -> str: ...


class Exact:
    """Predicates meet only when equal (what a write path does without a canonicalizer)."""

    def slot(self, predicate: str) -> str:
        return predicate


class Synonyms:
    """A table of aliases: ``Synonyms({"lives_in": ["live_in", "resides_in"]})``."""

    def __init__(self, table: Mapping[str, Iterable[str]]):
        self._to = {}
        for canon, aliases in table.items():
            self._to[canon] = canon
            for a in aliases:
                if self._to.get(a, canon) != canon:
                    raise ValueError(f"alias {a!r} names two slots: {self._to[a]!r} and {canon!r}")
                self._to[a] = canon

    def slot(self, predicate: str) -> str:
        return self._to.get(predicate, predicate)


_PREPOSITIONS = {"in", "at", "on", "to", "for", "with", "from", "of", "as", "by"}
_SUFFIXES = (("ies", "y"), ("ing", ""), ("ed", ""), ("es", "e"), ("s", ""))


def _stem(word: str) -> str:
    for suf, rep in _SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= 3:
            word = word[: -len(suf)] + rep
            break
    return word if word.endswith("e") or not word.endswith(("iv", "ov")) else word + "e"


class HeadVerb:
    """The slot is the predicate's verb (stemmed) and the preposition after it: ``lives_in``,
    ``living_in`` and ``live_in_mangwon_dong`` are all ``live_in``: an extractor that folds the
    object into the predicate no longer creates a slot of its own."""

    def slot(self, predicate: str) -> str:
        words = [w for w in re.split(r"[^a-z0-9]+", predicate.lower()) if w]
        if not words:
            return predicate
        head = [_stem(words[0])]
        if len(words) > 1 and words[1] in _PREPOSITIONS:
            head.append(words[1])
        return "_".join(head)


def several_current_by_slot(rows, canonicalizer: Canonicalizer) -> list[str]:
    """Findings: a real-world slot (subject, canonical predicate) with several current values
    that the rows keep under different predicate names (rows: objects with subject, predicate,
    object, row_kind, system_time_end, valid_from, valid_to)."""
    groups: dict[tuple[str, str], list] = {}
    for r in rows:
        if r.row_kind == "current" and r.system_time_end == SENTINEL:
            groups.setdefault((r.subject, canonicalizer.slot(r.predicate)), []).append(r)
    found = []
    for (subject, slot), rs in sorted(groups.items()):
        names = sorted({r.predicate for r in rs})
        if len(names) < 2:
            continue
        for i, a in enumerate(rs):
            for b in rs[i + 1:]:
                if a.predicate != b.predicate and a.object != b.object and a.valid_from < b.valid_to \
                        and b.valid_from < a.valid_to:
                    found.append(f"slot ({subject}, {slot}) holds {a.object!r} as {a.predicate} and {b.object!r} "
                                 f"as {b.predicate}, both current and valid at once")
    return found
