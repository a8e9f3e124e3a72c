"""What the store of record holds in one field: Milvus's VARCHAR and ARRAY limits. One home for
the rule, checked where a value enters the engine (a turn read from a file or an API item, so a
bad input fails before a bank, a model or a cluster is touched) and again where a row is
written (:mod:`memlane.stores.milvus.codec`, whose schema declares these lengths)."""

from __future__ import annotations

MAX_ID_BYTES = 512  # ids, document/chunk ids, list elements
MAX_TEXT_BYTES = 65_535  # Milvus VARCHAR limit (bytes of UTF-8)
MAX_ARRAY = 4096  # Milvus ARRAY max_capacity limit


def check_bytes(what: str, value: str, limit: int) -> str:
    """``value`` unchanged, or ValueError naming ``what``, its size and the limit."""
    n = len(value.encode("utf-8"))
    if n > limit:
        raise ValueError(f"{what} is {n:,} bytes of UTF-8, the limit is {limit:,}")
    return value


def clip_bytes(value: str, limit: int) -> str:
    """``value`` cut to at most ``limit`` bytes of UTF-8 (at a character boundary): for text
    derived from input (a memory's context of neighbouring turns), never for the input itself."""
    data = value.encode("utf-8")
    return value if len(data) <= limit else data[:limit].decode("utf-8", errors="ignore")
