"""The tree's part of the engine facade (:class:`memlane.engine.Memory` inherits it):
consolidate a bank, read its tree, and the online schedule after writes."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Callable

from memlane.errors import InvalidInput
from memlane.model import Level, TreeNode, utc
from memlane.tree.build import TreeBuilder, TreeReport
from memlane.tree.invariants import prune_tree
from memlane.tree.model import parse_level

log = logging.getLogger(__name__)


class TreeMethods:
    """Consolidation and the tree on the engine (needs the engine's store, writer, embedder
    and consolidator; see memlane/components.py)."""

    store: Any
    writer: Any
    embedder: Any
    settings: Any
    _tree_worker: Any
    get_bank: Callable[[str], Any]
    consolidator: Callable[..., Any]
    resolve_facts: Callable[[str], Any]

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
        (:meth:`resolve_facts`; its counts are the report's ``facts``). Returns a
        :class:`TreeReport`."""
        self.get_bank(bank_id)
        resolved = self.resolve_facts(bank_id)
        builder = TreeBuilder(
            self.store,
            self.embedder,
            self.consolidator(consolidator),
            session_idle_s=self.settings.tree.session_idle_s,
        )

        def write(bank: str, upserts: list[TreeNode], deletes: list[str]) -> None:
            with self.writer.write(bank) as w:
                w.tree(upserts, deletes)
                # Units deleted while the tree was being built (outside the lease, so a slow
                # LLM never blocks a retain) must not leave nodes pointing at them.
                prune_tree(self.store, bank)

        report = builder.build(bank_id, write, now=utc(now) if now else None, progress=progress)
        report.facts = {"written": resolved.written, **resolved.outcomes}
        return report

    def tree(
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
        self.get_bank(bank_id)
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

    # the online schedule --------------------------------------------------------------------
    def _tree_after_write(self, bank_id: str) -> None:
        """After a retain or a deletion: consolidate as ``tree.online`` says ("background":
        queued once per bank, never blocking the write that asked; "sync"; "off")."""
        mode = self.settings.tree.online
        if mode == "off":
            return
        if mode == "sync":
            self._consolidate_quietly(bank_id)
            return
        self._tree_background().submit_once(bank_id, lambda: self._consolidate_quietly(bank_id))

    def _consolidate_quietly(self, bank_id: str) -> None:
        try:
            report = self.consolidate(bank_id)
        except Exception as exc:  # noqa: BLE001 - a failed background job is logged, not raised
            log.warning("tree consolidation of %s failed: %s: %s", bank_id, type(exc).__name__, exc)
            return
        if report.changed:
            log.info("tree of %s: %s", bank_id, report.as_dict())

    def _tree_background(self):
        if self._tree_worker is None:
            from memlane.background import BackgroundWorker

            self._tree_worker = BackgroundWorker(name="memlane-tree", max_pending=256)
        return self._tree_worker

    def wait_tree(self) -> None:
        """Wait for the queued background consolidations."""
        if self._tree_worker is not None:
            self._tree_worker.flush()
