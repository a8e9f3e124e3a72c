"""The LongMemEval reader (S, M and oracle files): questions with their haystacks.

The official files are a JSON list of objects with ``question_id``, ``question_type``,
``question``, ``question_date``, ``answer``, ``answer_session_ids``, ``haystack_session_ids``,
``haystack_dates`` ("2023/05/20 (Sat) 02:21") and ``haystack_sessions`` (each session a list of
``{role, content, has_answer}``). Ids holding ``_abs`` are abstention questions (the answer is
not in the history).

One bank per question, ``bank_id_for(question_id)`` (:mod:`memlane.ingest.common`), holding one
document of the question's id. Turn ids are ``"<session_id>:<n>"`` with ``n`` the 1-based
position of the turn in its session (user and assistant turns alike, the numbering of the
official code), and ``Turn.index`` is ``n - 1``. A session id that repeats within one haystack
gets ``#<position>`` appended, and :attr:`LMEQuestion.session_origin` maps it back. Turns whose
content is empty are left out (there is nothing to remember) but keep their place in the
numbering. A turn's metadata holds ``has_answer`` (a bool) and any other key of the turn.

Two modes (see :mod:`memlane.ingest.common`): strict (the evals: every question field is
required and the first problem raises :class:`InputError`), or collecting with ``reject`` (the
backfill: only the haystack is needed, ``haystack_session_ids`` default to ``session_<n>``; a
bad question, session or turn is rejected alone, empty turns are reported too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memlane.ingest.common import InputError, Reject, bank_id_for, field_error, read_text
from memlane.ingest.dataset_times import dataset_time, longmemeval_time
from memlane.records import Turn

REQUIRED = (
    "question_id",
    "question_type",
    "question",
    "answer",
    "haystack_session_ids",
    "haystack_dates",
    "haystack_sessions",
)
# What a haystack needs when only the haystack is read (the backfill).
HAYSTACK = ("question_id", "haystack_dates", "haystack_sessions")


def is_abstention(question_id: str) -> bool:
    """LongMemEval's rule: a question whose id contains ``_abs`` is an abstention question (the
    official scripts test ``'_abs' in question_id``; the ids end with it)."""
    return "_abs" in str(question_id)


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
        """The question's bank: :func:`~memlane.ingest.common.bank_id_for` its id."""
        return bank_id_for(self.question_id)

    @property
    def documents(self) -> list[tuple[str, list[Turn]]]:
        """What retain gets: one document, the question's id, holding the haystack."""
        return [(self.question_id, self.turns)] if self.turns else []

    def original_session(self, session_id: str) -> str:
        """The session id as the file names it (undoes the ``#n`` of a repeated session)."""
        return self.session_origin.get(session_id, session_id)


class _Skip(Exception):
    """A record rejected in collecting mode: the caller moves on to the next one."""


