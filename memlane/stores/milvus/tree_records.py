"""Temporal tree nodes (memlane/tree) in the bank's tree collection: one row per node, the
lists in a JSON payload. A session node stores its own turns; the turns under a day, a week or
the profile are the union over its sessions, filled in when the tree is read (a profile's
union would outgrow a JSON field on a long-lived bank)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from memlane.records import Level, TreeNode, check_bank_id
from memlane.stores.milvus.codec import check_json
from memlane.stores.milvus.records import Records
from memlane.units import from_us, to_us

_OUT = ["id", "level", "key", "start", "end", "text", "payload"]
_PAYLOAD = ("children", "cited", "cited_turns", "entity_ids", "consolidator", "signature", "metadata")


def _row(bank_id: str, node: TreeNode, dim: int) -> dict[str, Any]:
    if node.embedding is None or len(node.embedding) != dim:
        raise ValueError(f"tree node {node.id!r} needs a {dim}-d embedding")
    payload = {k: getattr(node, k) for k in _PAYLOAD}
    if node.level == Level.session:
        payload["source_turns"] = node.source_turns
    return {
        "id": node.id,
        "bank_id": bank_id,
        "level": int(node.level),
        "key": node.key,
        "start": to_us(node.start),
        "end": to_us(node.end),
        "text": node.text,
        "embedding": np.asarray(node.embedding, dtype=np.float32).tolist(),
        "payload": check_json("tree node", payload),
    }


def _node(bank_id: str, row: dict[str, Any]) -> TreeNode:
    payload = dict(row["payload"] or {})
    emb = row.get("embedding")
    return TreeNode(
        id=row["id"],
        bank_id=bank_id,
        level=Level(int(row["level"])),
        key=row["key"],
        start=from_us(row["start"]),
        end=from_us(row["end"]),
        text=row["text"],
        embedding=[float(x) for x in emb] if emb is not None else None,
        source_turns=list(payload.pop("source_turns", []) or []),
        **{k: payload[k] for k in _PAYLOAD if k in payload},
    )


def fill_source_turns(nodes: list[TreeNode]) -> list[TreeNode]:
    """Set the source turns of day, week and profile nodes to the union over their children,
    bottom up (session nodes carry their own)."""
    by_id = {n.id: n for n in nodes}
    for level in (Level.day, Level.week, Level.profile):
        for n in nodes:
            if n.level == level:
                turns: dict[str, None] = {}
                for c in n.children:
                    child = by_id.get(c)
                    if child is not None:
                        turns.update(dict.fromkeys(child.source_turns))
                n.source_turns = list(turns)
    return nodes


class TreeRecords(Records):
    """Tree methods of :class:`MilvusStore`."""

    def upsert_tree_nodes(self, bank_id: str, nodes: Sequence[TreeNode]) -> None:
        """Insert or replace tree nodes (keyed by id); creates the bank's tree collection."""
        check_bank_id(bank_id)
        rows = []
        for n in nodes or ():
            if not isinstance(n, TreeNode):
                raise ValueError(f"upsert_tree_nodes takes TreeNode objects, got {type(n).__name__}")
            if n.bank_id != bank_id:
                raise ValueError(f"tree node {n.id!r} belongs to bank {n.bank_id!r}, not {bank_id!r}")
            rows.append(_row(bank_id, n, self.dim))
        if not rows:
            return

        def write(names: dict[str, str]) -> None:
            self._ensure(names["tree"], "tree")
            self._bank_upsert(bank_id, names["tree"], rows)

        self._write_bank(bank_id, write)

    def list_tree_nodes(self, bank_id: str, *, with_embedding: bool = False) -> list[TreeNode]:
        """Every tree node of the bank, by level then start time ([] before consolidation),
        source turns filled in at every level."""
        fields = [*_OUT, "embedding"] if with_embedding else _OUT
        rows = self._read(bank_id, "tree", lambda n: self._bank_query(bank_id, n, "", fields), [])
        nodes = [_node(bank_id, r) for r in rows]
        nodes.sort(key=lambda n: (int(n.level), n.start, n.id))
        return fill_source_turns(nodes)

    def delete_tree_nodes(self, bank_id: str, ids: Sequence[str]) -> int:
        """Delete tree nodes by id; returns how many existed."""
        with self._write_lock:
            return len(self._delete_existing(bank_id, "tree", ids))
