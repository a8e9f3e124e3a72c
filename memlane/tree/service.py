"""The tree's part of the engine: consolidate a bank (its facts resolved first) and read its
tree. When that runs after writes is the engine's scheduler's business (memlane/components.py)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Callable

from memlane.banks import BankEmbedders, require_bank
from memlane.errors import InvalidInput
from memlane.facts.service import FactsService
from memlane.interfaces import VectorStore
from memlane.records import Level, TreeNode, utc
from memlane.settings import Settings
from memlane.tree.build import TreeBuilder, TreeReport
from memlane.tree.consolidators import Consolidator
from memlane.tree.invariants import prune_tree
from memlane.tree.nodes import parse_level

if TYPE_CHECKING:
    from memlane.writes import BankWriter

log = logging.getLogger(__name__)


class TreeService:
    """Consolidation and the tree over one engine's store and writer."""

    def __init__(
        self,
        settings: Settings,
        store: VectorStore,
        writer: BankWriter,
        embedders: BankEmbedders,
        consolidator: Callable[[str | None], Consolidator],
        facts: FactsService,
    ) -> None:
        """``consolidator(kind)`` builds the consolidator of ``kind`` (None: the settings')."""
        self.settings = settings
        self.store = store
        self.writer = writer
        self.embedders = embedders
        self.consolidator = consolidator
        self.facts = facts

    def consolidate(
        self,
        bank_id: str,
        *,
        now: datetime | None = None,
        consolidator: str | None = None,
        progress: Callable[[Level, int], None] | None = None,
    ) -> TreeReport:
        """Consolidate the bank's temporal tree: every session, day and week window closed by
        ``now`` (default: the current time) and the profile, written where their children
        changed (a re-run over the same data writes nothing). ``consolidator``: "auto",
        "rules" or "llm" (default: the settings'). Conflicts between facts are resolved first
        (:meth:`FactsService.resolve`; its counts are the report's ``facts``). Returns a
        :class:`TreeReport`."""
        bank = require_bank(self.store, bank_id)
        embedder = self.embedders.of(bank)  # a node's vector is searched with the bank's units
        resolved = self.facts.resolve(bank_id)
        builder = TreeBuilder(
            self.store,
            embedder,
            self.consolidator(consolidator),
            session_idle_s=self.settings.tree.session_idle_s,
        )

        # The build reads the bank outside its lease (a slow LLM never blocks a retain) and
        # writes under it. A write in between makes what it read stale in a way pruning cannot
        # see: a retain that says a document again rewrites its units under the same ids
        # (positional, memlane/ids.py) at their new time, so the build's session would name
        # units that exist with an interval that no longer covers them (the soak's doctor
        # finding, tree_containment on a session). So the nodes are written only over the
        # revision the build started from; when the bank moved, the build runs again holding
        # the lease (only after such a race: retains wait for that one).
        seen = self.store.get_revision(bank_id)
        moved = False

        def write(bank: str, upserts: list[TreeNode], deletes: list[str]) -> None:
            nonlocal moved
            with self.writer.write(bank) as w:
                if self.store.get_revision(bank) != seen:
                    moved = True  # nothing written: no revision bump
                    return
                w.tree(upserts, deletes)
                # Units deleted while the tree was being built (outside the lease, so a slow
                # LLM never blocks a retain) must not leave nodes pointing at them.
                prune_tree(self.store, bank)

        at = utc(now) if now else None
        report = builder.build(bank_id, write, now=at, progress=progress)
        if moved:
            with self.writer.leases.hold(bank_id):
                seen = self.store.get_revision(bank_id)
                report = builder.build(bank_id, write, now=at, progress=progress)
        report.facts = {"written": resolved.written, **resolved.outcomes}
        return report

    def nodes(
        self,
        bank_id: str,
        *,
        level: int | str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[TreeNode]:
        """The bank's tree nodes (no vectors) by level then start, optionally of one ``level``
        (2-5 or its name) and overlapping the window ``since`` (inclusive) to ``until``
        (exclusive). Raises InvalidInput for a bad level or window, BankNotFound."""
        require_bank(self.store, bank_id)
        want: Level | None = None
        if level is not None:
            try:
                want = parse_level(level)
            except ValueError as exc:
                raise InvalidInput(f"level: {exc}") from None
            if want == Level.unit:
                raise InvalidInput("level: 1 is the memory units (GET .../memories); the tree holds 2-5")
        lo = utc(since) if since else None
        hi = utc(until) if until else None
        if lo and hi and hi <= lo:
            raise InvalidInput("until: must be after since")
        out = []
        for n in self.store.list_tree_nodes(bank_id):
            if want is not None and n.level != want:
                continue
            if (lo and n.end < lo) or (hi and n.start >= hi):
                continue
            out.append(n)
        return out

    def consolidate_quietly(self, bank_id: str) -> None:
        """:meth:`consolidate`, logging a failure instead of raising it (the job after a write:
        the write that queued it succeeded)."""
        try:
            report = self.consolidate(bank_id)
        except Exception as exc:  # noqa: BLE001 - a failed background job is logged, not raised
            log.warning("tree consolidation of %s failed: %s: %s", bank_id, type(exc).__name__, exc)
            return
        if report.changed:
            log.info("tree of %s: %s", bank_id, report.as_dict())
