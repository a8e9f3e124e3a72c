"""``memlane store server start|status|stop`` (cluster/milvus_server.py) for real: Milvus 2.3.5
in a network namespace of its own behind a loopback relay, reachable from 127.0.0.1 only; the
engine and the CLI pointed at it with MEMLANE_STORE__MILVUS_URI; the one-line failures (a URI
that does not answer, a feature the server is too old for, a layout that contradicts the
store's, a second server, a busy port), each leaving nothing written."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from fixtures import write_jsonl_fixture
from listeners import is_loopback, listeners_of, process_tree
from typer.testing import CliRunner

from cluster.cli import app
from cluster.local import free_port
from tests.cluster.test_cli import ROWS
from tests.conftest import _purge_prefix, server_prefix


@pytest.fixture(autouse=True)
def _needs_the_extra():
    import importlib.util

    if importlib.util.find_spec("milvus") is None:
        if os.environ.get("MEMLANE_REQUIRE_MILVUS_SERVER") == "1":
            pytest.fail("MEMLANE_REQUIRE_MILVUS_SERVER=1 but the milvus package is not installed")
        pytest.skip("the milvus package is not installed (pip install -e '.[milvus-server]')")


@pytest.fixture
def shared(milvus_server_uri):
    """The session server's prefix of the modules with engines on 384-dim models (a fresh
    prefix costs ~18 s of collection loads: tests/conftest.py), emptied after the test."""
    prefix = server_prefix("engine-384")
    yield prefix
    _purge_prefix(milvus_server_uri, prefix)


@pytest.fixture
def run():
    runner = CliRunner()
    return lambda *args, env=None: runner.invoke(app, list(args), env=env)


def _one_line(result) -> str:
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _listening_ports_in(pid: int) -> set[tuple[str, int]]:
    """(address, port) of the listeners in ``pid``'s network namespace (its own /proc/net)."""
    out = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A":
                addr, port = f[1].split(":")
                raw = bytes.fromhex(addr)
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                family = socket.AF_INET if table == "tcp" else socket.AF_INET6
                out.add((socket.inet_ntop(family, words), int(port, 16)))
    return out


def test_start_status_stop_loopback_only_and_the_engine_on_it(run, tmp_path):
    root, port = tmp_path / "srv", free_port()
    r = run("store", "server", "start", "--port", str(port), "--data-dir", str(root))
    assert r.exit_code == 0, r.output
    uri = f"http://127.0.0.1:{port}"
    assert r.stdout.strip() == f"export MEMLANE_STORE__MILVUS_URI={uri}"
    state = json.loads((root / "milvus-server.json").read_text())
    try:
        status = json.loads(run("store", "server", "status", "--data-dir", str(root)).stdout)
        assert status["answers"] is True and status["version"] == "v2.3.5-lite" and status["uri"] == uri
        # the host's socket table: the server's processes hold one listener, the relay on loopback
        held = listeners_of(process_tree(state["pid"]))
        assert [(a, p) for _, a, p in held] == [("127.0.0.1", port)], held
        assert all(is_loopback(a) for _, a, _ in held)
        # Milvus itself listens on every interface, but in a namespace of its own
        milvus = state["milvus_pid"]
        assert os.readlink(f"/proc/{milvus}/ns/net") != os.readlink("/proc/self/ns/net")
        inside = _listening_ports_in(milvus)
        assert {("0.0.0.0", 19530), ("::", 19530)} & inside, inside
        # a second server for the directory, and a busy port: one line each, exit 2
        again = run("store", "server", "start", "--port", str(free_port()), "--data-dir", str(root))
        assert again.exit_code == 2 and "already running" in _one_line(again)
        busy = run("store", "server", "start", "--port", str(port), "--data-dir", str(tmp_path / "other"))
        assert busy.exit_code == 2 and f"port {port} on 127.0.0.1 is in use" in _one_line(busy)
        # every command pointed at it: retain and recall through the CLI
        sample = write_jsonl_fixture(tmp_path / "chat.jsonl", ROWS)
        env = {"MEMLANE_STORE__MILVUS_URI": uri, "MEMLANE_DATA_DIR": str(tmp_path / "data")}
        kept = run("retain", str(sample), "--bank", "ana", "--json", env=env)
        assert kept.exit_code == 0, kept.output
        assert json.loads(kept.stdout.strip().splitlines()[-1])["units"] == 3
        found = run(
            "recall", "--bank", "ana", "What is the name of the beagle Ana adopted?", "--json", env=env
        )
        assert found.exit_code == 0, found.output
        top = json.loads(found.stdout)["memories"][0]["unit"]
        assert "Pixel" in top["text"] and top["source_turns"] == ["s1:1"]
        banks = run("banks", "--json", env=env)
        assert json.loads(banks.stdout) == [{"bank_id": "ana", "name": "", "memories": 3}]
        # doctor and status reach the server the settings name too (not the data dir)
        doctor = run("doctor", "--bank", "ana", "--json", env=env)
        assert doctor.exit_code == 0, doctor.output
        checked = json.loads(doctor.stdout)
        assert checked["ok"] is True and [b["bank_id"] for b in checked["banks"]] == ["ana"]
        status = json.loads(run("status", "--json", env=env).stdout)
        assert (status["milvus"]["mode"], status["milvus"]["uri"]) == ("server", uri)
        assert status["banks"]["count"] == 1 and status["banks"]["banks"][0]["bank_id"] == "ana"
        assert not (tmp_path / "data" / "milvus.db").exists()  # nothing went to Milvus Lite
    finally:
        stopped = run("store", "server", "stop", "--data-dir", str(root))
    assert stopped.stdout.strip() == "stopped"
    gone = run("store", "server", "status", "--data-dir", str(root))
    assert gone.exit_code == 1 and "no Milvus server runs" in gone.stdout
    for pid in (state["pid"], state["milvus_pid"]):
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert "stopping Milvus: exited after" in (root / "milvus-server.log").read_text()


