"""``memlane --version``, ``memlane status`` and the quiet backfill, through the installed
``memlane`` entry point in subprocesses (real engine, Milvus Lite, Ray)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from fixtures import write_jsonl_fixture

ROOT = Path(__file__).resolve().parents[2]
ROWS = [
    {
        "speaker": "Ana",
        "text": "I adopted a beagle called Pixel.",
        "timestamp": "2025-03-10T09:00:00Z",
        "session_id": "s1",
    },
    {
        "speaker": "Ben",
        "text": "Is Pixel settling in?",
        "timestamp": "2025-03-10T09:01:00Z",
        "session_id": "s1",
    },
]


def _memlane(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("memlane")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _status(data: Path) -> dict:
    r = _memlane("status", "--data-dir", str(data), "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_version_names_the_installed_packages():
    import ray

    r = _memlane("--version", timeout=60)
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip()
    assert line.startswith(f"memlane {version('memlane')} (")
    assert f"ray {ray.__version__}" in line and len(line.splitlines()) == 1


def test_status_of_a_data_dir_that_does_not_exist(tmp_path):
    s = _status(tmp_path / "none")
    assert s["data_dir"]["exists"] is False
    assert s["service"] == {"running": False}
    assert "no store" in s["banks"]["unavailable"]
    assert not (tmp_path / "none").exists()  # status creates nothing


def test_status_lists_banks_with_their_counts(tmp_path):
    data = tmp_path / "data"
    src = write_jsonl_fixture(tmp_path / "chat.jsonl", ROWS)
    r = _memlane("retain", str(src), "--bank", "ana", "--data-dir", str(data), "--json")
    assert r.returncode == 0, r.stderr
    units = json.loads(r.stdout.strip().splitlines()[-1])["units"]
    s = _status(data)
    assert s["milvus"]["mode"] == "file" and s["service"]["running"] is False
    assert s["banks"]["count"] == 1
    assert s["banks"]["banks"][0]["bank_id"] == "ana"
    assert s["banks"]["banks"][0]["memories"] == units > 0
    text = _memlane("status", "--data-dir", str(data), timeout=120)
    assert text.returncode == 0 and "ana" in text.stdout and f"{units} memories" in text.stdout


def test_status_names_the_process_holding_the_store(tmp_path):
    data = tmp_path / "data"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from memlane.settings import Settings\n"
            "from memlane.stores.milvus import MilvusStore\n"
            f"s = Settings(data_dir={str(data)!r})\n"
            "store = MilvusStore(s, dim=s.models.embedding_dim)\n"
            "print('open', flush=True)\n"
            "time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        s = _status(data)
        assert s["milvus"]["mode"] == "held"
        assert s["milvus"]["pid"] == holder.pid
        assert str(holder.pid) in s["banks"]["unavailable"]
    finally:
        holder.kill()
        holder.wait(timeout=30)
    deadline = time.monotonic() + 30
    while _status(data)["milvus"]["mode"] == "held" and time.monotonic() < deadline:
        time.sleep(1)
    assert _status(data)["milvus"]["mode"] == "file"  # the lock went with the process


@pytest.mark.slow
def test_backfill_and_recall_keep_ray_and_model_logs_off_the_terminal(tmp_path):
    """The demo's commands: progress and results on the terminal, Ray's lines in the log,
    and every port they open on loopback."""
    from listeners import is_loopback, listeners_of, process_tree

    data = tmp_path / "data"
    exe = Path(sys.executable).with_name("memlane")
    proc = subprocess.Popen(
        [str(exe), "backfill", "samples/conversations.jsonl", "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    # While it runs: every listener of the command and what it started (Ray's daemons and
    # workers, the Milvus Lite server) is on loopback.
    seen: set[tuple[int, str, int]] = set()
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        seen.update(listeners_of(process_tree(proc.pid)))
        time.sleep(0.5)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr[-3000:]
    assert len({port for _, _, port in seen}) >= 4  # GCS, raylet, Milvus, workers, ...
    assert [x for x in seen if not is_loopback(x[1])] == []
    r = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    out = r.stdout + r.stderr
    log = data.resolve() / "backfill.log"
    assert f"logs: {log}" in r.stderr
    assert "backfill: 2 banks (2 retained" in r.stdout
    for noise in (" INFO ", "WARNING", "core_worker", "Loading weights", "UserWarning"):
        assert noise not in out, f"{noise!r} reached the terminal:\n{out[-2000:]}"
    logged = log.read_text()
    assert "memlane backfill" in logged and "Dataset" in logged  # Ray Data's lines went here

    r = _memlane("recall", "--bank", "priya", "What is Priya's dog called?", "--data-dir", str(data))
    assert r.returncode == 0, r.stderr
    assert "Biscuit" in r.stdout
    assert "Loading weights" not in r.stdout + r.stderr
