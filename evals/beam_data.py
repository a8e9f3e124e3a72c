"""BEAM's reader: "Beyond a Million Tokens" (github.com/mohammadtavakoli78/BEAM), long chats of
one user with an assistant, each with probing questions whose ``source_chat_ids`` name the
messages that hold the evidence. A source of its own for leave-one-source-out (its writers are
neither LoCoMo's, LongMemEval's nor the answer sets'); docs/evaluation.md says how to fetch it.

The layout read is the repository's ``chats/<size>/<n>/``: ``chat.json`` (a list of batches,
each ``{"batch_number", "turns": [[message, ...], ...]}``, a message ``{"role", "id",
"content"}`` and on a batch's first question its ``time_anchor``, "March-15-2024") and
``probing_questions/probing_questions.json`` (``{kind: [question, ...]}``). Where
``chat_trunecated.json`` (sic) is there, it is the chat BEAM's own answer generation reads and
the one its questions' ids stay within, so it is read instead.

Each conversation becomes one :class:`~evals.answers_data.AnswerHistory` (the answer sets'
record, so ``memlane eval answers DIR`` and ``train_ranker dump --source beam --file DIR`` take
it as they take an answer-set file): a batch is a session, dated by its time anchor (every turn
of a batch at that date, as LongMemEval's sessions are read), a message is a turn (speaker
``user`` or ``assistant``), and every question is asked at the last turn's date, after the
whole chat. The evidence of a question is its ``source_chat_ids``, except for knowledge
updates: their ``updated_info`` is the answer and ``original_info`` the superseded value (a
trap, as the answer sets name theirs). Abstention questions name no evidence and are left out,
as is any other question with an empty ``source_chat_ids`` (a few in the 100K chats).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evals.answers_data import AnswerHistory, AnswerQuestion
from memlane.records import Turn
from memlane.records.limits import MAX_TEXT_BYTES

CHAT_FILES = ("chat_trunecated.json", "chat.json")
QUESTIONS_FILE = Path("probing_questions") / "probing_questions.json"
# The kinds whose questions name no evidence turn (nothing for a ranking to find).
NO_EVIDENCE = frozenset({"abstention"})
# Knowledge updates: the answer is the update; the original value is what a stale memory says.
UPDATED, ORIGINAL = "updated_info", "original_info"
# The generator's position marker ending most user messages ("... ->-> 2,3"): the batch and
# question numbers, kept as the message's "index" field, not words the user said.
_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")
_ANSWER_KEYS = ("answer", "ideal_answer", "ideal_response", "ideal_summary", "expected_compliance")


def is_beam(path: Path) -> bool:
    """Whether ``path`` is a BEAM directory: one conversation (a chat file in it) or a folder
    of them."""
    path = Path(path)
    return path.is_dir() and (_chat_file(path) is not None or bool(_conversation_dirs(path)))


def load_beam(path: Path) -> list[AnswerHistory]:
    """The conversations of ``path``: one conversation directory, or a folder of them (its
    subdirectories holding a chat, in numeric order: a folder of links to some of a size's
    conversations bounds a run). Raises ValueError naming the file and the problem."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"{path}: not a BEAM directory")
    if _chat_file(path) is not None:
        return [read_conversation(path)]
    dirs = _conversation_dirs(path)
    if not dirs:
        raise ValueError(f"{path}: no BEAM conversation ({' or '.join(CHAT_FILES)}) in it or below it")
    return [read_conversation(d) for d in dirs]


def history_id(directory: Path) -> str:
    """``beam-<size>-<n>`` from the conversation's own folder (``chats/100K/3`` ->
    ``beam-100K-3``), links resolved, so a folder of links names the same banks."""
    real = Path(directory).resolve()
    raw = f"beam-{real.parent.name}-{real.name}"
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", raw)


def read_conversation(directory: Path) -> AnswerHistory:
    """One BEAM conversation as an answer-set history (see the module doc)."""
    directory = Path(directory)
    chat_path = _chat_file(directory)
    if chat_path is None:
        raise ValueError(f"{directory}: no {' or '.join(CHAT_FILES)}")
    hid = history_id(directory)
    turns, by_id = _turns(hid, _read_json(chat_path), chat_path)
    asked = max(t.timestamp for t in turns)
    questions_path = directory / QUESTIONS_FILE
    probing = _read_json(questions_path)
    if not isinstance(probing, dict):
        raise ValueError(f"{questions_path}: expected an object of question lists by kind")
    questions = []
    for kind, items in probing.items():
        if kind in NO_EVIDENCE:
            continue
        if not isinstance(items, list):
            raise ValueError(f"{questions_path}: {kind}: expected a list of questions")
        for i, raw in enumerate(items):
            where = f"{questions_path}: {kind}[{i}]"
            q = _question(f"{hid}-{kind}-{i}", kind, raw, by_id, asked, where)
            if q is not None:
                questions.append(q)
    return AnswerHistory(hid, "user", "assistant", turns, questions)


