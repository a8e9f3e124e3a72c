"""Which way a time expression leans: to a plan (the next occurrence) or a report (the last).

"I start on 1 September" said in August means this September; "we moved on 2 August" said in
November means the August just gone. Expressions without a year ("on the 9th", "in May",
"on Friday", "in four days") are resolved by the sentence they are said in, read here from cheap
lexical cues, so that every retained turn can afford it:

- a booking or schedule word ("booked", "pencilled in for", "rescheduled", "moved to the 21st")
  makes the clause a plan even in the past tense ("I booked the physio for the 30th");
- future cues: "will", "'ll", "going to", "gonna", "can't wait", "need to", "due", a present
  progressive ("we're flying", "Mum's coming"), a present copula before a date ("the wedding's
  on the 12th", "results day is the 14th") or a schedule verb in the present ("my flight leaves",
  "I start", "term starts"), a request ("can you", "remind me");
- past cues: a past-tense verb ("moved", "got", "flew"), a present perfect ("I've done"), "ago",
  "yesterday", "ever since".

The cue that decides is the nearest one in the expression's clause (clauses end at punctuation
and at "and", "but", "so", "because", "if" ...), else the nearest in the whole text; a booking
word anywhere in the clause wins over everything else in it. No cue at all: ``UNKNOWN`` (each
reading then says what it takes; see ``periods.pick``).

spaCy's tagger would read tense too, but the engine runs it with the tagger excluded (NER only,
memlane/retain/ner.py: 443 vs 179 turns/s with the full pipeline), and these cues resolve the
labelled set's plans and reports as well (``memlane eval dates``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

PAST, UNKNOWN, FUTURE = -1, 0, 1

_DAYS = "(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"

_ING_NOUNS = (
    "evening|morning|wedding|thing|nothing|something|anything|everything|king|ring|spring|"
    "string|sibling|darling|building|ceiling|meeting|feeling|clothing|pudding|stuffing|icing|"
    "christening|funeral|during|ping|wing|sing|sling|bring|sting|swing|according|regarding|"
    "including|considering|following|nothing|ceiling|shopping|parking|housewarming|"
    "thanksgiving|boxing|spelling|training|morning"
)
_PROGRESSIVE = (
    r"(?:\b(?:i['’]m|i\s+am|we\s+are|you\s+are|they\s+are|is|are|am)|['’](?:s|re))\s+"
    r"(?:(?:just|finally|actually|really|probably|definitely|also|all|now|only|officially|not)\s+)?"
    rf"(?!(?:still|already)\b)(?!(?:{_ING_NOUNS})\b)[a-z]{{2,}}ing\b"
)
# "is"/"'s" before a date ("the wedding's on the 12th", "results day is the 14th"); the cue
# stops before the date, which may start with "in" or "on"
_COPULA_DATE = (
    r"(?:\b(?:is|are)|['’]re)(?=\s+(?:(?:now|still|definitely|probably|also)\s+)?"
    rf"(?:(?:on|at|in|due|from|until|till|set|this|next|tomorrow|{_DAYS})\b|(?:the\s+)?\d))"
)
# present-tense verbs of timetables: "my flight leaves", "term starts", "the clocks go back"
_SCHEDULE_3RD = (
    r"starts|begins|ends|finishes|leaves|arrives|lands|departs|opens|closes|comes|goes|flies|"
    r"runs|kicks|expires|returns|resumes|breaks|reopens|launches|renews|restarts"
)
_SCHEDULE_BASE = (
    r"start|begin|end|finish|leave|arrive|land|depart|open|close|come|go|fly|run|kick|return|"
    r"resume|break|meet|play|exchange|move"
)
# ... and of a first person's own plans: "I start", "we exchange", "we have dinner there"
_PERSONAL_BASE = (
    rf"{_SCHEDULE_BASE}|travel|head|graduate|retire|visit|get|have|need|want|pick|collect|"
    r"drive|sail|take|sit|see|hand|sign|finish"
)
# not in a question or after an auxiliary: "what did I have on the 3rd?"
_NOT_INVERTED = "".join(
    rf"(?<!\b{w}\s)"
    for w in (
        "did",
        "do",
        "does",
        "didn't",
        "can",
        "could",
        "would",
        "should",
        "will",
        "have",
        "has",
        "had",
        "was",
        "were",
    )
)
_NOT_PLURAL_SUBJECT = (
    r"this|its|his|hers|ours|yours|theirs|was|is|has|does|yes|us|plus|thus|as|less|unless|"
    r"across|always|perhaps|sometimes|this"
)
_BOOKING = (
    r"(?<!\ba\s)(?<!\ban\s)(?<!\bthe\s)(?<!\bmy\s)(?<!\bour\s)(?<!\byour\s)(?<!\btheir\s)"
    r"\b(?:booked|re-?booked|re-?scheduled|scheduled|pencil+ed|reserved|postponed|re-?arranged|"
    r"arranged|planned|organi[sz]ed|signed\s+up\s+for|registered\s+for|set\s+for|"
    r"(?:put|pushed)\s+back|brought\s+forward|"
    rf"(?:moved|pushed|changed|shifted)\s+(?:it\s+)?to\s+(?=the\s+\d|\d|next|tomorrow|{_DAYS}\b)|"
    r"(?:put|booked|pencil+ed|signed|entered)\s+(?:[a-z'’&]+\s+){0,4}in\s+for)"
)
_FUTURE = (
    r"\b(?:will|won['’]t|shall|would|gonna|going\s+to|about\s+to|can['’]?t\s+wait|cannot\s+wait|"
    r"looking\s+forward|(?:need|needs|have|has|got)\s+to|plan\s+to|planning|hoping|hope\s+to|"
    r"want\s+to|wanna|due|next|upcoming|coming\s+up|tomorrow|can\s+you|could\s+you|are\s+you|"
    r"remind\s+me|don['’]t\s+forget|let['’]s|fingers\s+crossed|wish\s+me|pray\s+for|you\s+in|"
    r"how\s+about|what\s+about|plans?|works\s+for|sounds?\s+good|(?:are|is)\s+(?:you|she|he)\s+free)\b|"
    r"['’]ll\b|"
    rf"{_PROGRESSIVE}|{_COPULA_DATE}|\b(?:{_SCHEDULE_3RD})\b|"
    r"\b(?:i['’]m|i\s+am|we['’]re|we\s+are|they['’]re|you['’]re)\s+"
    r"(?:off|away|back|out|free|busy|home|there|around|in|at|on)\b|"
    rf"{_NOT_INVERTED}\b(?:i|we|they|you)\s+(?:(?:just|only|also|finally|officially|then)\s+)?(?:{_PERSONAL_BASE})\b|"
    rf"\b(?!(?:{_NOT_PLURAL_SUBJECT})\b)[a-z]+s\s+(?:{_SCHEDULE_BASE})\b"
)
# Cues that decide only where no other cue does: "'s" before a date ("Hen do's the 16th", but
# also "at Mum's on Sunday"), a clause opening with a gerund ("Taking the kids to the zoo this
# weekend", "signed the lease, moving in on the 1st"), a booked thing named
_WEAK_FUTURE = (
    r"['’]s(?=\s+(?:(?:now|still|definitely|probably|also)\s+)?"
    rf"(?:(?:on|at|in|due|from|until|till|set|this|next|tomorrow|{_DAYS})\b|(?:the\s+)?\d))|"
    rf"(?:^|(?<=[,;:.!?(]\s)|(?<=[-–—]\s)|(?<=\n))(?!(?:{_ING_NOUNS})\b)[a-z]{{2,}}ing\b|"
    r"\b(?:appointment|booking|reservation|deadline)s?\b|"
    # any present copula: "the keys are ready on the 5th"
    r"\b(?:is|are|am)\b|['’](?:re|m)\b"
)
_IRREGULAR_PAST = (
    r"was|were|had|did|went|came|took|made|said|saw|met|left|flew|drove|rode|ran|rang|broke|"
    r"bought|brought|caught|taught|thought|found|gave|sent|spent|told|felt|lost|won|paid|sold|"
    r"began|became|wrote|ate|drank|slept|woke|kept|held|heard|built|fell|forgot|froze|hung|knew|"
    r"lent|meant|sat|sang|shook|spoke|stood|stole|struck|swam|threw|tore|understood|wore|wept|"
    r"fled|bred|led|dug|fed|fought|ground|hid|slid|spun|swore|sought|bent|bit|blew|chose|drew|"
    r"grew|sank|shone|stuck|stung|swung|wound|been|done|gone|seen|taken|given|eaten|broken|"
    r"fallen|flown|grown|known|written|driven|woken|begun|ago|yesterday|since|used\s+to"
)
# -ed words that are not past tenses, and the booking words (read above)
_NOT_PAST_ED = (
    r"need|feed|seed|speed|bed|red|shed|weed|indeed|proceed|exceed|succeed|breed|bleed|greed|"
    r"hundred|sacred|naked|wicked|wretched|beloved|rugged|kindred|embed|deed|reed|sled|wed|"
    r"ted|ned|fred|supposed|booked|rebooked|scheduled|rescheduled|pencilled|penciled|reserved|"
    r"postponed|arranged|rearranged|planned|organised|organized|prepared|expected|excited|"
    r"interested|tired|bored|scared|worried|stressed|engaged|married|exhausted|relieved|"
    r"thrilled|delighted|obsessed|hooked|pleased|annoyed|gutted|chuffed|knackered"
)
_PAST = (
    rf"\b(?:{_IRREGULAR_PAST})\b|"
    r"(?<!['’]ve\s)(?<!\bhave\s)(?<!\bhas\s)(?<!['’]s\s)\bgot\b|"
    # a past tense in -ed, not as an adjective after a copula or "so" ("I'm so excited")
    r"(?<!['’]m\s)(?<!\bam\s)(?<!\bis\s)(?<!\bare\s)(?<!['’]re\s)(?<!\bso\s)(?<!\bbe\s)(?<!\bnot\s)"
    rf"(?<!\bget\s)(?<!\bgetting\s)(?<!\bbeing\s)(?<!\bvery\s)\b(?!(?:{_NOT_PAST_ED})\b)[a-z]{{2,}}ed\b"
)
# a plan reported in the past tense ("he promised to pay me back by the 30th", "we agreed to
# meet on Friday"): read before the past tenses it starts with
_PLAN_TO = r"\b(?:promised|agreed|decided|offered|supposed|meant|expected|asked\s+\w+|told\s+\w+)\s+to\b"
_CUES = re.compile(
    rf"(?P<book>{_BOOKING})|(?P<plan>{_PLAN_TO})|(?P<past>{_PAST})|(?P<future>{_FUTURE})|(?P<weak>{_WEAK_FUTURE})"
)
_STRENGTH = {"book": 2, "plan": 1, "past": 1, "future": 1, "weak": 0}
# "got" after "have"/"'ve" is a present ("I've got the kids tomorrow"): no cue either way
_CLAUSE_END = re.compile(
    r"[.!?;:,()\[\]\n]|\s[-–—]\s|\b(?:and|but|so|because|cos|though|although|while|whereas|if|"
    r"unless|then|which|when|after|before|until|till)\b"
)


class _Cue(NamedTuple):
    start: int
    end: int
    lean: int  # PAST or FUTURE
    strength: int  # 2 a booking word, 1 a verb or adverb, 0 a weak cue


_SENTENCE_END = re.compile(r"[.!?\n]+(?:\s|$)")
_REACH = 300  # characters either side of an expression that are read at most


class TenseReader:
    """The lean of each expression in one text. Only the sentence around an expression is read
    (at most ``_REACH`` characters either side), once per sentence, and only when asked: most
    turns hold no yearless expression and cost nothing here."""

    __slots__ = ("_text", "_lower", "_sentences")

    def __init__(self, text: str) -> None:
        self._text = text
        self._lower: str | None = None
        self._sentences: dict[tuple[int, int], tuple[list[_Cue], list[int]]] = {}

    def _sentence(self, start: int, end: int) -> tuple[int, int, list[_Cue], list[int]]:
        if self._lower is None:
            self._lower = self._text.lower()
        lower = self._lower
        lo = max(0, start - _REACH)
        for m in _SENTENCE_END.finditer(lower, lo, start):
            lo = m.end()
        hi = min(len(lower), end + _REACH)
        stop = _SENTENCE_END.search(lower, end, hi)
        if stop:
            hi = stop.start() + 1
        if (lo, hi) not in self._sentences:
            cues = [
                _Cue(
                    m.start(),
                    m.end(),
                    PAST if m.lastgroup == "past" else FUTURE,
                    _STRENGTH[m.lastgroup or ""],
                )
                for m in _CUES.finditer(lower, lo, hi)
            ]
            self._sentences[lo, hi] = cues, [m.start() for m in _CLAUSE_END.finditer(lower, lo, hi)]
        cues, ends = self._sentences[lo, hi]
        return lo, hi, cues, ends

    def clause(self, start: int, end: int) -> tuple[int, int]:
        """The [start, end) offsets of the clause holding the expression at [start, end)."""
        lo, hi, _, ends = self._sentence(start, end)
        for b in ends:
            if b < start:
                lo = b
            elif b >= end:
                hi = b
                break
        return lo, hi

    def lean(self, start: int, end: int) -> int:
        """FUTURE, PAST or UNKNOWN for the expression at [start, end) of the text: a booking word
        in its clause, else the nearest verb cue in the clause, the nearest weak cue there, the
        nearest verb cue in the sentence, the nearest weak cue in the sentence."""
        _, _, all_cues, _ = self._sentence(start, end)
        cues = [c for c in all_cues if c.end <= start or c.start >= end]  # not the expression's own words
        if not cues:
            return UNKNOWN
        lo, hi = self.clause(start, end)
        inside = [c for c in cues if lo <= c.start < hi]
        if any(c.strength == 2 for c in inside):
            return FUTURE
        for pool in (inside, cues):
            for strength in (1, 0):
                found = [c for c in pool if c.strength >= strength]
                if found:
                    return min(found, key=lambda c: start - c.end if c.end <= start else c.start - end).lean
        return UNKNOWN  # unreachable: cues is not empty


def lean_of(text: str, start: int, end: int) -> int:
    """The lean of the expression at ``text[start:end]`` (see the module docstring)."""
    return TenseReader(text).lean(start, end)
