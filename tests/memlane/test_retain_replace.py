"""One retain semantics (issue 26, item 5): a document retained again replaces what it held, on
the batch path (Memory.retain) and the API path (retain_items) alike, in one write, and the
turns it shares with its previous version are not embedded again. Judged against a fresh bank
(another data dir, the same bank id: ids derive from it) given only the second version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Callable

import numpy as np
import pytest

from memlane.engine import Memory
from memlane.interfaces import UnitFilter
from memlane.records import Turn
from memlane.settings import Settings

BANK = "ana"
DOC = "conv-1"

# Two sessions; the second version drops the second session and the last turn of the first,
# and edits one turn: units, chunks, links and entity mentions all shrink.
FIRST = [
    [
        ("Caroline", "I moved to Paris last spring with my sister Melanie."),
        ("Melanie", "Caroline and I still argue about which bakery in Paris is best."),
        ("Caroline", "Our friend Jon visits us every Sunday for lunch."),
        ("Melanie", "Jon brought his dog Rex to the park near the Seine."),
        ("Caroline", "Jon's dog Rex loves running in the park near the Seine."),
        ("Caroline", "I started painting lessons at a studio in Montmartre."),
    ],
    [
        ("Caroline", "Melanie and I saw the cherry blossoms in Tokyo."),
        ("Melanie", "Caroline and I saw cherry blossoms together in Tokyo."),
        ("Melanie", "We ate ramen with Kenji in Shinjuku every night."),
    ],
]
SECOND = [
    [
        *FIRST[0][:2],
        ("Caroline", "Our friend Jon visits us every Saturday for dinner now."),  # edited
        *FIRST[0][3:5],
    ]
]


def _turns(sessions: list[list[tuple[str, str]]]) -> list[Turn]:
    start = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
    return [
        Turn(
            document_id=DOC,
            session_id=f"s{s}",
            turn_id=f"s{s}-t{i}",
            index=i,
            speaker=speaker,
            text=text,
            timestamp=start + timedelta(days=7 * s, minutes=i),
        )
        for s, session in enumerate(sessions)
        for i, (speaker, text) in enumerate(session)
    ]


def _items(sessions: list[list[tuple[str, str]]]) -> list[dict[str, Any]]:
    return [
        {
            "content": t.text,
            "speaker": t.speaker,
            "document_id": DOC,
            "session_id": t.session_id,
            "timestamp": t.timestamp.isoformat(),
        }
        for t in _turns(sessions)
    ]


def _batch(memory: Memory, sessions: list[list[tuple[str, str]]]) -> None:
    memory.retain(BANK, [(DOC, _turns(sessions))])


def _api(memory: Memory, sessions: list[list[tuple[str, str]]]) -> None:
    memory.retain_items(BANK, _items(sessions))


PATHS = {"batch": _batch, "api": _api}
Retain = Callable[[Memory, list[list[tuple[str, str]]]], None]


class CountingEmbedder:
    """The engine's embedder, noting every text it is asked to embed."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return self.inner.embed(texts)

    def take(self) -> list[str]:
        texts, self.texts = self.texts, []
        return texts


def _counting(memory: Memory, monkeypatch) -> CountingEmbedder:
    """The retainer's embedder for the bank (the engine's: its banks are its embedder's),
    counting what it embeds from here on."""
    embedders = memory.retainer.embedders
    counting = CountingEmbedder(embedders.default)
    monkeypatch.setattr(embedders, "of", lambda bank: counting)
    return counting


def _state(memory: Memory) -> dict[str, Any]:
    """What a bank holds, in comparable form: units (id, text, links, entities), entities
    (id, name, mentions) and chunks (id, text)."""
    memory.wait_background()
    store = memory.store
    units = [u for page in store.iter_units(BANK) for u in page]
    chunks = [c for page in store.iter_chunks(BANK) for c in page]
    return {
        "units": sorted(
            (u.id, u.text, u.chunk_id, sorted((x.target_id, x.type) for x in u.links), sorted(u.entity_ids))
            for u in units
        ),
        "entities": sorted(
            (e.entity_id, e.name, e.type, sorted(e.aliases), e.mention_count)
            for e in store.list_entities(BANK)
        ),
        "chunks": sorted((c.chunk_id, c.text) for c in chunks),
    }


def _vectors(memory: Memory) -> dict[str, np.ndarray]:
    return {
        u.text: np.asarray(u.embedding, dtype=np.float32)
        for page in memory.store.iter_units(BANK, with_embedding=True)
        for u in page
    }


def _clean(memory: Memory) -> None:
    report = memory.banks.doctor(BANK)
    assert report.findings == [], report.as_dict()


