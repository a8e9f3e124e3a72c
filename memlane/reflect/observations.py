"""Observations: one objective, preference-neutral summary per entity, rewritten from the facts
that mention it whenever new facts do. ``proof_count`` is the number of supporting facts and
``source_fact_ids`` lists them, so a summary is as traceable as the facts it came from."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from memlane.ids import make_id


def observation_id(bank_id: str, entity_id: str) -> str:
    """One observation per entity: a refresh upserts the same id."""
    return make_id("observation", bank_id, entity_id)


class ObservationReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    summary: str = Field(min_length=1)


INSTRUCTIONS = """Write an objective summary of what the facts below say about {name}: who or
what it is, what happened with it and when, and how it relates to others. Third person, no
opinions or judgements, no facts that are not listed; where facts conflict, prefer the newer.
At most 120 words."""


def observation_messages(name: str, facts: list[tuple[str, str]]) -> list[dict]:
    """``facts``: (date, text) pairs, oldest first."""
    listing = "\n".join(f"- ({when}) {text}" for when, text in facts)
    return [{"role": "system", "content": INSTRUCTIONS.format(name=name)},
            {"role": "user", "content": f"Facts about {name}:\n{listing}"}]
