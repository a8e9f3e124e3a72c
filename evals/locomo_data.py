"""LoCoMo question-answer items for evaluation, with the evidence quirks of the data cleaned up.

LoCoMo's ``qa`` items name their evidence as dialogue ids (``"D3:4"`` = 4th turn of
``session_3``), which are the ``turn_id`` values the ingest loader gives LoCoMo turns. A few
evidence strings are malformed (see the data README): ``"D8:6; D9:17"`` and space-separated
lists hold several ids, ``"D30:05"`` is zero-padded, ``"D:11:26"`` has a stray colon, ``"D"``
is no id at all, and two ids name turns that do not exist. :func:`normalize_evidence` repairs
what can be repaired and drops the rest.

**Items without evidence.** An item whose evidence is empty after normalisation (4 category-3
items of LoCoMo have none to begin with) is kept, so answer-level scoring still sees it, but
:attr:`QAItem.has_evidence` is False: recall@k is undefined for it, and the evaluation leaves
such items out of its recall averages (and reports how many it left out).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from memlane.ingest.common import InputError, read_text

# LoCoMo category numbers (not in the paper's section order; see the data README).
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

# What a category-5 (adversarial) question expects: the conversation does not say.
ADVERSARIAL_ANSWER = "Not mentioned in the conversation"

_SPLIT_RE = re.compile(r"[\s;,]+")
# A LoCoMo dialogue id, tolerating zero padding and a stray colon after the "D".
_DIA_RE = re.compile(r"^D:?0*(\d+):0*(\d+)$")
# Something that was meant to be a dialogue id but is broken beyond repair ("D", "D12", "D:").
_BROKEN_DIA_RE = re.compile(r"^D[\d:]*$")


@dataclass
class QAItem:
    """One evaluation question.

    ``evidence`` holds normalised turn ids (possibly empty: see :attr:`has_evidence`);
    ``raw_evidence`` keeps the strings as found. ``answer`` is always a string; for category-5
    (adversarial) items without an ``answer`` it is :data:`ADVERSARIAL_ANSWER`, and
    ``adversarial_answer`` holds the trap answer the data gives."""

    sample_id: str
    question: str
    answer: str
    evidence: list[str]
    category: int
    raw_evidence: list[str] = field(default_factory=list)
    adversarial_answer: str | None = None

    @property
    def has_evidence(self) -> bool:
        """False when no evidence turn is left: such items are skipped in recall averages."""
        return bool(self.evidence)

    @property
    def category_name(self) -> str:
        """``"multi-hop"``, ``"temporal"``, ``"open-domain"``, ``"single-hop"`` or
        ``"adversarial"``."""
        return CATEGORY_NAMES.get(self.category, f"category-{self.category}")


def normalize_evidence(raw: Iterable[str], valid_ids: set[str] | None = None) -> list[str]:
    """Clean a list of evidence strings into distinct turn ids, keeping their order.

    Each string is split on whitespace, ``;`` and ``,``. LoCoMo ids are canonicalised
    (``"D30:05"`` -> ``"D30:5"``, ``"D:11:26"`` -> ``"D11:26"``); broken LoCoMo-like tokens
    (``"D"``) are dropped; other tokens (for example ``"session_2:5"``) are kept as they are.
    When ``valid_ids`` is given, ids not in it are dropped too. Raises ValueError for an entry
    that is not a string."""
    out: dict[str, None] = {}
    for entry in raw:
        if not isinstance(entry, str):
            raise ValueError(f"evidence entry {entry!r} is not a string")
        for token in _SPLIT_RE.split(entry.strip()):
            if not token:
                continue
            m = _DIA_RE.match(token)
            if m:
                token = f"D{int(m.group(1))}:{int(m.group(2))}"
            elif _BROKEN_DIA_RE.match(token):
                continue
            if valid_ids is not None and token not in valid_ids:
                continue
            out.setdefault(token, None)
    return list(out)


def _read_json(path: Path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path.name}: not valid JSON: {exc}") from None


def _check_categories(categories: Iterable[int] | None) -> set[int] | None:
    if categories is None:
        return None
    cats = set(categories)
    bad = sorted(c for c in cats if c not in CATEGORY_NAMES)
    if bad:
        raise ValueError(f"unknown LoCoMo categories {bad}: use 1..5")
    return cats


def _qa_item(
    sample_id: str, raw: Any, where: str, valid_ids: set[str] | None, *, json_path: bool = True
) -> QAItem:
    def at(name: str) -> str:
        return f"{where}.{name}" if json_path else f"{where}: field {name!r}"

    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a QA object, got {type(raw).__name__}")
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"{at('question')}: expected a non-empty string, got {question!r}")
    category = raw.get("category")
    if type(category) is not int or category not in CATEGORY_NAMES:  # bools and 2.0 too
        raise InputError(f"{at('category')}: expected an integer 1..5, got {category!r}")
    evidence = raw.get("evidence", [])
    if not isinstance(evidence, list):
        raise InputError(f"{at('evidence')}: expected a list, got {type(evidence).__name__}")
    try:
        clean = normalize_evidence(evidence, valid_ids)
    except ValueError as exc:
        raise InputError(f"{at('evidence')}: {exc}") from None
    adversarial = raw.get("adversarial_answer")
    if "answer" in raw and raw["answer"] is not None:
        answer = str(raw["answer"])  # 6 LoCoMo answers are integers
    elif category == 5:
        answer = ADVERSARIAL_ANSWER
    else:
        raise InputError(f"{where}: missing field 'answer'")
    return QAItem(
        sample_id=sample_id,
        question=question,
        answer=answer,
        evidence=clean,
        category=category,
        raw_evidence=[str(e) for e in evidence],
        adversarial_answer=None if adversarial is None else str(adversarial),
    )


def _dialogue_ids(conversation: Any) -> set[str]:
    ids: set[str] = set()
    if isinstance(conversation, dict):
        for key, value in conversation.items():
            if key.startswith("session_") and isinstance(value, list):
                ids.update(
                    t["dia_id"] for t in value if isinstance(t, dict) and isinstance(t.get("dia_id"), str)
                )
    return ids


def load_locomo_questions(
    path: str | Path, categories: Iterable[int] | None = (1, 2, 3, 4)
) -> dict[str, list[QAItem]]:
    """Read the ``qa`` items of a LoCoMo file: ``{sample_id: [QAItem, ...]}`` in file order.

    Only items of ``categories`` are kept (default 1-4: category 5 is adversarial and has no
    answer in the conversation; ``None`` keeps all). Evidence is normalised against the turn
    ids of the item's own sample, so ids that exist only in another sample are dropped. Every
    sample appears as a key, with an empty list if none of its items is kept. Raises
    :class:`~memlane.ingest.InputError` for a malformed file."""
    path = Path(path)
    cats = _check_categories(categories)
    data = _read_json(path)
    samples = [data] if isinstance(data, dict) else data
    if not isinstance(samples, list):
        raise InputError(f"{path.name}: $: expected a list of LoCoMo samples")
    out: dict[str, list[QAItem]] = {}
    for i, sample in enumerate(samples):
        jpath = "$" if isinstance(data, dict) else f"$[{i}]"
        if not isinstance(sample, dict):
            raise InputError(f"{path.name}: {jpath}: expected a sample object")
        sample_id = sample.get("sample_id")
        if not isinstance(sample_id, str) or not sample_id:
            raise InputError(f"{path.name}: {jpath}.sample_id: expected a non-empty string")
        if sample_id in out:
            raise InputError(f"{path.name}: {jpath}.sample_id: duplicate sample_id {sample_id!r}")
        qa = sample.get("qa", [])
        if not isinstance(qa, list):
            raise InputError(f"{path.name}: {jpath}.qa: expected a list")
        valid = _dialogue_ids(sample.get("conversation"))
        items = [_qa_item(sample_id, raw, f"{path.name}: {jpath}.qa[{j}]", valid) for j, raw in enumerate(qa)]
        out[sample_id] = [q for q in items if cats is None or q.category in cats]
    return out


def load_qa_jsonl(path: str | Path, categories: Iterable[int] | None = None) -> dict[str, list[QAItem]]:
    """Read QA items from JSON Lines, one object a line in the shape of :class:`QAItem`
    (``sample_id``, ``question``, ``answer``, ``evidence``, ``category``), as in
    ``samples/questions.jsonl``. Evidence is normalised without an id check (there is no
    conversation here to check against). Returns ``{sample_id: [QAItem, ...]}``."""
    path = Path(path)
    cats = _check_categories(categories)
    text = read_text(path)
    out: dict[str, list[QAItem]] = {}
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path.name} line {lineno}"
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{where}: not valid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise InputError(f"{where}: expected a JSON object")
        sample_id = raw.get("sample_id")
        if not isinstance(sample_id, str) or not sample_id:
            raise InputError(f"{where}: field 'sample_id': expected a non-empty string")
        item = _qa_item(sample_id, raw, where, None, json_path=False)
        if cats is None or item.category in cats:
            out.setdefault(sample_id, []).append(item)
    if not out and not text.strip():
        raise InputError(f"{path.name}: file is empty")
    return out
