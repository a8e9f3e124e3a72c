"""Storage backends: the store of record (Milvus) and the derived memory graph (igraph/scipy)."""
