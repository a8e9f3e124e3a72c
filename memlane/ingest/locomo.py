"""The LoCoMo JSON reader: a list of samples (or one sample object), each with a ``sample_id``
and a ``conversation`` holding ``session_N`` turn lists and their ``session_N_date_time``
strings. One :class:`Conversation` per sample, its document id the ``sample_id`` and its bank
(when each sample gets one: the backfill, the evals) ``bank_id_for(sample_id)``.

Strict by default (the first problem raises :class:`InputError` naming the JSON path); with
``reject`` a bad sample is rejected alone, with the reason and its turn count, and its
file-mates are still read. The ``qa`` items are the evaluation's (``evals.locomo_data``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memlane.ingest.common import (
    Conversation,
    InputError,
    Reject,
    json_message,
    make_turn,
    read_text,
    type_name,
)
from memlane.ingest.dataset_times import dataset_time, locomo_time
from memlane.records import Turn

# A LoCoMo turn that shares an image carries its BLIP caption (which becomes the turn's
# caption), the search query the image was found with and its URL (both kept in Turn.metadata).
LOCOMO_CAPTION_KEY = "blip_caption"
LOCOMO_TURN_METADATA_KEYS = ("query", "img_url")

_SESSION_RE = re.compile(r"^session_(\d+)$")
_SESSION_DATE_RE = re.compile(r"^session_(\d+)_date_time$")


def read_locomo(
    path: str | Path, text: str | None = None, *, reject: Reject | None = None
) -> list[Conversation]:
    """Read a LoCoMo file (``text``: its content, when already read). Without ``reject`` the
    whole file is validated and the first problem raises :class:`InputError`; with it, each
    bad sample (or an unreadable file) is handed to ``reject`` and the rest are returned."""
    path = Path(path)
    name = path.name
    try:
        text = read_text(path) if text is None else text
        data = _parse(name, text)
        samples, paths = _samples(name, data)
    except InputError as exc:
        if reject is None:
            raise
        reject(name, "$", str(exc))
        return []
    conversations: list[Conversation] = []
    seen: dict[str, str] = {}
    for sample, jpath in zip(samples, paths):
        try:
            conv = _locomo_sample(name, sample, jpath)
            if conv.document_id in seen:
                raise InputError(
                    f"{name}: {jpath}.sample_id: duplicate sample_id {conv.document_id!r} "
                    f"(first at {seen[conv.document_id]})"
                )
        except InputError as exc:
            if reject is None:
                raise
            reject(name, jpath, str(exc), max(_turn_count(sample), 1))
            continue
        seen[conv.document_id] = jpath
        conversations.append(conv)
    return conversations


def _parse(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        lineno = getattr(exc, "lineno", None)
        at = f" line {lineno} column {getattr(exc, 'colno', None)}" if lineno is not None else ""
        raise InputError(f"{name}{at}: not valid JSON: {json_message(exc)}") from None


def _samples(name: str, data: Any) -> tuple[list[Any], list[str]]:
    if isinstance(data, dict):
        return [data], ["$"]
    if not isinstance(data, list):
        raise InputError(
            f"{name}: $: expected a list of LoCoMo samples or one sample object, got {type_name(data)}"
        )
    if not data:
        raise InputError(f"{name}: $: the list holds no samples")
    return data, [f"$[{i}]" for i in range(len(data))]


def _turn_count(sample: Any) -> int:
    conv = sample.get("conversation") if isinstance(sample, dict) else None
    if not isinstance(conv, dict):
        return 0
    return sum(len(v) for k, v in conv.items() if _SESSION_RE.match(k) and isinstance(v, list))


def _locomo_sample(name: str, sample: Any, jpath: str) -> Conversation:
    if not isinstance(sample, dict):
        raise InputError(f"{name}: {jpath}: expected a sample object, got {type_name(sample)}")
    sample_id = sample.get("sample_id")
    if "sample_id" not in sample:
        raise InputError(f"{name}: {jpath}: missing field 'sample_id'")
    if not isinstance(sample_id, str) or not sample_id.strip():
        raise InputError(f"{name}: {jpath}.sample_id: expected a non-empty string, got {sample_id!r}")
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        what = (
            "missing field 'conversation'"
            if "conversation" not in sample
            else (f"field 'conversation': expected an object, got {type_name(conv)}")
        )
        raise InputError(f"{name}: {jpath}: {what}")
    cpath = f"{jpath}.conversation"

    sessions: dict[int, str] = {}
    dates: dict[int, str] = {}
    for key, value in conv.items():
        m = _SESSION_RE.match(key)
        if m:
            if not isinstance(value, list):
                raise InputError(f"{name}: {cpath}.{key}: expected a list of turns, got {type_name(value)}")
            sessions[int(m.group(1))] = key
            continue
        m = _SESSION_DATE_RE.match(key)
        if m:
            dates[int(m.group(1))] = key
    if not sessions:
        raise InputError(f"{name}: {cpath}: no session_N turn lists")

    speakers: list[str] = []
    for key in ("speaker_a", "speaker_b"):
        value = conv.get(key)
        if isinstance(value, str) and value.strip() and value not in speakers:
            speakers.append(value)

    turns: list[Turn] = []
    first_seen: dict[str, str] = {}
    for n in sorted(sessions):
        skey = sessions[n]
        dkey = f"{skey}_date_time"
        if n not in dates:
            raise InputError(f"{name}: {cpath}.{skey}: session has no '{dkey}'")
        raw_date = conv[dkey]
        if not isinstance(raw_date, str) or not raw_date.strip():
            raise InputError(f"{name}: {cpath}.{dkey}: expected a non-empty date string, got {raw_date!r}")

        def date_where(cpath: str = cpath, dkey: str = dkey) -> str:
            return f"{name}: {cpath}.{dkey}"

        when = dataset_time(raw_date, locomo_time, date_where)
        for i, raw in enumerate(conv[skey]):
            tpath = f"{cpath}.{skey}[{i}]"
            if not isinstance(raw, dict):
                raise InputError(f"{name}: {tpath}: expected a turn object, got {type_name(raw)}")
            for fname in ("speaker", "dia_id", "text"):
                if fname not in raw:
                    raise InputError(f"{name}: {tpath}: missing field {fname!r}")
                value = raw[fname]
                if not isinstance(value, str):
                    raise InputError(f"{name}: {tpath}.{fname}: expected a string, got {type_name(value)}")
                if fname != "text" and not value.strip():
                    raise InputError(f"{name}: {tpath}.{fname}: must not be empty")
            dia_id = raw["dia_id"]
            if dia_id in first_seen:
                raise InputError(
                    f"{name}: {tpath}.dia_id: duplicate dia_id {dia_id!r} in sample "
                    f"{sample_id!r} (first at {first_seen[dia_id]})"
                )
            first_seen[dia_id] = tpath
            speaker = raw["speaker"]
            if speaker not in speakers:
                speakers.append(speaker)
            caption = raw.get(LOCOMO_CAPTION_KEY, "")
            if not isinstance(caption, str):
                raise InputError(
                    f"{name}: {tpath}.{LOCOMO_CAPTION_KEY}: expected a string, got {type_name(caption)}"
                )
            meta = {k: raw[k] for k in LOCOMO_TURN_METADATA_KEYS if k in raw}
            turns.append(
                make_turn(
                    f"{name}: {tpath}",
                    document_id=sample_id,
                    session_id=skey,
                    turn_id=dia_id,
                    index=i,
                    speaker=speaker,
                    text=raw["text"],
                    timestamp=when,
                    kind="image" if LOCOMO_CAPTION_KEY in raw or "img_url" in raw else "text",
                    caption=caption,
                    metadata=meta,
                )
            )

    metadata: dict[str, Any] = {"format": "locomo", "source": name}
    for key in ("speaker_a", "speaker_b"):
        if isinstance(conv.get(key), str):
            metadata[key] = conv[key]
    orphans = [dates[n] for n in sorted(dates) if n not in sessions]
    if orphans:  # conv-26 carries date keys for sessions it does not have
        metadata["dates_without_session"] = orphans
    return Conversation(document_id=sample_id, turns=turns, speakers=speakers, metadata=metadata)
