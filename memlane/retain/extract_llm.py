"""The LLM extractor: 2-5 narrative facts per chunk in the Hindsight schema.

Each fact says what happened, when, where, who was involved and why; its network (world, or
experience when it is the bank owner's own); its occurrence interval resolved to absolute dates
from the turns' dates; its entities; and causal relations to earlier facts of the same chunk
with a strength. Pronouns are resolved in the fact text ("she" -> "Noor").

Prompt building (:func:`extraction_messages`) and reply checking (:func:`facts_from_reply`) are
pure functions, shared with the vLLM batch path (``pipelines/llm_extract.py``). A reply that
fails validation gets one repair round (memlane/llm/structured.py); if it still fails, or the
server cannot be reached, the chunk is extracted by the LLM-free extractor instead and the
reason is logged and counted in :attr:`LLMExtractor.stats`, so no turn is ever lost.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from memlane.facts.slots import Slot, norm_predicate
from memlane.llm.errors import LLMError
from memlane.llm.structured import complete_json, validate_reply
from memlane.records import Bank, FactType, LinkType
from memlane.retain.chunking import ChunkInput, format_turn
from memlane.retain.facts import CausalRelation, Fact, Mention

log = logging.getLogger(__name__)

MAX_FACTS = 8  # the prompt asks for 2-5; a few more are accepted, a flood is not


class _Lenient(BaseModel):
    # Extra keys a model adds are ignored; missing or mistyped required ones are not.
    model_config = ConfigDict(extra="ignore")


class ExtractedEntity(_Lenient):
    name: str = Field(min_length=1)
    type: str = "OTHER"  # PERSON, ORG, GPE, LOC, EVENT, PRODUCT, WORK_OF_ART, OTHER


class ExtractedCause(_Lenient):
    target_index: int = Field(ge=0, description="index of an EARLIER fact in this list")
    relation: Literal["causes", "caused_by", "enables", "prevents"]
    strength: float = Field(ge=0.0, le=1.0)


class ExtractedSlot(_Lenient):
    """The attribute a fact sets (memlane/facts): who, which attribute, what value."""

    subject: str = Field(min_length=1, description="the person or thing, by name")
    predicate: str = Field(
        min_length=1,
        description="lives_in, works_at, job_title, relationship, owns:<thing>, favourite:<category>, "
        "plans, or another short snake_case attribute",
    )
    object: str = Field(min_length=1, description="the value (for owns: the count)")
    count: int | None = Field(None, ge=0, description="for owns:<thing>: how many")


class ExtractedFact(_Lenient):
    what: str = Field(
        min_length=1, description="the fact as a self-contained sentence, pronouns replaced by names"
    )
    when: str | None = None
    where: str | None = None
    who: list[str] = Field(default_factory=list)
    why: str | None = None
    fact_type: Literal["world", "experience"]
    occurred_start: str | None = Field(None, description="ISO date or datetime")
    occurred_end: str | None = Field(None, description="ISO date or datetime")
    entities: list[ExtractedEntity] = Field(default_factory=list)
    source_turn_ids: list[str] = Field(default_factory=list)
    causal_relations: list[ExtractedCause] = Field(default_factory=list)
    slot: ExtractedSlot | None = None


class ExtractionReply(_Lenient):
    """What the model returns for one chunk."""

    facts: list[ExtractedFact] = Field(min_length=1, max_length=MAX_FACTS)


SYSTEM_PROMPT = """You extract long-term memories from a conversation chunk.
Write 2 to 5 narrative facts (fewer only if the chunk holds less). Each fact:
- what: one self-contained sentence; replace every pronoun and vague reference with the name
  it refers to (coreference resolved), so the fact reads correctly on its own.
