"""Entity resolution: map mentions to a bank's canonical entities.

A mention joins an existing entity on an exact name or alias match; otherwise on a combined
score of name similarity (0.6), co-occurrence with the other entities of the same chunk (0.25)
and temporal proximity to the entity's last sighting (0.15), when the name alone is at least
plausible. Everything else becomes a new entity whose id derives from its normalised name, so a
re-run resolves to the same ids.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from datetime import datetime
from difflib import SequenceMatcher
from typing import Iterable, Mapping, Sequence

from memlane.ids import entity_id
from memlane.records import Entity
from memlane.retain.facts import Mention

_PUNCT = re.compile(r"[^\w\s&+'.-]")
_POSSESSIVE = re.compile(r"['\u2019]s$")
# A dash with a space on one side separates ("David Grann - it's about...", "Grann -it's"): a
# hyphen inside a name ("Jean-Luc") has none. spaCy's small model takes such a dash, or the
# word after it, into the name it ends ("David Grann-" before " it's").
_SPACED_DASH = re.compile(r"\s[-\u2010-\u2015]|[-\u2010-\u2015]\s")
# What a name neither starts nor ends with: spaces, dashes, quotes and sentence punctuation.
# A period stays (an abbreviation: "Jr.", "D.C."), as do "+", "#" and "&" ("C++", "C#", "AT&T").
_EDGE = (
    " \t\r\n-\u2010\u2011\u2012\u2013\u2014\u2015'\"`\u2018\u2019\u201c\u201d\u00ab\u00bb,;:!?\u2026*_~/\\|"
)
_BRACKETS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_PERSONLIKE = {"PERSON", "SPEAKER"}
NAME_FLOOR = 0.5
ACCEPT = 0.62
TIME_SCALE_S = 30 * 86400.0


def clean_name(surface: str) -> str:
    """An entity's name as a mention gives it, without what only surrounds it in the text: the
    part before a spaced dash, no leading or trailing dash, quote or sentence punctuation, no
    bracket left open or unopened at either end ("'The Wager'" -> "The Wager", "David Grann -"
    -> "David Grann"). The one rule for names: stored names and aliases and the keys of
    :func:`normalize` all go through it."""
    s = " ".join(surface.split())
    for piece in _SPACED_DASH.split(s):
        piece = _strip_edges(piece)
        if piece:
            return piece
    return ""


def _strip_edges(s: str) -> str:
    while True:
        before = s
        s = s.strip(_EDGE)
        closer = _BRACKETS.get(s[:1])
        if closer and s.endswith(closer) and s.count(s[0]) == 1 and s.count(closer) == 1:
            s = s[1:-1]  # "(Mom)"
        if s[:1] in _BRACKETS and _BRACKETS[s[0]] not in s:
            s = s[1:]
        if s[-1:] in _BRACKETS.values() and not any(o in s for o, c in _BRACKETS.items() if c == s[-1]):
            s = s[:-1]
        if s == before:
            return s


def normalize(name: str) -> str:
    """Casefold, drop a leading 'the', a possessive and stray punctuation (of the name as
    :func:`clean_name` gives it)."""
    s = " ".join(_PUNCT.sub(" ", clean_name(name)).split()).casefold()
    s = _POSSESSIVE.sub("", s)
    if s.startswith("the "):
        s = s[4:]
    return s.strip(" .-'")


def name_similarity(mention: str, entity: str, label: str) -> float:
    """1.0 for a token-subset match ('caroline' in 'caroline smith') or a person-name prefix of
    at least 3 letters ('mel' for 'melanie'); else the difflib ratio."""
    if not mention or not entity:
        return 0.0
    m_tokens, e_tokens = mention.split(), entity.split()
    if set(m_tokens) <= set(e_tokens):
        return 1.0
    if label in _PERSONLIKE and len(m_tokens) == 1 and len(mention) >= 3 and e_tokens[0].startswith(mention):
        return 0.9
    return SequenceMatcher(None, mention, entity).ratio()


class EntityResolver:
    """Resolves mentions chunk by chunk against a bank's entities, updating them as it goes."""

    def __init__(self, bank_id: str, existing: Sequence[Entity] = ()) -> None:
        self.bank_id = bank_id
        self._by_id: dict[str, Entity] = {e.entity_id: e.model_copy(deep=True) for e in existing}
        self._by_key: dict[str, str] = {}
        # Blocking index: 3-letter prefixes of name tokens -> entity ids, so fuzzy matching
        # compares a mention with a handful of candidates, not with every entity of the bank.
        self._block: dict[str, set[str]] = defaultdict(set)
        for e in self._by_id.values():
            for key in [normalize(e.name), *map(normalize, e.aliases)]:
                self._by_key.setdefault(key, e.entity_id)
                self._index(key, e.entity_id)
        self._cooccur: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.touched: set[str] = set()

    def resolve_chunk(self, mentions: Sequence[Sequence[Mention]], at: Sequence[datetime]) -> list[list[str]]:
        """Entity ids for each fact's mentions (one list per fact, deduplicated, in the order
        of the mentions: the same whatever the bank held before)."""
        slots: list[list[str | None]] = []
        chunk_entities: set[str] = set()
        # Exact matches first, so fuzzy candidates can use the chunk's known co-mentions; a
        # mention resolved later keeps its place in its fact's list.
        pending: list[tuple[int, int, Mention, str]] = []
        for i, fact_mentions in enumerate(mentions):
            ids: list[str | None] = []
            for m in fact_mentions:
                key = normalize(m.surface)
                if not key:
                    continue
                eid = self._by_key.get(key)
                if eid is None:
                    pending.append((i, len(ids), m, key))
                    ids.append(None)
                    continue
                self._retype(eid, m)
                ids.append(eid)
                chunk_entities.add(eid)
            slots.append(ids)
        for i, j, m, key in pending:
            eid = self._by_key.get(key) or self._fuzzy(key, m.label, chunk_entities, at[i])
            if eid is None:
                eid = self._create(key, m)
            else:
                self._add_alias(eid, m.surface, key)
                self._retype(eid, m)
            slots[i][j] = eid
            chunk_entities.add(eid)
        resolved: list[list[str]] = []
        for i, ids in enumerate(slots):
            unique = list(dict.fromkeys(e for e in ids if e is not None))
            resolved.append(unique)
            for eid in unique:
                self._seen(eid, at[i])
        for a in chunk_entities:
            for b in chunk_entities:
                if a != b:
                    self._cooccur[a][b] += 1
        return resolved

    def entities(self, ids: Sequence[str] | None = None) -> list[Entity]:
        keys = self.touched if ids is None else ids
        return [self._by_id[i] for i in keys if i in self._by_id]

    def _index(self, key: str, eid: str) -> None:
        for token in key.split():
            self._block[token[:3]].add(eid)

    def _fuzzy(self, key: str, label: str, chunk_entities: set[str], at: datetime) -> str | None:
        best, best_score = None, 0.0
        candidates = set().union(*(self._block.get(t[:3], ()) for t in key.split()))
        for eid in sorted(candidates):
            ent = self._by_id[eid]
            compatible = ent.type == label or {ent.type, label} <= _PERSONLIKE or "OTHER" in (ent.type, label)
            if not compatible:
                continue
            name = max(name_similarity(key, normalize(n), label) for n in [ent.name, *ent.aliases])
            if name < NAME_FLOOR:
                continue
            co = self._cooccur.get(eid, {})
            cooc = (
                (sum(1 for c in chunk_entities if co.get(c)) / len(chunk_entities)) if chunk_entities else 0.0
            )
            last = ent.last_seen or at
            temporal = math.exp(-abs((at - last).total_seconds()) / TIME_SCALE_S)
            score = 0.6 * name + 0.25 * cooc + 0.15 * temporal
            if score > best_score:
                best, best_score = eid, score
        return best if best_score >= ACCEPT else None

    def _create(self, key: str, m: Mention) -> str:
        eid = entity_id(self.bank_id, key)
        label = "PERSON" if m.label == "SPEAKER" else m.label
        self._by_id[eid] = Entity(entity_id=eid, bank_id=self.bank_id, name=clean_name(m.surface), type=label)
        self._by_key[key] = eid
        self._index(key, eid)
        self.touched.add(eid)
        return eid

    def _retype(self, eid: str, m: Mention) -> None:
        """A certain mention (a speaker, a cue in the turn) corrects the entity's type: the
        first mention's label, often the NER model's guess, set it."""
        label = "PERSON" if m.label == "SPEAKER" else m.label
        ent = self._by_id[eid]
        if m.certain and ent.type != label:
            ent.type = label
            self.touched.add(eid)

    def _add_alias(self, eid: str, surface: str, key: str) -> None:
        ent = self._by_id[eid]
        if key != normalize(ent.name) and all(normalize(a) != key for a in ent.aliases):
            ent.aliases = [*ent.aliases, clean_name(surface)]
            self.touched.add(eid)
        self._by_key[key] = eid
        self._index(key, eid)

    def _seen(self, eid: str, at: datetime) -> None:
        ent = self._by_id[eid]
        if ent.first_seen is None or at < ent.first_seen:
            ent.first_seen = at
        if ent.last_seen is None or at > ent.last_seen:
            ent.last_seen = at
        self.touched.add(eid)


