"""The LLM-free extractor: one fact per turn, entities from spaCy plus the speaker, times from
the session date and the time expressions in the text. Deterministic, so re-runs give the same
ids and the same units."""

from __future__ import annotations

import re
from typing import Sequence

from memlane.facts.patterns import find_slot
from memlane.records import Bank, FactType
from memlane.records.limits import MAX_TEXT_BYTES, clip_bytes
from memlane.retain.chunking import ChunkInput, format_turn
from memlane.retain.entity_types import speaker_label, type_mentions
from memlane.retain.facts import Fact, Mention
from memlane.retain.ner import SpacyNER

_WORD = re.compile(r"\b[A-Z][\w'-]*")


def _norm(name: str) -> str:
    return " ".join(name.casefold().split())


def _labels(turns) -> dict[str, str]:
    """Each speaker's entity label; an assistant once is an assistant."""
    labels: dict[str, str] = {}
    for t in turns:
        key = _norm(t.speaker)
        if labels.get(key) != "ASSISTANT":
            labels[key] = speaker_label(t.speaker, t.metadata)
    return labels


def _speaker_mentions(text: str, speakers: dict[str, str], labels: dict[str, str], found) -> list[Mention]:
    """Speakers named in the text that NER did not report (it is skipped for many turns and
    misses names at a sentence start): 'Melanie, look at this!' mentions Melanie."""
    seen = {_norm(s) for s, *_ in found}
    out = []
    for word in _WORD.findall(text):
        key = _norm(word)
        if key in speakers and key not in seen:
            seen.add(key)
            out.append(Mention(speakers[key], labels[key], certain=True))
    return out


class RuleExtractor:
    """Facts straight from turns. A turn with neither text nor image caption yields no fact
    (the chunk still keeps it).

    Each fact's context is the turn before and the turn after it in the session. Chat turns
    lean on their neighbours ("Yes, last Friday!"); indexing that context lexically took BM25
    turn recall@10 on LoCoMo from 0.608 to 0.689 (measured offline on the eval banks)."""

    name = "rules"

    def __init__(self, ner: SpacyNER, *, slots: bool = True) -> None:
        self._ner = ner
        self._slots = slots  # fill slots from memlane/facts/patterns.py

    def extract(self, bank: Bank, chunks: Sequence[ChunkInput]) -> list[list[Fact]]:
        from memlane.temporal import EVENTS, turn_events

        # A chunk's speakers are those of its turns and the turns around it, never those of
        # other chunks extracted in the same call: a chunk's facts are a function of its own
        # input (memlane/retain/plan.py keeps a chunk whose input did not change).
        speakers_of = [
            {_norm(t.speaker): t.speaker for t in (item.before, *item.turns, item.after) if t is not None}
            for item in chunks
        ]
        turns = [t for item in chunks for t in item.turns]
        # what each speaker is, a person or an assistant (memlane/retain/entity_types.py), read
        # from the same turns as its speakers: the chunk's own and its neighbours
        labels_of = [
            _labels(t for t in (item.before, *item.turns, item.after) if t is not None) for item in chunks
        ]
        # speakers named in a turn are found by _speaker_mentions: NER runs where they are not
        known = [
            {k for k in speakers if " " not in k}
            for item, speakers in zip(chunks, speakers_of)
            for _ in item.turns
        ]
        mentions = self._ner.entities([t.text for t in turns], known_each=known)
        owner = _norm(bank.name) if bank.name else None
        out: list[list[Fact]] = []
        i = 0
        for item, speakers, labels in zip(chunks, speakers_of, labels_of):
            facts: list[Fact] = []
            around = [item.before, *item.turns, item.after]
            for pos, turn in enumerate(item.turns, start=1):
                ents = type_mentions(turn.text, mentions[i], labels, _norm)
                i += 1
                if not turn.has_content:
                    continue
                # said at turn.timestamp (mentioned_at); about the events it dates, if any
                # (memlane/temporal/events.py: their covering interval, none for habits alone)
                events = turn_events(turn.text, turn.timestamp)
                start, end = events.occurrence or (None, None)
                is_owner = owner is not None and _norm(turn.speaker) == owner
                meta: dict = {"speaker": turn.speaker, "session_id": turn.session_id}
                if len(events.intervals) > 1:  # each event's days, shown beside the said date
                    meta[EVENTS] = [[a.isoformat(), b.isoformat()] for a, b in events.intervals]
                slot = find_slot(turn.text, turn.speaker, order=turn.index) if self._slots else None
                if slot is not None:
                    meta["slot"] = slot.as_metadata()
                facts.append(
                    Fact(
                        text=format_turn(turn),
                        fact_type=FactType.experience if is_owner else FactType.world,
                        mentioned_at=turn.timestamp,
                        occurred_start=start,
                        occurred_end=end,
                        source_turns=[turn.turn_id],
                        # two long neighbours can pass what a memory's context holds
                        context=clip_bytes(
                            " ".join(format_turn(t) for t in (around[pos - 1], around[pos + 1]) if t),
                            MAX_TEXT_BYTES,
                        ),
                        mentions=[Mention(turn.speaker, labels[_norm(turn.speaker)], certain=True)]
                        + [Mention(s, label, certain=c) for s, label, c in ents]
                        + _speaker_mentions(turn.text, speakers, labels, ents),
                        metadata=meta,
                    )
                )
            out.append(facts)
        return out
