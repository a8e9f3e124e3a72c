"""A recall query analysed once (:func:`analyse`) into a frozen :class:`QueryAnalysis` that
every stage of recall reads: the channels and abstention (names, content words), the temporal
channel and the tree's planner (time expressions, cues), the facts' ordering (past cue, the
slots asked about), decomposition (names).

The cue words are here, one home each:

* **past** (:data:`_PAST`): the question asks about an earlier state ("before Bristol", "used
  to", "old"): recall includes superseded facts and puts the replaced value first.
* **change** (:data:`_CHANGE`): comparison or change over time ("compare", "since", "still",
  "now"): the planner climbs to days and weeks. It overlaps the past cue ("before",
  "previously") but is wider; neither list has been measured word by word (issue 24 item 7).
* **aggregate** and **habit**: the planner's other cues.
* **now** (:data:`_NOW`): the question asks for the present value; its words are left out of
  the lexical query (``lexical``).

How often they fire on the dev sets' questions (counted Nov 2026, no recall): the past cue on
38 of LoCoMo's 1,540 answerable questions ("old" 12 of them, mostly false hits on ages: "How
old was I when ...") and 14 of LongMemEval dev60's 60; a false hit only adds superseded facts
after the current ones. The change and aggregate cues make 233 LoCoMo questions and 32 of
LongMemEval's "complex", which changes the tree nodes and tokens recalled, not the evidence
ranking (tree = flat on both dev sets). Not yet measured word by word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from memlane.query.slot_words import asked_predicates
from memlane.query.words import content_stems, names_in, norm_text, suffix_stem, tokens
from memlane.temporal.parse import TimeSpan, find_time_expressions
from memlane.temporal.query import covering

_PAST = re.compile(
    r"\b(?:before|previous|previously|used to|formerly|former|originally|prior|earlier|in the past|"
    r"back then|no longer|any ?more|old|older|changed|change|switched|moved from)\b",
    re.I,
)
_CHANGE = re.compile(
    r"\b(compare|compared|comparison|change[ds]?|changing|differ(ence|ent)?|before|after|"
    r"since|first|last time|earlier|later|previous(ly)?|used to|anymore|still|now|"
    r"over time|evolv\w*|trend|more than|less than|fewer than|increase\w*|decrease\w*)\b",
    re.I,
)
_AGGREGATE = re.compile(
    r"\b(how many|how much|how often|how long|in total|total|altogether|combined|all the|"
    r"every time|each time|list|count|number of|times)\b",
    re.I,
)
_HABIT = re.compile(
    r"\b(usually|typically|normally|often|always|never|prefer\w*|favou?rite|like[sd]? to|"
    r"enjoy\w*|tend[s]? to|habit\w*|routine|recommend\w*|suggest\w*|would .* like)\b",
    re.I,
)
# The present cue: the question asks for the value now ("Where does Ana work now?"). Its words
# are a cue, not content: left in the lexical query, "now" matched every turn that says "now"
# ("The roguelike has a name now") above the one that answers (the answer set's "now"
# questions, calibration half).
_NOW = re.compile(
    r"\b(?:right now|now|currently|current|these days|nowadays|at the moment|at present|still|"
    r"anymore|any more)\b",
    re.I,
)
_FIRST_PERSON = re.compile(r"\b(?:I|my|me|mine)\b")
KEYWORDS = 8  # keywords a plan lists


@dataclass(frozen=True, slots=True)
class QueryAnalysis:
    """What recall needs to know about a query's words, worked out once."""

    text: str
    names: tuple[str, ...]  # name phrases, in order ("Caroline", "New York")
    tokens: tuple[str, ...]  # the lexical index's tokens (stop words out, not stemmed)
    content: frozenset[str]  # stems of the content words, names left out (abstention)
    name_stems: frozenset[str]  # stems of the names' words, lower-cased
    keywords: tuple[str, ...]  # tokens of three letters or more, no repeats, at most KEYWORDS
    normalized: str  # norm_text of the query, for matching a slot's value
    time_spans: tuple[TimeSpan, ...]  # its time expressions (none without a reference)
    interval: tuple[datetime, datetime] | None  # the window they cover
    past: bool  # asks about an earlier state
    change: str | None  # the comparison-or-change cue, as said
    aggregate: str | None  # the aggregation cue ("how many"), as said
    habit: str | None  # the preference-or-habit cue, as said
    now: str | None  # the present cue, as said ("now", "these days")
    lexical: str  # the query as the lexical channel searches it: the present cue left out
    asked_slots: frozenset[str]  # predicates asked about ("lives_in", "owns:dog")
    first_person: bool  # the asker speaks of itself ("my", "I")

    @property
    def name_words(self) -> list[str]:
        """The words of the names, each once ("Caroline Smith" -> "Caroline", "Smith")."""
        return list(dict.fromkeys(w for n in self.names for w in n.split()))


def analyse(query: str, reference: datetime | None = None) -> QueryAnalysis:
    """The analysis of ``query``; its time expressions are resolved against ``reference`` (the
    request's reference time, as-of time or now), none without one."""
    names = names_in(query, question=True)
    words = tokens(query)
    name_stems = frozenset(suffix_stem(w) for n in names for w in n.split())
    spans = tuple(find_time_expressions(query, reference)) if reference is not None else ()
    return QueryAnalysis(
        text=query,
        names=tuple(names),
        tokens=tuple(words),
        content=frozenset(content_stems(query, name_stems)),
        name_stems=name_stems,
        keywords=tuple(dict.fromkeys(w for w in words if len(w) > 2))[:KEYWORDS],
        normalized=norm_text(query),
        time_spans=spans,
        interval=covering(spans),
        past=history_intent(query),
        change=_found(_CHANGE, query),
        aggregate=_found(_AGGREGATE, query),
        habit=_found(_HABIT, query),
        now=_found(_NOW, query),
        lexical=" ".join(_NOW.sub(" ", query).split()) or query,
        asked_slots=frozenset(asked_predicates(query)),
        first_person=_FIRST_PERSON.search(query) is not None,
    )


def as_analysis(query: str | QueryAnalysis) -> QueryAnalysis:
    """``query`` analysed (without time expressions) unless it already is: for callers outside
    recall (evals, scripts) that hold the text."""
    return query if isinstance(query, QueryAnalysis) else analyse(query)


def history_intent(query: str) -> bool:
    """True when the question asks about an earlier state ("before", "used to", "previously")."""
    return _PAST.search(query) is not None


def _found(pattern: re.Pattern[str], text: str) -> str | None:
    m = pattern.search(text)
    return m.group(0).lower() if m else None


__all__ = ["QueryAnalysis", "analyse", "as_analysis", "history_intent"]
