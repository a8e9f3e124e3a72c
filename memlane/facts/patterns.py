"""The rules' slots: a small set of patterns over one sentence, first person resolved to the
speaker (the LLM-free extractor's half of Engram's structured facts).

Precision over recall: a fact the patterns miss stays slotless and is ranked as before, while a
wrong slot would invalidate a true fact. So a sentence is skipped when it asks ("?"), negates
("not", "no longer"), supposes ("if", "would", "might", "thinking about") or looks back ("used
to", "lived", "worked"): none of them states a current value; and a match is dropped when the
turn goes on to say it starts later ("starting next month"). Places and organisations must be
capitalised, and an organisation must not be the modifier of a noun that follows it: "started
Japanese lessons" is an activity, not a job at "Japanese" (a bare "started" or "work" needs
"at", "for" or "by" before the organisation). Counts of things come from a list of countable
possessions; diets, pets, cars and partners from memlane/facts/vocab.py.

Only first-person statements fill a slot here (the speaker's own): on the LongMemEval dev
banks, third-person matches were mostly an assistant's stories ("Luna became a hero"). Plans are
not a slot of the rules: people hold many at once, and treating "planning to X" as one value
superseded 229 true facts on those banks. The LLM extractor fills both (memlane/facts/resolve.py
never supersedes a plan).

Predicates: ``lives_in``, ``works_at``, ``job_title``, ``relationship``, ``owns:<thing>`` (with
a count: the ``count`` family), ``favourite:<category>``, ``diet``, ``pet``, ``car``,
``studies``. A turn may fill several (:func:`find_facts`).
"""

from __future__ import annotations

import re
from typing import Callable

from memlane.facts import vocab
from memlane.facts.slots import Slot, norm_text
from memlane.query.slot_words import COUNTABLE, PLURALS
from memlane.temporal.vocabulary import NUM_WORDS

_CONTRACTIONS = (
    (re.compile(r"\b(I|we|you|they)['’]m\b", re.I), r"\1 am"),
    (re.compile(r"\b(I|we|you|they)['’]ve\b", re.I), r"\1 have"),
    (re.compile(r"\b(we|you|they)['’]re\b", re.I), r"\1 are"),
    (re.compile(r"\b(I|we|you|they)['’]ll\b", re.I), r"\1 will"),
    (re.compile(r"\b(I|we|you|they)['’]d\b", re.I), r"\1 would"),
    (re.compile(r"\bim\b"), "I am"),
)
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")
# A statement of a current value is none of these (see the module docstring).
_GUARD = re.compile(
    r"\b(?:not|n['’]t|never|no longer|if|would|could|might|may|maybe|wanna|want to|wants to|"
    r"hope|hoping|wish|dream|thinking (?:of|about)|considering|used to|lived|worked|"
    r"was living|was working|will|going to|should|plan to|planning to|about to|soon)\b",
    re.I,
)
# Said after the value, in the rest of the turn: it starts later, or it ended.
_LATER = re.compile(
    r"\b(?:starting|start|starts|from)\s+(?:in|on|next|tomorrow|monday|tuesday|wednesday|thursday|"
    r"friday|january|february|march|april|may|june|july|august|september|october|november|"
    r"december|after)\b|\bnext (?:week|month|year|term|semester|spring|summer|autumn|fall|winter)\b|"
    r"\b(?:moving in|move in|get the keys|collecting|picking up)\b|"
    r"\b(?:died|passed away|put down|put to sleep|rip|r\.i\.p|sold it|used to)\b",
    re.I,
)
_SUBJECT = r"(?P<subj>\bI|\b[Ww]e)"
_ADV = r"(?:\s+(?:just|finally|recently|now|officially|actually|also|already|eventually|currently|"
_ADV += r"have|has|am|are|is|got|been|since|all|both|still))*"
_PLACE = r"(?P<obj>[A-Z][\w'’.-]*(?:\s+(?:[A-Z][\w'’.-]*|de|del|la|le|upon|on|of|am))*(?:,\s*[A-Z][\w'’-]*)?)"
_ORG = _PLACE
_WORDS = r"(?P<obj>[\w'’&-]+(?:\s+[\w'’&-]+){0,5})"
_NUMBERS = {
    **NUM_WORDS,  # the time rules' number words, one list
    "a": 1,
    "an": 1,
    "a second": 2,
    "a third": 3,
    "a fourth": 4,
    "a fifth": 5,
}
_BOUNDARY_WORDS = (
    "and but because since so which where who when while after before last next this that for now "
    "today yesterday with from as until though although in at on to recently these lately anymore "
    "again too right"
).split()
# Where an object's words end: punctuation or a word that starts another clause.
_BOUNDARY = re.compile(r"[,.;:!?()\"]|\s(?:" + "|".join(_BOUNDARY_WORDS) + r")\b", re.I)
# After a capitalised organisation or place: a lower-case word that is no clause boundary makes
# the capitalised word a modifier ("Japanese lessons", "Google headquarters"): not a value.
_MODIFIES = re.compile(r"\s+(?!(?:" + "|".join(_BOUNDARY_WORDS) + r"|and|or|is|are|was)\b)[a-z]")
_STATUS = r"(?P<obj>single|married|engaged|divorced|separated|widowed|in a relationship)"
_JOB = r"(?:" + "|".join(sorted(vocab.JOB_NOUNS, key=len, reverse=True)) + r")s?"
_JOB_PHRASE = r"(?P<obj>(?:[\w-]+\s+){0,3}" + _JOB + r")\b"
_DIET = r"(?P<obj>" + vocab.DIET_WORDS + r")"
_PET = r"(?P<obj>" + vocab.PET_WORDS + r")(?:e?s)?"
_PET_ADJ = (
    r"(?:(?:new|little|old|rescue|rescued|baby|big|lazy|fat|sweet|senior|young|two|three|four|\d+)\s+){0,2}"
)
_CAR = r"(?P<obj>" + vocab.CAR_PATTERN + r")\b"
_DEGREE = (
    r"(?:master['’]?s|masters|MSc|MA|MBA|MPhil|PhD|Ph\.D|doctorate|degree|bachelor['’]?s|bachelor|BSc|BA|"
    r"BEng|MEng|MTech|BTech|LLB|LLM|diploma|undergrad|postgrad|apprenticeship)"
)

