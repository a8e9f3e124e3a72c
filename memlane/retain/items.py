"""Retain API items (:class:`~memlane.records.RetainItem`) validated and grouped into documents,
before anything is written."""

from __future__ import annotations

from typing import Sequence

from pydantic import ValidationError

from memlane.errors import InvalidInput
from memlane.ids import make_id
from memlane.records import RetainItem, Turn, check_bank_id, now_utc

# {document_id: (tags, turns)}: what retain writes, one document at a time
DocumentPlan = dict[str, tuple[list[str], list[Turn]]]


def check_tags(tags: Sequence[str]) -> None:
    """Raise InvalidInput naming the first tag that is not a non-blank string."""
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip():
            raise InvalidInput(f"tags: invalid tag {tag!r}")


def plan_items(
    bank_id: str, items: Sequence[RetainItem | dict], document_id: str | None = None, tags: Sequence[str] = ()
) -> DocumentPlan:
    """Validate API items and group them into documents by ``document_id`` (the item's, else
    the call's, else one derived from the content); each document's turns are numbered per
    session. Raises InvalidInput naming the first bad field."""
    try:
        check_bank_id(bank_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    if not items:
        raise InvalidInput("items: at least one item is required")
    parsed: list[RetainItem] = []
    for i, raw in enumerate(items):
        try:
            parsed.append(raw if isinstance(raw, RetainItem) else RetainItem.model_validate(raw))
        except ValidationError as exc:
            raise InvalidInput(f"items.{i}.{InvalidInput.from_validation(exc)}") from None
    check_tags(tags)
    now = now_utc()
    auto = make_id("doc", bank_id, *(f"{it.speaker}\x1e{it.content}\x1e{it.timestamp}" for it in parsed))[:16]
    docs: dict[str, tuple[list[str], dict[str, list[Turn]]]] = {}
    for i, it in enumerate(parsed):
        doc_id = it.document_id or document_id or f"doc-{auto}"
        doc_tags = sorted(set(tags) | set(it.tags))
        entry = docs.setdefault(doc_id, (doc_tags, {}))
        if entry[0] != doc_tags:
            raise InvalidInput(
                f"items.{i}.tags: items of document {doc_id!r} must carry the "
                "same tags (send documents with other tags separately)"
            )
        session = it.session_id or doc_id
        turns = entry[1].setdefault(session, [])
        try:
            turn = Turn(
                document_id=doc_id,
                session_id=session,
                turn_id=f"{session}:{len(turns) + 1}",
                index=len(turns),
                speaker=it.speaker,
                text=it.content,
                timestamp=it.timestamp or now,
                metadata=it.metadata,
            )
        except ValidationError as exc:  # the store's size limit on speaker and content together
            raise InvalidInput(f"items.{i}.content: {_reason(exc)}") from None
        turns.append(turn)
    return {d: (t, [x for ts in sessions.values() for x in ts]) for d, (t, sessions) in docs.items()}


def _reason(exc: ValidationError) -> str:
    return "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
