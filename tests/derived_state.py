"""A bank's whole derived state in comparable form, and the differences between two of them:
what the property test of tests/memlane/test_derived_state.py (and the backfill's and the CLI's
re-retain tests) compare with a fresh bank fed the same final input.

Everything a bank holds is compared: every memory unit's fields (its validity, supersession
pointers and metadata, slot and resolution state included), its links, its vector, the chunks,
the entities, the tree nodes with their children and intervals. What legitimately differs is
normalised and nothing else: vectors, link weights and the slot signals read from a unit's
vector are compared to 1e-5 (the same text embedded in another batch differs in the last bits
of a float32; a cosine computed in a batch or by a search, likewise); the bank record's own
times and revision tokens are not read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# what consolidation's fact resolution writes on a unit (memlane/facts/resolver.py)
RESOLUTION_FIELDS = ("invalid_at", "superseded_by")
RESOLUTION_METADATA = ("engram", "slot", "facts")
TOLERANCE = 1e-5


def snapshot(memory, bank_id: str) -> dict[str, Any]:
    """The bank's units, chunks, entities and tree, keyed by id."""
    memory.wait_background()
    store = memory.store
    units = {u.id: u for page in store.iter_units(bank_id, with_embedding=True) for u in page}
    chunks = {c.chunk_id: c for page in store.iter_chunks(bank_id) for c in page}
    return {
        "units": {
            i: {
                **u.model_dump(mode="json", exclude={"embedding", "links"}),
                "links": sorted((x.target_id, x.type.value, x.weight) for x in u.links),
                "vector": np.asarray(u.embedding, dtype=np.float32),
            }
            for i, u in units.items()
        },
        "chunks": {i: c.model_dump(mode="json") for i, c in chunks.items()},
        "entities": {e.entity_id: e.model_dump(mode="json") for e in store.list_entities(bank_id)},
        "tree": {
            n.id: {
                **n.model_dump(mode="json", exclude={"embedding"}),
                "vector": np.asarray(n.embedding, dtype=np.float32),
            }
            for n in store.list_tree_nodes(bank_id, with_embedding=True)
        },
    }


def without_resolution(state: dict[str, Any]) -> dict[str, Any]:
    """The state less what fact resolution writes on units (validity, supersession pointers,
    the resolution's metadata and the slot it refreshes): for a write that reported its facts
    stale."""
    units = {}
    for i, u in state["units"].items():
        u = {k: v for k, v in u.items() if k not in RESOLUTION_FIELDS}
        u["metadata"] = {k: v for k, v in u["metadata"].items() if k not in RESOLUTION_METADATA}
        units[i] = u
    return {**state, "units": units}


def differences(
    got: dict[str, Any], want: dict[str, Any], parts=("units", "chunks", "entities", "tree")
) -> list[str]:
    """Every difference between two snapshots, one line each ([] when they are the same)."""
    out: list[str] = []
    for part in parts:
        a, b = got[part], want[part]
        for key in sorted(set(a) - set(b)):
            out.append(f"{part}: {key} only in the bank under test: {_short(a[key])}")
        for key in sorted(set(b) - set(a)):
            out.append(f"{part}: {key} missing from the bank under test: {_short(b[key])}")
        for key in sorted(set(a) & set(b)):
            for field in sorted(set(a[key]) | set(b[key])):
                x, y = a[key].get(field), b[key].get(field)
                if not _same(field, x, y):
                    out.append(f"{part}: {key}.{field}: {_short(x)} != {_short(y)}")
    return out


def tree_subset_differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Nodes of ``got``'s tree that ``want``'s does not hold as they are (a tree left partly
    for consolidation may miss nodes, never hold an outdated one)."""
    out = []
    for key, node in got["tree"].items():
        other = want["tree"].get(key)
        if other is None:
            out.append(f"tree: {key} ({node['key']}) is not in the reference's tree")
            continue
        for field in sorted(set(node) | set(other)):
            if not _same(field, node.get(field), other.get(field)):
                out.append(f"tree: {key}.{field}: {_short(node.get(field))} != {_short(other.get(field))}")
    return out


def _same(field: str, x: Any, y: Any) -> bool:
    if field == "vector":
        return x.shape == y.shape and bool(np.allclose(x, y, atol=TOLERANCE, rtol=0))
    if field == "slots":
        return (x is None) == (y is None) and (
            x is None
            or (
                x["weights"] == y["weights"]
                and bool(np.allclose(x["best"], y["best"], atol=TOLERANCE, rtol=0))
                and abs(x["gate"] - y["gate"]) <= TOLERANCE
            )
        )
    if field == "links":
        return len(x) == len(y) and all(
            (a[0], a[1]) == (b[0], b[1]) and abs(a[2] - b[2]) <= TOLERANCE for a, b in zip(x, y)
        )
    return x == y


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 300 else text[:300] + "..."
