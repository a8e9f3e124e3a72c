"""Consolidators: what writes a tree node's text from its children.

* :class:`ExtractiveConsolidator` (the default, no model): a header with the node's time span
  and the entities most mentioned under it, then the *points* of its most central children (by
  embedding: cosine to the children's centroid, near-duplicates skipped). A session quotes its
  central facts; a day and a week quote the lead point of their central children; the profile
  quotes, for each of its central weeks, the week's most central statement by a person, never
  the assistant's (memlane/tree/profile.py chooses it). It says what it is: every point is a
  quotation, nothing is paraphrased.
* :class:`LLMConsolidator` (the ``consolidation`` role): TiMem's level-specific instructions
  (factual summary for sessions, evolving patterns for days and weeks, a persona for the
  profile), the children plus the w=3 latest nodes of the same level as history, a structured
  reply validated like extraction. A node whose reply fails (transport or malformed output) is
  written by the extractive consolidator instead and says so in its metadata: nothing is lost.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field

from memlane.llm.errors import LLMError
from memlane.llm.structured import complete_json
from memlane.tree.nodes import Level

log = logging.getLogger(__name__)

# Points quoted per level: enough to name what a window was about, few enough that a week
# stays one short paragraph (5 points of ~25 tokens).
POINTS = {Level.session: 3, Level.day: 4, Level.week: 5, Level.profile: 8}
# Two points this similar say the same thing; the second is skipped.
DUPLICATE_COSINE = 0.92
ENTITIES_SHOWN = 5
# The most central turns of a chat are its greetings ("Welcome, Priya! Nice to meet you."
# was the first point of every week in the sample bank): children that name no entity or
# run under this many words come after the informative ones.
INFORMATIVE_WORDS = 8


@dataclass(slots=True)
class Child:
    """What a consolidator sees of one child (a memory unit, or a node one level down)."""

    id: str
    text: str
    vector: np.ndarray
    start: datetime
    end: datetime
    entity_ids: list[str]
    # (text, turns) quotable from this child, best first: a unit's own text and turns; a
    # node's quoted points.
    points: list[tuple[str, list[str]]] = field(default_factory=list)


@dataclass(slots=True)
class Written:
    """A consolidator's output for one node (the builder adds ids, times and the vector)."""

    text: str
    cited: list[str]
    cited_turns: list[str]
    consolidator: str
    metadata: dict = field(default_factory=dict)
    # The node's vector when the consolidator has one (None: the builder embeds the text).
    vector: np.ndarray | None = None


class Consolidator(Protocol):
    name: str

    def write(
        self, level: Level, key: str, children: list[Child], history: list[str], names: dict[str, str]
    ) -> Written: ...


def central_order(vectors: np.ndarray, informative: list[bool] | None = None) -> list[int]:
    """Child indices by cosine to the children's centroid, best first (ties by index);
    informative children (see INFORMATIVE_WORDS) before the others when given."""
    if len(vectors) == 0:
        return []
    centroid = vectors.mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    scores = vectors @ (centroid / norm) if norm > 0 else np.zeros(len(vectors))
    first = informative or [True] * len(vectors)
    return sorted(range(len(vectors)), key=lambda i: (not first[i], -round(float(scores[i]), 6), i))


def is_informative(child: Child) -> bool:
    """Names an entity and says something (not a greeting or a one-line reply)."""
    text = child.points[0][0] if child.points else child.text
    return bool(child.entity_ids) and len(text.split()) >= INFORMATIVE_WORDS


def _span(level: Level, key: str, start: datetime, end: datetime) -> str:
    day = f"{start:%a} {start.day} {start:%b %Y}"
    if level == Level.session:
        return f"Session on {day}, {start:%H:%M}-{end:%H:%M} UTC"
    if level == Level.day:
        return f"{start:%A} {start.day} {start:%B %Y}"
    if level == Level.week:
        return f"Week {key}, {start.day} {start:%b %Y} to {end.day} {end:%b %Y}"
    return f"Profile from {start.day} {start:%B %Y} to {end.day} {end:%B %Y}"


def _entities(children: list[Child], names: dict[str, str]) -> list[str]:
    counts: dict[str, int] = {}
    for c in children:
        for e in dict.fromkeys(c.entity_ids):
            if e in names:
                counts[e] = counts.get(e, 0) + 1
    top = sorted(counts, key=lambda e: (-counts[e], names[e].lower()))[:ENTITIES_SHOWN]
    return [names[e] for e in top]


