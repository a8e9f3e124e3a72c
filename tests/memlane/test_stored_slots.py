"""What the slot classifier reads of a memory alone is computed when the memory is written and
stored with it (memlane/facts/classifier.py ``with_slots``, memlane/writes.py): recall reads it
instead of scoring the memory again, and ranks as it ranks a bank written before the signals
were stored. Real engine: Milvus Lite, MiniLM, the rule extractor."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memlane.engine import Memory
from memlane.errors import InvalidInput
from memlane.facts.classifier import SlotClassifier, with_slots
from memlane.records import SLOTS_KEY, MemoryUnit, UnitSlots
from memlane.transfer import export_bank, import_bank
from memlane.views import unit_view

TURNS = [
    ("Ines", "I just started a new job as a nurse at the children's hospital in Porto."),
    ("Assistant", "Congratulations! How is the commute?"),
    ("Ines", "Twenty minutes by metro. I moved to Matosinhos last month, so it's close."),
    ("Ines", "My brother Rui works at a bank in Lisbon, he hates it."),
    ("Ines", "We adopted a dog called Pimenta, a very loud beagle."),
    ("Assistant", "What does Pimenta like to do?"),
    ("Ines", "Chasing pigeons on the beach. I'm vegetarian now, by the way, since January."),
    ("Ines", "Yes."),
    ("Ines", "I drive an old Fiat Panda but mostly take the metro."),
]
QUESTIONS = [
    "Where does Ines work?",
    "Where does Ines live now?",
    "What pet does Ines have?",
    "What does Ines eat?",
    "What car does Ines drive?",
    "How does Ines get to work?",
]


def _items():
    return [
        {"content": text, "speaker": who, "timestamp": f"2025-02-{1 + i // 3:02d}T09:{i:02d}:00Z"}
        for i, (who, text) in enumerate(TURNS)
    ]


def _engine(settings, embedder, extractor) -> Memory:
    return Memory(
        settings.model_copy(update={"background": {"tree": False}}), embedder=embedder, extractor=extractor
    )


def _units(memory: Memory, bank: str = "ines") -> list[MemoryUnit]:
    return [u for batch in memory.store.iter_units(bank, with_embedding=True) for u in batch]


@pytest.fixture
def written(settings, embedder, extractor):
    m = _engine(settings, embedder, extractor)
    m.create_bank("ines", name="")
    m.retain_items("ines", _items(), document_id="chat-1")
    m.wait_background()
    yield m
    m.close()


def test_every_written_memory_stores_the_signals_of_its_embedders_weights(written, embedder):
    classifier = SlotClassifier.for_embedder(embedder.name)
    assert classifier is not None  # MiniLM ships weights
    units = _units(written)
    assert len(units) == len(TURNS)
    for u in units:
        assert u.slots is not None and u.slots.weights == classifier.version, u.text
        assert len(u.slots.best) == len(classifier.weights.topic_b) and 0.0 <= u.slots.gate <= 1.0
        assert SLOTS_KEY not in u.metadata
    # the values are the classifier's own reading of the text and vector (to float rounding:
    # BLAS sums a batch's rows in another order than one row's)
    again = classifier.unit_slots([u.text for u in units], np.asarray([u.embedding for u in units]))
    for u, s in zip(units, again):
        assert u.slots is not None
        assert np.allclose(u.slots.best, s.best, atol=1e-6) and abs(u.slots.gate - s.gate) < 1e-6
    # a job statement scores as one, a one-word reply does not
    job = next(u for u in units if "nurse" in u.text)
    yes = next(u for u in units if u.text.endswith("Yes."))
    assert job.slots is not None and yes.slots is not None
    assert max(job.slots.best) > 0.5 and max(yes.slots.best) == -1.0


def test_clients_and_hit_fields_never_see_the_signals(written):
    units = _units(written)
    fields = written.store.get_unit_fields("ines", [u.id for u in units], ["metadata"])
    assert all(SLOTS_KEY not in f["metadata"] for f in fields.values())
    assert all("slots" not in unit_view(u) and SLOTS_KEY not in unit_view(u)["metadata"] for u in units)
    recalled = written.recall("ines", "Where does Ines work?")
    assert recalled.memories and all(m.unit.slots is None for m in recalled.memories)
    exported = [r for r in export_bank(written, "ines") if r["kind"] == "unit"]
    assert len(exported) == len(units) and all("slots" not in r for r in exported)
    assert all(SLOTS_KEY not in json.dumps(r) for r in exported)


def test_a_client_cannot_write_the_reserved_metadata_key(written):
    with pytest.raises(ValueError, match="reserved"):
        MemoryUnit.model_validate(
            {**_units(written)[0].model_dump(exclude={"slots"}), "metadata": {SLOTS_KEY: {"weights": "x"}}}
        )
    # a unit's metadata reaches the store from an imported bank: refused, naming the line
    records = list(export_bank(written, "ines"))
    at = next(i for i, r in enumerate(records) if r["kind"] == "unit")
    records[at] = {**records[at], "metadata": {**records[at]["metadata"], SLOTS_KEY: [1]}}
    with pytest.raises(InvalidInput, match=f"line {at + 1}: unit: .*reserved"):
        import_bank(written, records, bank_id="ines-copy")
    assert "ines-copy" not in {b.bank_id for b in written.store.list_banks()}


def test_signals_of_other_weights_are_computed_again_and_current_ones_kept(written, embedder):
    classifier = SlotClassifier.for_embedder(embedder.name)
    units = _units(written)
    stale = units[0].model_copy(update={"slots": UnitSlots(weights="minilm:old", best=[0.5] * 10, gate=0.5)})
    out = with_slots(classifier, [stale, units[1]])
    assert out[0].slots is not None and out[0].slots.weights == classifier.version
    assert out[0].slots != stale.slots
    assert out[1] is units[1]  # current signals: the unit as it was
    assert with_slots(None, [stale]) == [stale]  # an embedder without weights: nothing computed


def test_recall_ranks_alike_with_the_signals_stored_and_without(
    written, settings, embedder, extractor, tmp_path
):
    """A bank written before the signals were stored (its units written straight to the store,
    without them) is scored at query time, and ranks as the bank that stores them."""
    units = _units(written)
    plain = Memory(
        settings.model_copy(update={"data_dir": tmp_path / "plain", "background": {"tree": False}}),
        embedder=embedder,
        extractor=extractor,
    )
    try:
        plain.create_bank("ines", name="")
        plain.store.upsert_units("ines", [u.model_copy(update={"slots": None}) for u in units])
        assert all(u.slots is None for u in _units(plain))
        for question in QUESTIONS:
            a = written.recall("ines", question, budget="mid")
            b = plain.recall("ines", question, budget="mid")
            assert [m.unit.id for m in a.memories] == [m.unit.id for m in b.memories], question
            assert [m.score for m in a.memories] == pytest.approx([m.score for m in b.memories], abs=1e-6)
    finally:
        plain.close()


def test_the_bank_index_keeps_each_rows_signals_through_writes_and_compaction():
    """The index keeps the signals as one array beside the fields (memlane/recall/index_rows.py):
    each row keeps its own through appends one by one and in bulk, replacements, removals and
    the compaction that renumbers the rows; a unit without signals has none."""
    from memlane.facts.families import FAMILIES
    from memlane.recall.index import BankIndex
    from tests.memlane.test_ann_index import DIM, clustered, make_units

    def signals(i: int) -> UnitSlots:
        return UnitSlots(
            weights=f"w{i % 3}", best=[i + j / 100 for j in range(len(FAMILIES))], gate=(i % 100) / 100
        )

    units = [
        u.model_copy(update={"slots": None if i % 7 == 0 else signals(i)})
        for i, u in enumerate(make_units(clustered(1300)))
    ]
    idx = BankIndex(DIM)
    idx.bulk_load(units[:1200])  # one column at a time
    for lo in range(1200, 1300, 4):
        idx.upsert(units[lo : lo + 4])  # one row at a time
    replaced = units[5].model_copy(update={"slots": signals(5000)})
    idx.upsert([replaced])
    idx.remove([u.id for u in units[10:800]])  # over half the rows dead: compacted
    assert idx.rows.n < 1300
    left = [replaced, *units[:5], *units[6:10], *units[800:]]
    got = idx.unit_slots([u.id for u in left] + ["absent", units[20].id])
    assert got == {u.id: u.slots for u in left if u.slots is not None}


def test_a_long_text_is_left_to_recall(written, embedder):
    from memlane.facts.classifier import STORED_TEXT_CHARS

    classifier = SlotClassifier.for_embedder(embedder.name)
    unit = _units(written)[0]
    long = unit.model_copy(update={"text": "Ines: " + "I work at the hospital. " * 100, "slots": None})
    assert len(long.text) > STORED_TEXT_CHARS
    assert with_slots(classifier, [long]) == [long]  # no signals: recall scores it, as before
