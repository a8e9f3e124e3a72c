"""Models split over registry packages, joined into one file (cluster/llm_packaged.py): the
parts in order, the pinned sha256 checked, nothing left behind when it does not match."""

from __future__ import annotations

import hashlib
import sys

import pytest

from cluster.llm_local import LocalLLMError
from cluster.llm_packaged import PackagedModel, joined


@pytest.fixture()
def parts(tmp_path, monkeypatch):
    """Two installed chunk packages, each naming its chunk file as the real ones do."""
    chunks = [b"GGUF" + b"a" * 1000, b"b" * 777]
    for i, chunk in enumerate(chunks, start=1):
        pkg = tmp_path / "site" / f"chunk_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        (pkg / "__init__.py").write_text(
            "import os\ndef get_part_path():\n"
            f"    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'part{i:02d}.bin')\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield chunks
    for i in (1, 2):
        sys.modules.pop(f"chunk_part{i}", None)


def model(sha: str) -> PackagedModel:
    return PackagedModel("tiny", ("chunk_part1", "chunk_part2"), "tiny.gguf", sha, "tiny-extra")


def test_parts_are_joined_in_order_once(parts, tmp_path):
    sha = hashlib.sha256(b"".join(parts)).hexdigest()
    path = joined(model(sha), tmp_path / "models")
    assert path.read_bytes() == b"".join(parts)
    assert joined(model(sha), tmp_path / "models") == path  # already there: not joined again


def test_a_join_that_is_not_the_pinned_file_is_refused_and_removed(parts, tmp_path):
    with pytest.raises(LocalLLMError, match="not the pinned"):
        joined(model("0" * 64), tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_a_missing_part_names_the_extra(tmp_path):
    gone = PackagedModel("gone", ("no_such_part_module",), "gone.gguf", "0" * 64, "local-llm-qwen")
    with pytest.raises(
        LocalLLMError, match=r"no_such_part_module is not installed: install the local-llm-qwen"
    ):
        joined(gone, tmp_path)
