"""The words and regular-expression fragments the time-expression rules are built from
(memlane/temporal/rules.py), and the word sets that gate them."""

from __future__ import annotations

import re

NUM_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "a": 1,
    "an": 1,
    "couple": 2,
    "few": 3,
    "several": 3,
}
# Longest alternatives first so the regex engine tries "a couple of" before "a".
NUM = (
    r"(?:\d{1,3}|a\s+couple(?:\s+of)?|couple(?:\s+of)?|a\s+few|few|several|"
    r"thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|"
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|an|a)"
)
WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
# "May" and "March" are common verbs: only the capitalized forms are months.
MONTH_FULL = (
    r"(?:january|february|april|june|july|august|september|october|november|december|"
    r"(?-i:May|March))\b"
)
MONTH_ABBR = r"(?-i:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\b\.?"
MONTH_ANY = rf"(?:{MONTH_FULL}|{MONTH_ABBR})"
SEASON = r"(?:spring|summer|fall|autumn|winter)"
YEAR = r"(?:19\d\d|20\d\d|2100)"  # bare years in running text: 1900-2100 only
YEAR_EXPLICIT = r"(?:1[89]\d\d|20\d\d|21\d\d)"  # the year of an explicit date
REL = r"(?P<rel>this\s+past|this\s+coming|last|this|next|coming|past)"
# "my last week at work", "the last summer of college" name some other period, not the
# calendar one; lookbehinds must be fixed-width, hence one per word.
NOT_POSS = "".join(rf"(?<!\b{w}\s)" for w in ("the", "my", "his", "her", "our", "their", "your", "its"))
# An offset like "the day before" is anchored to an event we cannot resolve when a noun phrase
# or clause follows ("the day before my birthday", "the day after I left").
NO_EVENT_AFTER = r"(?!\s+\w)"
NOT_QUANTITY = (
    r"(?!\s*(?:%|percent|people|persons|dollars|usd|euros|pounds|yen|words|pages|steps|"
    r"calories|points|miles|km|meters|metres|feet|times|units|items|followers|likes|views|"
    r"votes|copies|students|members|users|kg|lbs)\b)"
)
HOLIDAYS = (
    r"(?:christmas\s+eve|christmas(?:\s+day)?|xmas|new\s+year['’]?s?\s+eve|"
    r"new\s+year['’]?s?(?:\s+day)?|halloween|thanksgiving|easter(?:\s+sunday)?|"
    r"valentine['’]?s?(?:\s+day)?|(?:the\s+)?(?:fourth|4th)\s+of\s+july|july\s+(?:fourth|4th)|"
    r"(?:st\.?|saint)\s+patrick['’]?s(?:\s+day)?|mother['’]?s\s+day|father['’]?s\s+day)"
)

WORDS = re.compile(r"[a-z]+")
DIGIT = re.compile(r"\d")

# Trigger words: a rule's regex runs only when one of its words is in the text.
MONTH_WORDS = frozenset(
    """january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
SEASON_WORDS = frozenset("spring summer fall autumn winter".split())
UNIT_WORDS = frozenset("week month year weekend".split())
DIGITS = "digits"  # trigger: the text contains a digit
