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
# Abbreviated weekdays are read only next to a day number ("Sat 28th"): "sat", "sun" and "wed"
# are words.
WEEKDAY_ABBR = r"(?:mon|tues|tue|weds|wed|thurs|thur|thu|fri|sat|sun)"

_LONG_MONTHS = ("january", "february", "august", "september", "october", "november", "december")


def _misspellings(word: str) -> set[str]:
    """One letter dropped or two neighbours swapped ("octobr", "febuary", "feburary"): the typos
    of a long month name that no English word shares."""
    dropped = {word[:i] + word[i + 1 :] for i in range(len(word))}
    swapped = {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)}
    return (dropped | swapped) - {word}


# misspelt month -> its number (only the long names: a short one's typos are other words)
MONTH_TYPOS = {typo: name for name in _LONG_MONTHS for typo in sorted(_misspellings(name))}
MONTH_TYPO_WORDS = frozenset(MONTH_TYPOS)  # a set: a text tests its few words, not these 99
# the misspelt months of a text, replaced before the rules run (memlane/temporal/parse.py)
MONTH_TYPO = re.compile(
    r"\b(?:" + "|".join(sorted(MONTH_TYPOS, key=lambda w: (-len(w), w))) + r")\b", re.IGNORECASE
)
# "May" and "March" are common verbs: only the capitalized forms are months.
MONTH_FULL = (
    r"(?:january|february|april|june|july|august|september|october|november|december|"
    r"(?-i:May|March))\b"
)
# Abbreviations in any case ("feb 20"), but "mar" is a verb: only "Mar".
MONTH_ABBR = r"(?:jan|feb|apr|jun|jul|aug|sept|sep|oct|nov|dec|(?-i:Mar))\b\.?"
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
# What may follow a bare day number ("on the 9th, remind me", "is the 14th and I"): the end of
# the text, punctuation or a word that does not make the ordinal a noun's ("the 3rd time").
DAY_ENDS = (
    r"(?!\s+(?!(?:at|and|but|so|or|then|after|before|when|which|in|for|to|with|if|as|because|"
    r"until|till|this|next|we|i|you|he|she|they|it|is|was|will|from|on|by|please|instead|too|"
    r"though|anyway|now|morning|afternoon|evening|night|lol|haha|yeah|right|sorry|thanks|"
    r"hopefully|apparently|fingers|assuming|unless|works|suits|sounds|would|could|should|might|"
    r"can|does|looks|seems|are|were|has|had)\b)[a-z])"
)
# A lower-case "may" or "march" after a day number ends the date: punctuation, the end, a year
# or a word that cannot follow the verb "may".
MAY_ENDS = r"(?=\s*(?:[,.!?;:)]|$|\d|(?:and|at|so|but|then|for|in|when|which|or|until|till)\b))"
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
OFFSET_WORDS = frozenset("day days week weeks fortnight fortnights month months year years".split())
ORDINAL_WORDS = frozenset("st nd rd th".split())  # the letters of an ordinal ("9th" has the word "th")
DIGITS = "digits"  # trigger: the text contains a digit
