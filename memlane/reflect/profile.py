"""Background merging: a new biographical snippet is merged into the bank's first-person
background; where they conflict, the new snippet wins (it is the newer information)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class BackgroundReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    background: str = Field(min_length=1)


INSTRUCTIONS = """You maintain a first-person biography ("I ..."). Merge the new information
into the current biography. Keep everything that still holds; where the new information
conflicts with the biography, the new information wins and the old statement is dropped.
Write it in the first person, concise, no commentary."""


def merge_messages(current: str, snippet: str) -> list[dict]:
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": f"Current biography:\n{current}\n\nNew information:\n{snippet}"},
    ]
