"""``memlane recall`` imports what a recall uses, and an unknown bank is refused from the data
directory's files before the store's client is imported. Each command runs in a fresh process
under ``python -X importtime``, whose report names every module the process imported; real
engine, models and Milvus Lite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures import write_jsonl_fixture
from typer.testing import CliRunner

from cluster.cli import app
from cluster.route import bank_absent
from memlane.engine import Memory
from memlane.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "import sys; from cluster.cli import main; sys.argv[0] = 'memlane'; main()"
TURNS = [
    ("Ana", "I adopted a beagle called Pixel last week.", "2025-03-10T09:00:00Z", "s1"),
    ("Ben", "Lovely! Is Pixel settling in?", "2025-03-10T09:01:00Z", "s1"),
    ("Ana", "Yes, and I started a pottery class in Porto.", "2025-04-02T18:00:00Z", "s2"),
    ("Ben", "Porto is lovely in spring.", "2025-04-02T18:01:00Z", "s2"),
]
# What a recall in process never needs: the torch stack, spaCy (retain's NER), Ray, and the
# learned ranker's and evals' libraries.
HEAVY = ("torch", "sentence_transformers", "transformers", "spacy", "ray", "lightgbm", "sklearn")


def memlane(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, list[str], set[str]]:
    """Run the CLI in a fresh process: exit code, stdout, the lines it wrote on stderr and the
    modules the process imported (from ``-X importtime``'s lines on stderr)."""
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    run_env.update(env or {})
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", ENTRY, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=run_env,
        timeout=600,
    )
    lines, modules = [], set()
    for line in p.stderr.splitlines():
        if line.startswith("import time:"):
            modules.add(line.rsplit("|", 1)[-1].strip())
        elif line.strip():
            lines.append(line)
    return p.returncode, p.stdout, lines, modules


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A data directory with bank "ana" (4 turns) and bank "gone", retained then deleted."""
    root = tmp_path_factory.mktemp("recall-imports")
    chat = write_jsonl_fixture(
        root / "chat.jsonl",
        [{"speaker": s, "text": t, "timestamp": ts, "session_id": sid} for s, t, ts, sid in TURNS],
    )
    data = root / "data"
    for bank in ("ana", "gone"):
        r = CliRunner().invoke(app, ["retain", str(chat), "--bank", bank, "--data-dir", str(data)])
        assert r.exit_code == 0, r.stderr
    r = CliRunner().invoke(app, ["delete", "--bank", "gone", "--data-dir", str(data)])
    assert r.exit_code == 0, r.stderr
    return data


def test_an_unknown_bank_exits_2_in_one_line_before_the_store_client_is_imported(data):
    code, out, lines, modules = memlane("recall", "dog", "--bank", "ghost", "--data-dir", str(data))
    assert code == 2 and out == ""
    assert lines == [f"error: unknown bank 'ghost': `memlane banks --data-dir {data}` lists the banks"]
    assert not top_level(modules) & {"pymilvus", "milvus_lite", "pandas", "onnxruntime", *HEAVY}
    assert "threadpoolctl" not in modules  # the process limits are set for a recall that runs


def test_a_deleted_bank_is_refused_by_the_store_in_the_same_line(data):
    """Its row is still in the banks collection's files (Lite deletes by a later record until it
    compacts), so the files cannot tell and the store answers."""
    code, out, lines, modules = memlane("recall", "dog", "--bank", "gone", "--data-dir", str(data))
    assert code == 2 and out == ""
    assert lines == [f"error: unknown bank 'gone': `memlane banks --data-dir {data}` lists the banks"]
    assert "pymilvus" in top_level(modules)


def test_recall_on_a_small_bank_answers_without_the_heavy_modules(data):
    code, out, lines, modules = memlane(
        "recall", "What is the name of the beagle?", "--bank", "ana", "--data-dir", str(data)
    )
    assert code == 0, lines
    memories = out.splitlines()
    assert len(memories) == 4
    assert "I adopted a beagle called Pixel" in memories[0]
    assert lines[-1].startswith("(4 memories, 0 tree nodes,")
    imported = top_level(modules)
    assert {"pymilvus", "onnxruntime", "tokenizers"} <= imported  # the store and the embedder
    assert not imported & set(HEAVY)
    # the other commands' modules are not registered for a recall
    assert not {m for m in modules if m.startswith("cluster.") and m.endswith("_cmd")} - {
        "cluster.recall_cmd"
    }


# Runs the CLI as the entry point does and, where it ends the process (os._exit, after the
# recall closed everything), writes the BLAS libraries' thread counts on stderr.
BLAS_AT_EXIT = """
import json, os, sys
from threadpoolctl import threadpool_info
from cluster.cli import main
end = os._exit
def report(code):
    threads = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    sys.stderr.write("blas threads " + json.dumps(threads) + "\\n")
    sys.stderr.flush()
    end(code)
os._exit = report
sys.argv[0] = "memlane"
main()
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: OpenBLAS starts with one thread anyway")
def test_recall_runs_numpy_on_one_blas_thread(data):
    """memlane.runtime.configure_process's limit holds for the recall it was measured for: set
    once NumPy is loaded (before, it was set before NumPy loaded, and OpenBLAS kept a thread per
    core)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENBLAS_", "OMP_"))}
    p = subprocess.run(
        [sys.executable, "-c", BLAS_AT_EXIT, "recall", "beagle", "--bank", "ana", "--data-dir", str(data)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert "I adopted a beagle called Pixel" in p.stdout
    [line] = [x for x in p.stderr.splitlines() if x.startswith("blas threads ")]
    threads = json.loads(line.removeprefix("blas threads "))
    assert threads and set(threads) == {1}  # NumPy's OpenBLAS and SciPy's


def test_the_files_tell_a_bank_apart_only_when_no_row_of_it_is_stored(tmp_path, monkeypatch):
    """An empty bank has a row and no collection of its own; an unknown one has no row; a
    directory with nothing stored holds no bank; another store prefix has its own banks; a
    directory another process holds, or a Milvus server, is left to the store."""
    data = tmp_path / "data"
    assert bank_absent(data, "ana")  # nothing stored yet
    with Memory(Settings(data_dir=data)) as memory:
        memory.create_bank("empty")
        assert not bank_absent(data, "empty")  # held by this process: only the store can tell
    assert not bank_absent(data, "empty")
    assert bank_absent(data, "ghost")
    monkeypatch.setenv("MEMLANE_STORE__COLLECTION_PREFIX", "other")
    assert bank_absent(data, "empty")
    # a Milvus server the settings name holds the banks, whatever the directory's files say
    monkeypatch.setenv("MEMLANE_STORE__MILVUS_URI", "http://127.0.0.1:9")
    assert not bank_absent(data, "ghost")
