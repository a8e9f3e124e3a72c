"""What the learned ranker reads of a memory alone, whatever the question: its speaker and form
(the assistant's turn, its share of questions, its length, the cues of memlane/facts/cues.py),
its names and numbers, whether it puts something forward, and its content stems and folded
text for the question's words and names. memlane/recall/features.py places them in each
candidate's row.

They are a function of the memory's text and speaker only, so they are kept per process under
that pair (a memory rewritten with other text or another speaker gets its own): the same turns
come back query after query, and computed per candidate on every query they made the feature
rows 7.9 ms CPU a recall at the median, 2.0 ms kept (process_time, 231 recalls of two LoCoMo
banks at mid, a loaded 2-core machine, Dec 2026). They are not stored with the memory: a bank
written before them would compute them at recall all the same, and the first recall that
reads a memory pays its share (the rows' p95 3.1 ms with every memory new to the process).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from memlane.facts.cues import CUES, turn_cues
from memlane.query.sayer import offers
from memlane.query.words import content_stems, is_assistant
from memlane.stored_fields import json_value

_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")
# A capitalised word that does not start a sentence: a name, a place, an organisation.
_INNER_CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"hundred|thousand|twins?|dozen)\b",
    re.I,
)

#: The features of :data:`memlane.recall.features.FEATURES` that :attr:`Traits.row` holds, in
#: its order.
TRAIT_FEATURES = (
    "assistant",
    "question",
    "words",
    *(f"cue_{c}" for c in CUES),
    "capitals",
    "number",
    "offers",
)
# Memories whose traits are kept (about 0.5 KB each with their text).
TRAITS_KEPT = 65536


def speaker_of(fields: Mapping[str, Any]) -> str:
    meta = json_value(fields.get("metadata")) or {}
    return str(meta.get("speaker") or "") if isinstance(meta, dict) else ""


def said_text(fields: Mapping[str, Any]) -> str:
    """The memory's text without the ``"Speaker: "`` the turn's text starts with."""
    return _said(str(fields.get("text") or ""), speaker_of(fields))


def _said(text: str, speaker: str) -> str:
    if speaker and text.startswith(f"{speaker}: "):
        return text[len(speaker) + 2 :]
    return text


def question_share(text: str) -> float:
    """The share of the text's sentences that are questions (0 for no sentence)."""
    ends = _SENTENCE_END.findall(text.strip() + (" " if text.strip()[-1:].isalnum() else ""))
    if not ends:
        return 0.0
    return sum(1 for e in ends if "?" in e) / len(ends)


@dataclass(frozen=True, slots=True)
class Traits:
    """One memory's reading, whatever the question."""

    speaker: str
    assistant: bool
    question: float  # its share of sentences that are questions
    stems: frozenset[str]  # its content stems (memlane/query/words.py content_stems)
    folded: str  # its said text, casefolded (the question's names are looked up in it)
    row: np.ndarray  # TRAIT_FEATURES' values, read-only


def traits_of(fields: Mapping[str, Any]) -> Traits:
    """The :class:`Traits` of a memory's fields (its text and its metadata's speaker)."""
    return traits(str(fields.get("text") or ""), speaker_of(fields))


@lru_cache(maxsize=TRAITS_KEPT)
def traits(text: str, speaker: str) -> Traits:
    """The :class:`Traits` of a memory of ``text`` said by ``speaker`` ("" for none)."""
    said = _said(text, speaker)
    assistant = is_assistant(speaker)
    question = question_share(said)
    row = np.array(
        [
            1.0 if assistant else 0.0,
            question,
            math.log1p(len(said.split())),
            *turn_cues(said)[: len(CUES)],
            math.log1p(len(_INNER_CAPITAL.findall(said))),
            1.0 if _NUMBER.search(said) else 0.0,
            1.0 if offers(said) else 0.0,
        ],
        dtype=np.float64,
    )
    row.setflags(write=False)
    return Traits(speaker, assistant, question, frozenset(content_stems(said)), said.casefold(), row)
