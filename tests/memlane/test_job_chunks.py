"""The job-title chunks of a turn (memlane/facts/values.py): the quick check before the chunk
pattern skips only texts the pattern cannot match."""

from __future__ import annotations

import re

import pytest

from memlane.facts import values, vocab

CASES = [
    ("Both of them are nurses now", [("them are nurses", 8, 23)]),  # the plural
    ("I will reengineer it", [("engineer", 9, 17)]),  # inside a word, as the pattern reads it
    ("The nursery opened", []),  # a noun without a word boundary after it
    ("I work as a data analyst_x", []),  # "_" is a word character
    ("Ich bin Ärztin und senior software engineer", [("und senior software engineer", 15, 43)]),  # not ASCII
    ("NURSE on nights since May", [("NURSE", 0, 5)]),  # any case
    ("We walked by the river all afternoon.", []),
]


def test_job_nouns_are_lower_case_letters():
    # The quick check compares lower-cased text with the nouns as plain substrings.
    assert all(re.fullmatch(r"[a-z]+", n) for n in vocab.JOB_NOUNS)


@pytest.mark.parametrize(("text", "chunks"), CASES)
def test_job_chunks(text, chunks):
    assert values._job_chunks(text) == chunks


@pytest.mark.parametrize("text", [t for t, _ in CASES])
def test_the_check_never_skips_a_text_the_pattern_matches(text):
    assert values._may_name_a_job(text) or values._JOB_CHUNK.search(text) is None
