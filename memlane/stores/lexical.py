"""Lexical analysis for BM25, done in Python so Milvus Lite and a Milvus server index alike.

Text is lowercased, split into word tokens, stripped of English function words and stemmed
(Snowball, via PyStemmer): the word list and the stemmer are the engine's one set
(memlane/query/words.py), which query analysis reads too. Milvus then only splits on
whitespace. Measured offline on the LoCoMo eval banks (turn recall@10 of BM25 alone,
categories 1-4): no stop words 0.560, stop words 0.564, stop words + stemming 0.608. Stop words
matter most for ranking: without them "What pet did Noor adopt?" ranked "Brilliant! What are
you planting first?" first on 'what'. Milvus Lite has no stemmer and only explicit stop-word
lists, hence doing it here. Negations ('not', 'never', 'no') and time words ('first', 'last',
'before', 'after') are kept: they carry meaning in questions.
"""

from __future__ import annotations

from memlane.query.words import stem_words, tokens

# Milvus only splits the pre-analysed text on word boundaries and lowercases (already done).
ANALYZER_PARAMS = {"tokenizer": "standard"}


def analyze(text: str) -> str:
    """The indexable form of ``text``: stemmed content words joined by spaces ('' if none)."""
    return " ".join(stem_words(tokens(text)))
