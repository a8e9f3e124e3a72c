"""A bank's embedder record, the mismatch error, re-embedding (memlane/reembed.py) and the
doctor's vector check: real Milvus Lite, real MiniLM and bge-small, one data dir per test (a
Milvus Lite directory takes one engine at a time, so the two embedders' engines alternate)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memlane.errors import EmbedderMismatch

TEXTS = [
    "I adopted a beagle called Pixel last spring.",
    "My sister Maria lives in Porto and teaches chemistry.",
    "I work night shifts as a nurse at the city hospital.",
    "We are planning a hiking trip to the Dolomites in July.",
    "I started learning the cello three months ago.",
    "Pixel chewed my running shoes again this morning.",
    "Maria is moving to Lisbon for a new job at a lab.",
    "The hospital changed my shifts to days next month.",
    "I bought a used road bike for commuting.",
    "My cello teacher says I should practise scales daily.",
]
QUERIES = ["what is the dog called", "where does the sister live", "what instrument", "what job"]


def _turns(doc: str = "d1"):
    from memlane.records import Turn

    start = datetime(2024, 5, 1, 9, tzinfo=UTC)
    return [
        Turn(
            document_id=doc,
            session_id=f"s{i // 5}",
            turn_id=f"t{i}",
            index=i % 5,
            speaker="Ana",
            text=text,
            timestamp=start + timedelta(days=i // 5, minutes=i),
        )
        for i, text in enumerate(TEXTS)
    ]


def _engine(settings, embedder: str, extractor):
    from memlane.engine import Memory

    return Memory(
        settings.model_copy(update={"models": settings.models.model_copy(update={"embedder": embedder})}),
        extractor=extractor,
    )


def _top(memory, bank: str) -> list[tuple[list[str], list[tuple[str, float]]]]:
    """Per query: the full recall's top 5 (as a set: BM25 breaks ties between equal scores
    by the rows' order in the store, which an upsert changes) and the dense channel's top 5
    with their scores, in order."""
    out = []
    for q in QUERIES:
        fused = memory.recall(bank, q, max_tokens=400).memories[:5]
        dense = memory.recall(bank, q, max_tokens=400, channels=["semantic"]).memories[:5]
        out.append((sorted(m.unit.text for m in fused), [(m.unit.text, round(m.score, 3)) for m in dense]))
    return out


def _link_counts(memory, bank: str) -> list[int]:
    """Each unit's number of links (semantic links are chosen by the vectors)."""
    return sorted(len(u.links) for page in memory.store.iter_units(bank) for u in page)


def _reembed(memory, bank: str, **kw):
    from memlane.reembed import reembed_bank

    return reembed_bank(memory.store, memory.writer, memory.embedder, bank, memory.settings.retain, **kw)


def _stored_cosines(memory, bank: str) -> np.ndarray:
    """Each unit's stored vector against this engine's embedding of its text."""
    units = [u for page in memory.store.iter_units(bank, with_embedding=True) for u in page]
    fresh = memory.embedder.embed([u.text for u in units])
    return np.sum(fresh * np.asarray([u.embedding for u in units], dtype=np.float32), axis=1)


