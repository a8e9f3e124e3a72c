"""Whom a question asks about as the one who said something: "What book did you recommend?"
asks for the assistant's turn, "What did Sam suggest?" for Sam's, "What did I tell you about
my sister?" for the user's. The learned ranker reads it against each memory's speaker
(memlane/recall/features.py ``sayer_match``): without it a turn's speaker was only a prior, and
the assistant's own recommendation ranked 6th where the fused order had it 2nd (traced on a new
user's history, 2026-12-07).

Regular expressions only: it runs once per question."""

from __future__ import annotations

import re

# A verb of saying, recommending or proposing, and the nouns of the same acts.
_SAY = (
    r"(?:recommend|suggest|say|said|tell|told|mention|advis|propos|pick|name|think|thought|"
    r"warn|remind|offer|tip)\w*"
)
_SAY_NOUN = r"(?:recommendation|suggestion|advice|tip|idea|pick|verdict)s?"
_SUBJECT_VERB = re.compile(
    rf"\b(?P<who>you|u|I|[A-Z][a-z]+)\s+(?:\w+ly\s+|ever\s+|once\s+|first\s+|just\s+|had\s+|have\s+)?{_SAY}\b"
)
_POSSESSIVE_NOUN = re.compile(rf"\b(?P<who>your|my|[A-Z][a-z]+(?:'s|’s))\s+(?:\w+\s+)?{_SAY_NOUN}\b")
_ASSISTANT = re.compile(r"\b(?:the )?assistant\b", re.I)
_NOT_NAMES = frozenset({"What", "Which", "Who", "When", "Where", "How", "Why", "Did", "Do", "Does", "The"})


def asks_said(question: str) -> bool:
    """Whether the question asks about something someone said, recommended or suggested."""
    return re.search(rf"\b(?:{_SAY}|{_SAY_NOUN})\b", question, re.I) is not None


def sayer(question: str) -> str | None:
    """Who said what the question asks about: "assistant" (you, your, the assistant), "user"
    (I, my), a name as written ("Sam"), or None when the question names no one who said it."""
    for pattern in (_SUBJECT_VERB, _POSSESSIVE_NOUN):
        for m in pattern.finditer(question):
            who = m.group("who")
            low = who.casefold()
            if low in ("you", "u", "your"):
                return "assistant"
            if low in ("i", "my"):
                return "user"
            name = re.sub(r"(?:'s|’s)$", "", who)
            if name not in _NOT_NAMES:
                return name
    if _ASSISTANT.search(question) and asks_said(question):
        return "assistant"
    return None


# A turn that offers something: a recommendation, a suggestion, an option put forward.
_OFFERS = re.compile(
    r"\b(?:try|I['’]d (?:recommend|suggest|go (?:with|for))|I (?:recommend|suggest)|you could|you might|"
    r"you should|how about|what about|go for|consider|check out|worth (?:a )?(?:look|try|trying|reading|"
    r"watching|listening)|my (?:pick|vote|recommendation|suggestion)|a good (?:option|choice|fit|bet)|"
    r"options?:)\b",
    re.I,
)


def offers(text: str) -> bool:
    """Whether a turn puts something forward (a recommendation or a suggestion)."""
    return _OFFERS.search(text) is not None


# A turn that opens by turning an option down: "not the blue one", "don't buy the cheap one",
# "avoid the ring road". The choice it rejects is not what was suggested.
_REJECTS = re.compile(r"^\W*(?:not|don['’]?t|do not|never|avoid|skip)\b", re.I)


def rejects(text: str) -> bool:
    """Whether a turn opens by turning an option down."""
    return _REJECTS.match(text) is not None
