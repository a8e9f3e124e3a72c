"""The store's units: upsert, read, list, count and delete (with their links)."""

from __future__ import annotations

from functools import partial
from typing import Collection, Iterator, Sequence

from memlane.interfaces import UnitFilter
from memlane.records import MemoryUnit, check_bank_id
from memlane.stores.milvus.codec import UNIT_OUT, row_unit, unit_row
from memlane.stores.milvus.collections import ID_BATCH
from memlane.stores.milvus.records import Records
from memlane.timings import stage
from memlane.units import NONE_TIME_US, escape_string, milvus_expr, str_list


class UnitRecords(Records):
    """Unit methods of :class:`MilvusStore`."""

    def upsert_units(self, bank_id: str, units: Sequence[MemoryUnit]) -> None:
        """Insert or replace units (keyed by ``unit.id``); rewriting the same units never
        duplicates. A unit without an embedding keeps the one already stored (so a unit read
        without its vector can be updated and written back); a new unit needs one. Every unit
        is validated before anything is written."""
        check_bank_id(bank_id)
        latest: dict[str, MemoryUnit] = {}
        for u in units or ():
            if not isinstance(u, MemoryUnit):
                raise ValueError(f"upsert_units takes MemoryUnit objects, got {type(u).__name__}")
            if u.bank_id != bank_id:
                raise ValueError(f"unit {u.id!r} belongs to bank {u.bank_id!r}, not {bank_id!r}")
            latest[u.id] = u  # the last copy of an id wins, as with sequential upserts
        if not latest:
            return

        def write(names: dict[str, str]) -> None:
            missing = [i for i, u in latest.items() if u.embedding is None]
            stored: dict[str, list[float]] = {}
            if missing:
                for row in self._bank_get(bank_id, names["units"], missing, ["id", "embedding"]):
                    stored[row["id"]] = row["embedding"]
                absent = [i for i in missing if i not in stored]
                if absent:
                    raise ValueError(f"units {absent[:5]} have no embedding and none is stored")
            rows = [
                unit_row(
                    bank_id,
                    u,
                    u.embedding if u.embedding is not None else stored[u.id],
                    self.dim,
                    self.capabilities,
                )
                for u in latest.values()
            ]
            self._bank_upsert(bank_id, names["units"], rows)

        self._write_bank(bank_id, write)

    def get_units(
        self, bank_id: str, ids: Sequence[str], *, with_embedding: bool = False
    ) -> list[MemoryUnit]:
        """Units by id, in the order asked (unknown ids skipped, duplicates once)."""
        ids = [i for i in (ids or ()) if isinstance(i, str)]
        if not ids:
            check_bank_id(bank_id)
            return []
        fields = UNIT_OUT + (["embedding"] if with_embedding else [])
        rows = self._read(bank_id, "units", lambda n: self._bank_get(bank_id, n, ids, fields), [])
        return [row_unit(bank_id, r, with_embedding) for r in rows]

    def iter_units(
        self, bank_id: str, *, with_embedding: bool = False, batch_size: int = 2000
    ) -> Iterator[list[MemoryUnit]]:
        """All units of the bank in pages of at most ``batch_size``, in id order.

        Lists the ids once (a light query), then fetches each page by id through the point
        lookup path: linear in the bank's size, and not bound by Milvus's 16,384-row query
        window. Units written meanwhile may be missed; deleted ones are skipped."""
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        id_rows = self._read(bank_id, "units", lambda n: self._bank_query(bank_id, n, "", ["id"]), [])
        ids: list[str] = sorted(r["id"] for r in id_rows)
        fields = UNIT_OUT + (["embedding"] if with_embedding else [])
        for i in range(0, len(ids), batch_size):
            page = ids[i : i + batch_size]
            rows = self._read(bank_id, "units", partial(self._bank_get, bank_id, ids=page, fields=fields), [])
            if rows:
                yield [row_unit(bank_id, r, with_embedding) for r in rows]

    def list_unit_ids(self, bank_id: str, flt: UnitFilter | None = None) -> list[str]:
        """Ids of the bank's units that pass ``flt`` (all units, invalidated ones included,
        when None), sorted; [] for an unknown bank."""
        expr = milvus_expr(flt)
        rows = self._read(bank_id, "units", lambda n: self._bank_query(bank_id, n, expr, ["id"]), [])
        return sorted(r["id"] for r in rows)

    def list_invalid_unit_ids(self, bank_id: str) -> list[str]:
        """Ids of the bank's invalidated units (``invalid_at`` set), sorted: what
        ``list_unit_ids(only_valid=False)`` less ``list_unit_ids()`` gives, read as one filtered
        query that returns only those rows (Milvus Lite returns rows at ~75 us each: the two
        listings cost 2.2 s at 10k units, benchmarks/replace_cost.py)."""
        expr = f"invalid_at != {NONE_TIME_US}"
        rows = self._read(bank_id, "units", lambda n: self._bank_query(bank_id, n, expr, ["id"]), [])
        return sorted(r["id"] for r in rows)

    def list_superseded_unit_ids(self, bank_id: str, successors: Collection[str]) -> list[str]:
        """Ids of the bank's units a fact of one of ``successors`` superseded (their
        ``superseded_by`` names it), sorted; what the delete hook reads to restore them."""
        ids = sorted(set(successors))
        out: list[str] = []
        for lo in range(0, len(ids), ID_BATCH):
            expr = f"superseded_by in {str_list(ids[lo : lo + ID_BATCH])}"
            rows = self._read(bank_id, "units", partial(self._superseded_query, bank_id, expr), [])
            out.extend(r["id"] for r in rows)
        return sorted(out)

    def _superseded_query(self, bank_id: str, expr: str, name: str) -> list[dict]:
        return self._bank_query(bank_id, name, expr, ["id"])

    def document_counts(self, bank_id: str) -> dict[str, dict[str, int]]:
        """``{document_id: {"units": n, "chunks": m}}`` for every document of the bank."""
        out: dict[str, dict[str, int]] = {}
        for kind in ("units", "chunks"):
            rows = self._read(
                bank_id, kind, lambda n: self._bank_query(bank_id, n, "", ["id", "document_id"]), []
            )
            for r in rows:
                counts = out.setdefault(r["document_id"], {"units": 0, "chunks": 0})
                counts[kind] += 1
        return dict(sorted(out.items()))

    def count_units(self, bank_id: str) -> int:
        """Number of units in the bank (0 for an unknown bank)."""
        return self._read(bank_id, "units", partial(self._bank_count, bank_id), 0)

    def delete_units(
        self, bank_id: str, ids: Sequence[str], *, linking: Collection[str] | None = None
    ) -> int:
        """Delete units by id; returns how many existed. Links of other units that pointed at
        them are removed too, so no stored link dangles (``linking``: see
        :meth:`delete_document`)."""
        ids = list(dict.fromkeys(i for i in (ids or ()) if isinstance(i, str)))
        if not ids:
            check_bank_id(bank_id)
            return 0
        with self._write_lock:
            existing = self._read(
                bank_id, "units", lambda n: [r["id"] for r in self._bank_get(bank_id, n, ids, ["id"])], []
            )
            if not existing:
                return 0
            name = self._names(bank_id)["units"]
            self._bank_delete(bank_id, name, existing)
            self._prune_links(bank_id, name, existing, linking)
            self._flush([name])
            return len(existing)

    def _prune_links(
        self, bank_id: str, name: str, deleted: Sequence[str], linking: Collection[str] | None = None
    ) -> None:
        """Remove links to ``deleted`` from the units that hold them. The units are found by a
        scan of the bank's link arrays (no index: 40 us a row on Milvus Lite, 0.85 s at 10k
        units), or, with ``linking`` (a superset of them the caller knows, e.g. from its
        graph), read by id (Lite's point-lookup path) and checked here."""
        gone = set(deleted)
        fields = UNIT_OUT + ["embedding"]
        ids = sorted(set(linking) - gone) if linking is not None else list(deleted)
        for i in range(0, len(ids), ID_BATCH):
            if linking is not None:
                rows = self._bank_get(bank_id, name, ids[i : i + ID_BATCH], fields)
            else:
                expr = f"array_contains_any(link_targets, {str_list(ids[i : i + ID_BATCH])})"
                rows = self._bank_query(bank_id, name, expr, fields)
            units = [row_unit(bank_id, r, True) for r in rows if r["id"] not in gone]
            units = [u for u in units if any(x.target_id in gone for x in u.links)]
            fixed = [
                u.model_copy(update={"links": [x for x in u.links if x.target_id not in gone]}) for u in units
            ]
            out = []
            for u in fixed:
                # read with the "embedding" field, a required vector field: row_unit filled it
                assert u.embedding is not None
                out.append(unit_row(bank_id, u, u.embedding, self.dim, self.capabilities))
            self._bank_upsert(bank_id, name, out, flush=False)

    def delete_document(
        self, bank_id: str, document_id: str, *, linking: Collection[str] | None = None
    ) -> dict[str, int]:
        """Delete a document's units and chunks; returns ``{"units": n, "chunks": m}``. Links of
        remaining units that pointed at the deleted units are removed. ``linking``: ids of the
        bank's units that may hold such links (a superset, which the caller vouches for: the
        writer's graph, memlane/writes.py); None: the store scans the bank for them."""
        if not isinstance(document_id, str) or not document_id:
            raise ValueError(f"document_id must be a non-empty string, got {document_id!r}")
        check_bank_id(bank_id)
        expr = f"document_id == {escape_string(document_id)}"
        with self._write_lock:
            with stage("delete.queries"):
                unit_ids = [
                    r["id"]
                    for r in self._read(
                        bank_id, "units", lambda n: self._bank_query(bank_id, n, expr, ["id"]), []
                    )
                ]
                chunk_ids = [
                    r["id"]
                    for r in self._read(
                        bank_id, "chunks", lambda n: self._bank_query(bank_id, n, expr, ["id"]), []
                    )
                ]
            names = self._names(bank_id)
            if unit_ids:
                with stage("delete.store_delete"):
                    self._bank_delete(bank_id, names["units"], unit_ids)
                with stage("delete.prune_links"):
                    self._prune_links(bank_id, names["units"], unit_ids, linking)
            if chunk_ids:
                with stage("delete.store_delete"):
                    self._bank_delete(bank_id, names["chunks"], chunk_ids)
            with stage("delete.flush"):
                self._flush([names[k] for k, ids in (("units", unit_ids), ("chunks", chunk_ids)) if ids])
        return {"units": len(unit_ids), "chunks": len(chunk_ids)}
