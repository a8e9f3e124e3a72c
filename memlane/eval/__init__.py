"""Evaluation: LoCoMo question data and retrieval metrics (recall@k, Wilson intervals)."""

from memlane.eval.locomo_data import (
    ADVERSARIAL_ANSWER,
    CATEGORY_NAMES,
    QAItem,
    load_locomo_questions,
    load_qa_jsonl,
    normalize_evidence,
)
from memlane.eval.metrics import (
    mean,
    ranked_turns,
    recall_at_k,
    session_of,
    session_recall_at_k,
    wilson_interval,
)

__all__ = [
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