class ExtractiveConsolidator:
    """Header plus the points of the most central children (see the module docstring)."""

    name = "rules"

    def write(
        self, level: Level, key: str, children: list[Child], history: list[str], names: dict[str, str]
    ) -> Written:
        vectors = np.stack([c.vector for c in children]).astype(np.float32)
        picked: list[int] = []
        for i in central_order(vectors, [is_informative(c) for c in children]):
            if len(picked) >= POINTS[level]:
                break
            if any(float(vectors[i] @ vectors[j]) >= DUPLICATE_COSINE for j in picked):
                continue
            if children[i].points:
                picked.append(i)
        points = [children[i].points[0] for i in picked]
        start = min(c.start for c in children)
        end = max(c.end for c in children)
        header = _span(level, key, start, end)
        if level != Level.session:
            header += f" ({len(children)} {_child_noun(level, len(children))})"
        about = _entities(children, names)
        if about:
            header += ", about " + ", ".join(about)
        lines = [header + "."] + [f"- {text}" for text, _ in points]
        turns = list(dict.fromkeys(t for _, ts in points for t in ts))
        # The text is its quotations, so its vector is theirs: the normalised mean of the
        # quoted children's vectors, with no model call. Embedding the texts instead was 2/3
        # of a LongMemEval bank's consolidation (long assistant turns, 256-token windows).
        mean = vectors[picked or list(range(len(children)))].mean(axis=0)
        norm = float(np.linalg.norm(mean))
        return Written(
            text="\n".join(lines),
            cited=[children[i].id for i in picked],
            cited_turns=turns,
            consolidator=self.name,
            metadata={"points": [[text, ts] for text, ts in points]},
            vector=mean / norm if norm > 0 else None,
        )


def _child_noun(level: Level, n: int) -> str:
    noun = {Level.day: "session", Level.week: "day", Level.profile: "week"}[level]
    return noun if n == 1 else noun + "s"


INSTRUCTIONS = {
    Level.session: (
        "Summarise this conversation session factually: who did, said, planned or felt what, with "
        "dates resolved to absolute dates. Keep names, numbers and places. No interpretation."
    ),
    Level.day: (
        "Consolidate this day's session summaries: the events of the day and any pattern or change "
        "against the recent days shown as history (new plans, changed facts, repeated habits)."
    ),
    Level.week: (
        "Consolidate this week's day summaries into the week's evolving patterns: what changed, "
        "what recurred, what is ongoing, against the recent weeks shown as history. Keep dates."
    ),
    Level.profile: (
        "Write the person profile these weekly summaries support: stable facts (home, work, "
        "relationships), preferences, habits and how they changed, in third person. Only what the "
        "summaries say; keep dates for facts that changed."
    ),
}
MAX_CHILD_CHARS = 12_000  # of children text per prompt (~3k tokens): central children first


class Summary(BaseModel):
    summary: str = Field(min_length=1, max_length=6000)


class LLMConsolidator:
    """TiMem's level-specific consolidation with an LLM, falling back per node to ``fallback``."""

    def __init__(self, llm, model_name: str, fallback: ExtractiveConsolidator | None = None) -> None:
        self.llm = llm
        self.name = f"llm:{model_name}"
        self.fallback = fallback or ExtractiveConsolidator()
        self.failures = 0

    def write(
        self, level: Level, key: str, children: list[Child], history: list[str], names: dict[str, str]
    ) -> Written:
        vectors = np.stack([c.vector for c in children]).astype(np.float32)
        shown: list[int] = []
        used = 0
        for i in central_order(vectors):
            text = children[i].text
            if used + len(text) > MAX_CHILD_CHARS and shown:
                break
            shown.append(i)
            used += len(text)
        shown.sort(key=lambda i: (children[i].start, i))  # the model reads them in time order
        start = min(c.start for c in children)
        end = max(c.end for c in children)
        body = "\n".join(f"[{children[i].start:%Y-%m-%d %H:%M}] {children[i].text}" for i in shown)
        past = "\n\n".join(history[-3:]) or "(none)"
        messages = [
            {"role": "system", "content": INSTRUCTIONS[level] + ' Reply with JSON: {"summary": "..."}.'},
            {
                "role": "user",
                "content": f"Window: {_span(level, key, start, end)}\n\nHistory (latest nodes of this "
                f"level):\n{past}\n\nItems:\n{body}",
            },
        ]
        try:
            reply = complete_json(self.llm, messages, Summary, check=_not_blank, max_tokens=800)
        except (LLMError, ValueError) as exc:
            self.failures += 1
            log.warning("consolidation LLM failed for %s %s, extractive instead: %s", level.name, key, exc)
            out = self.fallback.write(level, key, children, history, names)
            out.metadata["llm_error"] = f"{type(exc).__name__}: {exc}"[:500]
            return out
        turns = list(dict.fromkeys(t for i in shown for _, ts in children[i].points[:1] for t in ts))
        return Written(
            text=reply.summary.strip(),
            cited=[children[i].id for i in shown],
            cited_turns=turns,
            consolidator=self.name,
            metadata={"points": [[reply.summary.strip(), turns]]},
        )


def _not_blank(reply: Summary) -> None:
    if not reply.summary.strip():
        raise ValueError("summary: must not be blank")