Build = Callable[[re.Match[str]], "tuple[str, int | None] | None"]
_RULES: list[tuple[str, re.Pattern[str], Build]] = []
# The countable possessions as said, singular or plural ("two rescue dogs now": "dogs", not "now").
_COUNTABLE = "|".join(
    sorted(
        [*(re.escape(w) + r"(?:e?s)?" for w in COUNTABLE), *map(re.escape, PLURALS)], key=len, reverse=True
    )
)


def _trim(value: str, max_words: int = 5) -> str:
    """The object up to the first clause boundary, at most ``max_words`` words."""
    cut = _BOUNDARY.search(" " + value)
    head = (" " + value)[: cut.start()] if cut else " " + value
    return " ".join(head.split()[:max_words]).strip(" '’-")


_CALENDAR = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april june july "
    "august september october november december".split()
)


def _place(value: str) -> str:
    # A place or organisation stops at its last capitalised word ("Leeds last week" -> "Leeds").
    words = value.replace(",", " , ").split()
    kept: list[str] = []
    for w in words:
        if w.strip(".,!?").lower() in _CALENDAR:
            break  # "Acme on Monday": a day or month is not part of the name
        if w == "," or w[:1].isupper() or (kept and w in ("de", "del", "la", "le", "upon", "on", "of", "am")):
            kept.append(w)
        else:
            break
    while kept and not kept[-1][:1].isupper():
        kept.pop()
    return " ".join(kept).replace(" , ", ", ").strip(", ").rstrip(".")


def _rule(predicate: str, pattern: str):
    def add(fn: Build) -> Build:
        _RULES.append((predicate, re.compile(pattern), fn))
        return fn

    return add


def _as_place(m: re.Match[str]):
    if _MODIFIES.match(m.string, m.end("obj")):
        return None  # "Japanese lessons": the capitalised word qualifies a noun
    place = _place(m.group("obj"))
    return (place, None) if place else None


_rule(
    "lives_in",
    _SUBJECT + _ADV + r"\s+(?:live|lives|living|moved|relocated|settled|based)(?:\s+back|\s+here|\s+over)?"
    r"(?:\s+from\s+[A-Z][\w'’ -]*?\s+to|\s+(?:in|to|into|down to|up to|out to))\s+(?:the\s+)?" + _PLACE,
)(_as_place)
_rule(
    "lives_in",
    _SUBJECT + _ADV + r"\s+(?:moved into|bought|found|got)\s+(?:a|an|our|my|the)\s+(?:new\s+|own\s+)?"
    r"(?:place|home|house|flat|apartment|condo|bungalow|cottage)\s+(?:in|near)\s+" + _PLACE,
)(_as_place)
# A bare verb needs its preposition ("started at Acme"); only "joined" takes an object.
_rule(
    "works_at",
    _SUBJECT + _ADV + r"\s+(?:(?:work|works|working|started working|started|began working|employed|hired|"
    r"landed a job|took a job|got a job|got a new job|have a new job|have a job|accepted a job|"
    r"accepted a position|started a new job|started a job|started my new job|started my job|"
    r"am (?:an?|the)\s+(?:[\w-]+\s+){0,3}" + _JOB + r")\s+(?:at|for|by)|joined)\s+(?:the\s+)?" + _ORG,
)(_as_place)


