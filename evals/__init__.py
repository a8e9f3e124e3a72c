"""Evaluation: LoCoMo and LongMemEval question data, retrieval metrics (recall@k, LongMemEval's
official recall_any/recall_all/ndcg_any, Wilson intervals); runners in ``locomo`` and
``longmemeval``, the report format in ``report``, QA with a judge in ``qa``."""

from evals.locomo_data import (
    ADVERSARIAL_ANSWER,
    CATEGORY_NAMES,
    QAItem,
    load_locomo_questions,
    load_qa_jsonl,
    normalize_evidence,
)
from evals.metrics import (
    OFFICIAL_KS,
    is_abstention,
    mean,
    ndcg_any_at_k,
    ranked_turns,
    recall_all_at_k,
    recall_any_at_k,
    recall_at_k,
    session_of,
    session_recall_at_k,
    wilson_interval,
)
from memlane.ingest.longmemeval import LMEQuestion, load_longmemeval

__all__ = [
    "LMEQuestion",
    "OFFICIAL_KS",
    "is_abstention",
    "load_longmemeval",
    "ndcg_any_at_k",
    "recall_all_at_k",
    "recall_any_at_k",
    "ADVERSARIAL_ANSWER",
    "CATEGORY_NAMES",
    "QAItem",
    "load_locomo_questions",
    "load_qa_jsonl",
    "normalize_evidence",
    "mean",
    "ranked_turns",
    "recall_at_k",
    "session_of",
    "session_recall_at_k",
    "wilson_interval",
]
