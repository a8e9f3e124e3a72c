"""LongMemEval question files (S, M and oracle) read into questions with their haystacks.

The official files are a JSON list of objects with ``question_id``, ``question_type``,
``question``, ``question_date``, ``answer``, ``answer_session_ids``, ``haystack_session_ids``,
``haystack_dates`` and ``haystack_sessions`` (each session a list of ``{role, content,
has_answer}``). Ids ending in ``_abs`` are abstention questions (the answer is not in the
history).

Turn ids are ``"<session_id>:<n>"`` with ``n`` the 1-based position of the turn in its session
(user and assistant turns alike), the numbering the official code uses for its turn ids and the
one the backfill's corpus reader gives; so ``evals.metrics.session_of`` maps a turn back
to its session. A session id that repeats within one haystack gets ``#<position>`` appended (as
in the backfill), and :attr:`LMEQuestion.session_origin` maps it back to the id in the file.
Turns whose content is empty are left out of the bank (there is nothing to remember) but keep
their place in the numbering.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from evals.metrics import is_abstention
from memlane.ingest.loaders import InputError, read_text
from memlane.model import Turn
from memlane.temporal.timestamps import parse_timestamp

REQUIRED = ("question_id", "question_type", "question", "answer", "haystack_session_ids",
            "haystack_dates", "haystack_sessions")
_BANK_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")


@dataclass
class LMEQuestion:
    """One LongMemEval question with its haystack, ready to retain and score.

    ``turns`` is the haystack in file order; ``corpus_turns`` the ids of those turns (what a
    system could rank); ``evidence_turns`` the ids of turns with ``has_answer`` true (the
    turn-level gold); ``answer_session_ids`` the sessions the file names as holding the answer."""

    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: datetime | None
    answer_session_ids: list[str]
    turns: list[Turn]
    evidence_turns: list[str]
    session_origin: dict[str, str] = field(default_factory=dict)
    session_dates: dict[str, datetime] = field(default_factory=dict)

    @property
    def abstention(self) -> bool:
        """True for abstention questions (``_abs`` ids): left out of the official retrieval
        averages."""
        return is_abstention(self.question_id)

    @property
    def corpus_turns(self) -> list[str]:
        return [t.turn_id for t in self.turns]

    @property
    def bank_id(self) -> str:
        """``lme-<question_id>``, with characters a bank id cannot hold replaced by ``-``."""
        return bank_id_for(self.question_id)

    def original_session(self, session_id: str) -> str:
        """The session id as the file names it (undoes the ``#n`` of a repeated session)."""
        return self.session_origin.get(session_id, session_id)


def bank_id_for(question_id: str) -> str:
    """The bank a question's haystack goes into: ``lme-<question_id>`` made bank-id safe."""
    return ("lme-" + _BANK_UNSAFE.sub("-", str(question_id)))[:128]


def _need_list(item: dict, key: str, where: str) -> list:
    value = item[key]
    if not isinstance(value, list):
        raise InputError(f"{where}.{key}: expected a list, got {type(value).__name__}")
    return value


def _time(value: Any, where: str) -> datetime:
    try:
        return parse_timestamp(value)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{where}: {exc}") from None


def _question(item: Any, where: str) -> LMEQuestion:
    if not isinstance(item, dict):
        raise InputError(f"{where}: expected a question object, got {type(item).__name__}")
    for key in REQUIRED:
        if key not in item:
            raise InputError(f"{where}: missing field {key!r}")
    qid = item["question_id"]
    if not isinstance(qid, (str, int)) or isinstance(qid, bool) or str(qid) == "":
        raise InputError(f"{where}.question_id: expected a non-empty string, got {qid!r}")
    qid = str(qid)
    question = item["question"]
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"{where}.question: expected a non-empty string, got {question!r}")
    qtype = item["question_type"]
    if not isinstance(qtype, str) or not qtype:
        raise InputError(f"{where}.question_type: expected a non-empty string, got {qtype!r}")
    sids = _need_list(item, "haystack_session_ids", where)
    dates = _need_list(item, "haystack_dates", where)
    sessions = _need_list(item, "haystack_sessions", where)
    if not len(sids) == len(dates) == len(sessions):
        raise InputError(f"{where}: haystack_session_ids, haystack_dates and haystack_sessions "
                         f"differ in length ({len(sids)}, {len(dates)}, {len(sessions)})")
    answer_sids = item.get("answer_session_ids", [])
    if not isinstance(answer_sids, list):
        raise InputError(f"{where}.answer_session_ids: expected a list")
    qdate = item.get("question_date")
    question_date = None if qdate in (None, "") else _time(qdate, f"{where}.question_date")

    turns: list[Turn] = []
    evidence: list[str] = []
    origin: dict[str, str] = {}
    session_dates: dict[str, datetime] = {}
    for si, (raw_sid, date, session) in enumerate(zip(sids, dates, sessions)):
        spath = f"{where}.haystack_sessions[{si}]"
        if not isinstance(raw_sid, (str, int)) or str(raw_sid) == "":
            raise InputError(f"{where}.haystack_session_ids[{si}]: expected a non-empty string")
        sid = str(raw_sid)
        if sid in origin:  # the same session twice in one haystack: keep the copies apart
            sid = f"{sid}#{si + 1}"
        origin[sid] = str(raw_sid)
        when = _time(date, f"{where}.haystack_dates[{si}]")
        session_dates[sid] = when
        if not isinstance(session, list):
            raise InputError(f"{spath}: expected a list of turns")
        for ti, raw in enumerate(session):
            tpath = f"{spath}[{ti}]"
            if not isinstance(raw, dict):
                raise InputError(f"{tpath}: expected a turn object")
            role, content = raw.get("role"), raw.get("content")
            if not isinstance(role, str) or not role.strip():
                raise InputError(f"{tpath}.role: expected a non-empty string")
            if content is None:
                content = ""
            if not isinstance(content, str):
                raise InputError(f"{tpath}.content: expected a string")
            turn_id = f"{sid}:{ti + 1}"
            if raw.get("has_answer") is True:
                evidence.append(turn_id)
            if not content.strip():
                continue
            turns.append(Turn(document_id=qid, session_id=sid, turn_id=turn_id, index=ti,
                              speaker=role, text=content, timestamp=when,
                              metadata={"has_answer": bool(raw.get("has_answer", False))}))
    kept = {t.turn_id for t in turns}
    return LMEQuestion(
        question_id=qid, question_type=qtype, question=question,
        answer=str(item["answer"]), question_date=question_date,
        answer_session_ids=[str(s) for s in answer_sids], turns=turns,
        evidence_turns=[t for t in evidence if t in kept],
        session_origin={k: v for k, v in origin.items() if k != v}, session_dates=session_dates)


def load_longmemeval(path: str | Path, *, limit: int | None = None) -> list[LMEQuestion]:
    """Read a LongMemEval JSON file (a list of questions, or one question object) and return
    its first ``limit`` questions (all when None), validated. Raises
    :class:`~memlane.ingest.InputError` naming the file and JSON path of the first problem."""
    path = Path(path)
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    text = read_text(path)  # names a missing, empty or non-UTF-8 file itself
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path.name}: not valid JSON: {exc}") from None
    items = data if isinstance(data, list) else [data]
    if not items:
        raise InputError(f"{path.name}: no questions")
    if limit is not None:
        items = items[:limit]
    out: list[LMEQuestion] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"{path.name}: $[{i}]" if isinstance(data, list) else f"{path.name}: $"
        q = _question(item, where)
        if q.question_id in seen:
            raise InputError(f"{where}.question_id: duplicate id {q.question_id!r}")
        seen.add(q.question_id)
        out.append(q)
    return out
