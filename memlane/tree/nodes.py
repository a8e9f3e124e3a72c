"""The temporal memory tree (TiMem): its levels and its nodes.

Level 1 is the memory units the bank already holds (facts and turns); levels 2-5 are
consolidated nodes written by :mod:`memlane.tree.build`: one per session, day, ISO week and one
profile per bank. A node's interval is the union of its children's; a leaf's time is when it
was said (``mentioned_at``), not the time it talks about, so "last year" in a turn does not
stretch its session over a year and every window nests in the one above it. ``Level`` and
``TreeNode`` live in :mod:`memlane.records` with the rest of the memory model (recall results
carry nodes).
"""

from __future__ import annotations

import hashlib

from memlane.records import LEVEL_NAMES, Level, TreeNode

NODE_LEVELS = (Level.session, Level.day, Level.week, Level.profile)

__all__ = ["LEVEL_NAMES", "Level", "NODE_LEVELS", "TreeNode", "node_id", "parse_level"]


def parse_level(value: int | str) -> Level:
    """A level from its number (1-5) or name (unit, session, day, week, profile); ValueError
    naming the allowed values otherwise."""
    if isinstance(value, str) and not value.strip().isdigit():
        try:
            return Level[value.strip().lower()]
        except KeyError:
            pass
    else:
        try:
            return Level(int(value))
        except (TypeError, ValueError):
            pass
    allowed = ", ".join(f"{lv.value} ({lv.name})" for lv in Level)
    raise ValueError(f"unknown tree level {value!r}: expected one of {allowed}")


def node_id(bank_id: str, level: Level | int, key: str) -> str:
    """Deterministic id of the node of ``level`` for window ``key`` (a re-run of consolidation
    over the same data writes the same ids)."""
    digest = hashlib.sha256(f"{bank_id}\x1f{int(level)}\x1f{key}".encode()).hexdigest()[:24]
    return f"tn{int(level)}_{digest}"
