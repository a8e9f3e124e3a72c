"""Candidate values of each slot family in a turn: the spans a learned extractor chooses from
(memlane/facts/learned.py scores each one).

Generous on purpose: a candidate here is only a span that *could* be the value (an
organisation or place named with capitals or by spaCy's entities, a job noun phrase, a diet,
pet, car or partner word from memlane/facts/vocab.py, a number before a noun); the scorer
decides, per family, which of them the turn states as the speaker's own current value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from memlane.facts import vocab
from memlane.temporal.vocabulary import NUM_WORDS

SOURCES: tuple[str, ...] = ("org", "place", "person", "entity", "proper", "vocab", "phrase", "number")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One span that may be a family's value: where it is in the turn and how it was found."""

    family: str
    value: str
    start: int
    end: int
    source: str


# Capitalised words in a row ("Go-Ahead London", "University of Tartu"); a word's full stop
# ends the span only when a space follows ("St. Ives" stays one, "ER24. The" is two).
_WORD = r"[A-Z][\w'’&-]*(?:\.(?=[\w-]))?[\w'’&-]*"
_PROPER = re.compile(
    r"(?<![\w'’])"
    + _WORD
    + r"(?:\s+(?:(?:of|de|del|la|le|the|and|&|am|upon|on)\s+)?(?!I\b)(?:"
    + _WORD
    + r"|[0-9][\w-]*))*"
)
# Capitalised words that are never a value on their own.
_NOT_PROPER = frozenset(
    "I I'm I've I'd I'll Im My Our We The A An It It's Its He She They Our Your You This That These Those "
    "And But So Or If When While After Before Now Then Just Yes No Yeah Yep Nope Oh Ok Okay Well Also "
    "Still Honestly Actually Anyway Plus Haha Lol Sure Thanks Thank Sorry Please Hi Hey Hello "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July "
    "August September October November December Mum Mom Dad Christmas Easter Been Not Only Some "
    "Assistant Ha Wow Aye Mine Since Last Next First Second Third Final Probably Definitely Officially "
    "Finally Started Moved Got Recently Currently Mostly Basically Totally Really Pretty Very At In On For With "
    "From To By As Of Me Us Nothing Everything Something Everyone Someone Same Both All Back Growing".split()
)
_ENT_SOURCE = {
    "ORG": "org",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "PERSON": "person",
    "NORP": "entity",
}
_JOB_CHUNK = re.compile(
    r"(?:(?:[A-Za-z][\w-]*)\s+){0,3}?(?:"
    + "|".join(sorted(vocab.JOB_NOUNS, key=len, reverse=True))
    + r")s?\b",
    re.I,
)
_CHUNK_STOP = frozenset(
    "a an the my our his her their i im i'm i've am is are was be been as at for with in on of and or but "
    "so that this just now still also officially finally really very full part-time full-time "
    "time and to from by who which while when whos".split()
)
_DEGREE = re.compile(
    r"\b(?:master['’]?s|masters|MSc|MA|MBA|MPhil|PhD|doctorate|degree|bachelor['’]?s|bachelor|BSc|BA|BEng|"
    r"MEng|MTech|BTech|LLB|LLM|diploma|apprenticeship|undergrad|postgrad|(?:first|second|third|final) year)\b"
    r"(?:\s+(?:in|of)\s+[\w'’ -]{2,40}?)?(?=[,.;!?)]|\s+(?:at|and|but|so|while|because|which)\b|$)",
    re.I,
)
_STUDYING = re.compile(
    r"\b(?:studying|study|studies|majoring in|reading)\s+(?P<v>[a-z][\w'’ -]{2,30}?)(?=[,.;!?]|\s+(?:at|and|but|so|while|because)\b|$)",
    re.I,
)
_NUMBER_WORDS = {**NUM_WORDS, "a couple of": 2, "a pair of": 2, "a dozen": 12, "half a dozen": 6}
_ORDINALS = {
    "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9,
    "tenth": 10, "eleventh": 11, "twelfth": 12,
}  # fmt: skip
_NUMBER = re.compile(
    r"\b(?P<n>\d{1,4}|"
    + "|".join(sorted(map(re.escape, [*_NUMBER_WORDS, *_ORDINALS]), key=len, reverse=True))
    + r")\s+(?:[\w'’-]+\s+){0,2}?(?P<thing>[a-z][\w-]*s|children|people|fish|sheep|geese|mice)\b",
    re.I,
)
_CAR_ANY_CASE = re.compile(r"\b(?P<car>(?i:" + vocab.CAR_NAMES + r")" + vocab.CAR_TAIL + r")\b")
_DIET_NAMED = re.compile(
    r"\b(?:on|doing|following|started)\s+(?:an?\s+|the\s+|my\s+)?(?P<v>[\w-]+(?:\s+[\w-]+)?)(?:\s+diet\b|(?=,|\.|\s+day\b))",
    re.I,
)
_DIET_WITHOUT = re.compile(
    r"\b(?:no|don['’]t eat|do not eat|cut out|avoid|never eat)\s+(?P<v>red meat|pork|beef|meat|dairy|gluten|sugar|alcohol|fish|eggs|nuts)\b",
    re.I,
)
_FAV = re.compile(r"\b(?:favou?rite|fav|fave|all-time|go-to)\b", re.I)
_FAV_AFTER = re.compile(
    r"\b(?:favou?rite|fav|fave)\s+(?P<cat>[a-z]+)(?:\s+of all time|\s+ever)?\s+(?:is|has to be|has always been|"
    r"remains|these days is|right now is|at the moment is)\s+(?P<v>[^,.;!?]{1,60})",
    re.I,
)
_FAV_BEFORE = re.compile(
    r"(?P<v>[\w'’&.-]+(?:\s+[\w'’&.-]+){0,5}?)\s*(?:,\s*)?(?:is|are|has to be|remains|has always been|will always be|"
    r"[-—–])\s+(?:still\s+|probably\s+)?(?:my|our)\s+(?:all-time\s+|absolute\s+)?(?:favou?rite|fav|fave)\b",
    re.I,
)