def _as_title(m: re.Match[str]):
    title = _trim(m.group("obj"), 4)
    return (title, None) if title else None


_rule(
    "job_title",
    _SUBJECT + _ADV + r"\s+(?:work as|working as|started as|promoted to|a new role as|a new job as)"
    r"\s+(?:an?\s+|the\s+)?" + _WORDS,
)(_as_title)
_rule(
    "job_title",
    r"\b(?P<subj>[Mm]y)\s+(?:new\s+)?(?:job title|title|role|position)\s+is(?:\s+now)?\s+(?:an?\s+)?"
    + _WORDS,
)(_as_title)
_rule("job_title", r"\b(?P<subj>I)\s+am(?:\s+(?:now|currently|officially))?\s+(?:an?|the)\s+" + _JOB_PHRASE)(
    _as_title
)


@_rule(
    "relationship",
    _SUBJECT + _ADV + r"\s+(?:got\s+|gotten\s+)?" + _STATUS + r"(?:\s+to\s+(?P<partner>[A-Z][a-z]+))?",
)
def _status(m: re.Match[str]):
    partner = m.group("partner")
    status = m.group("obj").lower()
    return (f"{status} to {partner}" if partner else status, None)


@_rule("relationship", _SUBJECT + _ADV + r"\s+(?:started\s+)?dating\s+(?P<obj>[A-Z][a-z]+)")
def _dating(m: re.Match[str]):
    return (f"dating {m.group('obj')}", None)


@_rule("relationship", _SUBJECT + _ADV + r"\s+broke up(?:\s+with\s+[A-Z][a-z]+)?(?P<obj>)")
def _broke_up(m: re.Match[str]):
    return ("single", None)


@_rule(
    "owns",
    _SUBJECT
    + _ADV
    + r"\s+(?:have|own|adopted|got|bought|rescued)\s+(?P<n>\d+|an?(?:\s+(?:second|third|fourth|fifth))?"
    r"|one|two|three|four|five|six|seven|eight|nine|ten)\s+(?:[a-z-]+\s+)?(?P<obj>" + _COUNTABLE + r")\b",
)
def _owns(m: re.Match[str]):
    noun = m.group("obj").lower()
    noun = PLURALS.get(noun, noun[:-1] if noun.endswith("s") and noun[:-1] in COUNTABLE else noun)
    thing = COUNTABLE.get(noun)
    if thing is None:
        return None
    n = m.group("n").lower()
    count = int(n) if n.isdigit() else _NUMBERS.get(" ".join(n.split()))
    verb_is_having = re.search(r"\b(?:have|own)\s+" + re.escape(m.group("n")), m.group(0)) is not None
    if count is None or (count == 1 and n in ("a", "an") and not verb_is_having):
        return None  # "got a dog" says one more, not how many
    return (thing, count)


@_rule(
    "favourite",
    r"\b(?P<subj>[Mm]y|[Oo]ur)\s+(?:new\s+|current\s+|all-time\s+|absolute\s+)?favou?rite\s+(?P<cat>[a-z]+)"
    r"\s+(?:is|has to be|these days is|right now is|at the moment is)(?:\s+now)?\s+" + _WORDS,
)
def _favourite(m: re.Match[str]):
    value = _trim(m.group("obj"), 5)
    return (value, None) if value else None


@_rule(
    "diet",
    r"\b(?P<subj>I)\s+(?:am|have been|have gone|went|turned|became|eat|keep|stay)"
    r"(?:\s+(?:now|fully|strictly|mostly|basically|also|still|completely|totally|an?|only|properly))*\s+"
    + _DIET
    + r"\b(?!\s+(?:food|restaurant|place|cafe|option|options|recipe|recipes|dish|dishes|friend|friends))",
)
def _diet(m: re.Match[str]):
    return (vocab.DIETS[m.group("obj").lower()], None)


_rule("diet", r"\b(?P<subj>I)\s+am\s+(?:on|doing|following)\s+(?:an?|the)\s+" + _DIET + r"\s+diet\b")(_diet)


@_rule("pet", r"\b(?P<subj>[Mm]y|[Oo]ur)\s+" + _PET_ADJ + _PET + r"\b(?:,?\s+(?P<name>[A-Z][a-z]+)\b)?")
def _pet(m: re.Match[str]):
    species = vocab.pet_species(m.group("obj"))
    if species is None:
        return None
    name = m.group("name") if "name" in m.groupdict() else None
    return (f"{species} {name}" if name else species, None)


