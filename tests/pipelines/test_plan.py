"""Pool sizing and the optional GPU path (no Ray needed)."""

from __future__ import annotations

import pytest

from pipelines.backfill import _pack
from pipelines.corpus import BankInput
from pipelines.job import plan_resources


def test_cpu_only_cluster_never_asks_for_gpus():
    assert plan_resources(2, 0, None, None) == (2, 1.0, 0.0, False)
    assert plan_resources(2, 0, 1, None) == (1, 2.0, 0.0, False)
    assert plan_resources(2, 0, None, True) == (2, 1.0, 0.0, False)  # asked, none present


def test_gpu_cluster_one_worker_per_gpu():
    assert plan_resources(16, 4, None, None) == (4, 4.0, 1.0, True)
    assert plan_resources(16, 1, 2, None) == (2, 8.0, 0.5, True)  # two actors share one GPU
    assert plan_resources(16, 4, None, False) == (16, 1.0, 0.0, False)  # GPUs declined


def test_pack_keeps_banks_whole_largest_first():
    def bank(name, n):
        return (BankInput(name, [("d", [None] * n)]), f"payload-{name}", f"fp-{name}")

    groups = _pack(
        [bank("a", 3), bank("b", 900), bank("c", 500), bank("d", 2000), bank("e", 200)], group_turns=1024
    )
    assert [g["bank_id"] for g in groups] == [["d"], ["b"], ["c", "e", "a"]]
    assert groups[2]["payload"] == ["payload-c", "payload-e", "payload-a"]


def test_retain_worker_on_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    from actors.retain import RetainWorker

    worker = RetainWorker({"data_dir": str(tmp_path)}, use_gpu=True)
    assert worker.settings.models.embedder_device == "cuda"
    assert str(worker.memory.embedder._model.device).startswith("cuda")
