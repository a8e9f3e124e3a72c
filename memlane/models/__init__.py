"""Model backends: the embedder and the reranker (LLM clients come with the LLM layer)."""
