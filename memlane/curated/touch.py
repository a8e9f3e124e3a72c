"""When new facts touch a mental model, and when a query is about one.

Thresholds are cosines of the bundled embedder (all-MiniLM-L6-v2), measured on the question
"How does Priya like to travel?":

* a query about a model (MODEL_RECALL_COSINE = 0.80): its paraphrases scored 0.87-0.90
  ("How does Priya travel?", "What are Priya's travel preferences?", "What kind of trips does
  Priya enjoy?"); other questions about the same person 0.60-0.76 ("What is Priya's dog
  called?", "Where does Priya work?", "Where did Priya go on holiday?"); the same question
  about another person 0.57. Above 0.80 a model is the answer to the query, not a neighbour.
* a new fact that touches a model (TOUCH_COSINE = 0.45): facts that answer it scored 0.49-0.67
  ("Priya prefers trains to planes because she hates flying", "Priya booked a window seat on
  the train to Edinburgh"), unrelated facts 0.12-0.21; another fact about Priya 0.55. A
  needless refresh costs one recall and one consolidation; a missed one leaves the answer
  stale, so the threshold sits below the related facts, not above the unrelated ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MODEL_RECALL_COSINE = 0.80
TOUCH_COSINE = 0.45
# Nearest memories of a question looked at after a retain (and remembered as seen at each
# refresh): a new fact close enough to touch the model ranks among them.
TOUCH_CANDIDATES = 20


def touched(store: Any, bank_id: str, record: dict[str, Any]) -> bool:
    """Whether the model ``record`` needs a refresh: a memory it has not seen is now among its
    question's nearest with cosine >= TOUCH_COSINE, or a memory it cites is gone."""
    vector = record.get("_vector")
    if not vector:
        return True  # never answered (its first write failed part way)
    cited = list(dict.fromkeys(s["memory_id"] for s in record.get("sources") or ()))
    if cited and len(store.get_unit_fields(bank_id, cited, ["mentioned_at"])) < len(cited):
        return True
    seen = set(record.get("_seen") or ())
    hits = store.search_dense(bank_id, np.asarray(vector, dtype=np.float32), TOUCH_CANDIDATES, fields=[])
    return any(h.id not in seen and h.score >= TOUCH_COSINE for h in (hits[0] if hits else []))
