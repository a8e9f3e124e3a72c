"""Recall: four channels, reciprocal rank fusion, rerank, boosts, token-budget packing."""
