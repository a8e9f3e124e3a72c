"""The Hindsight surface's document listing fills each row from what the store holds: when the
document's first and last turns were said (created_at, updated_at), its text's length, its
units and tags, as its own GET answers them; the rows read by hindsight-client 1.1.0's models.
The surface runs on the real engine and Milvus Lite through the same error mapping as the
service's backend (serve/hindsight/backend.py), with no Ray in between."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memlane import catalogue
from memlane.records import Turn
from serve.hindsight.backend import mapped
from serve.hindsight.surface import Surface

pytest.importorskip("hindsight_client_api", reason='the hindsight extra: pip install -e ".[hindsight]"')

T0 = datetime(2025, 3, 10, 9, 0, tzinfo=UTC)
CHATS = {
    "chat/a": [("Ana", "I adopted a beagle called Pixel."), ("Ben", "Lovely! How old is Pixel?")],
    "chat/b": [("Ana", "I play the cello on Sundays."), ("Ana", "My teacher lives in Porto.")],
}


class EngineBackend:
    """The catalogue's operations on an engine in this process, errors mapped as the service's."""

    def __init__(self, memory) -> None:
        self.memory = memory

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any:
        return await mapped(asyncio.to_thread(catalogue.call, self.memory, name, bank_id, **params))


def _turns(document_id: str, start: datetime) -> list[Turn]:
    # the second session starts a day after the first: the document spans both
    return [
        Turn(
            document_id=document_id,
            session_id=f"s{i + 1}",
            turn_id=f"s{i + 1}:1",
            index=0,
            speaker=speaker,
            text=text,
            timestamp=start + timedelta(days=i),
        )
        for i, (speaker, text) in enumerate(CHATS[document_id])
    ]


def test_the_listing_gives_each_documents_time_and_text_length(memory):
    from hindsight_client_api.models import DocumentResponse, ListDocumentsResponse

    memory.retain("ana", [("chat/a", _turns("chat/a", T0))], tags=["pets"])
    memory.retain("ana", [("chat/b", _turns("chat/b", T0 + timedelta(days=7)))])
    surface = Surface(EngineBackend(memory))  # type: ignore[arg-type]

    listed = ListDocumentsResponse.from_dict(asyncio.run(surface.documents("ana", None, 100, 0)))
    assert listed is not None and listed.total == 2
    rows = {d.id: d for d in listed.items}
    assert [(d.created_at, d.updated_at) for d in rows.values()] == [
        ("2025-03-10T09:00:00Z", "2025-03-11T09:00:00Z"),
        ("2025-03-17T09:00:00Z", "2025-03-18T09:00:00Z"),
    ]
    # "speaker: text" per turn, one line each, as the document's own text holds them
    assert rows["chat/a"].text_length == len(
        "Ana: I adopted a beagle called Pixel.\nBen: Lovely! How old is Pixel?"
    )
    assert rows["chat/b"].text_length == len(
        "Ana: I play the cello on Sundays.\nAna: My teacher lives in Porto."
    )
    assert (rows["chat/a"].memory_unit_count, rows["chat/a"].tags) == (2, ["pets"])
    assert (rows["chat/b"].bank_id, rows["chat/b"].tags) == ("ana", [])
    for d in rows.values():  # the row says what the document's own GET says
        doc = DocumentResponse.from_dict(asyncio.run(surface.document("ana", d.id)))
        assert doc is not None and doc.original_text is not None
        assert (doc.created_at, doc.updated_at, len(doc.original_text)) == (
            d.created_at,
            d.updated_at,
            d.text_length,
        )

    second = ListDocumentsResponse.from_dict(asyncio.run(surface.documents("ana", "cello", 1, 0)))
    assert second is not None and second.total == 1
    assert [(d.id, d.text_length, d.matched_fields) for d in second.items] == [
        ("chat/b", rows["chat/b"].text_length, ["original_text"])
    ]
    paged = ListDocumentsResponse.from_dict(asyncio.run(surface.documents("ana", None, 1, 1)))
    assert paged is not None and (paged.total, [d.id for d in paged.items]) == (2, ["chat/b"])
    assert paged.items[0].created_at == "2025-03-17T09:00:00Z"
