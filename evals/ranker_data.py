"""The learned ranker's rows: every dev set's questions recalled on banks the evals built, each
candidate's features (:func:`memlane.recall.features.candidate_features`, the same function
recall ranks with) and whether it holds the question's evidence.

The three dev sets, split the way every tuning here splits them: LoCoMo by conversation (even
places calibration, odd held), LongMemEval dev60 by question (even places calibration), the
answer set by its files; and the answer set's training histories (``train``), written apart
for training only. Banks come from ``memlane eval locomo|longmemeval|answers --data-dir
D`` (this module never retains): give each set's data directory.

For leave-one-source-out (training/ranker_loso.py) a *source* is every question one group of
writers wrote, unsplit (:func:`source_questions`): ``locomo``, ``longmemeval`` (a LongMemEval
file in the official schema), ``team`` (the answer set with its training histories), or any
other answer-set file (``evals/answers/sources/<name>.json`` by default), or ``beam`` (a BEAM
directory, :mod:`evals.beam_data`, always given as the path: its data stay outside the repository).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

SETS = ("locomo", "longmemeval", "answers")
TRAIN_DIR = Path(__file__).resolve().parent / "answers" / "train"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


@dataclass(frozen=True, slots=True)
class Question:
    """One question of a dev set, as the ranker's rows need it."""

    dataset: str
    id: str
    bank: str
    text: str
    reference: datetime | None
    relevant: frozenset[str]  # evidence turn ids
    kind: str


def locomo_questions(path: Path, split: str) -> Iterator[Question]:
    from evals.locomo_data import load_locomo_questions
    from memlane.ingest import load_conversations

    conversations = load_conversations(path, format="locomo")
    questions = load_locomo_questions(path, categories=(1, 2, 3, 4))
    for i, conv in enumerate(conversations):
        if split != "all" and (i % 2 == 0) != (split == "calibration"):
            continue
        for j, qa in enumerate(questions.get(conv.document_id, [])):
            if qa.evidence:
                yield Question(
                    "locomo",
                    f"{conv.document_id}#{j}",
                    conv.bank_id,
                    qa.question,
                    None,
                    frozenset(qa.evidence),
                    qa.category_name,
                )


def lme_questions(path: Path, split: str) -> Iterator[Question]:
    from memlane.ingest.longmemeval import load_longmemeval

    for i, q in enumerate(load_longmemeval(path)):
        if split != "all" and (i % 2 == 0) != (split == "calibration"):
            continue
        if q.abstention or not q.evidence_turns:
            continue
        yield Question(
            "longmemeval",
            q.question_id,
            q.bank_id,
            q.question,
            q.question_date,
            frozenset(q.evidence_turns),
            q.question_type,
        )


def answer_questions(split: str) -> Iterator[Question]:
    """The answer set's questions of ``split``: calibration, held, or ``train`` (the histories
    written for training alone, evals/answers/train/: never scored)."""
    from evals.answers_data import default_answer_paths

    paths = sorted(TRAIN_DIR.glob("*.json")) if split == "train" else default_answer_paths(split)
    return answer_file_questions(paths)


def answer_file_questions(paths: Sequence[Path], dataset: str = "answers") -> Iterator[Question]:
    """Every question of these answer-set files (the banks ``memlane eval answers FILE...``
    builds), as rows of ``dataset``."""
    from evals.answers import _banks
    from evals.answers_data import load_answer_set

    for path in paths:
        for h in load_answer_set(path):
            banks = _banks(h)
            for q in h.questions:
                yield Question(
                    dataset,
                    q.id,
                    banks[len(h.turns_before(q.asked_at))],
                    q.question,
                    q.asked_at,
                    q.expected,
                    q.kind,
                )


def lme_sample(pool: Path, dev: Path, extra: int, seed: int) -> list[dict]:
    """A LongMemEval training sample: ``dev``'s questions (file order) then ``extra`` more of
    ``pool`` (a file of the official schema, questions kept aside for evaluation outside the
    team already left out), drawn by ``random.Random(seed)`` over the sorted ids not in ``dev``,
    in draw order (so a prefix of the sample is a sample too)."""
    import json
    import random

    rows = json.loads(pool.read_text(encoding="utf-8"))
    dev_ids = [q["question_id"] for q in json.loads(dev.read_text(encoding="utf-8"))]
    by_id = {q["question_id"]: q for q in rows}
    missing = [q for q in dev_ids if q not in by_id]
    if missing:
        raise ValueError(f"{pool}: lacks {len(missing)} of {dev}'s questions, e.g. {missing[0]}")
    rest = sorted(set(by_id) - set(dev_ids))
    drawn = random.Random(seed).sample(rest, min(extra, len(rest)))
    return [by_id[q] for q in [*dev_ids, *drawn]]


def source_paths(name: str, path: Path | None = None) -> list[Path]:
    """The files of source ``name``: ``path`` when given, else its default (LoCoMo's and
    dev60's shared files, the team's answer files, ``evals/answers/sources/<name>.json``)."""
    if path is not None:
        return [path]
    if name == "locomo":
        return [SHARED / "locomo10.json"]
    if name == "longmemeval":
        return [SHARED / "longmemeval_s_dev60.json"]
    if name == "beam":
        raise ValueError(
            "source beam: give its directory (--file DIR: a BEAM conversation or a folder of them)"
        )
    from evals.answers_data import source_answer_paths

    return source_answer_paths(name)


def source_questions(name: str, path: Path | None = None) -> Iterator[Question]:
    """Every question of source ``name`` (see the module doc), unsplit."""
    paths = source_paths(name, path)
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"source {name}: {p} not found")
    if name == "locomo":
        return locomo_questions(paths[0], "all")
    if name == "longmemeval":
        return lme_questions(paths[0], "all")
    return answer_file_questions(paths, name)


@dataclass
class Rows:
    """Feature rows of one dev set: X, labels, the question each row belongs to (a group per
    question, in order), and per question its dataset, id and kind."""

    X: np.ndarray
    y: np.ndarray
    group: np.ndarray
    questions: list[Question]

    def save(self, path: Path) -> None:
        np.savez_compressed(
            path,
            X=self.X,
            y=self.y,
            group=self.group,
            qid=np.array([q.id for q in self.questions]),
            dataset=np.array([q.dataset for q in self.questions]),
            kind=np.array([q.kind for q in self.questions]),
        )


def collect(memory, questions: Sequence[Question], budget: str, progress=None) -> Rows:
    """Recall each question (budget ``budget``) and keep the candidates' feature rows as the
    ranker would see them."""
    from memlane.recall.learned import rows_of

    recaller = memory._parts.recaller
    Xs, ys, groups = [], [], []
    kept: list[Question] = []
    for q in questions:
        captured: dict = {}

        def observe(stage: str, state, _c=captured) -> None:
            if stage == "rerank":
                _c["rows"] = rows_of(state)

        recaller.observer = observe
        try:
            memory.recall(q.bank, q.text, max_tokens=512, budget=budget, reference_time=q.reference)
        finally:
            recaller.observer = None
        if progress is not None:
            progress()
        ids, X, fields = captured.get("rows", ([], None, {}))
        if not ids:
            continue
        y = np.array([1.0 if set(fields[c].get("source_turns") or ()) & q.relevant else 0.0 for c in ids])
        Xs.append(X)
        ys.append(y)
        groups.append(np.full(len(ids), len(kept)))
        kept.append(q)
    return Rows(np.vstack(Xs), np.concatenate(ys), np.concatenate(groups), kept)