def _clean(value: str) -> str:
    return value.strip(" ,.;:!?'\"’-—–()")


def _proper_spans(text: str) -> list[tuple[str, int, int]]:
    out = []
    for m in _PROPER.finditer(text):
        words = m.group(0).split()
        start = m.start()
        while words and words[0].rstrip(".,!?'’") in _NOT_PROPER:  # "My Subaru" -> "Subaru"
            start = text.find(words[1], start + len(words[0])) if len(words) > 1 else m.end()
            words = words[1:]
        if words and words[-1] in ("of", "de", "del", "la", "le", "the", "and", "&", "am", "upon", "on"):
            words = words[:-1]
        value = _clean(" ".join(words))
        if value and value not in _NOT_PROPER:
            out.append((value, start, start + len(value)))
    return out


_NOUNS = tuple(sorted(vocab.JOB_NOUNS))  # lower-case letters only (a test holds it)


def _may_name_a_job(text: str) -> bool:
    """False only where :data:`_JOB_CHUNK` cannot match: an ASCII text without a job noun ending
    at a word boundary (the noun, or its plural). The chunk pattern tries up to three words before
    every position: 0.418 ms a LoCoMo turn, 0.048 with this check first (95% of them name no
    job); LongMemEval's longer turns 3.6 -> 2.1 ms (a third name one). Identical chunks on 39,273
    LoCoMo, LongMemEval and answer-set texts. Other texts take the pattern (re.I folds some
    non-ASCII letters onto ASCII ones)."""
    if not text.isascii():
        return True
    low = text.lower()

    def boundary(k: int) -> bool:
        return k == len(low) or not (low[k].isalnum() or low[k] == "_")

    for noun in _NOUNS:
        i = low.find(noun)
        while i >= 0:
            end = i + len(noun)
            if boundary(end) or (low.startswith("s", end) and boundary(end + 1)):
                return True
            i = low.find(noun, i + 1)
    return False


def _job_chunks(text: str) -> list[tuple[str, int, int]]:
    if not _may_name_a_job(text):
        return []
    out = []
    for m in _JOB_CHUNK.finditer(text):
        words = m.group(0).split()
        start = m.start()
        while len(words) > 1 and words[0].lower().strip(",.") in _CHUNK_STOP:
            start += len(words[0]) + 1
            words = words[1:]
        out.append((" ".join(words), start, m.end()))
    return out


# A partner word, then perhaps a name; compiled once (joined and looked up in re's cache per
# call, the alternation was compiled again whenever other patterns had pushed it out).
_PARTNER = re.compile(r"\b(?i:(?P<w>" + "|".join(vocab.PARTNERS) + r"))\b(?:\s*,?\s+(?P<name>[A-Z][a-z]+))?")


def _relationship(text: str) -> list[tuple[str, int, int]]:
    out = []
    for m in _PARTNER.finditer(text):
        status = vocab.PARTNERS[m.group("w").lower()]
        who = m.group("name")
        if who and who in _NOT_PROPER:
            who = None
        value = (
            status
            if not who
            else (f"{status} to {who}" if status in ("married", "engaged") else f"{status} {who}")
        )
        out.append((value, m.start(), m.end()))
    for m in re.finditer(
        r"\b(?i:(?P<s>married|engaged|divorced|separated|widowed|widow|widower|single|dating|seeing|together))\b"
        r"(?:\s+(?i:to|with|someone called|someone named)?\s*(?P<name>[A-Z][a-z]+))?",
        text,
    ):
        said = m.group("s").lower()
        status = {"seeing": "dating", "together": "dating", "widow": "widowed", "widower": "widowed"}.get(
            said, said
        )
        who = m.group("name")
        if who and who in _NOT_PROPER:
            who = None
        if who is None:
            before = re.search(r"\b(?P<name>[A-Z][a-z]+)\s+and\s+(?:I|me)\b[^.!?]{0,40}$", text[: m.start()])
            who = before.group("name") if before and before.group("name") not in _NOT_PROPER else None
        if status in ("married", "engaged") and who:
            value = f"{status} to {who}"
        elif status == "dating" and who:
            value = f"dating {who}"
        else:
            value = status
        out.append((value, m.start(), m.end()))
    return out


