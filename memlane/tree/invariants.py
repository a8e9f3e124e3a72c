"""The tree's invariants, checked in one place (tests, the doctor): every node's children exist
one level down (a session's are memory units of the bank), a parent's interval covers its
children's (temporal containment), and no level holds more nodes than the one below
(progressive consolidation). And the rule that keeps them after a deletion."""

from __future__ import annotations

from datetime import datetime
from typing import Collection, Iterable

from memlane.interfaces import VectorStore
from memlane.tree.nodes import Level, TreeNode


def tree_problems(nodes: Iterable[TreeNode], units: dict[str, datetime]) -> list[str]:
    """Every broken invariant of a bank's tree, one line each ([] when sound). ``units`` maps
    the bank's memory unit ids to when each was said (its time in the tree)."""
    nodes = list(nodes)
    by_id = {n.id: n for n in nodes}
    problems: list[str] = []
    for n in nodes:
        if n.start > n.end:
            problems.append(f"{n.id}: starts after it ends")
        for c in n.children:
            if n.level == Level.session:
                if c not in units:
                    problems.append(f"{n.id}: child {c} is not a memory unit of the bank")
                    continue
                c_start = c_end = units[c]
            else:
                child = by_id.get(c)
                if child is None:
                    problems.append(f"{n.id}: child {c} does not exist")
                    continue
                if int(child.level) != int(n.level) - 1:
                    problems.append(f"{n.id}: child {c} is level {int(child.level)}, not {int(n.level) - 1}")
                c_start, c_end = child.start, child.end
            if c_start < n.start or c_end > n.end:
                problems.append(f"{n.id}: interval does not cover child {c}")
    counts = {lv: sum(1 for n in nodes if n.level == lv) for lv in Level if lv != Level.unit}
    below = len(units)
    for lv in (Level.session, Level.day, Level.week, Level.profile):
        if counts[lv] > below:
            problems.append(f"level {lv.name} holds {counts[lv]} nodes, more than the {below} below it")
        below = counts[lv]
    if counts[Level.profile] > 1:
        problems.append(f"{counts[Level.profile]} profile nodes, expected at most one")
    return problems


def outdated_nodes(
    nodes: Iterable[TreeNode],
    *,
    removed: Collection[str] = (),
    sessions: Collection[str] = (),
    windows: Collection[str] = (),
) -> list[str]:
    """The ids of the nodes a change makes outdated: every session with a child in ``removed``
    (unit ids deleted) or whose window is one of ``sessions`` (keys "document|session" whose
    units were written again or added), every day, week or profile whose window is one of
    ``windows`` (keys: a new or moved session falls in them), and their ancestors (their
    children lists name them)."""
    nodes = list(nodes)
    removed, sessions, windows = set(removed), set(sessions), set(windows)
    by_id = {n.id: n for n in nodes}
    gone: set[str] = set()
    for lv in (Level.session, Level.day, Level.week, Level.profile):
        for n in nodes:
            if n.level != lv:
                continue
            if lv == Level.session:
                broken = n.key in sessions or any(c in removed for c in n.children)
            else:
                broken = n.key in windows or any(c in gone or c not in by_id for c in n.children)
            if broken:
                gone.add(n.id)
    return sorted(gone)


def prune_tree(store: VectorStore, bank_id: str, removed: frozenset[str] | None = None) -> None:
    """After memory units were deleted: remove every node with a child that no longer exists,
    and its ancestors (their children lists name it), so the tree never points at nothing. The
    next consolidation writes the removed windows again from what remains. ``removed``: the
    unit ids just deleted (the writer's delete hook), so the bank's ids are not listed (that
    listing made every re-retain of a document O(bank), benchmarks/replace_cost.py); None
    checks the children against every unit the store holds (consolidation)."""
    if removed is not None and not removed:
        return
    nodes = store.list_tree_nodes(bank_id)
    if not nodes:
        return
    if removed is None:
        held = set(store.list_unit_ids(bank_id))
        removed = frozenset(c for n in nodes if n.level == Level.session for c in n.children if c not in held)
    gone = outdated_nodes(nodes, removed=removed)
    if gone:
        store.delete_tree_nodes(bank_id, gone)
