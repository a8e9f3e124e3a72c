"""Unit tests of the recall building blocks, against hand-computed values."""

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from memlane.interfaces import Hit, UnitFilter
from memlane.models.reranker import RRFRankReranker
from memlane.recall import boosts
from memlane.recall.fusion import confidence, fuse, rrf, rsf
from memlane.recall.packing import pack
from memlane.records import FactType
from memlane.units import matches


def test_rrf_sums_reciprocal_ranks_with_k():
    fused = dict(rrf({"a": ["x", "y"], "b": ["y", "z"]}, k=60))
    assert fused["x"] == pytest.approx(1 / 61)
    assert fused["y"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["z"] == pytest.approx(1 / 62)


def test_rrf_orders_by_score_then_id():
    order = [d for d, _ in rrf({"a": ["b1", "a1"], "b": ["a1", "b1"]}, k=60)]
    assert order == ["a1", "b1"]  # equal scores: id order decides


def test_pack_skips_items_that_no_longer_fit_but_keeps_smaller_ones():
    assert pack([5, 4, 3, 1], budget=9) == [0, 1]
    assert pack([5, 6, 3, 1], budget=9) == [0, 2, 3]
    assert pack([10], budget=9) == []


def test_rrf_fallback_spreads_scores_from_one_to_point_one():
    scores = RRFRankReranker().rerank("q", ["a", "b", "c", "d"], [0, 1, 2, 3])
    assert scores == pytest.approx([1.0, 0.7, 0.4, 0.1])
    assert RRFRankReranker().rerank("q", ["a"], [0]) == [1.0]


def test_boost_factor_is_centred_and_bounded():
    assert boosts.factor(0.2, 0.5) == pytest.approx(1.0)
    assert boosts.factor(0.2, 1.0) == pytest.approx(1.1)
    assert boosts.factor(0.2, 0.0) == pytest.approx(0.9)
    assert boosts.factor(0.2, 7.0) == pytest.approx(1.1)


def test_recency_halves_per_half_life():
    day = 86400.0
    assert boosts.recency(1000 * day - 30 * day, 1000 * day, 30) == pytest.approx(0.5)
    assert boosts.recency(1000 * day - 2 * day, 1000 * day, 30) > 0.9
    assert boosts.recency(None, 0, 30) == 0.5


def test_a_memory_dated_after_the_reference_gets_no_recency_boost():
    day = 86400.0
    ref = 1000 * day
    # said after the reference time
    assert boosts.recency(ref + day, ref, 30) == 0.5
    # said yesterday, about an event next year: neutral, not the full boost
    assert boosts.recency(ref - day, ref, 30, occurred_start=ref + 200 * day) == 0.5
    # said yesterday about yesterday: boosted
    assert boosts.recency(ref - day, ref, 30, occurred_start=ref - day) > 0.9
    assert boosts.factor(0.2, boosts.recency(ref - day, ref, 30, occurred_start=ref + 200 * day)) == 1.0


def test_proof_boost_is_log_scaled_and_neutral_without_support_spread():
    assert boosts.proof(4, 4) == pytest.approx(1.0)
    assert boosts.proof(1, 4) == pytest.approx(math.log(2) / math.log(5))
    assert boosts.proof(1, 1) == 0.5


def _fields(**kw):
    base = {
        "fact_type": "world",
        "tags": [],
        "mentioned_at": 100,
        "valid_from": 100,
        "invalid_at": None,
        "document_id": "d",
    }
    base.update(kw)
    return base


def test_filter_matches_types_tags_and_validity():
    assert matches(_fields(), UnitFilter(fact_types=[FactType.world]))
    assert not matches(_fields(), UnitFilter(fact_types=[FactType.opinion]))
    assert matches(_fields(tags=["a", "b"]), UnitFilter(tags=["b", "c"]))
    assert not matches(_fields(tags=["a"]), UnitFilter(tags=["a", "c"], tags_match="all"))
    assert not matches(_fields(invalid_at=150), UnitFilter())
    as_of = datetime.fromtimestamp(120, UTC)
    assert matches(_fields(invalid_at=150), UnitFilter(as_of=as_of))
    assert not matches(_fields(mentioned_at=130, valid_from=130), UnitFilter(as_of=as_of))
    assert not matches(_fields(document_id="x"), UnitFilter(document_id="d"))


def test_rrf_channel_weights_scale_each_channel():
    fused = dict(
        rrf({"lexical": ["x"], "semantic": ["y", "x"]}, k=60, weights={"lexical": 1.0, "semantic": 0.2})
    )
    assert fused["x"] == pytest.approx(1 / 61 + 0.2 / 62)
    assert fused["y"] == pytest.approx(0.2 / 61)


def _hits(pairs):
    return [Hit(id=i, score=s) for i, s in pairs]


def test_rsf_normalises_each_channel_to_its_own_range():
    fused = dict(
        rsf(
            {
                "lexical": _hits([("x", 12.0), ("y", 7.0), ("z", 2.0)]),
                "semantic": _hits([("z", 0.9), ("x", 0.5)]),
            },
            {"lexical": 1.0, "semantic": 0.5},
        )
    )
    assert fused == pytest.approx({"x": 1.0 + 0.0, "y": 0.5, "z": 0.0 + 0.5})
    # One hit (or all alike) counts fully rather than dividing by zero.
    assert dict(rsf({"lexical": _hits([("x", 3.0)])}, {})) == {"x": 1.0}


def test_confidence_is_the_z_score_of_the_best_hit():
    s = [5.0, 1.0, 1.0, 1.0]
    assert confidence(s) == pytest.approx((5 - 2) / np.std(s))
    assert confidence([1.0, 1.0, 1.0]) == 0.0
    assert confidence([2.0, 1.0]) == 0.0


def test_fuse_weights_rrf_by_channel_confidence():
    peaked = _hits([("a", 10.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)])
    flat = _hits([("d", 1.0), ("c", 1.0), ("b", 1.0), ("a", 1.0)])
    hits = {"lexical": peaked, "semantic": flat}
    plain = fuse(hits, "rrf", 60, {})
    # Mirrored rankings: under plain RRF the two ends ("a" first in one, "d" in the other) tie.
    assert {plain[0][0], plain[1][0]} == {"a", "d"}
    assert plain[0][1] == pytest.approx(plain[1][1])
    conf = fuse(hits, "conf_rrf", 60, {})
    assert conf[0][0] == "a"  # the flat channel gets no say
    assert conf[0][1] == pytest.approx(confidence([h.score for h in peaked]) / 61)
    with pytest.raises(ValueError, match="unknown fusion 'nope'"):
        fuse(hits, "nope", 60, {})


def test_lexical_analysis_drops_stop_words_and_stems():
    from memlane.stores.lexical import analyze

    assert analyze("What pet did Noor ADOPT?") == "pet noor adopt"
    assert analyze("She adopted two puppies") == "adopt two puppi"
    assert analyze("what did you do") == ""