- when / where / who / why: the time, place, people involved and reason, when the chunk says.
- fact_type: "experience" only for what {owner} did, saw or felt; "world" for everything else.
- occurred_start / occurred_end: when it happened as absolute ISO dates (YYYY-MM-DD), resolved
  from the date of the turn that says it ("yesterday" said on 2024-03-02 is 2024-03-01; "last
  week" is that week's Monday to Sunday). null when the chunk does not say.
- entities: the people, places, organisations, events and things it mentions.
- source_turn_ids: the ids of the turns it comes from.
- causal_relations: links to EARLIER facts of your list (target_index < this fact's index),
  with relation causes / caused_by / enables / prevents and a strength in [0, 1].
- slot: when the fact states the current value of an attribute that can change later (where
  someone lives, works, their job title, relationship, how many pets or children they have, a
  favourite thing, a plan): {{subject, predicate, object, count}} with predicate one of lives_in,
  works_at, job_title, relationship, owns:<thing> (count = how many), favourite:<category>,
  plans, or another short snake_case attribute; null otherwise.
Skip greetings and small talk."""


def extraction_messages(bank: Bank, item: ChunkInput) -> list[dict[str, str]]:
    """The chat messages that ask for one chunk's facts."""
    owner = bank.name.strip() if bank.name else ""
    system = SYSTEM_PROMPT.format(owner=owner or "the memory owner (no owner: always world)")
    lines = [
        f"Session date: {item.chunk.started_at.date().isoformat()}",
        f"Memory owner: {owner or '(none)'}",
        "Turns:",
    ]
    if item.before is not None:
        lines.append(f"(earlier, context only) {format_turn(item.before)}")
    for t in item.turns:
        lines.append(f"[{t.turn_id}] ({t.timestamp.strftime('%Y-%m-%d %H:%M')}) {format_turn(t)}")
    if item.after is not None:
        lines.append(f"(later, context only) {format_turn(item.after)}")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def _parse_time(value: str | None, *, end: bool) -> datetime | None:
    """ISO datetime, date, year-month or year -> aware UTC datetime; the end of a date-like
    value is its last second. Raises ValueError naming the value."""
    if value is None or not str(value).strip():
        return None
    s = str(value).strip()
    try:
        if len(s) == 4 and s.isdigit():
            d = date(int(s), 12 if end else 1, 31 if end else 1)
        elif len(s) == 7 and s[4] == "-":
            y, m = int(s[:4]), int(s[5:])
            d = date(y, m, 1)
            if end:
                d = date(y + (m == 12), m % 12 + 1, 1) - timedelta(days=1)
        elif len(s) == 10:
            d = date.fromisoformat(s)
        else:
            dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
            return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"{s!r} is not an ISO date") from None
    return datetime.combine(d, time.max if end else time.min, tzinfo=UTC).replace(microsecond=0)


def _checker(bank: Bank, item: ChunkInput):
    known = {t.turn_id for t in item.turns}

    def check(reply: ExtractionReply) -> None:
        for i, f in enumerate(reply.facts):
            start = _parse_time(f.occurred_start, end=False)
            finish = _parse_time(f.occurred_end, end=True)
            if start and finish and finish < start:
                raise ValueError(f"facts.{i}: occurred_end is before occurred_start")
            unknown = [x for x in f.source_turn_ids if x not in known]
            if unknown:
                raise ValueError(
                    f"facts.{i}: unknown source_turn_ids {unknown[:3]} (turn ids: {sorted(known)[:8]})"
                )
            for rel in f.causal_relations:
                if rel.target_index >= i:
                    raise ValueError(
                        f"facts.{i}: causal target_index {rel.target_index} is not an earlier fact"
                    )

    return check


def _text(f: ExtractedFact) -> str:
    parts = [f.what.strip()]
    for label, value in (("When", f.when), ("Where", f.where), ("Why", f.why)):
        if value and value.strip():
            parts.append(f"{label}: {value.strip().rstrip('.')}.")
    if f.who:
        parts.append(f"Involving: {', '.join(w.strip() for w in f.who if w.strip())}.")
    return " ".join(p if p.endswith((".", "!", "?", ":")) else p + "." for p in parts)


def _slot_metadata(slot: ExtractedSlot | None, order: int) -> dict:
    if slot is None:
        return {}
    count = slot.count
    obj = str(count) if count is not None and slot.predicate.startswith("owns:") else slot.object
    found = Slot(slot.subject.strip(), norm_predicate(slot.predicate), obj.strip(), count, "llm", order)
    return {"slot": found.as_metadata()} if found.predicate else {}


def to_facts(bank: Bank, item: ChunkInput, reply: ExtractionReply, *, model: str = "") -> list[Fact]:
    """Facts of a validated reply (see :func:`facts_from_reply`)."""
    by_id = {t.turn_id: t for t in item.turns}
    has_owner = bool(bank.name and bank.name.strip())
    out: list[Fact] = []
    for f in reply.facts:
        turn_ids = list(dict.fromkeys(f.source_turn_ids)) or [t.turn_id for t in item.turns]
        turns = [by_id[x] for x in turn_ids]
        mentions = [Mention(w, "PERSON") for w in f.who if w.strip()]
        mentions += [Mention(e.name, e.type.upper() or "OTHER") for e in f.entities]
        ftype = FactType(f.fact_type) if has_owner else FactType.world
        out.append(
            Fact(
                text=_text(f),
                fact_type=ftype,
                mentioned_at=min(t.timestamp for t in turns),
                occurred_start=_parse_time(f.occurred_start, end=False),
                occurred_end=_parse_time(f.occurred_end, end=True),
                source_turns=turn_ids,
                context=" ".join(format_turn(t) for t in turns),
                mentions=mentions,
                causal=[
                    CausalRelation(target=r.target_index, type=LinkType(r.relation), strength=r.strength)
                    for r in f.causal_relations
                ],
                metadata={
                    "extractor": "llm",
                    "model": model,
                    "session_id": item.chunk.session_id,
                    **{k: v for k, v in (("when", f.when), ("where", f.where), ("why", f.why)) if v},
                    **_slot_metadata(f.slot, turns[0].index),
                },
            )
        )
    return out


def facts_from_reply(bank: Bank, item: ChunkInput, text: str, *, model: str = "") -> list[Fact]:
    """Validate one raw model reply for ``item``; ValueError with the reason when rejected."""
    reply = validate_reply(text, ExtractionReply, _checker(bank, item))
    return to_facts(bank, item, reply, model=model)


class LLMExtractor:
    """Extractor backed by an :class:`~memlane.interfaces.LLM`, with per-chunk fallback.

    Chunks go to the model concurrently (``concurrency`` threads; the HTTP client bounds
    requests in flight on its own too). ``stats`` counts chunks by outcome and the reasons of
    fallbacks."""

    name = "llm"

    def __init__(self, llm, fallback, *, concurrency: int = 4, max_tokens: int = 1500) -> None:
        self.llm = llm
        self.fallback = fallback
        self.concurrency = max(1, concurrency)
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self.stats: Counter = Counter()
        self.reasons: Counter = Counter()

    def extract_chunk(self, bank: Bank, item: ChunkInput) -> list[Fact]:
        """One chunk through the model; raises ValueError/LLMError when it cannot be used."""
        if not any(t.has_content for t in item.turns):
            return []
        reply = complete_json(
            self.llm,
            extraction_messages(bank, item),
            ExtractionReply,
            check=_checker(bank, item),
            max_tokens=self.max_tokens,
        )
        return to_facts(bank, item, reply, model=getattr(self.llm, "model", ""))

    def extract(self, bank: Bank, chunks: Sequence[ChunkInput]) -> list[list[Fact]]:
        def one(item: ChunkInput):
            try:
                return self.extract_chunk(bank, item), None
            except (LLMError, ValueError) as exc:
                return None, f"{type(exc).__name__}: {exc}"

        if len(chunks) > 1 and self.concurrency > 1:
            with ThreadPoolExecutor(
                min(self.concurrency, len(chunks)), thread_name_prefix="memlane-llm-extract"
            ) as pool:
                results = list(pool.map(one, chunks))
        else:
            results = [one(item) for item in chunks]
        failed = [i for i, (facts, _) in enumerate(results) if facts is None]
        rescued = self.fallback.extract(bank, [chunks[i] for i in failed]) if failed else []
        out: list[list[Fact]] = []
        it = iter(rescued)
        for item, (facts, reason) in zip(chunks, results):
            if facts is None:
                log.warning(
                    "LLM extraction of chunk %s rejected, using the rules: %s", item.chunk.chunk_id, reason
                )
                facts = next(it)
                for f in facts:  # why the rules wrote it: doctor and the explorer show it
                    f.metadata["llm_error"] = reason[:300]
                with self._lock:
                    self.stats["fallback"] += 1
                    self.reasons[reason.split(":", 1)[0]] += 1
            else:
                with self._lock:
                    self.stats["llm"] += 1
            out.append(facts)
        return out
