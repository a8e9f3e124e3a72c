"""Train the learned slot extractor's weights for one embedder (memlane/facts/classifier.py,
memlane/facts/learned.py) and choose its thresholds.

* Training data: evals/statements/train/*.jsonl only (written apart from the statement set;
  every line has a ``topic``: the family the turn is about, ``none`` for chit-chat).
* Topic: one logistic regression per family over the vector of ``"Speaker: text"``; a turn is
  about a family when its topic names it or one of its facts is of it.
* Gate: one logistic regression over the vector and the turn's cues; positive when the turn
  states a fact of the speaker's own (kind ``positive``).
* Candidates: one logistic regression per family over memlane/facts/learned.py's FEATURES, on
  the candidates of the training turns, with the topic and gate probabilities cross-fitted
  (5 folds) so that the scorer does not learn to trust overfitted ones. A candidate is positive
  when its value matches a labelled fact of its family (evals/statements.py ``values_match``).
* Thresholds, per family, on the statement set's *calibration* half (never the held half): the
  lowest score from which every higher cut keeps precision >= the target (0.95), when some cut
  does with at least 3 facts; otherwise the cut with the best F1 (those facts are hints only).

Run: ``python -m training.train_slots --embedder bge-small`` (and ``--embedder minilm``);
writes ``memlane/facts/weights/slots-<embedder>.npz`` and prints the calibration figures.
scikit-learn is needed here only; the engine reads the weights with numpy.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from evals.statements import Statement, default_statement_paths, family, load_statements, values_match
from memlane.facts.cues import CUES, turn_cues
from memlane.facts.families import FAMILIES
from memlane.facts.learned import FEATURES, LearnedExtractor, SpacyEntities, candidate_features
from memlane.facts.patterns import find_facts
from memlane.facts.slot_weights import FORMAT, SlotWeights, weights_path
from memlane.facts.values import candidates

TRAIN_DIR = Path(__file__).resolve().parent.parent / "evals" / "statements" / "train"
TARGET = 0.95  # the precision a family must keep to be trusted (memlane/facts/trust.py)
C_TOPIC, C_GATE, C_CAND = 16.0, 0.3, 1.0  # inverse regularisation: calibration AP 0.791 (4, 1, 1: 0.784)


def _train_rows(paths: Sequence[Path]) -> tuple[list[Statement], list[str]]:
    statements, topics = [], []
    for path in paths:
        statements += load_statements(path)
        topics += [json.loads(line)["topic"] for line in path.read_text().splitlines() if line.strip()]
    return statements, topics


def _embed(embedder, statements: Sequence[Statement]) -> np.ndarray:
    v = np.asarray(embedder.embed([f"{s.speaker}: {s.text}" for s in statements]), dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _fit(x: np.ndarray, y: np.ndarray, c: float):
    from sklearn.linear_model import LogisticRegression

    if y.min() == y.max():  # a family without a positive: a constant model
        m = LogisticRegression()
        m.coef_ = np.zeros((1, x.shape[1]))
        m.intercept_ = np.array([-8.0 if y.max() == 0 else 8.0])
        m.classes_ = np.array([0, 1])
        return m
    return LogisticRegression(C=c, max_iter=5000).fit(x, y)


def _topic_gate(xv, xc, y_topic, y_gate):
    topic = [_fit(xv, y_topic[:, j], C_TOPIC) for j in range(len(FAMILIES))]
    gate = _fit(np.concatenate([xv, xc], axis=1), y_gate, C_GATE)
    return topic, gate


def _predict_tg(models, xv, xc):
    topic, gate = models
    pt = np.stack([m.predict_proba(xv)[:, 1] for m in topic], axis=1)
    pg = gate.predict_proba(np.concatenate([xv, xc], axis=1))[:, 1]
    return pt, pg


def _turn_inputs(topic: np.ndarray, gate: np.ndarray) -> np.ndarray:
    from memlane.facts.slot_weights import turn_inputs

    return turn_inputs(topic, gate)


def _candidate_rows(statements, entities, pt, pg):
    feats, labels, fams = [], [], []
    for i, (s, ents) in enumerate(zip(statements, entities)):
        cands = candidates(s.text, ents)
        if not cands:
            continue
        x = candidate_features(s.text, cands, pt[i], float(pg[i]), find_facts(s.text, s.speaker))
        for c, row in zip(cands, x):
            feats.append(row)
            fams.append(FAMILIES.index(c.family))
            labels.append(any(family(sl) == c.family and values_match(sl, c.value, v) for sl, v in s.facts))
    return np.asarray(feats), np.asarray(labels, dtype=int), np.asarray(fams)


def _fit_candidates(x: np.ndarray, y: np.ndarray, fam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One logistic regression over every family's candidates with each feature twice, shared
    and per family (feature augmentation): what a cue means ("my brother", "if") is learned
    from all families' rows, what a family adds from its own. Collapsed to per-family weights
    (F, K) and intercepts (F,)."""
    n_f, k = len(FAMILIES), x.shape[1]
    onehot = np.eye(n_f, dtype=np.float32)[fam]
    aug = np.concatenate([x, (x[:, None, :] * onehot[:, :, None]).reshape(len(x), -1), onehot], axis=1)
    m = _fit(aug, y, C_CAND)
    w = m.coef_[0]
    shared, per_family, bias = w[:k], w[k : k + n_f * k].reshape(n_f, k), w[k + n_f * k :]
    return (shared[None, :] + per_family).astype(np.float32), (m.intercept_[0] + bias).astype(np.float32)


