"""A Serve replica whose engine needs no torch keeps it out of its process (serve/deployments.py,
keep_torch_out, called from the deployments' constructors): spaCy's thinc would otherwise import
it. Each case runs in its own interpreter, since the change is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from memlane.engine import Memory
from memlane.settings import Settings
from serve.deployments import keep_torch_out

settings = Settings(data_dir=sys.argv[1])
settings.models.embedder_backend = "onnx"
settings.models.reranker_model = sys.argv[2]
memory = Memory(settings)
memory.embedder.embed(["built before the check, as service_memory builds it"])
keep_torch_out(memory)
try:
    import torch  # noqa: F401
except ImportError:
    print("blocked")
else:
    print("imported")
# what a recall imports for the learned ranker: scipy's array-API helpers look torch up, and a
# torch kept out must look absent to them, not broken
from memlane.recall.learned import RankerModel
print("ranker" if RankerModel.for_budget("mid") is not None else "no-ranker")
"""


@pytest.mark.parametrize(
    ("reranker_model", "expected"),
    [("", "blocked"), ("cross-encoder/ms-marco-MiniLM-L-6-v2", "imported")],
)
def test_torch_is_kept_out_only_without_a_cross_encoder(tmp_path, reranker_model, expected):
    pytest.importorskip("torch")  # without torch installed there is nothing to keep out
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "data"), reranker_model],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [expected, "ranker"]
