"""The schemas of the store's collections."""

from __future__ import annotations

from typing import Any

from pymilvus import DataType, Function, FunctionType, MilvusClient

from memlane.stores.lexical import ANALYZER_PARAMS
from memlane.stores.milvus.capabilities import Capabilities
from memlane.stores.milvus.codec import (
    MAX_ARRAY,
    MAX_ID_BYTES,
    MAX_TEXT_BYTES,
    PLACEHOLDER,
)
from memlane.stores.milvus.layout import KEY_EXTRA_BYTES
from memlane.units import LIST_FIELDS, TIME_FIELDS

#: Every JSON field of every kind (Capabilities.stored_rows wraps lists in them on Milvus 2.3).
JSON_FIELDS = frozenset({"links", "history", "metadata", "payload", "record", "disposition"})


def build_schema(
    c: MilvusClient, kind: str, dim: int, caps: Capabilities, *, shared: bool = False
) -> tuple[Any, Any]:
    """The schema and index parameters of a collection of ``kind`` (units, chunks, entities,
    tree, revisions, operations, banks) on a Milvus that can do ``caps``. ``shared``: a
    collection of the partition-key layout (memlane/stores/milvus/layout.py): ``bank_id`` is
    the partition key and the primary key holds ``"<bank>:<id>"``. Without BM25 (Milvus 2.3)
    units have no ``lexical``/``sparse`` fields: the lexical channel is the in-process index's;
    without nullable fields ``superseded_by`` stores "" for none (:func:`codec.unit_row`)."""
    s = c.create_schema(auto_id=False, enable_dynamic_field=False)
    partition_key = shared and caps.partition_key_upsert
    ip = c.prepare_index_params()
    if shared and kind in ("units", "chunks", "entities", "tree") and caps.bank_index:
        ip.add_index("bank_id", index_type=caps.bank_index, index_name="bank_id_idx")
    id_bytes = MAX_ID_BYTES + (KEY_EXTRA_BYTES if shared else 0)
    s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=id_bytes)
    arr = dict(element_type=DataType.VARCHAR, max_capacity=MAX_ARRAY, max_length=MAX_ID_BYTES)
    if kind == "units":
        s.add_field("bank_id", DataType.VARCHAR, max_length=128, is_partition_key=partition_key)
        s.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        s.add_field("context", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        if caps.bm25:
            # BM25 input: text + context, analysed in Python (memlane/stores/lexical.py).
            s.add_field(
                "lexical",
                DataType.VARCHAR,
                max_length=MAX_TEXT_BYTES,
                enable_analyzer=True,
                analyzer_params=ANALYZER_PARAMS,
            )
            s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        s.add_field("embedding", DataType.FLOAT_VECTOR, dim=dim)
        s.add_field("fact_type", DataType.VARCHAR, max_length=16)
        for name in (*TIME_FIELDS, "t_start", "t_end", "proof_count"):
            s.add_field(name, DataType.INT64)
        s.add_field("confidence", DataType.DOUBLE)
        s.add_field("document_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
        s.add_field("chunk_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
        for name in (*LIST_FIELDS, "link_targets"):
            s.add_field(name, DataType.ARRAY, **arr)
        s.add_field("superseded_by", DataType.VARCHAR, max_length=MAX_ID_BYTES, nullable=caps.nullable)
        for name in ("links", "history", "metadata"):
            s.add_field(name, DataType.JSON)
        if caps.bm25:
            s.add_function(
                Function(
                    name="text_bm25",
                    function_type=FunctionType.BM25,
                    input_field_names=["lexical"],
                    output_field_names=["sparse"],
                )
            )
            ip.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        # FLAT: exact COSINE; at one bank's size a brute-force scan is 24 ms p50 (above).
        ip.add_index("embedding", index_type="FLAT", metric_type="COSINE")
        return s, ip
    if kind == "chunks":
        s.add_field("bank_id", DataType.VARCHAR, max_length=128, is_partition_key=partition_key)
        s.add_field("document_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
        s.add_field("session_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
        s.add_field("index", DataType.INT64)
        s.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        s.add_field("turn_ids", DataType.ARRAY, **arr)
        s.add_field("started_at", DataType.INT64)
        s.add_field("tags", DataType.ARRAY, **arr)
    elif kind == "entities":
        s.add_field("bank_id", DataType.VARCHAR, max_length=128, is_partition_key=partition_key)
        s.add_field("name", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        s.add_field("type", DataType.VARCHAR, max_length=MAX_ID_BYTES)
        s.add_field("aliases", DataType.ARRAY, **arr)
        s.add_field("mention_count", DataType.INT64)
        s.add_field("first_seen", DataType.INT64)
        s.add_field("last_seen", DataType.INT64)
    elif kind == "tree":
        # Temporal tree nodes (memlane/tree): few per bank (sessions, days, weeks, one
        # profile), always read whole, so a FLAT index and JSON for the lists (a profile's
        # children can outgrow an ARRAY's 4096 capacity on a long-lived bank).
        s.add_field("bank_id", DataType.VARCHAR, max_length=128, is_partition_key=partition_key)
        s.add_field("level", DataType.INT64)
        s.add_field("key", DataType.VARCHAR, max_length=MAX_ID_BYTES)
        s.add_field("start", DataType.INT64)
        s.add_field("end", DataType.INT64)
        s.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        s.add_field("embedding", DataType.FLOAT_VECTOR, dim=dim)
        s.add_field("payload", DataType.JSON)
        ip.add_index("embedding", index_type="FLAT", metric_type="COSINE")
        return s, ip
    elif kind == "revisions":
        s.add_field("revision", DataType.VARCHAR, max_length=64)
    elif kind == "operations":
        s.add_field("record", DataType.JSON)
    elif kind == "banks":
        s.add_field("name", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        s.add_field("background", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        s.add_field("disposition", DataType.JSON)
        s.add_field("created_at", DataType.INT64)
        s.add_field("updated_at", DataType.INT64)
    else:  # pragma: no cover - internal misuse
        raise ValueError(f"unknown collection kind {kind!r}")
    s.add_field("_v", DataType.FLOAT_VECTOR, dim=len(PLACEHOLDER))
    ip.add_index("_v", index_type="FLAT", metric_type="L2")
    return s, ip
