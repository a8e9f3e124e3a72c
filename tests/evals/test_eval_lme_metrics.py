"""LongMemEval's retrieval metrics against hand-computed cases.

The official definitions (xiaowu0162/LongMemEval, src/retrieval/eval_utils.py): recall_any@k,
recall_all@k, and ndcg_any@k with its DCG = rel[0] + sum_{i>=1} rel[i] / log2(i + 1) (0-based
i), the ideal DCG taken over the whole corpus' labels; session metrics from a turn ranking widen
the cut-off until it holds k distinct sessions. Each expected value is worked out in a comment.
"""

from __future__ import annotations

import math

import pytest

from evals.metrics import (
    dcg,
    is_abstention,
    ndcg_any_at_k,
    recall_all_at_k,
    recall_any_at_k,
    retrieval_scores,
    session_scores_from_turns,
)

LOG2_3 = math.log2(3)  # 1.5849625


def test_recall_any_and_all():
    ranked = ["a", "x", "b", "y"]
    # top1 = {a}: a relevant -> any 1; b missing -> all 0
    assert recall_any_at_k(ranked, {"a", "b"}, 1) == 1.0
    assert recall_all_at_k(ranked, {"a", "b"}, 1) == 0.0
    # top3 = {a, x, b}: both there
    assert recall_all_at_k(ranked, {"a", "b"}, 3) == 1.0
    # top1 = {a}, relevant {b} -> 0; a k past the end takes the whole ranking
    assert recall_any_at_k(ranked, {"b"}, 1) == 0.0
    assert recall_all_at_k(ranked, {"b", "y"}, 50) == 1.0


def test_no_relevant_documents_follow_the_official_code():
    # any() of nothing is False, all() of nothing is True, ideal DCG 0 -> ndcg 0
    assert recall_any_at_k(["a", "b"], [], 5) == 0.0
    assert recall_all_at_k(["a", "b"], [], 5) == 1.0
    assert ndcg_any_at_k(["a", "b"], [], ["a", "b", "c"], 5) == 0.0
    assert retrieval_scores(["a"], [], ["a"], 1) == {
        "recall_any@1": 0.0,
        "recall_all@1": 1.0,
        "ndcg_any@1": 0.0,
    }


def test_dcg_does_not_discount_the_first_two_ranks():
    # 1 + 1/log2(2) + 1/log2(3) = 2 + 0.6309
    assert dcg([1, 1, 1], 3) == pytest.approx(2 + 1 / LOG2_3)
    # rank 2 alone weighs 1 (the textbook log2(rank+1) would give 0.6309)
    assert dcg([0, 1], 2) == pytest.approx(1.0)
    assert dcg([0, 0, 1], 3) == pytest.approx(1 / LOG2_3)
    assert dcg([], 3) == 0.0
    assert dcg([1, 1, 1], 1) == 1.0


def test_ndcg_hand_computed():
    corpus = ["a", "b", "x", "y", "z"]
    ranked = ["a", "x", "b", "y"]
    # @3: rels [1,0,1] -> 1 + 0 + 1/log2(3) = 1.6309; ideal [1,1,0] -> 2 -> 0.81546
    assert ndcg_any_at_k(ranked, {"a", "b"}, corpus, 3) == pytest.approx((1 + 1 / LOG2_3) / 2)
    # @2: rels [1,0] -> 1; ideal [1,1] -> 2 -> 0.5
    assert ndcg_any_at_k(ranked, {"a", "b"}, corpus, 2) == pytest.approx(0.5)
    # @1: 1/1
    assert ndcg_any_at_k(ranked, {"a", "b"}, corpus, 1) == 1.0
    # one relevant doc at rank 2: dcg 1, ideal 1 -> 1.0 (official quirk)
    assert ndcg_any_at_k(["x", "a"], {"a"}, ["a", "x"], 2) == 1.0
    # a relevant doc the system never returned still counts in the ideal: 0 / 1
    assert ndcg_any_at_k(["x"], {"a"}, ["a", "x"], 1) == 0.0
    # relevant but not in the corpus at all: ideal 0 -> 0 even when ranked first
    assert ndcg_any_at_k(["q"], {"q"}, ["a", "x"], 1) == 0.0


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_k(k):
    with pytest.raises(ValueError):
        recall_any_at_k(["a"], ["a"], k)
    with pytest.raises(ValueError):
        dcg([1], k)


