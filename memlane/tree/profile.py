"""What the profile quotes: statements the people of the bank made, never the assistant's.

The profile (the tree's top level) is the person's profile: facts about them and the people in
their life (docs/recall.md; the LLM consolidator's instruction asks for "stable facts, preferences,
habits"). The extractive consolidator quotes, for each of its central weeks, one point; a week's
own points are the lead points of its days, which are often the assistant's (its long replies
name the most entities: "Ha, that's adorable. Is your landlord okay with pets?" was a bank's
profile). So the profile's point for a week is the most central statement under the week that
the profile may quote (:func:`quotable`):

* not said by an assistant (by its speaker: a role word such as "assistant", or a speaker the
  bank's entities type ASSISTANT, as retain typed it from the turn's ``role``); its questions,
  its chit-chat and its recommendations alike, which are what the assistant said, not what the
  user is;
* a statement: a turn whose every sentence is a question states nothing about its speaker. On
  the 1,380 labelled user turns of evals/statements, "a sentence that does not end in '?'" drops
  62 of the 82 questions and 4 of the 708 turns that state a fact.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

import numpy as np

from memlane.records import Entity, MemoryUnit
from memlane.retain.entities import normalize
from memlane.retain.entity_types import ASSISTANT, speaker_label
from memlane.tree.consolidators import Child, central_order, is_informative
from memlane.tree.nodes import Level
from memlane.tree.windows import Window

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class Speakers:
    """Who in a bank is an assistant: its entities typed ASSISTANT, by id and by name."""

    def __init__(self, entities: Sequence[Entity]) -> None:
        assistants = [e for e in entities if e.type == ASSISTANT]
        self.assistant_ids = frozenset(e.entity_id for e in assistants)
        self._names = frozenset(normalize(n) for e in assistants for n in (e.name, *e.aliases))

    def is_assistant(self, speaker: str) -> bool:
        return speaker_label(speaker) == ASSISTANT or normalize(speaker) in self._names


def states_something(text: str) -> bool:
    """True when a sentence of ``text`` is not a question."""
    return any(s and not s.endswith("?") for s in (p.strip() for p in _SENTENCE_END.split(text)))


def quotable(unit: MemoryUnit, speakers: Speakers) -> bool:
    """Whether the profile may quote ``unit``: a statement not said by an assistant. A unit
    with no speaker (an LLM's extracted fact) is judged by its form alone."""
    speaker = unit.metadata.get("speaker")
    if isinstance(speaker, str) and speakers.is_assistant(speaker):
        return False
    return states_something(unit.text)


def profile_children(
    weeks: Mapping[str, Child],
    windows: Mapping[Level, Sequence[Window]],
    leaves: Mapping[str, Child],
    allowed: Collection[str],
    assistant_ids: Collection[str],
) -> dict[str, Child]:
    """The weeks as the profile sees them: each with one point, the most central of the units
    under it that the profile may quote (``allowed``: their ids; none: no point), and without
    the assistant among the entities it names."""
    under = {lv: {w.key: w.children for w in windows[lv]} for lv in (Level.session, Level.day, Level.week)}
    out: dict[str, Child] = {}
    for key, week in weeks.items():
        ids = [
            leaf
            for day in under[Level.week].get(key, ())
            for session in under[Level.day].get(day, ())
            for leaf in under[Level.session].get(session, ())
            if leaf in allowed and leaf in leaves
        ]
        points = []
        if ids:
            kids = [leaves[i] for i in ids]
            order = central_order(np.stack([k.vector for k in kids]), [is_informative(k) for k in kids])
            points = kids[order[0]].points[:1]
        entity_ids = [e for e in week.entity_ids if e not in assistant_ids]
        out[key] = replace(week, points=points, entity_ids=entity_ids)
    return out
