"""The engine's one word list and one stemmer, and the rule for names in a text.

* :data:`STOP_WORDS`: English function words. The lexical index drops them from stored text
  and queries alike (memlane/stores/lexical.py), so the list is part of the index format:
  changing it changes every BM25 figure and needs a reindex.
* :data:`NOT_NAMES`: capitalised words that are never names of anything a bank holds (the stop
  words, question and request words, months, days, titles).
* :data:`VAGUE_WORDS`: words a question uses that say nothing about its subject ("time",
  "kind", "favourite", "recently"); with :data:`NOT_NAMES` they are left out of a query's
  content words (abstention's coverage).
* :func:`stem_words`: Snowball (PyStemmer), the index's stemmer.
* :func:`suffix_stem`: abstention's cruder suffix stripping, kept beside it because its
  thresholds were calibrated with it: Snowball in its place moved LoCoMo's abstention figures
  (all 1986 questions, signals re-computed on the same recalled memories: category 5
  abstains 28.0 % -> 25.3 %, categories 1-4 3.6 % -> 3.1 %). One stemmer for both waits for
  abstention's re-calibration (issue 24 item 7).
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

STOP_WORDS = frozenset(
    """
a an the and or but if then so than too very just also
i me my mine myself you your yours yourself he him his himself she her hers herself
it its itself we us our ours ourselves they them their theirs themselves
what which who whom whose when where why how
is am are was were be been being do does did doing done have has had having
will would shall should can could may might must
this that these those there here
of to in on at by for with from about into over under up down out off
as s t d ll m re ve don didn doesn isn wasn aren weren hasn haven hadn won wouldn couldn shouldn
some any each all both such own same other
again further once only
while until because through during
let lets get got gets oh ok okay yeah yes hey hi wow
""".split()
)
NOT_NAMES = STOP_WORDS | frozenset(
    """
    i'm i've i'd i'll according after before since every no not please tell describe explain
    name list give january february march april may june july august september october
    november december monday tuesday wednesday thursday friday saturday sunday mr mrs ms dr
    """.split()
)
VAGUE_WORDS = frozenset(
    """
    it's one ones thing things go went gone make made take took say said ever like more most
    much many kind type sort way time times year years day days week weeks month months first
    last recent recently new old favorite favourite ago now yet still
    """.split()
)

# Speakers that are the assistant, not a person whose life the bank holds ("Assistant",
# LongMemEval's "assistant", the demo's "Memlane"): their turns ask, suggest and echo, and
# state no fact about the person (memlane/facts/resolver.py; the learned ranker's features).
ASSISTANT_SPEAKERS = frozenset({"assistant", "ai", "bot", "chatbot", "memlane", "system", "agent", "model"})


def is_assistant(speaker: str) -> bool:
    """Whether a turn's speaker is the assistant (:data:`ASSISTANT_SPEAKERS`)."""
    return speaker.strip().casefold() in ASSISTANT_SPEAKERS


_TOKEN = re.compile(r"\w+", re.UNICODE)
# A capitalised word ("Caroline", "McDonald"), its possessive ending outside the group.
_CAPITAL = re.compile(r"\b([A-Z][a-z]+(?:[A-Z][a-z]+)?)(?:'s|s')?\b")
_ARTICLE = re.compile(r"^(?:the|a|an|my|our)\s+")
_NON_WORD = re.compile(r"[^\w\s]")
_local = threading.local()  # PyStemmer objects are not safe to share between threads


def _stemmer():
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def tokens(text: str) -> list[str]:
    """The lexical index's tokens of ``text``: lower-cased word tokens without stop words."""
    return [w for w in _TOKEN.findall(text.lower()) if w not in STOP_WORDS]


def stem_words(words: list[str]) -> list[str]:
    """Snowball stems of ``words`` ("painting", "painted", "paints" -> "paint")."""
    return _stemmer().stemWords(words) if words else []


def suffix_stem(word: str) -> str:
    """Crude suffix stripping: enough to match "painted"/"painting"/"paints" to "paint"."""
    w = word.lower().strip("'-")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def content_stems(text: str, drop: frozenset[str] | set[str] = frozenset()) -> set[str]:
    """Stems (:func:`suffix_stem`) of the words of ``text`` that say what it is about: no
    stop, request or vague words, none shorter than three letters, and none of ``drop``
    (stems of names)."""
    return {s for s in _stems(text) if s not in drop}


# Recall's ranker reads the stems of every candidate and of its neighbours on each query, and a
# bank's turns come back query after query: kept per text, 80 LoCoMo questions' recalls spent
# 0.31 s here before (3.8 ms a recall, a 2-core machine, Nov 2026).
@lru_cache(maxsize=8192)
def _stems(text: str) -> frozenset[str]:
    words = (w for w in tokens(text) if len(w) >= 3 and w not in NOT_NAMES and w not in VAGUE_WORDS)
    return frozenset(map(suffix_stem, words))


def names_in(text: str, *, question: bool = False) -> list[str]:
    """The names ``text`` mentions, in order, without repeats: runs of capitalised words
    ("Caroline", "New York") that are not :data:`NOT_NAMES`. In a ``question`` the first word
    counts only when possessive ("Caroline's dog ..."): any first word is capitalised, and a
    request verb ("Summarize ...") is not a name."""
    names: list[str] = []
    run: list[str] = []
    end = -1  # where the run's last word ended (-1: no run open)
    for m in _CAPITAL.finditer(text):
        word = m.group(1)
        possessive = m.group(0) != word
        at_start = not text[: m.start()].strip(" \"'(")
        if word.lower() in NOT_NAMES or (question and at_start and not possessive):
            _close(run, names)
            end = -1
            continue
        if end < 0 or text[end : m.start()] != " ":
            _close(run, names)
        run.append(word)
        end = -1 if possessive else m.end()  # "Ana's Jon": two names
        if possessive:
            _close(run, names)
    _close(run, names)
    return names


def _close(run: list[str], names: list[str]) -> None:
    if run:
        name = " ".join(run)
        if name not in names:
            names.append(name)
        run.clear()


def norm_text(value: str) -> str:
    """Case-folded words without punctuation or a leading article: "The Bristol!" -> "bristol"."""
    words = " ".join(_NON_WORD.sub(" ", value.casefold()).split())
    return _ARTICLE.sub("", words)
