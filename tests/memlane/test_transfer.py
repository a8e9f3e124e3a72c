"""Bank export and import (memlane/transfer.py): round trips on the LoCoMo fixture through real
engines and Milvus Lite, idempotence, and bad input that writes nothing."""

from __future__ import annotations

import json

import pytest
from fixtures import write_locomo_fixture

from memlane.errors import InvalidInput
from memlane.settings import Settings
from memlane.transfer import export_bank, import_bank

QUERIES = [
    "What did Caroline research?",
    "When did Melanie paint a sunrise?",
    "What does Caroline want to do after school?",
    "pottery class",
]


@pytest.fixture
def second(tmp_path, embedder, extractor):
    """A second engine over its own, empty data directory."""
    from memlane.engine import Memory

    m = Memory(Settings(data_dir=tmp_path / "other"), embedder=embedder, extractor=extractor)
    yield m
    m.close()


@pytest.fixture
def fx(memory, tmp_path):
    memory.retain_file("fx", write_locomo_fixture(tmp_path / "fx.json"))
    return memory


def _units(memory, bank_id):
    return {u.id: u for page in memory.store.iter_units(bank_id) for u in page}


def _counts(memory, bank_id):
    s = memory.stats(bank_id)
    return {k: s[k] for k in ("units", "chunks", "entities", "graph")}


def _recall_ids(memory, bank_id):
    ids = [[m.unit.id for m in memory.recall(bank_id, q, max_tokens=512).memories] for q in QUERIES]
    assert all(ids)
    return ids


@pytest.mark.parametrize("vectors", [True, False])
def test_round_trip_reproduces_the_bank(fx, second, tmp_path, vectors):
    path = tmp_path / "fx.jsonl"
    with path.open("w") as f:
        for record in export_bank(fx, "fx", vectors=vectors):
            f.write(json.dumps(record) + "\n")
    header = json.loads(path.read_text().splitlines()[0])
    assert header["kind"] == "memlane-bank" and header["format"] == 1 and header["vectors"] is vectors
    assert header["counts"]["units"] == fx.stats("fx")["units"] > 0

    report = import_bank(second, path)
    assert report["vectors"] == ("imported" if vectors else "re-embedded")
    assert report["units"] == header["counts"]["units"]

    assert second.get_bank("fx") == fx.get_bank("fx")
    assert _counts(second, "fx") == _counts(fx, "fx")
    assert second.store.list_entities("fx") == fx.store.list_entities("fx")
    before, after = _units(fx, "fx"), _units(second, "fx")
    assert after == before  # every field: text, times, links, source_turns, entity_ids, types
    chunk_ids = sorted({u.chunk_id for u in before.values()})
    assert second.store.get_chunks("fx", chunk_ids) == fx.store.get_chunks("fx", chunk_ids)
    if vectors:  # the vectors themselves came across exactly
        some = sorted(before)[:20]
        a = fx.store.get_units("fx", some, with_embedding=True)
        b = second.store.get_units("fx", some, with_embedding=True)
        assert [u.embedding for u in a] == [u.embedding for u in b]
    assert _recall_ids(second, "fx") == _recall_ids(fx, "fx")


def test_import_is_idempotent_and_can_rename_the_bank(fx, second):
    records = list(export_bank(fx, "fx"))
    import_bank(second, records, bank_id="copy")
    counts = _counts(second, "copy")
    units = _units(second, "copy")
    report = import_bank(second, records, bank_id="copy")
    assert _counts(second, "copy") == counts
    assert _units(second, "copy") == units
    assert report["units"] == counts["units"]
    assert {u.bank_id for u in units.values()} == {"copy"}
    assert set(units) == set(_units(fx, "fx"))  # ids kept
    assert _recall_ids(second, "copy") == _recall_ids(fx, "fx")


def _lines(memory):
    return [json.dumps(r) for r in export_bank(memory, "fx")]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda ls: ls.insert(3, "{not json"), "line 4: not JSON"),
        (
            lambda ls: ls.insert(2, json.dumps({"kind": "tree_node", "id": "t"})),
            "line 3: record kind 'tree_node'",
        ),
        (lambda ls: ls.insert(2, json.dumps({"kind": "thing"})), "line 3: unknown record kind 'thing'"),
        (
            lambda ls: ls.__setitem__(0, ls[0].replace('"format": 1', '"format": 2')),
            "line 1: header: format 2",
        ),
        (lambda ls: ls.pop(0), "line 1: header: the first record must be"),
        (lambda ls: ls.pop(), "the header counts"),
        (
            lambda ls: ls.__setitem__(-1, ls[-1].replace('"bank_id": "fx"', '"bank_id": "other"')),
            "belongs to bank 'other'",
        ),
        (
            lambda ls: ls.__setitem__(-1, ls[-1].replace('"fact_type": "', '"fact_type": "x')),
            "unit: fact_type",
        ),
    ],
)
def test_bad_input_names_the_line_and_writes_nothing(fx, second, mutate, message):
    lines = _lines(fx)
    # a bank that already holds something: it must be left as it was
    import_bank(second, lines, bank_id="target")
    counts, units = _counts(second, "target"), _units(second, "target")
    mutate(lines)
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(")):
        import_bank(second, lines, bank_id="target")
    assert _counts(second, "target") == counts
    assert _units(second, "target") == units
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(")):
        import_bank(second, lines, bank_id="fresh")
    assert "fresh" not in {b.bank_id for b in second.list_banks()}


def test_vectors_of_another_embedder_are_re_embedded(fx, second):
    records = list(export_bank(fx, "fx", vectors=True))
    records[0] = {**records[0], "embedder": "some-other-model"}
    report = import_bank(second, records)
    assert report["vectors"] == "re-embedded" and "some-other-model" in report["reembed_reason"]
    assert report["reembedded"] == report["units"] > 0
    assert _recall_ids(second, "fx") == _recall_ids(fx, "fx")
