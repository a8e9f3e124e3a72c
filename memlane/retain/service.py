"""Retain on the engine: conversations and API items written into a bank through the bank
writer, then what follows a retain queued (memlane/components.py).

One rule for every retain path (the backfill, ``memlane retain``, files, the API, MCP, the
LangGraph store): a document retained again replaces what it held, in one write (one lease, one
revision bump), so the bank ends as a fresh bank given the new version would (no memories of
turns the new version dropped). Only what changed is written (memlane/retain/plan.py): a
document retained again unchanged writes nothing, bumps nothing and queues nothing, and its
memories keep their validity, supersessions, links and the tree over them; a changed one
rewrites what changed, and the report's ``stale`` says what it left for consolidation."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from memlane.banks import Banks, valid_bank_id
from memlane.records import RetainItem, Turn
from memlane.retain.deferred import DeferredExtraction
from memlane.retain.facts import Extractor
from memlane.retain.items import check_tags, plan_items
from memlane.retain.pipeline import Retainer
from memlane.retain.report import RetainReport
from memlane.timings import recording, stage

if TYPE_CHECKING:
    from memlane.writes import BankWriter


class RetainService:
    """Retain calls: a document retained again replaces what it held (see the module), the
    bank created when missing unless told not."""

    def __init__(
        self,
        banks: Banks,
        writer: BankWriter,
        retainer: Retainer,
        extraction: DeferredExtraction,
        retained: Callable[[str], None],
    ) -> None:
        """``retained(bank_id)`` queues what follows a retain."""
        self.banks = banks
        self.writer = writer
        self.retainer = retainer
        self.extraction = extraction
        self.retained = retained

    def retain(
        self,
        bank_id: str,
        conversations: Sequence[tuple[str, Sequence[Turn]]],
        *,
        tags: Sequence[str] = (),
        create_bank: bool = True,
        progress: Callable[[int], None] | None = None,
        extractor: Extractor | None = None,
    ) -> RetainReport:
        """Retain ``(document_id, turns)`` pairs, all in one write; each document replaces
        what the bank held under its id. Creates the bank when missing unless
        ``create_bank`` is False; ``extractor`` replaces the configured one for this call
        (e.g. replies of a batch LLM stage). Returns a
        :class:`~memlane.retain.report.RetainReport`."""
        t0 = time.perf_counter()
        with recording() as timings:
            check_tags(tags)  # before the bank is created: bad input leaves no bank behind
            with stage("bank"):
                bank = self.banks.to_retain_into(bank_id, create_bank)
            with self.writer.write(bank_id) as w:
                report = self.retainer.replace(
                    bank, conversations, w, tags=tags, progress=progress, extractor=extractor
                )
            if w.changed:  # an unchanged retain has nothing to follow it
                with stage("queue"):
                    self.retained(bank_id)
        return _timed(report, timings, t0)

    def retain_items(
        self,
        bank_id: str,
        items: Sequence[RetainItem | dict],
        *,
        document_id: str | None = None,
        tags: Sequence[str] = (),
        create_bank: bool = True,
        progress: Callable[[int], None] | None = None,
    ) -> RetainReport:
        """Retain API items (see :class:`~memlane.records.RetainItem`). Items are grouped into
        documents by ``document_id`` (the item's, else the call's, else one derived from the
        content); each document replaces what it held before, in one write. Validated whole
        before anything is written."""
        t0 = time.perf_counter()
        with recording() as timings:
            with stage("validate"):
                plan = plan_items(bank_id, items, document_id, tags)
            with stage("bank"):
                bank = self.banks.to_retain_into(bank_id, create_bank)
            total = RetainReport(bank_id=bank_id)
            # the LLM's extraction deferred: the rules now, and what the LLM extracted from
            # the same turns counts as current
            episode = self.extraction.episode_extractor()
            accept = () if episode is None else (self.retainer.extractor.name,)
            for doc_id, (doc_tags, turns) in plan.items():
                with self.writer.write(bank_id) as w:
                    report = self.retainer.replace(
                        bank,
                        [(doc_id, turns)],
                        w,
                        tags=doc_tags,
                        progress=progress,
                        extractor=episode,
                        accept=accept,
                    )
                if w.changed:  # an unchanged document has nothing to follow it
                    with stage("queue"):
                        if episode is not None:
                            self.extraction.extract_later(bank_id, doc_id, turns, doc_tags)
                            report.deferred = 1
                        self.retained(bank_id)
                total.add(report)
        return _timed(total, timings, t0)

    def retain_file(
        self,
        bank_id: str,
        path: str | Path,
        *,
        format: str = "auto",
        tags: Sequence[str] = (),
        progress: Callable[[int], None] | None = None,
    ) -> RetainReport:
        """Load a LoCoMo JSON or JSONL file (validated whole before anything is written) and
        retain it."""
        from memlane.ingest import load_conversations

        check = valid_bank_id(bank_id)
        conversations = load_conversations(Path(path), format=format)
        return self.retain(
            check, [(c.document_id, c.turns) for c in conversations], tags=tags, progress=progress
        )


def _timed(report: RetainReport, timings: dict[str, float], t0: float) -> RetainReport:
    """The report with the whole call's wall time and every stage it recorded (the bank
    load, the lease, the write's stages, the queueing of what follows: memlane/timings.py)."""
    report.seconds = time.perf_counter() - t0
    report.timings_s = {k: round(v, 4) for k, v in timings.items()}
    return report