def _average_precision(scored: list[tuple[float, bool]], n_labelled: int) -> float:
    """Precision averaged over the labelled facts found, in score order (a missed one counts 0)."""
    ordered = sorted(scored, key=lambda x: -x[0])
    right, total = 0, 0.0
    for n, (_, ok) in enumerate(ordered, start=1):
        if ok:
            right += 1
            total += right / n
    return round(total / max(n_labelled, 1), 4)


def _threshold(scored: list[tuple[float, bool]], n_labelled: int) -> tuple[float, bool]:
    """(cut, whether the target precision is kept from it upward) for one family's top
    predictions on calibration: (score, right) per turn that has a candidate."""
    if not scored:
        return 0.5, False
    ordered = sorted(scored, key=lambda x: -x[0])
    right = np.cumsum([r for _, r in ordered])
    n = np.arange(1, len(ordered) + 1)
    prec = right / n
    ok = [k for k in range(len(ordered)) if k + 1 >= 3 and all(prec[j] >= TARGET for j in range(2, k + 1))]
    if ok and prec[2] >= TARGET:
        k = max(ok)
        return float(ordered[k][0]), True
    f1 = 2 * right / (n + max(n_labelled, 1))
    k = int(np.argmax(f1))
    return float(max(ordered[k][0], 0.5)), False


