"""Observations: one objective, preference-neutral summary per entity, rewritten from the facts
that mention it whenever new facts do. ``proof_count`` is the number of supporting facts and
``source_fact_ids`` lists them, so a summary is as traceable as the facts it came from."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from memlane.ids import make_id
from memlane.interfaces import UnitFilter, VectorStore
from memlane.records import FactType


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
    return [
        {"role": "system", "content": INSTRUCTIONS.format(name=name)},
        {"role": "user", "content": f"Facts about {name}:\n{listing}"},
    ]


def prune_observations(store: VectorStore, bank_id: str, removed: frozenset[str] = frozenset()) -> None:
    """After facts were deleted: an observation keeps only the sources that still exist
    (proof_count follows) and goes when none is left, so no summary outlives its evidence.
    Its text is rewritten by the next consolidation. (A delete hook of memlane/writes.py.)"""
    ids = store.list_unit_ids(bank_id, UnitFilter(fact_types=[FactType.observation], only_valid=False))
    if not ids:
        return
    observations = store.get_units(bank_id, ids, with_embedding=True)
    sources = sorted({f for o in observations for f in o.source_fact_ids})
    alive = set(store.get_unit_fields(bank_id, sources, fields=[])) if sources else set()
    gone, changed = [], []
    for obs in observations:
        kept = [f for f in obs.source_fact_ids if f in alive]
        if obs.source_fact_ids and not kept:
            gone.append(obs.id)
        elif len(kept) != len(obs.source_fact_ids):
            changed.append(obs.model_copy(update={"source_fact_ids": kept, "proof_count": len(kept)}))
    if changed:
        store.upsert_units(bank_id, changed)
    if gone:
        store.delete_units(bank_id, gone)