_rule(
    "pet",
    _SUBJECT
    + _ADV
    + r"\s+(?:have|own|adopted|got|rescued)\s+(?:an?|two|three|four|\d+)\s+"
    + _PET_ADJ
    + _PET
    + r"\b",
)(_pet)


@_rule(
    "car",
    r"\b(?:(?P<subj>[Mm]y|[Oo]ur)\s+(?:(?:new|little|trusty|beloved|used|\d{4})\s+)*|(?P<subj2>I)\s+"
    r"(?:drive|have|own|bought|got)\s+(?:an?|the)\s+(?:(?:new|little|used|second-hand|\d{4})\s+)*)" + _CAR,
)
def _car(m: re.Match[str]):
    return (m.group("obj").strip(), None)


_STUDY_END = re.compile(
    r"[,.;:!?()\"]|\s(?:" + "|".join(w for w in _BOUNDARY_WORDS if w not in ("in", "at", "for")) + r")\b",
    re.I,
)


@_rule(
    "studies",
    r"\b(?P<subj>I)\s+am\s+(?:studying|doing|taking|in\s+(?:my|the)\s+\w+\s+year\s+of)\s+(?:an?\s+|my\s+|the\s+)?"
    r"(?:(?:part-time|full-time|first|second|third|final|online)\s+)*(?P<obj>(?:[\w'’-]+\s+){0,4}?"
    + _DEGREE
    + r"\b[^,.;:!?()]*)",
)
def _studies(m: re.Match[str]):
    # The degree, its subject and its place ("MSc in business analytics at NUS"), up to the
    # next clause ("while working ...").
    obj = m.group("obj")
    cut = _STUDY_END.search(" " + obj)
    value = " ".join((" " + obj)[: cut.start()].split() if cut else obj.split()[:10])
    return (value, None) if value else None


# A sentence that starts with its verb ("Started my new job at Acme today!") is the speaker's.
_NO_SUBJECT = re.compile(
    r"^(?:just|finally|officially|started|moved|joined|got|adopted|relocated|landed|bought|living|working|settled)\b",
    re.I,
)


def _sentences(text: str) -> list[str]:
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    out = []
    for s in _SENTENCES.split(text):
        s = s.strip()
        if s:
            out.append("I " + s[0].lower() + s[1:] if _NO_SUBJECT.match(s) else s)
    return out


def _subject(m: re.Match[str]) -> str:
    groups = m.groupdict()
    return (groups.get("subj") or groups.get("subj2") or "").lower()


def find_facts(text: str, speaker: str, *, order: int = 0) -> list[Slot]:
    """Every slot the sentences of ``text`` fill, first person resolved to ``speaker``, in the
    order said; at most one per predicate and sentence, a value said twice once. Empty when no
    pattern matches a plain statement. ``text`` may start with ``"<speaker>: "``."""
    prefix = f"{speaker}: "
    if text.startswith(prefix):
        text = text[len(prefix) :]
    sentences = _sentences(text)
    out: list[Slot] = []
    seen: set[tuple[str, str]] = set()
    for i, sentence in enumerate(sentences):
        if sentence.endswith("?"):
            continue
        filled: set[str] = set()
        for predicate, pattern, build in _RULES:
            m = pattern.search(sentence)
            if m is None or predicate in filled or _GUARD.search(sentence[: m.start("obj")]):
                continue
            if _subject(m) not in ("i", "we", "my", "our"):
                continue  # the speaker's own statements only (see the module docstring)
            if _LATER.search(" ".join([sentence[m.end("obj") :], *sentences[i + 1 : i + 2]])):
                continue  # it starts later, or it ended
            found = build(m)
            if found is None:
                continue
            obj, count = found
            if predicate == "owns":
                predicate_name, obj = f"owns:{obj}", str(count)
            elif predicate == "favourite":
                predicate_name = f"favourite:{m.group('cat').lower()}"
            else:
                predicate_name = predicate
            filled.add(predicate)
            if (predicate_name, norm_text(obj)) in seen:
                continue
            seen.add((predicate_name, norm_text(obj)))
            out.append(Slot(subject=speaker, predicate=predicate_name, object=obj, count=count, order=order))
    return out


def find_slot(text: str, speaker: str, *, order: int = 0) -> Slot | None:
    """The first slot :func:`find_facts` finds (the one a unit that holds a single slot keeps)."""
    facts = find_facts(text, speaker, order=order)
    return facts[0] if facts else None