def test_a_bank_keeps_its_embedder_in_a_process_configured_for_another(settings, extractor):
    """A process whose default is bge-small recalls from and retains into a MiniLM bank with
    MiniLM (the same ranking as a MiniLM process, every stored vector MiniLM's), records a
    bank from before the record as MiniLM's, and gives a new bank bge-small."""
    with _engine(settings, "minilm", extractor) as mini:
        mini.retain("b", [("d1", _turns())])
        bank = mini.banks.get("b")
        assert (bank.embedder, bank.embedding_dim, bank.reembedding) == ("minilm", 384, "")
        # a bank from before the record (none stored) counts as MiniLM's
        mini.retain("legacy", [("d1", _turns())])
        mini.store.upsert_bank(
            mini.banks.get("legacy").model_copy(update={"embedder": "", "embedding_dim": 0})
        )
        expected = _top(mini, "b")
    with _engine(settings, "bge-small", extractor) as bge:
        assert bge.embedder.name == "bge-small"
        assert _top(bge, "b") == expected and _top(bge, "legacy") == expected
        bge.retain("b", [("d2", _turns("d2"))])
        bge.retain("legacy", [("d2", _turns("d2"))])
        assert bge.banks.get("legacy").embedder == "minilm"  # recorded by its first retain here
        bge.retain("fresh", [("d1", _turns())])
        assert (bge.banks.get("fresh").embedder, bge.banks.get("fresh").embedding_dim) == ("bge-small", 384)
    with _engine(settings, "minilm", extractor) as mini:
        for bank_id in ("b", "legacy"):  # d2's vectors are MiniLM's too
            assert mini.store.count_units(bank_id) == 2 * len(TEXTS)
            assert _stored_cosines(mini, bank_id).min() > 0.999
            assert mini.banks.doctor(bank_id).ok
    with _engine(settings, "bge-small", extractor) as bge:
        assert _stored_cosines(bge, "fresh").min() > 0.999


def test_a_bank_whose_embedder_is_not_here_is_refused_with_nothing_written(settings, extractor):
    from serve.errors import engine_error

    with _engine(settings, "bge-small", extractor) as bge:
        bge.retain("b", [("d1", _turns())])
        bge.store.upsert_bank(bge.banks.get("b").model_copy(update={"embedder": "e5-large"}))
        store = bge.store
        before = (store.list_unit_ids("b"), store.get_revision("b"), store.count_chunks("b"))
        expected = (
            "bank 'b' was embedded with e5-large, which this process cannot load: run "
            "`memlane reembed --bank b --embedder bge-small` (or set MEMLANE_MODELS__EMBEDDER_MODEL "
            "to e5-large's model folder)"
        )
        with pytest.raises(EmbedderMismatch) as retained:
            bge.retain("b", [("d2", _turns("d2"))])
        assert str(retained.value) == expected
        with pytest.raises(EmbedderMismatch) as recalled:
            bge.recall("b", "what is the dog called")
        assert str(recalled.value) == expected
        assert (store.list_unit_ids("b"), store.get_revision("b"), store.count_chunks("b")) == before
        api = engine_error(recalled.value)
        assert api is not None and (api.status, api.code, api.message) == (409, "embedder_mismatch", expected)


def test_an_export_of_a_minilm_bank_imports_into_a_bge_process_with_its_vectors(settings, extractor):
    from memlane.transfer import export_bank, import_bank

    with _engine(settings, "minilm", extractor) as mini:
        mini.retain("b", [("d1", _turns())])
        records = list(export_bank(mini, "b", vectors=True))
        expected = _top(mini, "b")
    with _engine(settings, "bge-small", extractor) as bge:
        report = import_bank(bge, records, bank_id="copy")
        assert report["vectors"] != "re-embedded" and report.get("reembedded", 0) == 0
        assert bge.banks.get("copy").embedder == "minilm"
        assert _top(bge, "copy") == expected


