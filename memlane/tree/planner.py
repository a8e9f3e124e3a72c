"""Recall planning (TiMem's planner): a query's complexity and keywords, and the tree levels
recall climbs to for it.

* simple: one fact about one thing ("Where does Priya work?"): memory units and their
  sessions (L1-L2) and the profile (L5);
* hybrid: a time expression, a preference or habit, or two named things: + days (L3);
* complex: aggregation ("how many", "in total"), comparison or change ("before", "changed",
  "compare"), a span of more than two weeks, or three named things: + days and weeks (L3-L4).

Rules by default; the LLM (the consolidation role's model) when configured, with the paper's
prompt and the rules as the fallback when its reply fails. The decision goes into the trace.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from memlane.llm.errors import LLMError
from memlane.llm.structured import complete_json
from memlane.query.analysis import KEYWORDS, QueryAnalysis, as_analysis

log = logging.getLogger(__name__)

Complexity = Literal["simple", "hybrid", "complex"]
LEVELS: dict[str, tuple[int, ...]] = {
    "simple": (1, 2, 5),
    "hybrid": (1, 2, 3, 5),
    "complex": (1, 2, 3, 4, 5),
}
# A question whose time span exceeds this is complex. Not yet measured (the plan changes the
# tree nodes recalled, not the evidence ranking: tree = flat on both dev sets).
LONG_SPAN_DAYS = 14


@dataclass(slots=True)
class Plan:
    """A planned query: complexity, keywords, the levels recall climbs to, who decided, why."""

    complexity: Complexity
    keywords: list[str]
    levels: tuple[int, ...]
    planner: str
    reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        out = asdict(self)
        out["levels"] = list(self.levels)
        return out


def plan_rules(query: QueryAnalysis | str, interval: tuple[datetime, datetime] | None = None) -> Plan:
    """The rules planner (see the module docstring) over the query's analysis (its cues and
    names, memlane/query/analysis.py); ``interval`` is the query's time expression resolved by
    the temporal channel, if any."""
    q = as_analysis(query)
    reasons: list[str] = []
    complex_ = False
    if q.aggregate:
        reasons.append(f"aggregation: {q.aggregate!r}")
        complex_ = True
    if q.change:
        reasons.append(f"comparison or change: {q.change!r}")
        complex_ = True
    if interval is not None and (interval[1] - interval[0]).days > LONG_SPAN_DAYS:
        reasons.append(f"time span over {LONG_SPAN_DAYS} days")
        complex_ = True
    if len(q.names) >= 3:
        reasons.append(f"{len(q.names)} named things")
        complex_ = True
    hybrid = False
    if not complex_:
        if interval is not None:
            reasons.append("time expression")
            hybrid = True
        if q.habit:
            reasons.append(f"preference or habit: {q.habit!r}")
            hybrid = True
        if len(q.names) == 2:
            reasons.append("two named things")
            hybrid = True
    complexity: Complexity = "complex" if complex_ else "hybrid" if hybrid else "simple"
    return Plan(complexity, list(q.keywords), LEVELS[complexity], "rules", reasons or ["one plain fact"])


PROMPT = (
    "You plan memory retrieval for a question about a user's past conversations. Classify its "
    "complexity: 'simple' (one fact, one entity, one moment), 'hybrid' (a time reference, a "
    "preference or habit, or two entities) or 'complex' (aggregation over many sessions, "
    "comparison, change over time, or reasoning across several facts). Also list up to 8 "
    'keywords. Reply with JSON: {"complexity": "...", "keywords": ["..."]}.'
)


class PlanReply(BaseModel):
    complexity: Complexity
    keywords: list[str] = Field(default_factory=list, max_length=20)


def plan_llm(llm, query: QueryAnalysis, interval: tuple[datetime, datetime] | None = None) -> Plan:
    """The LLM planner; the rules planner when the call or its reply fails (the reason is in
    the plan's reasons)."""
    messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": query.text}]
    try:
        reply = complete_json(llm, messages, PlanReply, max_tokens=200)
    except (LLMError, ValueError) as exc:
        log.warning("planner LLM failed, rules instead: %s", exc)
        plan = plan_rules(query, interval)
        plan.reasons.append(f"llm failed: {type(exc).__name__}")
        return plan
    kws = [k.strip() for k in reply.keywords if k.strip()][:KEYWORDS] or list(query.keywords)
    return Plan(reply.complexity, kws, LEVELS[reply.complexity], "llm", ["llm"])
