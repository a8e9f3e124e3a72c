"""The answer set's reader: small everyday histories, each with questions naming the turns that
state their answer (``evals/answers/README.md`` says how the set was written and split).

A history is one document of :class:`~memlane.records.Turn` s (the engine knows no dataset:
this reader turns the set's format into turns). Its questions carry the time they are asked
(``asked_at``): a question asked between sessions sees only the turns said before it, so the
eval retains each history's prefix up to it (:func:`AnswerHistory.turns_before`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memlane.records import Turn

# The kinds of question the set holds (its README describes each).
KINDS = (
    "now",
    "before",
    "as_of",
    "date_yearless",
    "date_relative",
    "plan",
    "fact",
    "count",
    "multi",
    "reply_answer",
    "assistant_said",
)
SPLITS = ("calibration", "held")
ANSWERS_DIR = Path(__file__).resolve().parent / "answers"
# Answer sets written apart from the team's, one file per group of writers: each a source of its
# own for leave-one-source-out (docs/evaluation.md).
SOURCES_DIR = ANSWERS_DIR / "sources"
TEAM = "team"


@dataclass(frozen=True, slots=True)
class AnswerQuestion:
    """A question, when it is asked, and the turns (engine turn ids) that state its answer."""

    id: str
    question: str
    asked_at: datetime
    kind: str
    answer: str
    expected: frozenset[str]
    traps: dict[str, str]  # turn id -> why a naive ranking would put it first


@dataclass(slots=True)
class AnswerHistory:
    """One user's chats with an assistant, as one document of turns, and its questions."""

    id: str
    user: str
    assistant: str
    turns: list[Turn]
    questions: list[AnswerQuestion]

    def turns_before(self, when: datetime) -> list[Turn]:
        """The turns said at or before ``when`` (what the bank holds when a question is asked)."""
        return [t for t in self.turns if t.timestamp <= when]


def turn_id(raw: str) -> str:
    """The engine turn id of a set turn id ``<history>-s<session>-<n>``: ``<history>-s<session>:<n>``
    (the ``<session>:<turn>`` form the evals' session metrics read)."""
    session, sep, n = raw.rpartition("-")
    if not sep or not session or not n.isdigit():
        raise ValueError(f"turn id {raw!r} is not of the form <history>-s<session>-<n>")
    return f"{session}:{n}"


def _time(value: Any, what: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{what}: expected an ISO 8601 time, got {value!r}")
    try:
        t = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if t.tzinfo is None:
        raise ValueError(f"{what}: {value!r} has no time zone")
    return t


def _history(raw: dict[str, Any], where: str) -> AnswerHistory:
    hid = raw["id"]
    turns: list[Turn] = []
    for s in raw["sessions"]:
        for index, t in enumerate(s["turns"]):
            turns.append(
                Turn(
                    document_id=hid,
                    session_id=s["id"],
                    turn_id=turn_id(t["id"]),
                    index=index,
                    speaker=t["speaker"],
                    text=t["text"],
                    timestamp=_time(t["timestamp"], f"{where}: turn {t['id']}"),
                )
            )
    known = {t.turn_id for t in turns}
    said = {t.turn_id: t.timestamp for t in turns}
    questions = []
    for q in raw["questions"]:
        what = f"{where}: question {q['id']}"
        if q["kind"] not in KINDS:
            raise ValueError(f"{what}: kind {q['kind']!r} is not one of {', '.join(KINDS)}")
        expected = frozenset(turn_id(x) for x in q["expected"])
        traps = {turn_id(k): v for k, v in (q.get("traps") or {}).items()}
        missing = sorted((expected | set(traps)) - known)
        if not expected or missing:
            raise ValueError(f"{what}: expected turns {missing or 'none'} not in the history")
        asked = _time(q["asked_at"], what)
        if any(said[x] > asked for x in expected):
            raise ValueError(f"{what}: an expected turn is said after the question is asked")
        questions.append(
            AnswerQuestion(
                q["id"], q["question"], asked, q["kind"], str(q.get("answer", "")), expected, traps
            )
        )
    return AnswerHistory(hid, raw["user"], raw["assistant"], turns, questions)


def load_answer_set(path: Path) -> list[AnswerHistory]:
    """The histories of one answer-set file (``{"histories": [...]}``), checked: every
    expected or trap turn exists and is said before its question. Raises ValueError naming
    the file and the problem. A BEAM directory is read by :func:`evals.beam_data.load_beam`
    (a source for leave-one-source-out, read as answer-set histories)."""
    path = Path(path)
    if path.is_dir():
        from evals.beam_data import load_beam

        return load_beam(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("histories"), list):
        raise ValueError(f"{path}: expected an object with a 'histories' list")
    out = []
    for raw in doc["histories"]:
        try:
            out.append(_history(raw, str(path)))
        except KeyError as exc:
            raise ValueError(f"{path}: history {raw.get('id', '?')}: missing field {exc}") from None
    return out


def default_answer_paths(split: str) -> list[Path]:
    """The repository's answer-set files of ``split`` (calibration, held or all)."""
    base = ANSWERS_DIR
    if split == "all":
        return [base / f"{s}.json" for s in SPLITS]
    if split not in SPLITS:
        raise ValueError(f"--split must be calibration, held or all, not {split!r}")
    return [base / f"{split}.json"]


def source_answer_paths(name: str) -> list[Path]:
    """The answer-set files of source ``name``: ``team``, the team's both halves and its
    training histories (evals/answers/train/); any other name, ``evals/answers/sources/<name>.json``.
    Raises ValueError for a name that is not a plain file stem."""
    if name == TEAM:
        return [*default_answer_paths("all"), *sorted((ANSWERS_DIR / "train").glob("*.json"))]
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"source {name!r}: expected team or the stem of a file in {SOURCES_DIR}")
    return [SOURCES_DIR / f"{name}.json"]
