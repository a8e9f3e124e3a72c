"""What a job sends its workers and what an actor makes of it (no Ray, no models)."""

from __future__ import annotations

import warnings

import pytest

from actors.engine_settings import engine_settings
from memlane.settings import Settings
from pipelines.job import worker_settings


@pytest.fixture(autouse=True)
def _no_thread_env(monkeypatch):
    monkeypatch.delenv("MEMLANE_MODELS__TORCH_THREADS", raising=False)
    monkeypatch.delenv("MEMLANE_MODELS__EMBEDDER_DEVICE", raising=False)


def _actor(sent: dict, **kw) -> Settings:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecated flat setting names on the way
        return engine_settings(sent, **kw)


def test_actor_threads_default_to_its_cpus_when_unset():
    sent = worker_settings(Settings(), "http://milvus:19530", "/data")
    assert sent["models"]["torch_threads"] == 0  # unset on the driver
    assert _actor(sent, cpus=3).models.torch_threads == 3
    assert _actor(sent, cpus=0.4).models.torch_threads == 1


def test_users_torch_threads_wins_over_the_actors_cpus(monkeypatch):
    # Set on the driver: travels in the job's settings.
    monkeypatch.setenv("MEMLANE_MODELS__TORCH_THREADS", "5")
    sent = worker_settings(Settings(), "http://milvus:19530", "/data")
    monkeypatch.delenv("MEMLANE_MODELS__TORCH_THREADS")
    assert _actor(sent, cpus=2).models.torch_threads == 5
    # Set only in the worker's environment, the job's settings silent on it.
    monkeypatch.setenv("MEMLANE_MODELS__TORCH_THREADS", "6")
    assert _actor({"data_dir": "/data"}, cpus=2).models.torch_threads == 6


def test_gpu_actor_embeds_on_cuda_unless_a_device_is_named():
    assert _actor({}, use_gpu=True, cpus=1).models.embedder_device == "cuda"
    assert _actor({}, use_gpu=False, cpus=1).models.embedder_device == "cpu"
    named = {"models": {"embedder_device": "cuda:1"}}
    assert _actor(named, use_gpu=True, cpus=1).models.embedder_device == "cuda:1"


def test_worker_settings_carry_the_jobs_store_and_no_online_tree():
    s = Settings(store={"milvus_uri": "http://driver:1", "milvus_token": "tok"}, recall={"rrf_k": 7})
    sent = worker_settings(s, "http://job:2", "/job/data")
    assert sent["store"]["milvus_uri"] == "http://job:2" and "milvus_token" not in sent["store"]
    assert sent["data_dir"] == "/job/data" and sent["background"]["tree"] is False
    s_on = Settings(background={"tree": True})
    assert Settings.model_validate(worker_settings(s_on, "u", "d")).background.tree is False
    assert sent["recall"]["rrf_k"] == 7
    # Overrides (a job config's dict) go the same way, secrets dropped there too.
    again = worker_settings({"store": {"milvus_token": "tok"}, "llm": {"api_key": "sk"}}, "u", "d")
    assert again == {"store": {"milvus_uri": "u"}, "llm": {}, "background": {"tree": False}, "data_dir": "d"}
