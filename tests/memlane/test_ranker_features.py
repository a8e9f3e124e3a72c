"""The learned ranker's feature rows (memlane/recall/features.py ``candidate_features``) from
recorded recall inputs equal the rows recorded with them, to the last bit: the sample questions'
recalls at mid and high (tests/memlane/data/record_feature_inputs.py), whose rows were
recorded by the loop over candidates that computed every figure per query, before a memory's
own figures were kept (memlane/recall/traits.py). The model reads these rows, so the same rows
are the same ranking."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from memlane.recall.features import FEATURES, INDEX, candidate_features
from memlane.recall.traits import TRAIT_FEATURES, traits, traits_of

DATA = Path(__file__).resolve().parent / "data"
_spec = importlib.util.spec_from_file_location("record_feature_inputs", DATA / "record_feature_inputs.py")
assert _spec is not None and _spec.loader is not None
recorder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recorder)


@pytest.fixture(scope="module")
def recorded() -> dict:
    with gzip.open(DATA / "ranker_inputs.json.gz", "rt") as f:
        return json.load(f)


def _rows(rec: dict, fields: dict) -> np.ndarray:
    state, kwargs = recorder.state_of(rec, fields)
    return candidate_features(state, rec["ids"], **kwargs)


def test_the_rows_equal_the_recorded_ones_cold_and_warm(recorded: dict) -> None:
    traits.cache_clear()  # cold: every memory's own figures computed on this call
    for warm in (False, True):
        for rec in recorded["recalls"]:
            expected = np.array(rec["rows"], dtype=np.float64)
            got = _rows(rec, recorded["fields"])
            assert got.shape == expected.shape == (len(rec["ids"]), len(FEATURES))
            assert np.array_equal(got, expected, equal_nan=True), (
                rec["question"],
                warm,
                sorted({FEATURES[j] for j in np.argwhere(~np.isclose(got, expected, equal_nan=True))[:, 1]}),
            )
        assert traits.cache_info().hits > 0 or not warm


def test_the_recorded_rows_exercise_the_features(recorded: dict) -> None:
    """The recordings hold what the rows are computed from: a memory's own figures that differ
    between memories, neighbours, slot signals, the cross-encoder (at high), the question's
    words and names in the text. (No sample question has a time window or names who said
    something: temporal_overlap and sayer_match are NaN throughout.)"""
    X = np.vstack([np.array(r["rows"], dtype=np.float64) for r in recorded["recalls"]])
    assert len(recorded["recalls"]) == 32 and len(X) > 500
    for name in (*TRAIT_FEATURES[:3], "cue_first_person", "cue_question", "capitals", "number"):
        assert len(np.unique(X[:, INDEX[name]])) >= 2, name
    for name in (
        "prev_semantic",
        "prev_question",
        "slot_p",
        "slot_newest",
        "gate",
        "cross",
        "q_names_in_text",
    ):
        assert np.isfinite(X[:, INDEX[name]]).any(), name
    assert len(np.unique(X[:, INDEX["content_overlap"]])) >= 2


def test_a_memory_with_other_text_or_speaker_gets_its_own_traits() -> None:
    fields = {"text": "Sam: I moved to Leeds in 2020?", "metadata": {"speaker": "Sam"}}
    first = traits_of(fields)
    assert traits_of(dict(fields)) is first  # kept: the same text and speaker
    assert first.question == 1.0 and not first.assistant and "leed" in first.folded
    words = TRAIT_FEATURES.index("words")
    other = traits_of({**fields, "text": "Sam: I moved to Leeds last year. It rains a lot."})
    assert other.question == 0.0 and other.row[words] > first.row[words]
    assistant = traits_of({**fields, "metadata": {"speaker": "assistant"}})
    assert assistant.assistant and assistant.row[TRAIT_FEATURES.index("assistant")] == 1.0
    # "Sam: " is not the assistant's prefix: its words count
    assert assistant.row[words] > first.row[words]
