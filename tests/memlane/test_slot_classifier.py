"""The learned slot classifier and extractor with the shipped weights and the real embedders
(memlane/facts/classifier.py, learned.py). Sentences written for these tests."""

from __future__ import annotations

import numpy as np
import pytest

from memlane.facts.classifier import FAMILIES, SlotClassifier, WeightsError, weights_path


@pytest.fixture(scope="module")
def bge():
    from memlane.models.embedder import build_embedder
    from memlane.settings import Settings

    return build_embedder(Settings(), "bge-small")


@pytest.fixture(scope="module")
def entities():
    from memlane.facts.learned import SpacyEntities

    return SpacyEntities()


def embed(embedder, lines):
    return np.asarray(embedder.embed(lines), dtype=np.float32)


def test_weights_ship_for_both_embedders_and_none_for_others():
    assert FAMILIES == ("works_at", "job_title", "lives_in", "relationship", "pet", "diet", "car", "studies",
                        "favourite", "count")  # fmt: skip
    for name in ("bge-small", "minilm"):
        clf = SlotClassifier.for_embedder(name)
        assert clf is not None and clf.embedder == name and clf.dim == 384
        assert SlotClassifier.for_embedder(name) is clf  # loaded once
    assert SlotClassifier.for_embedder("no-such-embedder") is None


def test_a_weights_file_for_other_families_is_refused(tmp_path):
    with np.load(weights_path("bge-small")) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["families"] = np.array(["works_at", "lives_in"])  # trained for another family list
    bad = tmp_path / "slots-bad.npz"
    np.savez(bad, **arrays)
    with pytest.raises(WeightsError, match="families"):
        SlotClassifier.load(bad)


def test_own_current_statements_outrank_someone_elses_and_plans(bge):
    clf = SlotClassifier.for_embedder("bge-small")
    lines = [
        "Tomasz: I work as a welder at Harrow Steel, mostly night shifts.",
        "Tomasz: My cousin works as a welder at Harrow Steel.",
        "Tomasz: If I ever moved to Lisbon I'd learn to surf.",
        "Tomasz: We live in Lisbon now, right by the river.",
    ]
    p = clf.probabilities(lines, embed(bge, lines))
    assert p.shape == (4, len(FAMILIES)) and ((p >= 0) & (p <= 1)).all()
    works, lives = FAMILIES.index("works_at"), FAMILIES.index("lives_in")
    assert p[0, works] > 0.5 > p[1, works]
    assert p[3, lives] > 0.5 > p[2, lives]
    assert p[0, works] > p[0, lives] and p[3, lives] > p[3, works]  # the topic tells families apart


def test_vectors_of_another_dimension_or_count_are_refused(bge):
    clf = SlotClassifier.for_embedder("bge-small")
    with pytest.raises(ValueError, match="dimension"):
        clf.probabilities(["Ana: hi"], np.ones((1, 768), dtype=np.float32))
    with pytest.raises(ValueError, match="2 texts for 1 vectors"):
        clf.probabilities(["Ana: hi", "Ana: ho"], embed(bge, ["Ana: hi"]))


def test_the_minilm_weights_read_minilm_vectors(embedder):
    clf = SlotClassifier.for_embedder("minilm")
    lines = ["Ines: I'm a pescatarian these days.", "Ines: My flatmate is a pescatarian."]
    p = clf.probabilities(lines, embed(embedder, lines))
    diet = FAMILIES.index("diet")
    assert p[0, diet] > 0.5 and p[0, diet] > p[1, diet]


def test_the_learned_extractor_gives_the_speakers_facts_with_values(bge, entities):
    from memlane.facts.learned import LearnedExtractor
    from memlane.facts.slot_weights import SlotWeights

    extractor = LearnedExtractor(SlotWeights.for_embedder("bge-small"), entities)
    texts = [
        "I'm a radiographer at Fenwick General, and we live in Harrogate.",
        "My sister just got a job at Fenwick General.",
        "I might take Italian lessons at the Dante Society in the autumn.",
        "Our two cats, Mabel and Sprout, own the sofa.",
    ]
    speakers = ["Oona"] * len(texts)
    vectors = embed(bge, [f"Oona: {t}" for t in texts])
    got = [{(s.predicate, s.object) for s in facts} for facts in extractor.extract(texts, speakers, vectors)]
    assert ("works_at", "Fenwick General") in got[0]
    assert not any(p == "works_at" for p, _ in got[1])  # the sister's job
    assert not any(p in ("works_at", "studies") for p, _ in got[2])  # a plan, and a class
    assert {"pet", "owns:cat"} & {p for p, _ in got[3]}
    slots = extractor.extract(texts[:1], speakers[:1], vectors[:1])[0]
    assert all(s.subject == "Oona" and s.by == "classifier:bge-small" for s in slots)