def train(embedder_name: str, out: Path | None = None) -> dict:
    from memlane.models.embedder import build_embedder
    from memlane.settings import Settings

    t0 = time.perf_counter()
    train_set, topics = _train_rows(sorted(TRAIN_DIR.glob("*.jsonl")))
    calib = [s for p in default_statement_paths("calibration") for s in load_statements(p)]
    embedder = build_embedder(Settings(), embedder_name)
    xv, xv_cal = _embed(embedder, train_set), _embed(embedder, calib)
    xc = np.stack([turn_cues(s.text) for s in train_set])
    y_topic = np.array(
        [
            [t == f or any(family(sl) == f for sl, _ in s.facts) for f in FAMILIES]
            for s, t in zip(train_set, topics)
        ],
        dtype=int,
    )
    y_gate = np.array([s.kind == "positive" for s in train_set], dtype=int)
    entities = SpacyEntities()
    ents = entities([s.text for s in train_set])

    # Cross-fitted topic and gate probabilities for the candidate scorer's training rows.
    rng = np.random.default_rng(20261128)
    folds = rng.permutation(len(train_set)) % 5
    pt, pg = np.zeros(y_topic.shape), np.zeros(len(train_set))
    for k in range(5):
        tr, te = folds != k, folds == k
        pt[te], pg[te] = _predict_tg(_topic_gate(xv[tr], xc[tr], y_topic[tr], y_gate[tr]), xv[te], xc[te])
    # The turn-level probability recall reads: the topic and the gate, combined and calibrated
    # per family against "the turn states the speaker's own value of it" (cross-fitted too).
    y_fact = np.array(
        [[any(family(sl) == f for sl, _ in s.facts) for f in FAMILIES] for s in train_set], dtype=int
    )
    turn = [_fit(_turn_inputs(pt[:, j], pg), y_fact[:, j], 1.0) for j in range(len(FAMILIES))]
    x, y, fam = _candidate_rows(train_set, ents, pt, pg)
    cand_w, cand_b = _fit_candidates(x, y, fam)
    topic, gate = _topic_gate(xv, xc, y_topic, y_gate)

    arrays = {
        "format": np.array(FORMAT),
        "embedder": np.array(embedder_name),
        "families": np.array(FAMILIES),
        "cues": np.array(CUES),
        "features": np.array(FEATURES),
        "topic_w": np.stack([m.coef_[0] for m in topic]).astype(np.float32),
        "topic_b": np.array([m.intercept_[0] for m in topic], dtype=np.float32),
        "gate_w": gate.coef_[0].astype(np.float32),
        "gate_b": np.array(gate.intercept_[0], dtype=np.float32),
        "turn_w": np.stack([m.coef_[0] for m in turn]).astype(np.float32),
        "turn_b": np.array([m.intercept_[0] for m in turn], dtype=np.float32),
        "cand_w": cand_w,
        "cand_b": cand_b,
        "thresholds": np.full(len(FAMILIES), 0.5, dtype=np.float32),
        "target_met": np.zeros(len(FAMILIES), dtype=bool),
        "trained_on": np.array(f"{len(train_set)} statements of evals/statements/train/"),
    }
    # Thresholds on the calibration half, with the extractor as it will run.
    clf = SlotWeights(
        embedder_name, arrays["topic_w"], arrays["topic_b"], arrays["gate_w"], float(arrays["gate_b"]), arrays
    )
    # What recall reads: the turn-level probability at 0.5, per family (slot only, no value).
    p_turn = clf.turn_probabilities([s.text for s in calib], xv_cal)
    y_cal = np.array(
        [[any(family(sl) == f for sl, _ in s.facts) for f in FAMILIES] for s in calib], dtype=bool
    )
    turn_level = {}
    for j, f in enumerate(FAMILIES):
        said = p_turn[:, j] >= 0.5
        turn_level[f] = {"predicted": int(said.sum()), "right": int((said & y_cal[:, j]).sum()),
                         "labelled": int(y_cal[:, j].sum())}  # fmt: skip
    from memlane.facts.classifier import SlotClassifier

    p_best = SlotClassifier(clf).probabilities([f"{s.speaker}: {s.text}" for s in calib], xv_cal)
    for j, f in enumerate(FAMILIES):
        said = p_best[:, j] >= 0.5
        turn_level[f].update(
            best_candidate_predicted=int(said.sum()), best_candidate_right=int((said & y_cal[:, j]).sum())
        )
    extractor = LearnedExtractor(clf, entities)
    scored = extractor.score([s.text for s in calib], [s.speaker for s in calib], xv_cal)
    report = {}
    for j, f in enumerate(FAMILIES):
        tops = []
        for s, sc in zip(calib, scored):
            mine = [x for x in sc if x.candidate.family == f]
            if mine:
                best = max(mine, key=lambda x: x.score)
                tops.append(
                    (
                        best.score,
                        any(
                            family(sl) == f and values_match(sl, best.candidate.value, v) for sl, v in s.facts
                        ),
                    )
                )
        labelled = sum(family(sl) == f for s in calib for sl, _ in s.facts)
        cut, met = _threshold(tops, labelled)
        arrays["thresholds"][j], arrays["target_met"][j] = cut, met
        kept = [r for sc, r in tops if sc >= cut]
        report[f] = {"threshold": round(cut, 4), "target_met": met, "predicted": len(kept), "right": sum(kept),
                     "labelled": labelled, "average_precision": _average_precision(tops, labelled)}  # fmt: skip
    path = out or weights_path(embedder_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return {
        "weights": str(path),
        "seconds": round(time.perf_counter() - t0, 1),
        "calibration": report,
        "calibration_turn_level": turn_level,
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--embedder", default="bge-small", help="bge-small (the default) or minilm")
    ap.add_argument("--out", type=Path, default=None, help="weights file (default: the shipped one)")
    args = ap.parse_args(argv)
    print(json.dumps(train(args.embedder, args.out), indent=1))


if __name__ == "__main__":
    main()
