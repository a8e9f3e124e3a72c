"""The recall area (``settings.recall``): fusion, the channels, the boosts, the cross-encoder and
the cold-bank policy. Its own module because nearly every default here was chosen by a
measurement, and each carries it (see :mod:`memlane.settings.areas` for the other areas)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from memlane.settings.areas import _Area

# How deep each recall channel searches per budget (the low/mid/high).
BUDGET_DEPTH = {"low": 100, "mid": 300, "high": 1000}
# RRF weight per channel. Semantic 0.6 (was 0.2, fit with MiniLM) re-derived for bge-small on
# the calibration halves of both dev sets, budget mid (benchmarks/recall_sweep.py, 27 Nov 2026):
# LoCoMo turn@10 / session@5 0.748 / 0.889 -> 0.756 / 0.886, LongMemEval dev60 nDCG@10 / turn
# all@10 0.811 / 0.767 -> 0.835 / 0.833; about neutral on MiniLM banks. Grid, rule, held-out
# halves: README, "bge-small, the default embedder".
DEFAULT_CHANNEL_WEIGHTS = {"lexical": 1.0, "semantic": 0.6, "graph": 0.2, "temporal": 0.5}


class RecallSettings(_Area):
    """Fusion, boosts and the graph channel."""

    # How the channels' rankings are fused (memlane/recall/fusion.py; the README's "Recall that
    # generalises" has the figures of each on LoCoMo and LongMemEval).
    fusion: Literal["rrf", "rsf", "conf_rrf"] = "rrf"
    rrf_k: int = Field(60, gt=0)
    # Semantic channel: weight of the query's similarity to the centroid of the unit's chunk
    # (the consecutive turns it was retained with). 0 turns it off. Applied by the in-process
    # index only (search_backend="memory"); a Milvus server search keeps no chunk centroids.
    chunk_prior: float = Field(0.5, ge=0.0, le=4.0)
    # Big banks: from this many live units the in-process dense search asks an HNSW graph for
    # candidates and re-scores them exactly (memlane/recall/ann.py has the measurements);
    # below it the search is exact. A bank crossing it builds the graph in a background
    # thread and answers exactly meanwhile.
    ann_threshold: int = Field(200_000, ge=1)
    # The budget of the per-bank state a process derives from the store (indexes, graphs:
    # memlane/derived.py), in every process that holds any (the service's replicas, the Ray
    # actors, the CLI): past either bound the least recently used banks are dropped (they
    # reload from the store when next used). Estimated at BYTES_PER_MEMORY per memory held,
    # plus the trees cached for the tree stage (memlane/tree/recall.py). In the Ingress the
    # bank bound is also Serve's multiplexer's table (serve/bank_host.py). No measurement
    # yet of the best size per kind of process.
    state_max_mb: int = Field(1024, ge=1)
    state_max_banks: int = Field(2000, ge=1)
    # The lexical channel scores a unit's text and its context (the turns beside it) as two
    # BM25 fields: text + this weight * context (memlane/recall/index.py). Measured: see
    # docs/results.md ("the learned ranker": the lexical context weight).
    lexical_context_weight: float = Field(1.0, ge=0.0, le=4.0)
    # What orders the candidates: "learned", the ranking model of the request's budget
    # (memlane/recall/learned.py; where none ships, the fused order), or "fused", the fused
    # order with the boosts and, where it reads, the cross-encoder's join. Figures: see
    # docs/results.md ("the learned ranker").
    ranker: Literal["learned", "fused"] = "learned"
    # Where the learned ranker's models (ranker-<budget>.txt) are read from; None: the shipped
    # ones (memlane/recall/models/). Evals set it to score a source with a model trained
    # without it (leave-one-source-out, docs/evaluation.md).
    ranker_models: Path | None = None
    # Read-your-writes: a recall waits at most this long for its bank's queued fact
    # resolution (run at once, its delay waived), so a retain that returned before the recall
    # has its supersessions seen; the wait is reported as timings_ms["facts_wait"]. Only where
    # facts resolve in the background (background.tree, on under `memlane serve`). The bound
    # has no measurement behind it yet beyond the recall-after-retain test (docs/recall.md).
    read_your_writes_s: float = Field(5.0, ge=0.0)
    # RRF weight per channel (DEFAULT_CHANNEL_WEIGHTS above; memlane/recall/fusion.py).
    channel_weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_CHANNEL_WEIGHTS))
    # Boosts (memlane/recall/boosts.py), measured one at a time on LoCoMo (recall on the same
    # banks, Nov 2026; turn recall@10 / session recall@5, default 0.7224 / 0.8756):
    # recency 0 vs 0.2: 0.7226 / 0.8755, but LoCoMo has no question date, so recency is flat
    # there; LongMemEval, where it can act, not yet measured.
    recency_alpha: float = Field(0.2, ge=0.0, le=1.0)
    # temporal 0 vs 0.2: 0.7217 / 0.8732, temporal questions 0.7557 vs 0.7697 / 0.9034 vs
    # 0.9128: it earns its place there; LongMemEval not yet measured.
    temporal_alpha: float = Field(0.2, ge=0.0, le=1.0)
    # Not yet measured: the proof boost and the recency half-life.
    proof_alpha: float = Field(0.1, ge=0.0, le=1.0)
    recency_half_life_days: float = Field(180.0, gt=0)
    # Graph channel: 1 vs 2 hops: LoCoMo 0.7221 / 0.8740 vs 0.7224 / 0.8756 (no measurable
    # work); LongMemEval not yet measured. Seeds and decay: not yet measured.
    graph_hops: int = Field(2, ge=1, le=4)
    graph_seeds: int = Field(10, gt=0)
    graph_decay: float = Field(0.5, gt=0.0, le=1.0)
    # Multi-hop decomposition (memlane/recall/decompose.py): a question that joins facts is
    # split into sub-queries, each recalled on its own and fused with the question's channels.
    # "auto": the consolidation role's LLM when configured, the rules otherwise; "rules" or
    # "llm" force one; RecallRequest.decompose overrides it per request. Off by default: the
    # rules split 86 of LoCoMo's 1,536 questions and changed multi-hop turn recall@10 by +0.000
    # [+0.000, +0.000] (0.399 both; session recall@5 +0.004 [+0.000, +0.011]) and nothing
    # elsewhere beyond the interval; on LongMemEval dev60 they split 3 of 60 and every
    # headline metric moved by +0.000 to +0.001 (Nov 2026, `memlane eval locomo|longmemeval
    # --systems memlane,nodecomp` with MEMLANE_RECALL__DECOMPOSE=rules). The LLM decomposer
    # is not measured (no model on the dev machine) and would add a model call to every recall.
    decompose: Literal["auto", "rules", "llm", "off"] = "off"
    # A recall on a bank this process does not hold yet (a cold bank: the first recall after a
    # start, or on a replica that never served it): "store" answers it from the store's own
    # searches while the bank loads in the background (no graph spreading and no chunk prior
    # for that answer; the result says cold=true), "wait" loads the bank first (3.4 s at 10k
    # memories). Figures: benchmarks/refresh_bench.py. The engine waits (an evaluation or a
    # CLI recall gets the full pipeline on its first call); the service (serve/) answers from
    # the store unless MEMLANE_RECALL__COLD_BANK says otherwise.
    cold_bank: Literal["store", "wait"] = "wait"
    # Cross-encoder reranking (memlane/recall/rerank.py), with models.reranker_model set; without
    # one, or at a budget whose size is 0, the fused order decides (the RRF-rank fallback).
    # How many of the fused best the cross-encoder reads per budget (0: none), beside each
    # channel's own best rerank_channel_best. Chosen on the calibration halves of both dev sets
    # together (LoCoMo conversations 0, 2, 4, 6, 8: 786 questions; LongMemEval dev60 at even
    # places: 30; MiniLM banks, budget high, Nov 27 2026, `benchmarks/recall_sweep.py`), after
    # the tree's gate stopped deleting what the cross-encoder ranked (issue 37):
    #   LoCoMo turn@10 / session@5; LME all@5 / nDCG@10 / turn all@10 / KU latest first
    #   none                 0.735 / 0.882; 0.967 / 0.814 / 0.800 / 3 of 5
    #   pool 10, w 0.5       0.752 / 0.884; -
    #   pool 20, w 0.5       0.763 / 0.886; 1.000 / 0.814 / 0.867 / 5 of 5  <- chosen
    #   pool 30, w 0.5       0.763 / 0.883; -
    #   pool 20, w 0.75      0.762 / 0.886; 1.000 / 0.814 / 0.867 / 5 of 5
    #   pool 20, w 1         0.768 / 0.891; 1.000 / 0.792 / 0.833 / 5 of 5  (LME nDCG below none)
    #   pool 10, w 1         0.758 / 0.886; 0.967 / 0.802 / 0.867 / 5 of 5
    #   pool 30, w 1         0.768 / 0.883; 0.967 / 0.779 / 0.867 / 5 of 5
    # The held-out halves and the cost are in the README ("Reranking with a cross-encoder").
    # Mid: off; the cost of the smallest useful pool does not fit its 150 ms p95 on 2 cores
    # (README); the Rerank deployment (serve.reranker="remote") is how it is bought at mid.
    rerank_low: int = Field(0, ge=0)
    rerank_mid: int = Field(0, ge=0)
    rerank_high: int = Field(20, ge=0)
    # Each channel's own best that join the pool beside the fused top N (not fusion's bias
    # alone): 0 instead of 3 gave LoCoMo 0.758 / 0.885 (w 0.5) and LME nDCG@10 0.802 (w 1).
    rerank_channel_best: int = Field(3, ge=0)
    # final = w * cross-encoder + (1 - w) * RRF-rank fallback over the pool, before the boosts
    # (the figures above; 0.25 gave LoCoMo 0.750 / 0.882).
    rerank_weight: float = Field(0.5, ge=0.0, le=1.0)
    # Characters of "date speaker: text" the cross-encoder reads per memory (~4 a token; the
    # model reads at most 512 tokens). At pool 20, w 1: LME 300 chars 1.000 / 0.788 / 0.833 / 4
    # of 5, 1,000 chars 1.000 / 0.792 / 0.833 / 5 of 5, 2,000 chars 1.000 / 0.797 / 0.800 / 5
    # of 5 at twice 1,000's cost; LoCoMo (w 0.5) 0.761 / 0.884 at 300 against 0.763 / 0.886.
    # 300 cut the answer clause of about half of LongMemEval's evidence turns. 700 since Dec 7
    # 2026: LongMemEval's long turns made budget high slow (recall is the cross-encoder's time).
    # Recall at high on dev60's first 7 banks (one pair a forward pass, a loaded 2-core machine;
    # p50 / p95 s; nDCG@10 learned / fused; session all@5 and turn all@10 1.000 in each):
    # 1,000 chars 2.7 / 5.2, 0.8551 / 0.8833; 700 2.0 / 3.0, 0.8541 / 0.8826; 500 1.1 / 2.9,
    # 0.8548 / 0.8815 (`benchmarks/rerank_cost.py`). The cross-encoder alone on each dev60
    # question's evidence beside its 12 BM25 best turns (59 questions, 9 with an evidence turn
    # over 500 chars), MRR / all@5 / all@5 of those 9: 1,000 0.724 / 0.763 / 1.000, 700 0.729 /
    # 0.780 / 1.000, 500 0.737 / 0.763 / 0.889 (`benchmarks/rerank_text.py`). LoCoMo, whose
    # turns are short, was not re-measured.
    rerank_text_chars: int = Field(700, gt=0)
    # A question about the present (no past cue, no time window): among the memories whose
    # cross-encoder score is at least the floor (it judges they answer) and within the margin
    # of each other, the newest first (margin 0 turns it off). LongMemEval dev60 knowledge-update
    # latest answer session first, weight 0.5: 4/10 without it, 6/10 with it (fused order 7/10).
    rerank_current_margin: float = Field(0.05, ge=0.0)
    rerank_current_floor: float = Field(0.5, ge=0.0, le=1.0)
    # Session spread (memlane/recall/ranking.py SpreadStage): at most session_cap memories of
    # one session among the first session_window places (0: off). Off by measurement (Nov 27
    # 2026, calibration halves as above): LoCoMo (budget mid) turn@10 0.730 -> 0.548 (cap 2 in
    # 10), 0.654 (cap 3), 0.717 (cap 1 in 5); LME (budget high) cap 2 in 10 nDCG@10 0.814 ->
    # 0.714 and turn all@10 0.800 -> 0.500 without the cross-encoder, 0.867 -> 0.733 with it.
    # Evidence turns sit together in a session more often than piled turns hide another one.
    session_cap: int = Field(0, ge=0)
    session_window: int = Field(10, gt=0)

    def rerank_size(self, budget: str) -> int:
        """How many fused candidates the cross-encoder reads at ``budget`` (0: none)."""
        return {"low": self.rerank_low, "mid": self.rerank_mid, "high": self.rerank_high}[budget]