class _Reader:
    """One file's read: ``fail`` raises in strict mode and rejects (then skips) otherwise."""

    def __init__(self, name: str, reject: Reject | None) -> None:
        self.name = name
        self.reject = reject

    @property
    def strict(self) -> bool:
        return self.reject is None

    def fail(self, where: str, reason: str, n: int = 1, **extra: Any) -> _Skip:
        if self.reject is None:
            raise InputError(f"{self.name}: {where}: {reason}")
        self.reject(self.name, where, reason, n, **extra)
        return _Skip()

    def time(self, value: Any, where: str) -> datetime:
        return dataset_time(value, longmemeval_time, lambda: f"{self.name}: {where}")

    def question(self, item: Any, where: str) -> LMEQuestion:
        if not isinstance(item, dict):
            raise self.fail(where, f"expected a question object, got {type(item).__name__}")
        for key in REQUIRED if self.strict else HAYSTACK:
            if key not in item:
                raise self.fail(where, f"missing field {key!r}")
        qid = item["question_id"]
        if not isinstance(qid, (str, int)) or isinstance(qid, bool) or str(qid) == "":
            raise self.fail(f"{where}.question_id", f"expected a non-empty string, got {qid!r}")
        qid = str(qid)
        question, qtype = item.get("question", ""), item.get("question_type", "")
        if self.strict:
            if not isinstance(question, str) or not question.strip():
                raise self.fail(f"{where}.question", f"expected a non-empty string, got {question!r}")
            if not isinstance(qtype, str) or not qtype:
                raise self.fail(f"{where}.question_type", f"expected a non-empty string, got {qtype!r}")
        dates = self._list(item, "haystack_dates", where)
        sessions = self._list(item, "haystack_sessions", where)
        sids = self._list(item, "haystack_session_ids", where) if "haystack_session_ids" in item else None
        if len(dates) != len(sessions) or (sids is not None and len(sids) != len(sessions)):
            raise self.fail(
                where,
                "haystack_session_ids, haystack_dates and haystack_sessions "
                f"differ in length ({len(sids) if sids is not None else '-'}, "
                f"{len(dates)}, {len(sessions)})",
                n=max(1, sum(len(s) for s in sessions if isinstance(s, list))),
            )
        answer_sids = item.get("answer_session_ids", [])
        if not isinstance(answer_sids, list):
            if self.strict:
                raise self.fail(f"{where}.answer_session_ids", "expected a list")
            answer_sids = []
        question_date = None
        qdate = item.get("question_date")
        if qdate not in (None, ""):
            try:
                question_date = self.time(qdate, f"{where}.question_date")
            except InputError:
                if self.strict:
                    raise  # the backfill retains the haystack only; the date is not needed

        q = LMEQuestion(
            question_id=qid,
            question_type=str(qtype),
            question=str(question),
            answer=str(item.get("answer", "")),
            question_date=question_date,
            answer_session_ids=[str(s) for s in answer_sids],
            turns=[],
            evidence_turns=[],
        )
        evidence: list[str] = []
        for si, session in enumerate(sessions):
            try:
                self._session(
                    q, si, sids[si] if sids is not None else None, dates[si], session, where, evidence
                )
            except _Skip:
                continue
        kept = {t.turn_id for t in q.turns}
        q.evidence_turns = [t for t in evidence if t in kept]
        q.session_origin = {k: v for k, v in q.session_origin.items() if k != v}
        return q

    def _list(self, item: dict, key: str, where: str) -> list:
        value = item[key]
        if not isinstance(value, list):
            raise self.fail(f"{where}.{key}", f"expected a list, got {type(value).__name__}")
        return value

    def _session(
        self, q: LMEQuestion, si: int, raw_sid: Any, date: Any, session: Any, where: str, evidence: list[str]
    ) -> None:
        spath = f"{where}.haystack_sessions[{si}]"
        if raw_sid in (None, "") and not self.strict:
            raw_sid = f"session_{si + 1}"
        if not isinstance(raw_sid, (str, int)) or str(raw_sid) == "":
            raise self.fail(f"{where}.haystack_session_ids[{si}]", "expected a non-empty string")
        sid = str(raw_sid)
        if sid in q.session_origin:  # the same session twice in one haystack: keep them apart
            sid = f"{sid}#{si + 1}"
        q.session_origin[sid] = str(raw_sid)
        if not isinstance(session, list):
            raise self.fail(spath, "expected a list of turns", bank_id=q.bank_id)
        try:
            when = self.time(date, f"{where}.haystack_dates[{si}]")
        except InputError as exc:
            if self.strict:
                raise
            reason = str(exc).removeprefix(f"{self.name}: {where}.haystack_dates[{si}]: ")
            raise self.fail(
                f"{where}.haystack_dates[{si}]", reason, n=max(1, len(session)), bank_id=q.bank_id
            ) from None
        q.session_dates[sid] = when
        for ti, raw in enumerate(session):
            try:
                self._turn(q, sid, ti, raw, when, f"{spath}[{ti}]", evidence)
            except _Skip:
                continue

    def _turn(
        self, q: LMEQuestion, sid: str, ti: int, raw: Any, when: datetime, tpath: str, evidence: list[str]
    ) -> None:
        if not isinstance(raw, dict):
            raise self.fail(tpath, "expected a turn object", bank_id=q.bank_id)
        role, content = raw.get("role"), raw.get("content")
        if not isinstance(role, str) or not role.strip():
            raise self.fail(f"{tpath}.role", "expected a non-empty string", bank_id=q.bank_id)
        if content is not None and not isinstance(content, str):
            raise self.fail(f"{tpath}.content", "expected a string", bank_id=q.bank_id)
        turn_id = f"{sid}:{ti + 1}"
        if raw.get("has_answer") is True:
            evidence.append(turn_id)
        if not content or not content.strip():
            if not self.strict:  # left out either way; the backfill counts what it leaves out
                raise self.fail(tpath, "missing text (field 'content')", bank_id=q.bank_id)
            return
        meta = {k: v for k, v in raw.items() if k not in ("role", "content")}
        meta["has_answer"] = bool(raw.get("has_answer", False))
        try:
            turn = Turn(
                document_id=q.question_id,
                session_id=sid,
                turn_id=turn_id,
                index=ti,
                speaker=role,
                text=content,
                timestamp=when,
                metadata=meta,
            )
        except ValidationError as exc:
            raise self.fail(tpath, field_error(exc), bank_id=q.bank_id) from None
        q.turns.append(turn)


def read_longmemeval(
    path: str | Path, *, limit: int | None = None, reject: Reject | None = None
) -> list[LMEQuestion]:
    """Read a LongMemEval JSON file (a list of questions, or one question object) and return
    its first ``limit`` questions (all when None).

    Without ``reject`` everything is validated and the first problem raises
    :class:`InputError` naming the file and JSON path. With ``reject`` (collecting mode, see
    the module doc) bad records are handed to it and the rest returned."""
    path = Path(path)
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    reader = _Reader(path.name, reject)
    try:
        text = read_text(path)  # names a missing, empty or non-UTF-8 file itself
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InputError(f"{path.name}: not valid JSON: {exc}") from None
    except InputError as exc:
        if reject is None:
            raise
        reject(path.name, "$", f"not a readable LongMemEval JSON file: {exc}")
        return []
    items = data if isinstance(data, list) else [data]
    if not items:
        if reject is None:
            raise InputError(f"{path.name}: no questions")
        return []
    if limit is not None:
        items = items[:limit]
    out: list[LMEQuestion] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"$[{i}]" if isinstance(data, list) else "$"
        try:
            q = reader.question(item, where)
            if q.question_id in seen:
                raise reader.fail(
                    f"{where}.question_id", f"duplicate id {q.question_id!r}", n=max(1, len(q.turns))
                )
        except _Skip:
            continue
        seen.add(q.question_id)
        out.append(q)
    return out


def load_longmemeval(path: str | Path, *, limit: int | None = None) -> list[LMEQuestion]:
    """The strict read of :func:`read_longmemeval` (the evals): every question validated,
    :class:`InputError` on the first problem."""
    return read_longmemeval(path, limit=limit)
