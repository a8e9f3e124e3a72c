"""Which window of each level a leaf falls in, and when a window closes (TiMem's stratified
schedule): a session when the bank's next session begins or after ``session_idle_s`` without a
turn; a day at its end (UTC midnight) once its sessions are closed; an ISO week (Monday to
Sunday) at its end once its days are; the profile is refined whenever a week closes. A window
is consolidated only once closed, so a node is never written from half a window."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from memlane.records import utc
from memlane.tree.nodes import Level

DAY = timedelta(days=1)


@dataclass(slots=True)
class Leaf:
    """What the tree needs of a memory unit."""

    id: str
    text: str
    at: datetime  # when it was said (mentioned_at)
    session: str  # "document|session"
    source_turns: list[str]
    entity_ids: list[str]
    vector: np.ndarray | None = None  # float32: a 100k-unit bank as lists would take ~1.2 GB
    profile: bool = True  # the profile may quote it (memlane/tree/profile.py)


@dataclass(slots=True)
class Window:
    """One window of one level: its key, the child keys under it, and its span."""

    level: Level
    key: str
    children: list[str] = field(default_factory=list)
    start: datetime | None = None
    end: datetime | None = None


def day_key(at: datetime) -> str:
    return utc(at).date().isoformat()


def week_key(day: str) -> str:
    y, w, _ = datetime.fromisoformat(day).isocalendar()
    return f"{y}-W{w:02d}"


def day_end(day: str) -> datetime:
    return utc(datetime.fromisoformat(day)) + DAY


def week_end(week: str) -> datetime:
    year, w = week.split("-W")
    monday = datetime.fromisocalendar(int(year), int(w), 1)
    return utc(monday) + 7 * DAY


def closed_windows(leaves: list[Leaf], now: datetime, session_idle_s: float) -> dict[Level, list[Window]]:
    """The closed windows of every level over ``leaves``, each with its children's keys
    (leaf ids for a session), in time order. A session belongs to the day it starts on."""
    now = utc(now)
    sessions: dict[str, Window] = {}
    for leaf in sorted(leaves, key=lambda x: (x.at, x.id)):
        w = sessions.setdefault(leaf.session, Window(Level.session, leaf.session, start=leaf.at, end=leaf.at))
        w.children.append(leaf.id)
        w.start, w.end = min(w.start or leaf.at, leaf.at), max(w.end or leaf.at, leaf.at)
    ordered = sorted(sessions.values(), key=lambda w: (w.start, w.key))
    last_start = max((w.start for w in ordered if w.start), default=None)
    idle = timedelta(seconds=session_idle_s)
    closed_sessions = [
        w
        for w in ordered
        if (w.start is not None and last_start is not None and w.start < last_start)
        or (w.end is not None and now - w.end >= idle)
    ]
    open_days = {day_key(w.start) for w in ordered if w not in closed_sessions and w.start}
    days: dict[str, Window] = {}
    for s in closed_sessions:
        assert s.start is not None and s.end is not None
        d = days.setdefault(day_key(s.start), Window(Level.day, day_key(s.start), start=s.start, end=s.end))
        d.children.append(s.key)
        d.start, d.end = min(d.start or s.start, s.start), max(d.end or s.end, s.end)
    closed_days = [d for k, d in sorted(days.items()) if k not in open_days and now >= day_end(k)]
    open_weeks = {week_key(k) for k in days if k not in {d.key for d in closed_days}} | {
        week_key(k) for k in open_days
    }
    weeks: dict[str, Window] = {}
    for d in closed_days:
        assert d.start is not None and d.end is not None
        k = week_key(d.key)
        w = weeks.setdefault(k, Window(Level.week, k, start=d.start, end=d.end))
        w.children.append(d.key)
        w.start, w.end = min(w.start or d.start, d.start), max(w.end or d.end, d.end)
    closed_weeks = [w for k, w in sorted(weeks.items()) if k not in open_weeks and now >= week_end(k)]
    out: dict[Level, list[Window]] = {
        Level.session: closed_sessions,
        Level.day: closed_days,
        Level.week: closed_weeks,
        Level.profile: [],
    }
    if closed_weeks:
        starts = [w.start for w in closed_weeks if w.start]
        ends = [w.end for w in closed_weeks if w.end]
        out[Level.profile] = [
            Window(Level.profile, "profile", [w.key for w in closed_weeks], min(starts), max(ends))
        ]
    return out
