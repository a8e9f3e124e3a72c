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

# Sentences: split after their end marks; a text's unpunctuated tail is a sentence too.
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# How a question opens without its "?" (terse texting leaves it off): a question word, not an
# exclamation ("what a day", "how cool"); an auxiliary before a subject pronoun or article
# ("are u", "did the"), which statements do not open with; "you" and a verb in -ing ("you
# coming to the match"). After a few openers ("ok", "so"), or after a name the question is
# addressed to ("Pia what time do we set up", "jo you coming to the match"), where only the forms
# that a statement after a name would not take count ("Sarah is the new manager" states).
_ASKED = (
    r"(?:what|which|whose|who|whom|where|why)\b(?!\s+(?:a|an)\b)"
    r"|how\s+(?:is|are|was|were|do|does|did|many|much|long|often|come|far|old|about)\b"
    r"|when\s+(?:is|are|was|were|do|does|did|will|can|should|r)\b"
    r"|(?:u|you)\s+\w+ing\b"
)
_AUX = r"(?:are|is|was|were|am|do|does|did|have|has|can|could|will|would|should|shall|r)\s+"
_NOT_A_NAME = (
    r"(?:i|we|you|u|he|she|it|they|this|that|there|then|so|and|but|or|if|not|just|also|now|yes|no|"
    r"yeah|ok|okay|well|because|cos|what|which|who|where|why|how|when)\b"
)
_INTERROGATIVE = re.compile(
    r"^\W*(?:(?:ok|okay|so|and|but|wait|also|hey|oh|btw|lol|um|hmm|then)\b\W*)*"
    rf"(?:{_ASKED}|{_AUX}(?:u|you|ya|i|we|they|he|she|it|there|ur|your|his|her|their|our|my|the|any|anyone|"
    rf"anybody)\b|(?!{_NOT_A_NAME})[a-z]+,?\s+(?:{_ASKED}|{_AUX}(?:u|you|ya|we|they|he|she)\b))",
    re.I,
)
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
    """The share of the text's sentences that are questions (0 for no sentence): those that end
    with "?" and, as people text, those left unpunctuated that open like a question
    (:func:`opens_a_question`)."""
    return _shares(text)[0]


def asking_share(text: str) -> float:
    """The share of the text's sentences that ask outright: a question that opens like one
    ("Do you have shoes yet?", "which hostel for tuesday"). A statement that ends by asking
    ("I'm moving on the 5th, can you help me plan?") or a tag ("never the way, ya know?")
    states something of its own."""
    return _shares(text)[1]


def opens_a_question(sentence: str) -> bool:
    """Whether a sentence opens like a question: a question word ("which hostel for tuesday"), or
    an auxiliary before its subject ("r u driving up", "did you book it")."""
    return _INTERROGATIVE.match(sentence.strip()) is not None


def _shares(text: str) -> tuple[float, float]:
    """(:func:`question_share`, :func:`asking_share`) of ``text``, one pass over its sentences."""
    parts = [p.rstrip() for p in _SENTENCE.split(text.strip()) if p.strip()]
    if not parts:
        return 0.0, 0.0
    questions = asked = 0
    for p in parts:
        opens = opens_a_question(p)
        if "?" in p[-3:] or (opens and not p.endswith((".", "!"))):
            questions += 1
            asked += opens
    return questions / len(parts), asked / len(parts)


@dataclass(frozen=True, slots=True)
class Traits:
    """One memory's reading, whatever the question."""

    speaker: str
    assistant: bool
    question: float  # its share of sentences that are questions
    asking: float  # its share of sentences that ask outright (asking_share)
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
    question, asking = _shares(said)
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
    return Traits(speaker, assistant, question, asking, frozenset(content_stems(said)), said.casefold(), row)
