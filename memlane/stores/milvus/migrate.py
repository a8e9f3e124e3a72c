"""Move a store's banks from one tenant layout to the other (``memlane store migrate``).

Per bank: clear whatever the target layout holds of it (a copy cut short by a crash), copy
its units (with vectors), chunks, entities and tree nodes through the store's own read and
write methods, then compare the four counts and the bank's revision with the source. A bank
that checks out leaves a checkpoint (its revision and counts) in the operations collection, so
a re-run skips it while neither has changed. Only when every bank has a valid checkpoint is
the target layout recorded as the store's (the switch); until then the source layout stays the
one the store opens, so a migration cut short at any point loses nothing. Banks, revisions,
operations, mental models and directives are global collections: both layouts share them.

Writers must be stopped meanwhile (stop ``memlane serve``): a bank written during its copy
fails its check and is copied again (up to three times), but a write after its check is seen
only by the next run's revision comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from memlane.records import check_bank_id
from memlane.settings import Settings
from memlane.stores.milvus.layout import LAYOUTS
from memlane.stores.milvus.store import MilvusStore

COPY_BATCH = 1000  # units per read page and write call (the store's write batch)
TRIES = 3  # copies of one bank before giving up on a bank that keeps changing


@dataclass
class BankResult:
    """One bank's outcome: ``status`` copied | skipped (a valid checkpoint) and its counts."""

    bank_id: str
    status: str
    counts: dict[str, int]


@dataclass
class MigrationReport:
    """What :func:`migrate_layout` did; ``switched``: the target layout is now the store's."""

    source: str | None
    target: str
    banks: list[BankResult] = field(default_factory=list)
    switched: bool = False
    left: int = 0  # banks without a valid checkpoint (only with a subset of banks)
    dropped_source: bool = False


def bank_counts(store: MilvusStore, bank_id: str) -> dict[str, int]:
    """The rows the bank holds in the store's layout, by kind."""
    return {
        "units": store.count_units(bank_id),
        "chunks": store.count_chunks(bank_id),
        "entities": len(store.list_entities(bank_id)),
        "tree": len(store.list_tree_nodes(bank_id)),
    }


def _checkpoint_id(target: str, bank_id: str) -> str:
    return f"migrate:{target}:{bank_id}"


def _copy_bank(src: MilvusStore, dst: MilvusStore, bank_id: str) -> None:
    with dst._write_lock:
        dst._drop_bank_rows(bank_id)
    for page in src.iter_units(bank_id, with_embedding=True, batch_size=COPY_BATCH):
        dst.upsert_units(bank_id, page)
    for chunks in src.iter_chunks(bank_id, batch_size=COPY_BATCH):
        dst.upsert_chunks(bank_id, chunks)
    entities = src.list_entities(bank_id)
    for i in range(0, len(entities), COPY_BATCH):
        dst.upsert_entities(bank_id, entities[i : i + COPY_BATCH])
    nodes = src.list_tree_nodes(bank_id, with_embedding=True)
    for i in range(0, len(nodes), COPY_BATCH):
        dst.upsert_tree_nodes(bank_id, nodes[i : i + COPY_BATCH])


def _valid_checkpoint(src: MilvusStore, dst: MilvusStore, target: str, bank_id: str) -> dict[str, int] | None:
    """The bank's counts when its checkpoint still holds (same revision, same counts in both
    layouts), else None."""
    mark = src.get_operation(_checkpoint_id(target, bank_id))
    if not mark or mark.get("revision") != src.get_revision(bank_id):
        return None
    counts = bank_counts(src, bank_id)
    if counts != mark.get("counts") or bank_counts(dst, bank_id) != counts:
        return None
    return counts


def migrate_layout(
    settings: Settings,
    target: str,
    *,
    banks: Sequence[str] | None = None,
    drop_source: bool = False,
    on_bank: Callable[[BankResult, int], None] | None = None,
) -> MigrationReport:
    """Copy every bank (or ``banks``) of the store ``settings`` opens into the ``target``
    layout, verify each, and switch the store to it once all banks are verified. Idempotent:
    re-run after a crash, it skips verified banks and redoes the rest. ``drop_source``: after
    the switch, remove the source layout's rows. ``on_bank(result, total)`` reports progress.
    ValueError for an unknown layout or bank."""
    if target not in LAYOUTS:
        raise ValueError(f"--to must be one of {', '.join(LAYOUTS)}, not {target!r}")
    dim = settings.models.embedding_dim
    with MilvusStore(settings, dim, layout=target) as probe:
        source = probe.stored_layout()
    report = MigrationReport(source=source, target=target)
    if source is None or source == target:
        # nothing stored yet, or already there: record the target so the store opens in it
        with MilvusStore(settings, dim, layout=target) as dst:
            dst.record_layout(target)
        report.switched = source is None
        return report
    with MilvusStore(settings, dim, layout=source) as src, MilvusStore(settings, dim, layout=target) as dst:
        every = [b.bank_id for b in src.list_banks()]
        chosen = every
        if banks:
            unknown = [b for b in banks if check_bank_id(b) not in set(every)]
            if unknown:
                raise ValueError(f"unknown bank(s) {', '.join(unknown)}: the store holds {len(every)} banks")
            chosen = list(dict.fromkeys(banks))
        for bank_id in chosen:
            counts = _valid_checkpoint(src, dst, target, bank_id)
            status = "skipped"
            if counts is None:
                counts = _copy_verified(src, dst, bank_id)
                src.put_operation(
                    _checkpoint_id(target, bank_id), {"revision": src.get_revision(bank_id), "counts": counts}
                )
                status = "copied"
            result = BankResult(bank_id, status, counts)
            report.banks.append(result)
            if on_bank:
                on_bank(result, len(chosen))
        done = set(chosen)
        left = [b for b in every if b not in done and _valid_checkpoint(src, dst, target, b) is None]
        report.left = len(left)
        if left:
            return report
        dst.record_layout(target)
        report.switched = True
        with src._write_lock:
            src._delete_ids(src._operations, [_checkpoint_id(target, b) for b in every])
            if drop_source and every:
                if src.layout.shared:  # every bank moved: the shared collections go whole
                    for name in dict.fromkeys(src._names(every[0]).values()):
                        src._forget(name)
                        if src.client.has_collection(name):
                            src.client.drop_collection(name)
                else:
                    for bank_id in every:
                        src._drop_bank_rows(bank_id)
                report.dropped_source = True
    return report


def _copy_verified(src: MilvusStore, dst: MilvusStore, bank_id: str) -> dict[str, int]:
    """Copy one bank until its counts match and its revision held still over the copy."""
    for _ in range(TRIES):
        revision = src.get_revision(bank_id)
        _copy_bank(src, dst, bank_id)
        counts = bank_counts(src, bank_id)
        if bank_counts(dst, bank_id) == counts and src.get_revision(bank_id) == revision:
            return counts
    raise RuntimeError(
        f"bank {bank_id} changed during {TRIES} copies (or its copy does not count the same): "
        "stop the writers (memlane serve --stop) and run the migration again"
    )
