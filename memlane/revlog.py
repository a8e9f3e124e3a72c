"""The revision log: what each of a bank's last writes changed, so a process holding the bank
warm applies the change instead of reloading the whole bank (memlane/derived.py).

Every write bumps the bank's revision token once (memlane/writes.py). A write that knows what it
changed (the unit ids it upserted and removed) also appends a :class:`RevisionStep` ``base ->
token`` to the bank's log; a process holding the bank at an older token walks the steps from its
token to the current one and applies their union: the upserted units fetched by id (one query),
the removed ones dropped from its index and graph. Anything the log cannot prove (a token not in
the chain, a write that reset the log, a lost or stale log) means a full reload, as before.

Appending is a read-modify-write of the log, safe because every write holds the bank's lease
(memlane/leases.py). The chain check makes a stray writer harmless too: a step is appended only
when the writer's own state was at the current token (``base``), so a revision bumped by
anything else (a bulk load calling ``bump_revision`` alone, a writer whose lease expired) breaks
the chain and readers reload.

Bound (:data:`MAX_LOG_BYTES`): the log is one JSON value of the store, rewritten whole by every
write, so it keeps the newest steps whose JSON fits in 8,000 bytes: with 32-hex unit ids about
230 ids (a 1-turn retain writes 1-10 units, so dozens of writes). Why not Milvus's 64 KiB JSON
limit: Milvus Lite keeps each superseded version of the record in memory until it compacts, and
with a 60,000-byte log its server grew 313 MB in the 10-minute soak (tests/serving/test_soak.py,
limit 200 MB). A replica that fell further behind, or a single write of more ids (a whole
conversation backfilled), loads the bank in full.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

#: The most bytes the log's JSON may take (see the module docstring: far below Milvus's 65,536).
MAX_LOG_BYTES = 8_000
#: The most steps the log keeps, however small they are (a bound on the walk, not on bytes).
MAX_STEPS = 64


@dataclass(slots=True)
class RevisionDelta:
    """What one write changed in a bank: ``base`` is the revision the writer's state was at
    when the write began; ``upserted`` and ``removed`` are unit ids."""

    base: str
    upserted: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RevisionStep:
    """One write in the log: the revision went from ``base`` to ``token``."""

    base: str
    token: str
    upserted: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"b": self.base, "t": self.token, "u": self.upserted, "r": self.removed}

    @staticmethod
    def from_json(raw: dict[str, Any]) -> RevisionStep:
        return RevisionStep(str(raw["b"]), str(raw["t"]), list(raw.get("u") or []), list(raw.get("r") or []))


def log_record(token: str, steps: Sequence[RevisionStep]) -> dict[str, Any]:
    """The JSON record of a log that ends at ``token``."""
    return {"token": token, "steps": [s.as_json() for s in steps]}


def parse_log(record: dict[str, Any] | None) -> tuple[str, list[RevisionStep]]:
    """(token the log ends at, steps) of a stored record; ("", []) when there is none or it is
    not a log this code wrote."""
    if not isinstance(record, dict) or not isinstance(record.get("token"), str):
        return "", []
    try:
        return record["token"], [RevisionStep.from_json(s) for s in record.get("steps") or []]
    except (KeyError, TypeError, ValueError):
        return "", []


def append(
    current: str, log_token: str, steps: Sequence[RevisionStep], delta: RevisionDelta | None, token: str
) -> list[RevisionStep]:
    """The steps of the log after a write that bumped ``current`` to ``token``: the old steps
    (when the log ends at ``current``) plus this write's, trimmed to the bound; [] when the
    write's delta is unknown or does not start at ``current`` (the chain is broken)."""
    if delta is None or delta.base != current:
        return []
    kept = list(steps) if log_token == current else []
    kept.append(RevisionStep(current, token, sorted(set(delta.upserted)), sorted(set(delta.removed))))
    return trim(kept)


def trim(steps: list[RevisionStep]) -> list[RevisionStep]:
    """The newest steps that fit in :data:`MAX_LOG_BYTES` and :data:`MAX_STEPS` (possibly
    none: a single step too large to keep)."""
    steps = steps[-MAX_STEPS:]
    sizes = [len(json.dumps(s.as_json())) + 2 for s in steps]
    budget = MAX_LOG_BYTES - 64  # the record's token and keys
    total = 0
    start = len(steps)
    for i in range(len(steps) - 1, -1, -1):
        if total + sizes[i] > budget:
            break
        total += sizes[i]
        start = i
    return steps[start:]


def between(held: str, current: str, steps: Sequence[RevisionStep]) -> tuple[set[str], set[str]] | None:
    """The union of the steps that lead from ``held`` to ``current``: (ids to fetch again,
    ids to remove, never overlapping), or None when the log cannot prove the path (the caller
    reloads in full). ``current`` may be older than the log's end (a write landed after the
    caller read the revision): the path stops at ``current``."""
    if held == current:
        return set(), set()
    if not current:  # the bank was deleted: nothing to walk to
        return None
    start = next((i for i, s in enumerate(steps) if s.base == held), None)
    if start is None:
        return None
    upserted: set[str] = set()
    removed: set[str] = set()
    expect = held
    for step in steps[start:]:
        if step.base != expect:  # a gap: not one chain
            return None
        upserted.update(step.upserted)
        removed.update(step.removed)
        expect = step.token
        if expect == current:
            # fetched ids reflect the store now: an id removed, then written again, is fetched
            return upserted, removed - upserted
    return None