class MentionCounts:
    """Each entity's mention count through one retain call: how many memories the graph had
    naming it when the call began, plus each memory the call writes that names it (a written
    memory's id is never in the graph before: what changed was deleted first). So a batch can
    write its entities, counted, before its memories, and the count is the graph's once they
    are written."""

    def __init__(self, stored: Sequence[Entity], degrees: Mapping[str, int]) -> None:
        self._stored = {e.entity_id: e.mention_count for e in stored}
        self._counts = {e: n for e, n in degrees.items() if n}
        self.written: set[str] = set()

    def add(self, memories: Iterable[Sequence[str]]) -> set[str]:
        """Count memories (each given by the entity ids it names, once each); returns the ids."""
        named: set[str] = set()
        for ids in memories:
            for eid in ids:
                self._counts[eid] = self._counts.get(eid, 0) + 1
                named.add(eid)
        self.written |= named
        return named

    def count(self, entity_id: str) -> int:
        return self._counts.get(entity_id, 0)

    def stale(self) -> list[str]:
        """Stored entities the call did not write whose count differs from the graph's (an
        entity no memory names is left to the delete path, which drops it)."""
        return sorted(
            e
            for e, n in self._stored.items()
            if e not in self.written and self._counts.get(e) and self._counts[e] != n
        )
