"""What one retain call reports: its counts, what it left stale for consolidation, its time."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


def _no_stale() -> dict[str, int]:
    return {"tree_sessions": 0, "facts": 0}


@dataclass
class RetainReport:
    """What one retain call wrote, kept and left for consolidation."""

    bank_id: str
    documents: int = 0
    turns: int = 0
    chunks: int = 0  # chunk records written
    units: int = 0  # memories written
    # memories the bank held as this call would write them: kept as they were, not written
    unchanged: int = 0
    removed: int = 0  # memories of earlier versions deleted (changed or gone)
    entities: int = 0
    links: int = 0
    relinked: int = 0  # other memories whose semantic links the written ones changed
    # Documents whose LLM extraction runs in the background (memlane/retain/deferred.py).
    deferred: int = 0
    # What the call left out of date in a consolidated bank, for `memlane consolidate`: the
    # sessions whose tree nodes it removed (their memories changed) or lacks (new sessions),
    # and the facts (memories with a slot or a resolution) whose resolution may change.
    stale: dict[str, int] = field(default_factory=_no_stale)
    seconds: float = 0.0
    timings_s: dict[str, float] = field(default_factory=dict)

    COUNTS = (
        "documents",
        "turns",
        "chunks",
        "units",
        "unchanged",
        "removed",
        "entities",
        "links",
        "relinked",
    )

    def as_dict(self) -> dict:
        return asdict(self)

    def add(self, other: RetainReport) -> None:
        """Add another report's counts and seconds to this one (a call that retains several
        documents one at a time reports their sum)."""
        for key in (*self.COUNTS, "deferred", "seconds"):
            setattr(self, key, getattr(self, key) + getattr(other, key))
        for key, n in other.stale.items():
            self.stale[key] = self.stale.get(key, 0) + n