@pytest.fixture
def fresh(tmp_path, embedder, extractor):
    """A second engine on another data dir: the bank as if it only ever got the second version."""
    with Memory(Settings(data_dir=tmp_path / "fresh"), embedder=embedder, extractor=extractor) as m:
        yield m


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_shrunk_and_edited_document_replaces_what_it_held(memory, fresh, path, monkeypatch):
    retain: Retain = PATHS[path]
    retain(fresh, SECOND)
    expected = _state(fresh)
    assert expected["units"] and expected["entities"] and any(u[3] for u in expected["units"])

    retain(memory, FIRST)
    first = _state(memory)
    before = _vectors(memory)
    assert len(first["units"]) > len(expected["units"]) and len(first["chunks"]) > len(expected["chunks"])

    counting = _counting(memory, monkeypatch)
    steps = len(memory.store.revision_log(BANK)[1])
    retain(memory, SECOND)

    assert _state(memory) == expected
    _clean(memory)
    assert len(memory.store.revision_log(BANK)[1]) == steps + 1  # one write
    # only the edited turn's memories were embedded; the others kept their stored vectors
    new_texts = {u[1] for u in expected["units"]} - {u[1] for u in first["units"]}
    assert new_texts and sorted(counting.take()) == sorted(new_texts)
    after = _vectors(memory)
    kept = set(after) & set(before)
    assert kept and all(np.array_equal(after[t], before[t]) for t in kept)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_retaining_the_same_document_again_changes_nothing_and_embeds_nothing(memory, path, monkeypatch):
    retain: Retain = PATHS[path]
    retain(memory, FIRST)
    state, vectors = _state(memory), _vectors(memory)

    counting = _counting(memory, monkeypatch)
    steps = len(memory.store.revision_log(BANK)[1])
    retain(memory, FIRST)

    assert counting.take() == []
    assert len(memory.store.revision_log(BANK)[1]) == steps  # nothing written: no revision
    assert _state(memory) == state
    again = _vectors(memory)
    assert again.keys() == vectors.keys() and all(np.array_equal(again[t], vectors[t]) for t in vectors)
    _clean(memory)


OTHER = [
    ("Kenji", "Kenji opened a ramen bar in Shinjuku called Hoshi."),
    ("Jon", "Jon flew to Tokyo to help Kenji paint the walls."),
]


@pytest.mark.parametrize("second", ["both", "one"])
def test_a_call_replaces_the_documents_it_names_and_keeps_the_others(memory, fresh, second):
    """The batch path retains several documents in one write: each one it names replaces what
    it held; a document it does not name stays as it was."""
    other = [t.model_copy(update={"document_id": "conv-2"}) for t in _turns([OTHER])]
    memory.retain(BANK, [("conv-2", other), (DOC, _turns(FIRST))])
    if second == "both":
        memory.retain(BANK, [("conv-2", other), (DOC, _turns(SECOND))])
        fresh.retain(BANK, [("conv-2", other), (DOC, _turns(SECOND))])
    else:
        memory.retain(BANK, [(DOC, _turns(SECOND))])
        fresh.retain(BANK, [("conv-2", other)])
        fresh.retain(BANK, [(DOC, _turns(SECOND))])
    assert _state(memory) == _state(fresh)
    assert sorted(memory.browse.list_documents(BANK)) == [DOC, "conv-2"]
    _clean(memory)


def test_replacing_a_document_prunes_the_links_to_it_from_the_graph_as_a_scan_would(
    memory, fresh, monkeypatch
):
    """The links other documents hold to a replaced document's units are pruned; the writer
    names the units holding them from its graph (read by id), and the bank ends as the store's
    own scan of every unit's links leaves it (``fresh``, its graph hidden from the store)."""
    from memlane.derived import DerivedState
    from memlane.stores.milvus.store import MilvusStore

    other = [t.model_copy(update={"document_id": "conv-2"}) for t in _turns([OTHER, FIRST[1]])]
    for m in (memory, fresh):
        m.retain(BANK, [(DOC, _turns(FIRST))])
        m.retain(BANK, [("conv-2", other)])  # its units link to DOC's
    ids = set(memory.store.list_unit_ids(BANK, UnitFilter(document_id=DOC, only_valid=False)))
    assert any(x.target_id in ids for u in _units(memory, "conv-2") for x in u.links)

    scans: list[str] = []
    query = MilvusStore._bank_query

    def spy(self, bank_id, name, expr, fields):
        scans.append(expr)
        return query(self, bank_id, name, expr, fields)

    monkeypatch.setattr(MilvusStore, "_bank_query", spy)
    monkeypatch.setattr(fresh.derived, "linking_to", lambda bank_id, ids: None)
    assert isinstance(fresh.derived, DerivedState)
    fresh.retain(BANK, [(DOC, _turns(SECOND))])
    assert any("array_contains_any" in e for e in scans)  # the scan ran where no graph was given
    scans.clear()
    memory.retain(BANK, [(DOC, _turns(SECOND))])
    assert not any("array_contains_any" in e for e in scans)

    assert _state(memory) == _state(fresh)
    gone = ids - set(memory.store.list_unit_ids(BANK, UnitFilter(only_valid=False)))
    assert gone and not any(x.target_id in gone for u in _units(memory, "conv-2") for x in u.links)
    _clean(memory)
    _clean(fresh)


def _units(memory: Memory, document_id: str):
    ids = memory.store.list_unit_ids(BANK, UnitFilter(document_id=document_id, only_valid=False))
    return memory.store.get_units(BANK, ids)


def test_a_text_said_twice_in_one_retain_is_embedded_once(memory, monkeypatch):
    counting = _counting(memory, monkeypatch)
    said = [
        ("Caroline", "Good morning Melanie!"),
        ("Melanie", "Morning! Coffee?"),
        ("Caroline", "Good morning Melanie!"),
    ]
    _batch(memory, [said])

    embedded = counting.take()
    assert sorted(embedded) == sorted(set(embedded)) and len(embedded) == 2
    units = [u for page in memory.store.iter_units(BANK, with_embedding=True) for u in page]
    twice = [u for u in units if u.text == "Caroline: Good morning Melanie!"]
    assert len(units) == 3 and len(twice) == 2
    assert np.array_equal(twice[0].embedding, twice[1].embedding)