def test_reembed_round_trip_keeps_ids_passes_doctor_and_recalls_as_from_scratch(
    settings, extractor, tmp_path
):
    with _engine(settings, "minilm", extractor) as mini:
        mini.retain("b", [("d1", _turns())])
        mini.consolidate("b", consolidator="rules")
        ids = mini.store.list_unit_ids("b")
        nodes = {n.id for n in mini.store.list_tree_nodes("b")}
        assert nodes
        minilm_top = _top(mini, "b")
    with _engine(settings, "bge-small", extractor) as bge:
        report = _reembed(bge, "b")
        assert (report.status, report.source, report.target) == ("done", "minilm", "bge-small")
        assert (report.units, report.tree_nodes) == (len(ids), len(nodes))
        assert bge.store.list_unit_ids("b") == ids
        assert {n.id for n in bge.store.list_tree_nodes("b")} == nodes
        assert (bge.banks.get("b").embedder, bge.banks.get("b").reembedding) == ("bge-small", "")
        assert bge.banks.doctor("b").ok, bge.banks.doctor("b").as_dict()
        assert _stored_cosines(bge, "b").min() > 0.99
        reembedded = _top(bge, "b"), _link_counts(bge, "b")
        assert _reembed(bge, "b").status == "unchanged"  # already on bge-small: nothing to do
    # The same bank retained with bge-small from scratch (same bank id: same unit ids, so
    # ties between scores break the same way), in a data dir of its own.
    with _engine(
        settings.model_copy(update={"data_dir": tmp_path / "scratch"}), "bge-small", extractor
    ) as bge:
        bge.retain("b", [("d1", _turns())])
        bge.consolidate("b", consolidator="rules")
        assert reembedded == (_top(bge, "b"), _link_counts(bge, "b"))
    with _engine(settings, "minilm", extractor) as mini:
        assert _reembed(mini, "b").status == "done"
        assert mini.store.list_unit_ids("b") == ids
        assert mini.banks.doctor("b").ok
        assert _top(mini, "b") == minilm_top


def test_a_reembed_cut_short_is_refused_until_a_rerun_finishes_it(settings, extractor):
    with _engine(settings, "minilm", extractor) as mini:
        mini.retain("b", [("d1", _turns())])
        ids = mini.store.list_unit_ids("b")
    with _engine(settings, "bge-small", extractor) as bge:
        cut = _reembed(bge, "b", batch=4, stop_after=1)  # a run killed after its first write
        assert (cut.status, cut.units) == ("stopped", 4)
        assert bge.banks.get("b").reembedding == "bge-small"
        for call in (lambda: bge.recall("b", "dog"), lambda: bge.retain("b", [("d2", _turns("d2"))])):
            with pytest.raises(EmbedderMismatch, match="is being re-embedded from minilm to bge-small"):
                call()
        report = bge.banks.doctor("b")
        assert not report.ok and [f.check for f in report.errors] == ["embedder"]
        assert "memlane reembed --bank b --embedder bge-small" in report.errors[0].message
        done = _reembed(bge, "b", batch=4)
        assert (done.status, done.units, done.writes) == ("done", len(ids), 3)
        assert bge.store.list_unit_ids("b") == ids
        assert _stored_cosines(bge, "b").min() > 0.99  # no unit left on MiniLM
        assert bge.banks.doctor("b").ok
        assert bge.recall("b", "what is the dog called").memories


def test_doctor_finds_vectors_that_are_not_the_recorded_embedders(settings, extractor):
    with _engine(settings, "bge-small", extractor) as bge:
        bge.retain("b", [("d1", _turns())])
        # recorded as MiniLM's, vectors bge-small's: what a bank written without the record is
        bge.store.upsert_bank(bge.banks.get("b").model_copy(update={"embedder": "minilm"}))
        report = bge.banks.doctor("b")
        assert [f.check for f in report.errors] == ["embedder"]
        assert report.errors[0].count == len(TEXTS)
        assert "not minilm's" in report.errors[0].message


def test_the_mismatch_is_a_409_also_when_ray_re_raises_it_from_a_replica():
    import pickle

    from ray.exceptions import RayTaskError

    from serve.errors import engine_error

    exc = EmbedderMismatch("b", "minilm", "bge-small", reembedding="bge-small")
    remote = RayTaskError("recall", "Traceback (most recent call last): ...", pickle.loads(pickle.dumps(exc)))
    api = engine_error(remote.as_instanceof_cause())
    assert api is not None and (api.status, api.code, api.field) == (409, "embedder_mismatch", "bank_id")
    assert api.message == (
        "bank 'b' is being re-embedded from minilm to bge-small (a re-embed stopped before it "
        "finished): run `memlane reembed --bank b --embedder bge-small` to finish it"
    )