def test_a_uri_that_does_not_answer_is_one_line(run, tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    r = run("banks", env={"MEMLANE_STORE__MILVUS_URI": uri, "MEMLANE_DATA_DIR": str(tmp_path / "d")})
    assert r.exit_code == 2
    line = _one_line(r)
    assert line.startswith(f"error: the Milvus server at {uri} does not answer"), line
    assert "memlane store server start" in line


def test_serve_refuses_a_server_uri_that_does_not_answer_before_starting_anything(run, tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    data = tmp_path / "d"
    r = run(
        "serve", "--port", str(free_port()), "--data-dir", str(data), env={"MEMLANE_STORE__MILVUS_URI": uri}
    )
    assert r.exit_code == 2
    assert _one_line(r).startswith(f"error: the Milvus server at {uri} does not answer")
    from cluster.service import STATE_FILE

    assert not (data / STATE_FILE).exists() and not (data / "milvus.db").exists()


@pytest.mark.slow
def test_the_service_runs_on_the_server_it_is_pointed_at(milvus_server_uri, shared, tmp_path):
    """`memlane serve` with MEMLANE_STORE__MILVUS_URI: no Milvus Lite of its own; what it
    retains lands in the server (read back there by a store of this process) and recalls."""
    import httpx
    from live import live_service

    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    env = {"MEMLANE_STORE__MILVUS_URI": milvus_server_uri, "MEMLANE_STORE__COLLECTION_PREFIX": shared}
    with live_service(tmp_path, env=env) as state:
        assert state["milvus_uri"] == milvus_server_uri
        with httpx.Client(base_url=state["url"], timeout=120) as http:
            assert http.put("/v1/banks/ada", json={"name": ""}).status_code == 201
            item = {"content": "Ada keeps her bike in the shed by the river", "speaker": "Ada"}
            assert http.post("/v1/banks/ada/memories", json={"items": [item]}).status_code == 200
            found = http.post("/v1/banks/ada/recall", json={"query": "Where is the bike kept?"})
            assert found.status_code == 200 and "shed by the river" in found.text
        assert not list((tmp_path / "data").glob("**/*.db")), "the service opened a Milvus Lite"
    settings = Settings(
        data_dir=tmp_path / "reader", store={"milvus_uri": milvus_server_uri, "collection_prefix": shared}
    )
    with MilvusStore(settings, dim=settings.models.embedding_dim) as store:
        texts = [u.text for batch in store.iter_units("ada") for u in batch]
    assert any("shed by the river" in t for t in texts), texts


def test_a_feature_the_server_is_too_old_for_and_a_contradicting_layout(
    run, tmp_path, milvus_server_uri, shared
):
    from pymilvus import MilvusClient

    client = MilvusClient(uri=milvus_server_uri)
    env = {
        "MEMLANE_STORE__MILVUS_URI": milvus_server_uri,
        "MEMLANE_STORE__COLLECTION_PREFIX": "too_old",
        "MEMLANE_DATA_DIR": str(tmp_path / "d"),
    }
    try:
        # BM25 searched in the store needs Milvus 2.5: refused before anything is created
        r = run("banks", env={**env, "MEMLANE_STORE__SEARCH_BACKEND": "milvus"})
        assert r.exit_code == 2
        assert "needs Milvus's BM25 function" in _one_line(r) and "Milvus v2.3.5-lite" in r.stderr
        assert [n for n in client.list_collections() if n.startswith("too_old_")] == []
        # a store recorded as partition_key (a server's default) asked for per_bank (on the
        # shared prefix: its collections exist, so the retain does not wait for their loads)
        env["MEMLANE_STORE__COLLECTION_PREFIX"] = shared
        sample = write_jsonl_fixture(tmp_path / "chat.jsonl", ROWS)
        assert run("retain", str(sample), "--bank", "ana", env=env).exit_code == 0
        units = f"{shared}_pk_units"
        before = client.query(units, filter="", output_fields=["count(*)"])[0]["count(*)"]
        collections = set(client.list_collections())
        r = run("banks", env={**env, "MEMLANE_STORE__LAYOUT": "per_bank"})
        assert r.exit_code == 2
        line = _one_line(r)
        assert "holds the partition_key layout" in line and "memlane store migrate --to per_bank" in line
        after = client.query(units, filter="", output_fields=["count(*)"])[0]["count(*)"]
        assert after == before > 0
        assert set(client.list_collections()) == collections  # no per-bank collection appeared
    finally:
        for name in client.list_collections():
            if name.startswith("too_old_"):
                client.drop_collection(name)
        client.close()


def test_the_rest_api_names_an_unavailable_store():
    from memlane.errors import StoreCapabilityError, StoreUnavailable
    from serve.errors import engine_error

    down = engine_error(StoreUnavailable("the Milvus server at http://127.0.0.1:1 does not answer"))
    assert (down.status, down.code) == (503, "store_unavailable")
    old = engine_error(StoreCapabilityError("needs Milvus 2.5"))
    assert (old.status, old.code) == (503, "not_configured")


def test_a_cold_bank_on_milvus_2_3_is_answered_without_the_lexical_channel(
    backend_settings, milvus_server_uri, shared, embedder, extractor
):
    """The store answers a bank this process does not hold (recall.cold_bank=store); Milvus 2.3
    has no BM25, so that answer names the lexical channel as missing, and the warm answer after
    the load (the in-process index's BM25) has it."""
    from memlane.engine import Memory

    settings = backend_settings(
        store={"milvus_uri": milvus_server_uri, "collection_prefix": shared}, recall={"cold_bank": "store"}
    )
    turns = [
        {"content": r["text"], **{k: r[k] for k in ("speaker", "timestamp", "session_id")}} for r in ROWS
    ]
    with Memory(settings, embedder=embedder, extractor=extractor) as writer:
        writer.retain_items("ana", turns, document_id="chat")
    with Memory(settings, embedder=embedder, extractor=extractor) as reader:
        cold = reader.recall("ana", "What is the name of the beagle Ana adopted?")
        assert cold.cold and cold.channels_missing == ["lexical"]
        assert "Pixel" in cold.memories[0].unit.text
        reader.derived.ensure("ana")
        warm = reader.recall("ana", "What is the name of the beagle Ana adopted?")
        assert not warm.cold and warm.channels_missing == []
        assert "Pixel" in warm.memories[0].unit.text


def test_the_jobs_and_export_reach_the_server_the_settings_name(run, tmp_path, milvus_server_uri, shared):
    """With MEMLANE_STORE__MILVUS_URI set, the backfill (and its consolidation), `export`,
    `doctor` and `status` all use that server, agree on what it holds, and open no Milvus Lite."""
    sample = Path(__file__).resolve().parents[2] / "samples" / "conversations.jsonl"
    rows = [json.loads(line) for line in sample.read_text().splitlines()]
    corpus = tmp_path / "priya.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows if r["bank_id"] == "priya"))
    env = {
        "MEMLANE_STORE__MILVUS_URI": milvus_server_uri,
        "MEMLANE_STORE__COLLECTION_PREFIX": shared,
        "MEMLANE_DATA_DIR": str(tmp_path / "data"),
    }
    done = run("backfill", str(corpus), "--consolidate", "--json", env=env)
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["banks"] == 1 and summary["memories"] > 0
    exported = run("export", "--bank", "priya", env=env)
    assert exported.exit_code == 0, exported.output
    header = json.loads(exported.stdout.splitlines()[0])
    assert header["counts"]["units"] == summary["memories"] and header["counts"]["tree_nodes"] > 0
    doctor = json.loads(run("doctor", "--bank", "priya", "--json", env=env).stdout)
    assert doctor["ok"] is True
    status = json.loads(run("status", "--json", env=env).stdout)
    assert [b["bank_id"] for b in status["banks"]["banks"]] == ["priya"]
    assert not list((tmp_path / "data").glob("**/*.db")), "a command opened a Milvus Lite"


def test_a_small_consolidate_runs_in_process_on_the_milvus_uri_given(
    run, tmp_path, milvus_server_uri, shared
):
    """`--milvus-uri` alone (no MEMLANE_STORE__MILVUS_URI): the in-process job opens that server,
    not the empty data directory."""
    env = {"MEMLANE_STORE__MILVUS_URI": milvus_server_uri, "MEMLANE_STORE__COLLECTION_PREFIX": shared}
    sample = write_jsonl_fixture(tmp_path / "chat.jsonl", ROWS)
    data = str(tmp_path / "elsewhere")
    assert run("retain", str(sample), "--bank", "ana", "--data-dir", data, env=env).exit_code == 0
    only_prefix = {"MEMLANE_STORE__COLLECTION_PREFIX": shared, "MEMLANE_STORE__MILVUS_URI": ""}
    r = run(
        "consolidate",
        "--bank",
        "ana",
        "--milvus-uri",
        milvus_server_uri,
        "--json",
        "--data-dir",
        data,
        env=only_prefix,
    )
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["workers"] == 1 and summary["banks"] == 1 and summary["leaves"] == len(ROWS)
    assert not (tmp_path / "elsewhere" / "milvus.db").exists()
