"""What the NER gate's speaker rule changes: entity mentions per turn with NER run on every turn
with an inner capital (the gate alone) vs also passing over the speakers' names (the extractor's
own speaker match finds those), on LoCoMo and the LongMemEval dev sample.

``python benchmarks/ner_gate.py [--locomo F] [--lme F] [--lme-questions N] [--samples K]``

Prints, per set, the turns NER runs on either way and the (name, label) mentions the speaker
rule loses, with ``--samples`` of them for reading (LoCoMo, 26 Nov 2026: 2,467 -> 742 turns, 183
of 2,675 mentions, the 25 read all noise such as a speaker tagged NORP).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"


def compare(name: str, banks: list[list], samples: int) -> dict:
    from memlane.retain.entity_types import speaker_label
    from memlane.retain.extract_rules import _norm, _speaker_mentions
    from memlane.retain.ner import KEPT_LABELS, SpacyNER, has_inner_capital

    ner = SpacyNER()
    out = {
        "set": name,
        "turns": 0,
        "ner_turns_gate": 0,
        "ner_turns_speaker_rule": 0,
        "mentions": 0,
        "lost": 0,
    }
    shown = 0
    for turns in banks:
        speakers = {_norm(t.speaker): t.speaker for t in turns}
        known = {k for k in speakers if " " not in k}
        labels = {_norm(t.speaker): speaker_label(t.speaker, t.metadata) for t in turns}
        texts = [t.text for t in turns]
        run = [i for i, t in enumerate(texts) if has_inner_capital(t)]
        ents: list[list[tuple[str, str]]] = [[] for _ in texts]
        for i, doc in zip(run, ner._nlp.pipe((texts[i] for i in run), batch_size=256)):
            ents[i] = [
                (e.text.strip(), e.label_) for e in doc.ents if e.label_ in KEPT_LABELS and e.text.strip()
            ]
        out["turns"] += len(turns)
        out["ner_turns_gate"] += len(run)
        for i, t in enumerate(turns):
            full = {(_norm(s), lab) for s, lab in ents[i]} | {
                (_norm(m.surface), m.label) for m in _speaker_mentions(t.text, speakers, labels, ents[i])
            }
            if has_inner_capital(t.text, known):
                out["ner_turns_speaker_rule"] += 1
                kept = full
            else:
                kept = {(_norm(m.surface), m.label) for m in _speaker_mentions(t.text, speakers, labels, [])}
            out["mentions"] += len(full)
            lost = full - kept
            out["lost"] += len(lost)
            if lost and shown < samples:
                shown += 1
                print(f"  {name} lost {sorted(lost)} | {t.text[:90]}", file=sys.stderr)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--locomo", type=Path, default=SHARED / "locomo10.json")
    p.add_argument("--lme", type=Path, default=SHARED / "longmemeval_s_dev60.json")
    p.add_argument("--lme-questions", type=int, default=12)
    p.add_argument("--samples", type=int, default=25)
    a = p.parse_args()
    from memlane.ingest import load_conversations
    from memlane.ingest.longmemeval import load_longmemeval

    rows = []
    if a.locomo.is_file():
        rows.append(compare("locomo", [c.turns for c in load_conversations(a.locomo)], a.samples))
    if a.lme.is_file():
        qs = load_longmemeval(a.lme, limit=a.lme_questions)
        rows.append(compare("longmemeval", [q.turns for q in qs], a.samples))
    if not rows:
        print("error: neither dataset found (pass --locomo / --lme)", file=sys.stderr)
        raise SystemExit(2)
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
