"""Opinions: beliefs with a confidence c in [0, 1] and a history of changes.

Formed by reflect (first-person opinions the answer expresses). Updated when retain brings
related evidence: the model assesses the evidence against the opinion as reinforce / weaken /
contradict / neutral, and c moves by +a / -a / -2a / 0 (clamped to [0, 1]); every change is
appended to the opinion's history with the reason and the evidence's id.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memlane.ids import make_id

Verdict = Literal["reinforce", "weaken", "contradict", "neutral"]
STEPS = {"reinforce": 1.0, "weaken": -1.0, "contradict": -2.0, "neutral": 0.0}


def updated_confidence(c: float, verdict: str, a: float) -> float:
    """c + a / c - a / c - 2a / c for reinforce / weaken / contradict / neutral, clamped to
    [0, 1] and rounded to 6 places (so 0.6 - 2 * 0.1 is 0.4, not 0.39999999999999997)."""
    if verdict not in STEPS:
        raise ValueError(f"unknown verdict {verdict!r} (one of {', '.join(STEPS)})")
    return round(min(1.0, max(0.0, c + STEPS[verdict] * a)), 6)


def opinion_id(bank_id: str, statement: str) -> str:
    """Deterministic: the same statement in the same bank is the same opinion."""
    return make_id("opinion", bank_id, " ".join(statement.casefold().split()))


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class OpinionDraft(_Lenient):
    statement: str = Field(min_length=1, description="a first-person belief: 'I think ...'")
    confidence: float = Field(ge=0.0, le=1.0)
    entities: list[str] = Field(default_factory=list, description="names it is about")


class ReflectReply(_Lenient):
    """What the reflect model returns."""

    answer: str = Field(min_length=1)
    cited: list[str] = Field(default_factory=list, description="labels like M3 of memories used")
    opinions: list[OpinionDraft] = Field(default_factory=list, max_length=5)


class Assessment(_Lenient):
    verdict: Verdict
    reason: str = ""


REFLECT_INSTRUCTIONS = """Answer the question in the first person, as yourself, using only the
memories listed (each has a label like M1). Cite the labels of the memories you used in "cited".
Your existing opinions are listed with their confidence. If your answer expresses an opinion of
your own (a belief, judgement or preference, not a fact), add it to "opinions" as a first-person
statement with your confidence in [0, 1] and the names it is about. If the memories do not
answer the question, say so."""

ASSESS_INSTRUCTIONS = """You hold an opinion with a confidence. New evidence arrived. Decide how
the evidence bears on the opinion:
- "reinforce": it supports the opinion;
- "weaken": it makes the opinion somewhat less likely;
- "contradict": it directly contradicts the opinion;
- "neutral": it is unrelated or does not bear on it.
Give a short reason."""


def assess_messages(opinion_text: str, confidence: float, evidence: list[str]) -> list[dict]:
    listing = "\n".join(f"- {e}" for e in evidence)
    return [
        {"role": "system", "content": ASSESS_INSTRUCTIONS},
        {
            "role": "user",
            "content": f"Opinion (confidence {confidence:.2f}): {opinion_text}\nNew evidence:\n{listing}",
        },
    ]