def _numbers(text: str) -> list[tuple[str, int, int]]:
    out = []
    for m in _NUMBER.finditer(text):
        n = m.group("n").lower()
        value = int(n) if n.isdigit() else _NUMBER_WORDS.get(n, _ORDINALS.get(n))
        if value is not None and not (n.isdigit() and len(n) == 4 and 1900 <= value <= 2100):
            out.append((str(value), m.start(), m.end()))
    return out


def _favourites(text: str) -> list[tuple[str, int, int]]:
    if not _FAV.search(text):
        return []
    out = []
    for m in _FAV_AFTER.finditer(text):
        v = _clean(re.split(r"\s+(?:because|since|and|but|so|which|though)\b", m.group("v"))[0])
        if v:
            out.append((" ".join(v.split()[:6]), m.start("v"), m.start("v") + len(v)))
    for m in _FAV_BEFORE.finditer(text):
        v = _clean(
            re.sub(
                r"^(?:and|but|so|honestly|probably|oh|well|yes|yeah|it|that)\s+", "", m.group("v"), flags=re.I
            )
        )
        if v and v.lower() not in ("it", "that", "this", "which", "she", "he", "they"):
            out.append((v, m.start("v"), m.end("v")))
    first = re.match(r"\s*([^.!?]{1,50})[.!?]", text)
    if first and _FAV.search(text[first.end() :]) and not _FAV.search(first.group(1)):
        v = _clean(
            re.split(r",|\s+(?:always|obviously|probably|definitely|forever|till|until)\b", first.group(1))[0]
        )
        if v and len(v.split()) <= 6:
            out.append((v, first.start(1), first.start(1) + len(v)))
    return out


def candidates(text: str, entities: Sequence[tuple[str, str, int, int]] = ()) -> list[Candidate]:
    """Every candidate value of every family in ``text`` (the turn without its speaker prefix).
    ``entities``: spaCy's (text, label, start, end) for the turn, when the caller ran NER."""
    out: list[Candidate] = []
    seen: set[tuple[str, str, int]] = set()

    def add(family: str, value: str, start: int, end: int, source: str) -> None:
        key = (family, value.casefold(), start)
        if value and key not in seen:
            seen.add(key)
            out.append(Candidate(family, value, start, end, source))

    named: list[tuple[str, int, int, str]] = []
    for value, label, start, end in entities:
        if label in _ENT_SOURCE:
            named.append((_clean(value), start, end, _ENT_SOURCE[label]))
    for value, start, end in _proper_spans(text):
        named.append((value, start, end, "proper"))
    for value, start, end, source in named:
        if source != "person":
            for fam in ("works_at", "lives_in", "studies"):
                add(fam, value, start, end, source)
        add("favourite", value, start, end, source)
        if source == "person":
            add("relationship", value, start, end, source)
    for value, start, end in _job_chunks(text):
        add("job_title", value, start, end, "phrase")
    for m in vocab.DIET_RE.finditer(text):
        add("diet", vocab.DIETS[m.group(0).lower()], m.start(), m.end(), "vocab")
    for m in vocab.PET_RE.finditer(text):
        species = vocab.pet_species(m.group(0))
        if species:
            after = re.match(
                r"(?:\s*,)?\s+(?:called\s+|named\s+)?([A-Z][a-z]+)\b(?:\s+and\s+([A-Z][a-z]+)\b)?",
                text[m.end() :],
            )
            names = [n for n in (after.groups() if after else ()) if n and n not in _NOT_PROPER]
            add("pet", species, m.start(), m.end(), "vocab")
            for name in names:
                add("pet", f"{species} {name}", m.start(), m.end(), "vocab")
    for m in _CAR_ANY_CASE.finditer(text):
        add("car", m.group("car"), m.start(), m.end(), "vocab")
    for m in _DIET_NAMED.finditer(text):
        add("diet", m.group("v").lower(), m.start("v"), m.end("v"), "phrase")
    for m in _DIET_WITHOUT.finditer(text):
        add("diet", "no " + m.group("v").lower(), m.start("v"), m.end("v"), "phrase")
    for value, start, end in _relationship(text):
        add("relationship", value, start, end, "vocab")
    for m in _DEGREE.finditer(text):
        add("studies", _clean(m.group(0)), m.start(), m.end(), "phrase")
    for m in _STUDYING.finditer(text):
        add("studies", _clean(m.group("v")), m.start("v"), m.end("v"), "phrase")
    for value, start, end in _numbers(text):
        add("count", value, start, end, "number")
    for value, start, end in _favourites(text):
        add("favourite", value, start, end, "phrase")
    return out
