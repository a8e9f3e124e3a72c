"""The learned ranker (memlane/recall/learned.py) with real LightGBM models: a shipped model
reads memlane/recall/features.py's features (by name), a model of other features is refused (the fused
order ranks), and a model's order is the order recall returns, with one falling score.
Sentences written for these tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

lightgbm = pytest.importorskip("lightgbm")

from memlane.recall import learned  # noqa: E402
from memlane.recall.features import FEATURES, INDEX  # noqa: E402
from memlane.recall.learned import MODELS, RankerModel  # noqa: E402
from memlane.records import Turn  # noqa: E402


def _train(names: list[str], column: int, path: Path) -> None:
    """A lambdarank model whose relevant row in each group is the one highest in ``column``."""
    rng = np.random.default_rng(0)
    # the other columns missing: the model can split on ``column`` alone, so its order on real
    # rows is that column's whatever the other features read there
    X = np.full((40 * 8, len(names)), np.nan)
    X[:, column] = rng.random(40 * 8) * 4.0  # log(1 + words) of a turn: 0 to ~4
    y = np.zeros(len(X))
    for g in range(40):
        rows = slice(8 * g, 8 * g + 8)
        y[8 * g + int(np.argmax(X[rows, column]))] = 1
    data = lightgbm.Dataset(X, y, group=[8] * 40, feature_name=names)
    params = {"objective": "lambdarank", "min_data_in_leaf": 5, "verbose": -1, "num_threads": 1}
    lightgbm.train(params, data, num_boost_round=30).save_model(str(path))


def test_every_shipped_model_reads_the_features_recall_computes() -> None:
    for path in sorted(MODELS.glob("ranker-*.txt")):
        booster = lightgbm.Booster(model_file=str(path))
        # a model reads its features by name: each must be one recall computes
        assert set(booster.feature_name()) <= set(FEATURES), (
            f"{path.name}: retrain it (training/train_ranker.py)"
        )


def test_a_model_of_other_features_is_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _train([f"f{i}" for i in range(len(FEATURES))], 0, tmp_path / "ranker-mid.txt")
    _train(list(FEATURES), INDEX["words"], tmp_path / "ranker-high.txt")
    with caplog.at_level("WARNING"):
        assert RankerModel.for_budget("mid", tmp_path) is None
    assert "other features" in caplog.text
    model = RankerModel.for_budget("high", tmp_path)
    assert model is not None and model.path == tmp_path / "ranker-high.txt"
    assert RankerModel.for_budget("low", tmp_path) is None  # none ships for it


def _bank_with_a_model(memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: list[str]) -> None:
    """Bank "lena" holding ``said`` as Lena's turns, recalled with a mid model trained in place
    of the shipped one that ranks the turn of the most words first."""
    models = tmp_path / "models"
    models.mkdir()
    _train(list(FEATURES), INDEX["words"], models / "ranker-mid.txt")
    monkeypatch.setattr(learned, "MODELS", models)
    t0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    turns = [
        Turn(document_id="d1", session_id="s1", turn_id=f"t{i}", index=i, speaker="Lena", text=t,
             timestamp=t0 + timedelta(minutes=i))
        for i, t in enumerate(said)
    ]  # fmt: skip
    memory.retain("lena", [("d1", turns)])


def test_recall_returns_the_models_order_with_one_falling_score(
    memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = [
        "Our dog Pepper chewed the sofa again.",
        "Pepper is a dog.",
        "The dog walker comes on Mondays and Thursdays, and on Fridays she takes Pepper "
        "to the long beach past the harbour where the other dogs play for an hour.",
        "We feed the dog twice a day.",
        "The vet said the dog should lose a little weight.",
        "My sister is coming to stay in May.",
        "I finally fixed the garden gate.",
        "We booked a cottage in Wales for the summer.",
    ]
    _bank_with_a_model(memory, tmp_path, monkeypatch, said)
    question = "What is the dog called?"

    memory.settings.recall.ranker = "fused"
    fused = memory.recall("lena", question, budget="mid", trace=True)
    memory.settings.recall.ranker = "learned"
    ranked = memory.recall("lena", question, budget="mid", trace=True)

    longest = max(said, key=lambda t: len(t.split()))
    assert fused.memories[0].unit.text != f"Lena: {longest}"  # the model, not fusion, puts it first
    assert ranked.memories[0].unit.text == f"Lena: {longest}"
    assert all(m.trace is not None and "learned" in m.trace for m in ranked.memories)
    assert all("learned" not in (m.trace or {}) for m in fused.memories)
    scores = [m.score for m in ranked.memories]
    assert scores == sorted(scores, reverse=True) and 0 < scores[-1] <= scores[0] < 1


def test_fewer_candidates_than_the_model_saw_keep_the_fused_order(memory, tmp_path, monkeypatch) -> None:
    said = [
        "Pepper is a dog.",
        "Our dog Pepper chewed the sofa again, the third time since the spring began.",
    ]
    _bank_with_a_model(memory, tmp_path, monkeypatch, said)
    got = memory.recall("lena", "Who is Pepper?", budget="mid", trace=True)
    assert len(got.memories) == 2 < learned.MIN_CANDIDATES
    assert all("learned" not in (m.trace or {}) for m in got.memories)