def test_session_scores_widen_the_cutoff_to_k_sessions():
    corpus = ["s1:1", "s1:2", "s2:1", "s2:2", "s3:1"]
    ranked = ["s1:1", "s1:2", "s2:1", "s3:1"]
    # k=2: sessions [s1,s1,s2,s3]; top2 has 1 session -> widen to 3 = {s1,s2}.
    # recall_any/all: s2 in it -> 1, 1. ndcg@3: rels [0,0,1] -> 1/log2(3);
    # ideal: corpus sessions [s1,s1,s2,s2,s3] -> labels sorted [1,1,0] -> 2.
    s = session_scores_from_turns(ranked, ["s2:1"], corpus, 2)
    assert s["recall_any@2"] == 1.0 and s["recall_all@2"] == 1.0
    assert s["ndcg_any@2"] == pytest.approx((1 / LOG2_3) / 2)
    # k=1: top1 = {s1} already 1 session: s2 missing -> 0, 0, 0
    assert session_scores_from_turns(ranked, ["s2:1"], corpus, 1) == {
        "recall_any@1": 0.0,
        "recall_all@1": 0.0,
        "ndcg_any@1": 0.0,
    }
    # two gold turns in one session count once as a gold session
    s = session_scores_from_turns(ranked, ["s2:1", "s2:2"], corpus, 2)
    assert s["recall_all@2"] == 1.0


def test_session_scores_when_the_ranking_has_too_few_sessions():
    corpus = ["s1:1", "s1:2", "s2:1", "s2:2"]
    ranked = ["s1:1", "s1:2"]
    # k=2: never 2 sessions; the cut-off runs one past the corpus (5).
    # gold s2: dcg of [0,0] = 0; ideal over [1,1,0,0] = 2 -> 0; any 0, all 0
    assert session_scores_from_turns(ranked, ["s2:2"], corpus, 2) == {
        "recall_any@2": 0.0,
        "recall_all@2": 0.0,
        "ndcg_any@2": 0.0,
    }
    # gold s1: dcg [1,1] = 2, ideal [1,1,0,0]@5 = 2 -> 1.0
    s = session_scores_from_turns(ranked, ["s1:2"], corpus, 2)
    assert s == {"recall_any@2": 1.0, "recall_all@2": 1.0, "ndcg_any@2": 1.0}


def test_session_scores_with_empty_gold_and_lme_session_ids():
    # LongMemEval session ids hold underscores, no colons: session_of still splits at ':'
    corpus = ["answer_ab12_1:1", "sharegpt_x_0:1"]
    s = session_scores_from_turns(["sharegpt_x_0:1", "answer_ab12_1:1"], ["answer_ab12_1:1"], corpus, 1)
    assert s == {"recall_any@1": 0.0, "recall_all@1": 0.0, "ndcg_any@1": 0.0}
    s = session_scores_from_turns(["sharegpt_x_0:1"], [], corpus, 1)
    assert s == {"recall_any@1": 0.0, "recall_all@1": 1.0, "ndcg_any@1": 0.0}


@pytest.mark.parametrize(
    "qid, expected",
    [
        ("gpt4_2655b836_abs", True),
        ("e47becba_abs", True),
        ("e47becba", False),
        ("absent_minded", False),
        ("q_abstract", True),  # the official test is a substring test
    ],
)
def test_is_abstention(qid, expected):
    assert is_abstention(qid) is expected
