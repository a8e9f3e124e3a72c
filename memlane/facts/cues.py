"""Cue features of a sentence: whether it states the speaker's own current situation.

Regular expressions only (no model), so recall can compute them for every candidate memory.
Each cue is 0 or 1; :data:`CUES` names them in the order :func:`sentence_cues` returns them,
and the learned slot classifier (memlane/facts/classifier.py) stores that order with its
weights, so a weights file trained on another list is refused rather than misread.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from memlane.facts.vocab import OTHERS_RE

CUES: tuple[str, ...] = (
    "first_person",  # I / I'm / me / my / we / our
    "first_subject",  # a sentence whose subject is the speaker (or that starts with its verb)
    "other_person",  # "my sister", "our neighbour", a third-person subject pronoun first
    "question",
    "hypothetical",  # if, would, could, might, imagine, dream
    "plan",  # going to, will, planning, next month, from January, about to
    "negation",  # not, never, no longer, don't
    "past",  # used to, was, were, had, ago, back when, grew up
    "change",  # just, finally, now, new, since, moved, started, switched
    "opinion",  # think, love, hate, best, worst, should
    "activity",  # lessons, classes, course, club, hobby, volunteer
)

_FIRST = re.compile(r"\b(?:I|I['’](?:m|ve|d|ll)|me|my|mine|myself|we|we['’](?:re|ve)|our|ours|us)\b", re.I)
_FIRST_SUBJECT = re.compile(
    r"^(?:\W*(?:so|well|yes|yeah|yep|no|oh|honestly|actually|and|but|also|plus|anyway|ok|okay|lol|haha)\b\W*)*"
    r"(?:I|I['’](?:m|ve|d)|im|ive|we|we['’](?:re|ve)|me and \w+|\w+ and I|my (?:\w+ )?(?:and I))\b"
    r"|^(?:just|finally|officially|still|been|started|moved|joined|got|adopted|landed|bought|living|working|"
    r"studying|doing|married|engaged|divorced|single)\b",
    re.I,
)
_THIRD_SUBJECT = re.compile(r"^\W*(?:he|she|they|his|her|their)\b", re.I)
_HYPOTHETICAL = re.compile(
    r"\b(?:if|would|could|might|imagine|dream|dreaming|wish|suppose|hypothetically|someday|one day|"
    r"wouldn['’]t|ideally|fantasi[sz]e)\b",
    re.I,
)
_PLAN = re.compile(
    r"\b(?:going to|gonna|will|['’]ll|plan|plans|planning|intend|about to|soon|next (?:week|month|year|"
    r"term|spring|summer|autumn|fall|winter)|from (?:january|february|march|april|may|june|july|august|"
    r"september|october|november|december|next)|starting (?:in|on|next)|thinking (?:of|about)|"
    r"considering|hoping|hope to|want to|wanna|applying|applied|interview|booked|picking up|collecting|"
    r"ordering|looking at|shopping for|saving for|test[- ]?driv\w*|on the list|waiting list)\b",
    re.I,
)
_NEGATION = re.compile(
    r"\b(?:not|never|no longer|n['’]t|nope|neither|nor|no more|quit|gave up|stopped|any ?more|ended|left)\b",
    re.I,
)
_PAST = re.compile(
    r"\b(?:used to|was|were|had|ago|back when|back then|grew up|growing up|as a kid|when I was|"
    r"in the past|previously|formerly|former|ex-|until|lived|worked|studied|died|passed away)\b",
    re.I,
)
_CHANGE = re.compile(
    r"\b(?:just|finally|now|new|since|moved|started|switched|officially|these days|currently|"
    r"at the moment|nowadays|anymore|still)\b",
    re.I,
)
_OPINION = re.compile(
    r"\b(?:think|thought|love|hate|best|worst|better|should|overrated|underrated|prefer|fan of|"
    r"don['’]t you|isn['’]t it|honestly)\b",
    re.I,
)
_ACTIVITY = re.compile(
    r"\b(?:lesson|lessons|class|classes|course|courses|club|hobby|hobbies|volunteer|volunteering|"
    r"workshop|evening class|night class|practice|practise|training for|lessons)\b",
    re.I,
)

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def sentences(text: str) -> list[tuple[int, str]]:
    """The sentences of ``text`` with their character offsets."""
    out = []
    pos = 0
    for part in _SENTENCE.split(text):
        start = text.find(part, pos)
        if part.strip():
            out.append((start, part))
        pos = start + len(part)
    return out


def sentence_cues(sentence: str) -> np.ndarray:
    """The cues of one sentence, as float32 0/1 in :data:`CUES` order."""
    s = sentence.strip()
    return np.array(
        [
            _FIRST.search(s) is not None,
            _FIRST_SUBJECT.search(s) is not None,
            OTHERS_RE.search(s) is not None or _THIRD_SUBJECT.search(s) is not None,
            s.endswith("?") or "?" in s,
            _HYPOTHETICAL.search(s) is not None,
            _PLAN.search(s) is not None,
            _NEGATION.search(s) is not None,
            _PAST.search(s) is not None,
            _CHANGE.search(s) is not None,
            _OPINION.search(s) is not None,
            _ACTIVITY.search(s) is not None,
        ],
        dtype=np.float32,
    )


@lru_cache(maxsize=65536)
def sentence_rows(text: str) -> tuple[tuple[tuple[int, str], ...], np.ndarray]:
    """``text``'s sentences with their offsets (:func:`sentences`) and their cues, one row a
    sentence (read-only). Kept per text: the gate reads them through :func:`turn_cues` and the
    slot scorer (memlane/facts/learned.py) for each candidate value's sentence; computed once
    for both, the slot classifier took 0.79 -> 0.68 ms a LoCoMo turn (CPU, 2,077 turns, two
    alternated runs each, identical probabilities)."""
    sents = tuple(sentences(text))
    rows = np.stack([sentence_cues(s) for _, s in sents]) if sents else np.zeros((0, len(CUES)), np.float32)
    rows.setflags(write=False)
    return sents, rows


@lru_cache(maxsize=65536)
def turn_cues(text: str) -> np.ndarray:
    """A turn's cues: the share of its sentences that show each cue, and whether any does
    (2 x len(CUES) values; read-only). Kept per text: recall reads them for every candidate,
    twice (the gate and the ranker's features), and the same turns come back query after
    query; the regexes took ~16 ms of a LoCoMo recall's ~50 ms learned stage (cProfile, 40
    questions, Nov 2026)."""
    m = sentence_rows(text)[1]
    if not len(m):
        m = np.zeros((1, len(CUES)), np.float32)
    out = np.concatenate([m.mean(axis=0), m.max(axis=0)]).astype(np.float32)
    out.setflags(write=False)
    return out
