"""A mental model's answer: recall its question on the bank, then write the answer from the
recalled memories with the bank's tree consolidator (memlane/tree/consolidators.py), as a tree
node is written from its children. Nothing here summarises on its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from memlane.records import MemoryUnit, ModelSource, RecallResult
from memlane.tree.consolidators import Child, ExtractiveConsolidator, Written
from memlane.tree.nodes import Level

# Recall budget of a model's question: about 20 facts of ~25 tokens, more than the profile
# level quotes (8 points), so the consolidator still chooses the central ones.
RECALL_TOKENS = 600
NO_ANSWER = "Nothing in this bank answers this question yet."


@dataclass(slots=True)
class Answer:
    """What a refresh writes into the model."""

    text: str
    sources: list[ModelSource]
    recalled: list[str]  # every memory recall gave the consolidator
    consolidator: str
    metadata: dict[str, Any] = field(default_factory=dict)


def child_of(unit: MemoryUnit) -> Child:
    """A recalled memory as a consolidator child (a unit quotes its own text and turns)."""
    start = unit.occurred_start or unit.mentioned_at
    end = unit.occurred_end or start
    return Child(
        id=unit.id,
        text=unit.text,
        vector=np.asarray(unit.embedding, dtype=np.float32),
        start=start,
        end=max(start, end),
        entity_ids=list(unit.entity_ids),
        points=[(unit.text, list(unit.source_turns))],
    )


def answer_question(
    question: str,
    recall: Callable[[str], RecallResult],
    units_with_vectors: Callable[[list[str]], list[MemoryUnit]],
    consolidator,
    names: dict[str, str],
) -> Answer:
    """Recall ``question`` and consolidate what came back into an answer.

    The consolidator writes at the profile level (the most points, 8, and for the LLM one the
    instruction that states stable facts and preferences, closest to a standing question);
    the question goes in as the node's history, so the LLM reads what the answer is for. The
    extractive consolidator's header names a time window; the answer's header names the
    question instead, and its points are the consolidator's own choice, unchanged."""
    recalled = recall(question)
    ids = [m.unit.id for m in recalled.memories]
    units = {u.id: u for u in units_with_vectors(ids) if u.embedding is not None}
    children = [child_of(units[i]) for i in ids if i in units]
    if not children:
        return Answer(NO_ANSWER, [], [], "none")
    written: Written = consolidator.write(
        Level.profile, "model", children, [f"Question this answer is for: {question}"], names
    )
    text = written.text
    points = written.metadata.get("points")
    if written.consolidator == ExtractiveConsolidator.name:  # also the LLM one's fallback
        # the extractive header names a window of time ("Profile from ... (n weeks)"): say
        # what the answer is, from how many memories, over which span
        start = min(c.start for c in children)
        end = max(c.end for c in children)
        header = f"{question} (from {len(children)} memories, {start:%d %b %Y} to {end:%d %b %Y})"
        text = "\n".join([header] + [f"- {p}" for p, _ in points or []])
    by_id = {c.id: c for c in children}
    sources = [
        ModelSource(memory_id=i, text=by_id[i].text, turns=list(by_id[i].points[0][1]))
        for i in written.cited
        if i in by_id
    ]
    metadata = {k: v for k, v in written.metadata.items() if k != "points"}
    return Answer(text, sources, [c.id for c in children], written.consolidator, metadata)
