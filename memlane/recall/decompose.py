"""Multi-hop decomposition: a question that joins facts is split into sub-queries, each
recalled on its own, and their channel rankings are fused with the question's own.

A question like "the city where the person she met in Lisbon lives" needs two facts ("she met
Marco in Lisbon", "Marco lives in Porto"); the second shares almost no words with the question,
so the question's own channels rank it low. Recalling "the person she met in Lisbon" and "the
city where the person lives" separately gives each fact a ranking where it stands near the top.

Who decomposes (``RecallSettings.decompose``, off by default, or ``RecallRequest.decompose``
per request):

* ``rules`` (no model call, :func:`decompose_rules`):

  - **clauses joined by a conjunction** ("Who did Evan meet in Canada, and who did he come back
    with?"): one sub-query per clause, a third-person pronoun in a later clause replaced by the
    first name of the question;
  - **coordinated names** ("What do Jon and Gina both have in common?"): one sub-query per
    name, the coordination replaced by that name;
  - **a relative clause on a noun** ("the city where the person she met in Lisbon lives"): the
    noun with its clause ("the person she met in Lisbon") and the question without the clause
    ("the city where the person lives").

  A question with none of these (one fact about one thing) is not split.
* ``llm``: the consolidation role's model (the one the tree's planner uses) lists the
  sub-questions (:func:`decompose_llm`); the rules when its reply fails, with the reason in
  the decomposition's reasons.
* ``auto``: the LLM when one is configured for the consolidation role, the rules otherwise.
* ``off``: never.

How the sub-queries' rankings count in fusion is decided here, in one place:
:func:`merge_channels` (each sub-query's channel lists at :data:`SUBQUERY_WEIGHT` of the
main query's channel weight).
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from typing import Callable, Literal, Mapping, Sequence

from pydantic import BaseModel, Field

from memlane.interfaces import Hit
from memlane.llm.errors import LLMError
from memlane.llm.structured import complete_json
from memlane.query.analysis import QueryAnalysis, as_analysis
from memlane.query.words import STOP_WORDS, names_in, tokens

log = logging.getLogger(__name__)

Decomposer = Literal["auto", "rules", "llm", "off"]

# At most this many sub-queries per question (each costs one more run of the lexical, semantic
# and graph channels).
MAX_SUBQUERIES = 3
# RRF (or RSF) weight of a sub-query's channel list, relative to the main query's list of the
# same channel: the question itself stays the strongest voice, and a sub-query can lift a fact
# into the candidates without pushing the question's own best hits out. Set a priori, not
# tuned on the dev sets. Measured on LoCoMo (86 of 1,536 questions split by the rules): the
# split questions' rankings changed, but no multi-hop question gained or lost evidence in its
# top 10 turns (turn recall@10 0.399 with and without): with RRF's k=60 a sub-query's first
# place adds 0.5/61 while the question's own lists, 3 of them voting for the same units, keep
# their order. A fact no channel of the question ranks (the engine test's bridged join) is
# what it lifts.
SUBQUERY_WEIGHT = 0.5
# A bridging sub-query takes the new names of the first of the earlier sub-query's best this
# many units that has any (the earlier query's answer is among its first hits, not always the
# first), at most BRIDGE_NAMES of them.
BRIDGE_UNITS = 3
BRIDGE_NAMES = 2
# A sub-query needs this many content words (fewer carries no retrieval signal of its own).
MIN_CONTENT_WORDS = 2

_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
_AUX = (
    r"(?:who|whom|whose|what|which|where|when|why|how|did|does|do|is|are|was|were|has|have|had|"
    r"can|could|will|would|should)"
)
# A conjunction (or ';' or a second '?') that starts a new question clause.
_CLAUSE_SPLIT = re.compile(
    rf"\s*(?:;|\?(?=\s+\S)|,?\s+(?:and|but|as well as|and also)\s+(?={_AUX}\b))\s*", re.I
)
_NAME = r"[A-Z][a-z]+(?:\s[A-Z][a-z]+)?"
_COORD = re.compile(rf"\b(?P<first>{_NAME})(?P<more>(?:,\s*{_NAME})*),?\s+(?:and|&)\s+(?P<last>{_NAME})\b")
_QUANT = re.compile(r"\s+\b(?:both|each|together|all)\b", re.I)
# A relative clause on a noun phrase: "the person (who) she met in Lisbon", "the friend that
# Caroline made at the conference", "the woman who gave her the book". Its verb must look like a
# past or present verb form (a suffix or a common irregular one), so "the book she" alone or a
# noun compound is not taken for a clause.
_VERB = (
    r"(?:[a-z]+(?:ed|es)|met|saw|made|took|bought|got|found|gave|told|went|read|wrote|brought|"
    r"sent|sang|ran|won|lost|left|kept|knew|taught|caught|heard|said|paid|built|drew|ate|"
    r"drove|meets|sees|makes|takes|likes|loves|knows|works|lives|visits|calls)"
)
# Words after a clause's verb that are not its object (a preposition, a time adverb).
_NOT_OBJECT = (
    r"(?:in|at|on|from|to|with|during|for|about|last|this|next|yesterday|today|ago|that|which|who|"
    r"when|while|before|after|since|and|or|but)"
)
# A prepositional phrase on a time word ("in the past two months") is the question's time
# expression, not part of the clause: taking it out would leave "two months" stranded.
_TIME_WORD = (
    r"(?:past|last|next|previous|coming|few|couple|day|days|week|weeks|month|months|year|years|"
    r"morning|evening|night|weekend|summer|winter|spring|autumn|fall)"
)
_SUBJECT = r"(?:I|you|he|she|we|they|[A-Z][a-z]+)"
_RELATIVE = re.compile(
    rf"(?P<np>\b(?:the|a|an|that)\s+(?:[a-z]+\s+)?(?P<head>[a-z]+))\s+"
    rf"(?P<rc>(?:(?:who|whom|that|which)\s+{_SUBJECT}\s+{_VERB}|(?:who|that|which)\s+{_VERB}|"
    rf"{_SUBJECT}\s+{_VERB})\b"
    rf"(?:\s+(?:(?:me|him|her|them|us|{_NAME})\s+)?(?:(?:the|a|an|his|her|their|my|our)\s+)?(?!{_NOT_OBJECT}\b)[a-z]+)?"
    rf"(?:\s+(?:in|at|on|from|to|with|during|for)\s+(?:(?:the|a|an|his|her|their|my|our)\s+)?"
    rf"(?!{_TIME_WORD}\b)(?:{_NAME}|[a-z]+))?)"
)
# The nouns a relative clause must describe for the rule to split: a person, a place or an
# organisation, something another fact says more about under its name (the bridge). "The three
# trips I took" or "the new feed I purchased" are one thing asked about, not a join.
_ENTITY_HEADS = frozenset(
    """person people man woman guy girl boy kid friend friends colleague coworker neighbor
    neighbour doctor teacher coach boss partner artist author singer band musician player team
    company firm brand startup organization organisation charity club school university college
    city town country place restaurant cafe bar shop store hotel gym museum park venue
    """.split()
)
_PRONOUN = re.compile(r"\b(he|she|they|him|them|her|his|their)\b", re.I)
_OWNER = {"his", "their"}
_SPEAKER = re.compile(rf"^\s*{_NAME}:\s*")
_REF = re.compile(r"#(\d)")


@dataclass(slots=True)
class Decomposition:
    """A question's sub-queries (empty: not split), who decided, and why."""

    subqueries: list[str]
    decomposer: str
    reasons: list[str] = field(default_factory=list)
    # Sub-query i -> (j, placeholder): i needs what sub-query j finds, put in for placeholder
    # (:func:`bridge`); j < i, and j bridges from nothing.
    bridges: dict[int, tuple[int, str]] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def _clean(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip(" ,;")
    return text


def _keep(query: str, candidates: Sequence[str]) -> list[str]:
    """Sub-queries worth a recall: enough content words, not the question itself, no repeats."""
    own = set(tokens(query))
    out: list[str] = []
    for c in candidates:
        c = _clean(c)
        words = tokens(c)
        if len(words) < MIN_CONTENT_WORDS or c.lower() == query.strip().lower():
            continue
        if set(words) == own:  # the same words in another order: nothing new to rank by
            continue
        if c.lower() not in (o.lower() for o in out):
            out.append(c)
    return out[:MAX_SUBQUERIES]


def _resolve_pronouns(clause: str, name: str) -> str:
    def sub(m: re.Match) -> str:
        word = m.group(1).lower()
        return f"{name}'s" if word in _OWNER else name

    return _PRONOUN.sub(sub, clause)


def _split_clauses(query: QueryAnalysis) -> list[str]:
    parts = [p for p in _CLAUSE_SPLIT.split(query.text) if p and p.strip()]
    if len(parts) < 2:
        return []
    names = [n for n in query.names if re.search(rf"\b{re.escape(n)}\b", parts[0])]
    if names:
        parts = [parts[0], *(_resolve_pronouns(p, names[0]) for p in parts[1:])]
    return parts


def _split_names(query: QueryAnalysis) -> list[str]:
    m = _COORD.search(query.text)
    if m is None:
        return []
    names = [m.group("first"), *re.findall(_NAME, m.group("more")), m.group("last")]
    if any(n.split()[0].lower() in STOP_WORDS for n in names):  # "What and ..." is not a name
        return []
    rest = query.text[: m.start()] + "{}" + query.text[m.end() :]
    rest = _QUANT.sub("", rest)
    return [rest.format(n) for n in names]


def _relative(query: str) -> re.Match | None:
    """The first relative clause on a person, place or organisation noun."""
    return next((m for m in _RELATIVE.finditer(query) if m.group("head") in _ENTITY_HEADS), None)


def _split_relative(query: QueryAnalysis) -> list[str]:
    m = _relative(query.text)
    if m is None:
        return []
    inner = f"{m.group('np')} {m.group('rc')}"
    outer = query.text[: m.start("rc")] + query.text[m.end("rc") :]
    return [inner, outer]


def _relative_np(query: str) -> str | None:
    m = _relative(query)
    return m.group("np") if m else None


def decompose_rules(query: QueryAnalysis | str) -> Decomposition:
    """The rules decomposer (see the module docstring): clauses first, then coordinated names,
    then a relative clause; the first rule that gives at least two usable sub-queries wins."""
    query = as_analysis(query)
    for reason, split in (
        ("clauses joined by a conjunction", _split_clauses),
        ("coordinated names", _split_names),
        ("relative clause", _split_relative),
    ):
        subs = _keep(query.text, split(query))
        if len(subs) >= 2:
            out = Decomposition(subs, "rules", [reason])
            np = _relative_np(query.text) if split is _split_relative else None
            if np is not None and len(subs) == 2 and np in subs[1]:
                # the outer query asks about what the clause describes: it bridges from it
                out.bridges = {1: (0, np)}
            return out
    return Decomposition([], "rules", ["one fact"])


PROMPT = (
    "You prepare memory retrieval for a question about a user's past conversations. If "
    "answering it needs two or more separate facts (a join: 'the city where the person she met "
    "in Lisbon lives' needs who she met in Lisbon and where that person lives; or a question "
    "about several people or things), list one short self-contained search query per fact, at "
    f"most {MAX_SUBQUERIES}. Where a query needs what an earlier one finds, write #1 (#2, ...) "
    "for that earlier query's answer, e.g. ['the person she met in Lisbon', 'the city where #1 "
    "lives']. If one fact answers it, return an empty list. Reply with JSON: "
    '{"subqueries": ["...", "..."]}.'
)


class DecomposeReply(BaseModel):
    subqueries: list[str] = Field(max_length=10)  # required: a reply without it is malformed


def _check_reply(reply: DecomposeReply) -> None:
    if any(not s.strip() for s in reply.subqueries):
        raise ValueError("subqueries: an empty string")
    if len(reply.subqueries) == 1:
        raise ValueError("subqueries: one sub-query (list none, or two or more)")


def decompose_llm(llm, query: QueryAnalysis | str) -> Decomposition:
    """The LLM decomposer; the rules when the call or its reply fails (the reason is in the
    decomposition's reasons)."""
    query = as_analysis(query)
    messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": query.text}]
    try:
        reply = complete_json(llm, messages, DecomposeReply, check=_check_reply, max_tokens=300)
    except (LLMError, ValueError) as exc:
        log.warning("decomposition LLM failed, rules instead: %s", exc)
        out = decompose_rules(query)
        out.reasons.append(f"llm failed: {type(exc).__name__}")
        return out
    subs = _keep(query.text, reply.subqueries)
    if len(subs) < 2:
        return Decomposition([], "llm", ["llm: one fact"])
    bridges: dict[int, tuple[int, str]] = {}
    for i, sub in enumerate(subs):
        refs = [int(r) - 1 for r in _REF.findall(sub)]
        src = next((r for r in refs if 0 <= r < i and r not in bridges), None)
        if src is not None:
            bridges[i] = (src, f"#{src + 1}")
    return Decomposition(subs, "llm", ["llm"], bridges)


def bridge(subquery: str, placeholder: str, texts: Sequence[str], question: str) -> str:
    """``subquery`` with ``placeholder`` replaced by the names that the best of the earlier
    sub-query's units (``texts``, best first) that names anyone the question does not mentions,
    a unit's speaker (its leading "Name:") left out (at most
    :data:`BRIDGE_NAMES`, joined by "or"): "the city where the person lives" after "the person
    she met in Lisbon" found "Nora: I met Marco in Lisbon" becomes "the city where Marco
    lives". Unchanged when they mention no new name."""
    known = {w.lower() for w in _WORD.findall(question)}
    names: list[str] = []
    for text in texts:
        # "Nora: I met Marco in Lisbon": the speaker is who the question asks about ("she"),
        # not the one it asks for, and in a conversation nearly every unit names a speaker
        names = [n for n in names_in(_SPEAKER.sub("", text, count=1)) if n.lower() not in known]
        if names:  # the best unit that names someone new; later ones are other people
            break
    if not names:
        return _REF.sub("", subquery).strip() if placeholder.startswith("#") else subquery
    return _clean(subquery.replace(placeholder, " or ".join(names[:BRIDGE_NAMES])))


def decompose(
    query: QueryAnalysis | str, mode: Decomposer, llm: Callable[[], object | None]
) -> Decomposition:
    """Decompose ``query`` as ``mode`` says; ``llm`` returns the model (or None when none is
    configured) and is called only for ``auto`` and ``llm``. ``llm`` with no model configured
    uses the rules, saying so in the reasons."""
    if mode == "off":
        return Decomposition([], "off", ["off"])
    model = llm() if mode in ("auto", "llm") else None
    if model is not None:
        return decompose_llm(model, query)
    out = decompose_rules(query)
    if mode == "llm":
        out.reasons.append("no LLM configured for the consolidation role")
    return out


def merge_channels(
    main: Mapping[str, Sequence[Hit]],
    subs: Sequence[Mapping[str, Sequence[Hit]]],
    weights: Mapping[str, float],
) -> tuple[dict[str, list[Hit]], dict[str, float]]:
    """The channel lists to fuse and their weights: the main query's lists under their channel
    names at the channel's weight, sub-query ``i``'s (from 1) as ``"<channel>@<i>"`` at
    :data:`SUBQUERY_WEIGHT` times it. The one home of how sub-queries count in fusion."""
    hits: dict[str, list[Hit]] = {c: list(hs) for c, hs in main.items()}
    w: dict[str, float] = {c: weights.get(c, 1.0) for c in hits}
    for i, sub in enumerate(subs, start=1):
        for c, hs in sub.items():
            hits[f"{c}@{i}"] = list(hs)
            w[f"{c}@{i}"] = weights.get(c, 1.0) * SUBQUERY_WEIGHT
    return hits, w


__all__ = [
    "BRIDGE_UNITS",
    "Decomposer",
    "Decomposition",
    "MAX_SUBQUERIES",
    "SUBQUERY_WEIGHT",
    "bridge",
    "decompose",
    "decompose_llm",
    "decompose_rules",
    "merge_channels",
]