def _question(
    qid: str, kind: str, raw: Any, by_id: dict[int, str], asked: datetime, where: str
) -> AnswerQuestion | None:
    """The question, or None where it names no evidence message (left out, as LoCoMo's
    questions without evidence are: no ranking can be scored on it)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("question"), str):
        raise ValueError(f"{where}: expected an object with a 'question' string")
    ids = raw.get("source_chat_ids")
    traps: dict[str, str] = {}
    if kind == "knowledge_update" and isinstance(ids, dict) and UPDATED in ids:
        expected = _turn_ids(ids[UPDATED], by_id, where)
        traps = dict.fromkeys(
            _turn_ids(ids.get(ORIGINAL, []), by_id, where) - expected, "the value before the update"
        )
    else:
        expected = _turn_ids(ids, by_id, where)
    if not expected:
        return None
    answer = next((raw[k] for k in _ANSWER_KEYS if isinstance(raw.get(k), str)), "")
    return AnswerQuestion(qid, raw["question"], asked, kind, answer, frozenset(expected), traps)


def _turn_ids(value: Any, by_id: dict[int, str], where: str) -> set[str]:
    """The turn ids of the message ids in ``value`` (an id, a list, or an object of lists)."""
    if value is None:
        return set()
    if isinstance(value, dict | list):
        out: set[str] = set()
        for v in value.values() if isinstance(value, dict) else value:
            out |= _turn_ids(v, by_id, where)
        return out
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: source_chat_ids: {value!r} is not a message id")
    if value not in by_id:
        raise ValueError(f"{where}: source_chat_ids: message {value} is not in the chat")
    return {by_id[value]}


def _turns(hid: str, batches: Any, path: Path) -> tuple[list[Turn], dict[int, str]]:
    """The chat's turns, and each message id's turn id (``<hid>-b<batch>:<message id>``)."""
    if not isinstance(batches, list) or not batches:
        raise ValueError(f"{path}: expected a non-empty list of batches")
    turns: list[Turn] = []
    by_id: dict[int, str] = {}
    when: datetime | None = None
    for b, batch in enumerate(batches):
        number = batch.get("batch_number", b + 1) if isinstance(batch, dict) else None
        if not isinstance(batch, dict) or not isinstance(batch.get("turns"), list):
            raise ValueError(f"{path}: batch {b}: expected an object with a 'turns' list")
        messages = [m for group in batch["turns"] for m in (group if isinstance(group, list) else [group])]
        anchors = [m["time_anchor"] for m in messages if isinstance(m, dict) and m.get("time_anchor")]
        anchor = anchors[0] if anchors else batch.get("time_anchor")
        if anchor:
            when = _date(anchor, f"{path}: batch {number}")
        if when is None:  # a later batch without an anchor keeps the one before's date
            raise ValueError(f"{path}: batch {number}: no time_anchor on the first batch")
        session = f"{hid}-b{number}"
        for index, m in enumerate(messages):
            if (
                not isinstance(m, dict)
                or not isinstance(m.get("id"), int)
                or not isinstance(m.get("content"), str)
            ):
                raise ValueError(f"{path}: batch {number}, message {index}: expected id and content")
            if m["id"] in by_id:
                raise ValueError(f"{path}: message id {m['id']} appears twice")
            speaker = str(m.get("role") or "user")
            tid = f"{session}:{m['id']}"
            by_id[m["id"]] = tid
            turns.append(
                Turn(
                    document_id=hid,
                    session_id=session,
                    turn_id=tid,
                    index=index,
                    speaker=speaker,
                    text=_fit(speaker, _MARKER.sub("", m["content"])),
                    timestamp=when,
                    metadata={k: m[k] for k in ("index", "question_type") if k in m},
                )
            )
    return turns, by_id


def _fit(speaker: str, text: str) -> str:
    """``text`` cut, at a character, so the turn's line (``speaker: text``) fits a memory's
    text: one assistant message of the 100K chats is a 349 KB loop of repeated lines."""
    room = MAX_TEXT_BYTES - len(f"{speaker}: ".encode())
    data = text.encode()
    return text if len(data) <= room else data[:room].decode("utf-8", errors="ignore")


def _date(value: Any, where: str) -> datetime:
    """A time anchor ("March-15-2024") as midnight UTC of that day."""
    if isinstance(value, str):
        for fmt in ("%B-%d-%Y", "%b-%d-%Y"):
            try:
                return datetime.strptime(value.strip(), fmt).replace(tzinfo=UTC)
            except ValueError:
                continue
    raise ValueError(f"{where}: time_anchor {value!r} is not of the form March-15-2024")


def _chat_file(directory: Path) -> Path | None:
    return next((directory / n for n in CHAT_FILES if (directory / n).is_file()), None)


def _conversation_dirs(folder: Path) -> list[Path]:
    dirs = [d for d in folder.iterdir() if d.is_dir() and _chat_file(d) is not None]
    return sorted(dirs, key=lambda d: (not d.name.isdigit(), int(d.name) if d.name.isdigit() else 0, d.name))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from None
