"""Hindsight's request bodies (hindsight-client 1.1.0's models, as its server reads them) and
their translation into the catalogue's parameters: the inbound half of the surface's one
translation (the outbound half is serve/hindsight/answers.py).

Bodies follow Hindsight's server: an explicit ``null`` is "not given", a default is what
Hindsight defaults to, and a field Memlane has no use for is accepted and reported back in the
``X-Ignored-Params`` header (Hindsight's own way) instead of refused: the client always sends
fields (``observation_scopes``, ``strategy``, ...) a server may not implement. A field whose
value would change *what* is answered, which Memlane cannot honour, is refused with 501 naming
it (``tag_groups``, ``min_scores``, ``fact_types``, ``update_mode: append``).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from serve.errors import APIError

HindsightTagsMatch = Literal["any", "all", "any_strict", "all_strict", "exact"]
# Hindsight's tag modes in the engine's (memlane.records.TagsMatch): its "any" and "all" also
# take untagged memories, its "_strict" modes are Memlane's own "any" and "all".
TAG_MODES = {
    "any": "any_or_untagged",
    "all": "all_or_untagged",
    "any_strict": "any",
    "all_strict": "all",
    "exact": "exact",
}
# Hindsight's fact types (it dropped "opinion": asked for alone, recall answers nothing).
FACT_TYPES = ("world", "experience", "observation")
# The speaker of text that names none (see turns_of).
DEFAULT_SPEAKER = "user"
# "Name: text" starts a turn: a name of 1-3 words, each starting with a letter (40 characters
# at most), then ": " and text. What format_turn writes back (memlane/retain/chunking.py).
_TURN = re.compile(r"([A-Za-z][\w.'-]*(?: [A-Za-z][\w.'-]*){0,2}): (.*\S.*)", re.S)


class _Body(BaseModel):
    # Extra fields are kept (not refused) so that they can be reported as ignored.
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def ignored(self, *accepted_unused: str) -> list[str]:
        """The fields sent that have no effect here: unknown ones and ``accepted_unused``
        given a value (for the X-Ignored-Params header)."""
        extra = [k for k, v in (self.model_extra or {}).items() if v is not None]
        return extra + [k for k in accepted_unused if getattr(self, k, None) not in (None, False, [], {})]


def unsupported(field: str, why: str) -> APIError:
    """501 naming a field whose value Memlane cannot honour on this surface."""
    return APIError(501, "not_implemented", f"{field}: {why} (see docs/hindsight.md)", field)


# retain ----------------------------------------------------------------------------------------
class MemoryItemBody(_Body):
    content: str | list[dict[str, Any]]
    timestamp: datetime | str | None = None
    context: str | None = None
    metadata: dict[str, Any] | None = None
    document_id: str | None = None
    entities: list[dict[str, Any]] | None = None
    resolve_entities: bool | None = None
    tags: list[str] | str | None = None
    observation_scopes: Any = None
    strategy: str | None = None
    update_mode: Literal["replace", "append"] | None = None


class RetainBody(_Body):
    items: list[MemoryItemBody] = Field(min_length=1)
    async_: bool = Field(False, alias="async")
    document_tags: list[str] | None = None
    operation_id: str | None = None

    def ignored_fields(self) -> list[str]:
        unused = ("context", "metadata", "entities", "observation_scopes", "strategy")
        names = self.ignored()
        for i, item in enumerate(self.items):
            names += [f"items.{i}.{k}" for k in item.ignored(*unused)]
        return names


def turns_of(content: str) -> list[tuple[str, str]]:
    """A Hindsight item's text as Memlane turns, ``(speaker, text)``: a line ``Name: text``
    starts a turn by Name, any other line continues the turn before it (a line break kept),
    and text before the first such line is a turn by :data:`DEFAULT_SPEAKER`. Memlane forms
    one memory per turn without an LLM, so a transcript becomes one memory per line of speech
    rather than one for the whole text; the turns written back as ``speaker: text`` lines
    (a document's text) are the transcript as it was sent."""
    turns: list[tuple[str, list[str]]] = []
    for line in content.split("\n"):
        m = _TURN.fullmatch(line)
        if m and len(m.group(1)) <= 40:
            turns.append((m.group(1), [m.group(2)]))
        elif turns:
            turns[-1][1].append(line)
        else:
            turns.append((DEFAULT_SPEAKER, [line]))
    out = [(speaker, "\n".join(lines)) for speaker, lines in turns]
    return [(s, t) for s, t in out if t.strip()]


def _timestamp(value: datetime | str | None, where: str) -> str | None:
    """Hindsight's item timestamp: null, "" and "unset" (no date: Memlane needs one, so the
    time of the request) are None; else ISO 8601 ("Z" taken); 422 otherwise."""
    if value is None or isinstance(value, datetime):
        return None if value is None else value.isoformat()
    if value.strip().lower() in ("", "unset"):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat()
    except ValueError:
        raise APIError(422, "invalid_request", f"{where}: not an ISO 8601 time: {value!r}", where) from None


def retain_params(body: RetainBody) -> dict[str, Any]:
    """The catalogue's retain parameters (``items``) for a Hindsight retain: each item's text
    as turns (:func:`turns_of`), its tags with the request's ``document_tags``."""
    items: list[dict[str, Any]] = []
    for i, item in enumerate(body.items):
        where = f"items.{i}"
        if not isinstance(item.content, str):
            raise APIError(
                422,
                "invalid_request",
                f"{where}.content: content blocks (images, files) need a vision model; send text",
                f"{where}.content",
            )
        if item.update_mode == "append":
            raise unsupported(f"{where}.update_mode", "append is not supported: send the whole document")
        tags = [item.tags] if isinstance(item.tags, str) else list(item.tags or ())
        tags = sorted(set(tags) | set(body.document_tags or ()))
        when = _timestamp(item.timestamp, f"{where}.timestamp")
        turns = turns_of(item.content)
        if not turns:
            raise APIError(422, "invalid_request", f"{where}.content: must not be blank", f"{where}.content")
        for speaker, text in turns:
            row: dict[str, Any] = {"content": text, "speaker": speaker, "tags": tags}
            if when is not None:
                row["timestamp"] = when
            if item.document_id:
                row["document_id"] = item.document_id
            items.append(row)
    return {"items": items}


# recall and reflect -------------------------------------------------------------------------
class EntityOptions(_Body):
    max_tokens: int = Field(500, gt=0)


class ChunkOptions(_Body):
    max_tokens: int = Field(8192, gt=0)


class IncludeOptions(_Body):
    entities: EntityOptions | None = None
    chunks: ChunkOptions | None = None
    source_facts: dict[str, Any] | None = None


class _Tagged(_Body):
    tags: list[str] | None = None
    tags_match: HindsightTagsMatch = "any"
    tag_groups: list[Any] | None = None

    def tag_params(self) -> dict[str, Any]:
        """The engine's tags and tags_match. Hindsight's empty tags select everything, but
        for "exact" the untagged memories."""
        if self.tag_groups is not None:
            if self.tags is not None:
                raise APIError(
                    422, "invalid_request", "tags and tag_groups are mutually exclusive", "tag_groups"
                )
            raise unsupported("tag_groups", "boolean tag groups are not supported; use tags and tags_match")
        return {"tags": self.tags or None, "tags_match": TAG_MODES[self.tags_match]}


class RecallBody(_Tagged):
    query: str
    types: list[str] | None = None
    prefer_observations: bool | None = None
    budget: Literal["low", "mid", "high"] = "mid"
    max_tokens: int = Field(4096, gt=0, le=1_000_000)
    trace: bool = False
    query_timestamp: str | None = None
    # omitted: entities are included (Hindsight's default); sent with entities null: not
    include: IncludeOptions | None = Field(default_factory=lambda: IncludeOptions(entities=EntityOptions()))
    min_scores: dict[str, Any] | None = None
    temporal_window: dict[str, Any] | None = None


def _query(query: str) -> str:
    if not re.search(r"\w", query):
        raise APIError(
            422,
            "invalid_request",
            "query must contain at least one word character after normalization",
            "query",
        )
    return query


def recall_types(types: list[str] | None) -> list[str] | None:
    """The fact types a Hindsight recall asks for (all three when none are named; never the
    bank's opinions); [] when it named only "opinion" (recall answers nothing). 422 for a type
    Hindsight does not know."""
    if types is None:
        return list(FACT_TYPES)
    bad = [t for t in types if t not in (*FACT_TYPES, "opinion")]
    if bad:
        raise APIError(422, "invalid_request", f"Invalid fact type(s): {', '.join(bad)}", "types")
    return [t for t in dict.fromkeys(types) if t != "opinion"]


def recall_params(body: RecallBody) -> dict[str, Any]:
    """The catalogue's recall parameters (memlane.records.RecallRequest's fields)."""
    if body.min_scores is not None:
        raise unsupported("min_scores", "score floors are not supported (Memlane's scores have other scales)")
    params: dict[str, Any] = {
        "query": _query(body.query),
        "budget": body.budget,
        "max_tokens": body.max_tokens,
        "types": recall_types(body.types),
        "trace": body.trace,
        **body.tag_params(),
    }
    if body.query_timestamp:
        try:
            at = datetime.fromisoformat(body.query_timestamp.replace("Z", "+00:00"))
        except ValueError:
            raise APIError(
                400,
                "invalid_request",
                f"Invalid query_timestamp format: {body.query_timestamp!r} (ISO 8601)",
                "query_timestamp",
            ) from None
        params["reference_time"] = at.isoformat()
    chunks = body.include.chunks if body.include else None
    if chunks is not None:
        params["include_chunks"] = True
        params["max_chunk_tokens"] = chunks.max_tokens
    return params


class ToolCallOptions(_Body):
    output: bool = True


class ReflectInclude(_Body):
    facts: dict[str, Any] | None = None
    tool_calls: ToolCallOptions | None = None


class ReflectBody(_Tagged):
    query: str
    budget: Literal["low", "mid", "high"] = "low"
    context: str | None = None
    max_tokens: int = Field(4096, gt=0, le=32_768)
    include: ReflectInclude | None = None
    response_schema: dict[str, Any] | None = None
    fact_types: list[str] | None = None
    apply_all_directives: bool = False
    exclude_mental_models: bool = False
    exclude_mental_model_ids: list[str] | None = None


def reflect_params(body: ReflectBody) -> dict[str, Any]:
    """The catalogue's reflect parameters (memlane.reflect.ReflectRequest's fields). The
    context is appended to the question as Hindsight does; ``max_tokens`` bounds the answer;
    reflect here forms no opinions (Hindsight's reflect writes no memories)."""
    if body.fact_types is not None:
        raise unsupported("fact_types", "reflect reads every fact type")
    query = _query(body.query)
    if body.context:
        query = f"{query}\n\nAdditional context: {body.context}"
    params: dict[str, Any] = {
        "query": query,
        "budget": body.budget,
        "answer_max_tokens": body.max_tokens,
        "form_opinions": False,
        **body.tag_params(),
    }
    if body.response_schema is not None:
        params["response_schema"] = body.response_schema
    return params


# banks --------------------------------------------------------------------------------------
class DispositionBody(_Body):
    skepticism: int | None = Field(None, ge=1, le=5)
    literalism: int | None = Field(None, ge=1, le=5)
    empathy: int | None = Field(None, ge=1, le=5)


class BankBody(_Body):
    name: str | None = Field(None, max_length=256)
    mission: str | None = None
    background: str | None = None
    reflect_mission: str | None = None
    disposition: DispositionBody | None = None
    disposition_skepticism: int | None = Field(None, ge=1, le=5)
    disposition_literalism: int | None = Field(None, ge=1, le=5)
    disposition_empathy: int | None = Field(None, ge=1, le=5)


def bank_params(body: BankBody, current: dict[str, Any] | None = None) -> dict[str, Any]:
    """The catalogue's put_bank parameters: Hindsight's mission (``reflect_mission``, else
    ``mission``, else ``background``) is Memlane's background, its disposition traits are
    Memlane's (the individual fields over the ``disposition`` object); ``current``: the bank's
    view, whose other traits are kept."""
    params: dict[str, Any] = {}
    if body.name is not None:
        params["name"] = body.name
    mission = body.reflect_mission or body.mission or body.background
    if mission is not None:
        params["background"] = mission
    traits = {k: v for k, v in (body.disposition.model_dump() if body.disposition else {}).items() if v}
    for trait in ("skepticism", "literalism", "empathy"):
        value = getattr(body, f"disposition_{trait}")
        if value is not None:
            traits[trait] = value
    if traits:
        params["disposition"] = {**((current or {}).get("disposition") or {}), **traits}
    return params


# The keys of a config update (PATCH .../config) Memlane applies; the others are reported as
# ignored. Hindsight's own names: memlane has no per-bank config of retain or recall.
CONFIG_KEYS = ("reflect_mission", "disposition_skepticism", "disposition_literalism", "disposition_empathy")


class ConfigUpdateBody(_Body):
    updates: dict[str, Any]


def config_params(body: ConfigUpdateBody) -> tuple[BankBody, list[str]]:
    """The bank fields a config update sets, and the keys it ignores. Keys may be given in
    Hindsight's environment-variable form (``HINDSIGHT_API_REFLECT_MISSION``)."""
    named = {k.removeprefix("HINDSIGHT_API_").lower(): v for k, v in body.updates.items()}
    applied = {k: v for k, v in named.items() if k in CONFIG_KEYS}
    return BankBody.model_validate(applied), sorted(k for k in named if k not in CONFIG_KEYS)
