"""The Ray Data backfill end to end: real Ray on 127.0.0.1, a real Milvus Lite server, real
models. Order matters in this module: the CLI tests start (and stop) their own local cluster
before the module's shared cluster starts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import typer
from dashboard_metrics import ray_env
from fixtures import write_jsonl_fixture, write_locomo_fixture
from typer.testing import CliRunner

pytestmark = pytest.mark.slow


def _app() -> typer.Typer:
    """The CLI's registration of the command (cluster/cli.py does ``app.command()(backfill)``)."""
    from cluster.backfill_cmd import backfill

    app = typer.Typer()
    app.command()(backfill)

    @app.command()
    def other() -> None:  # a second command, so typer keeps the subcommand name
        pass

    return app


def _invoke(*args: str):
    return CliRunner().invoke(_app(), ["backfill", *args])


def _open_store(data_dir: Path):
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    return MilvusStore(Settings(data_dir=data_dir), dim=384)


def _assert_doctor_clean(uri: str, banks) -> None:
    """memlane doctor's checks on every bank: a fault must leave no broken invariant."""
    from memlane.engine import Memory
    from memlane.settings import Settings

    with Memory(Settings(store={"milvus_uri": uri})) as memory:
        for bank_id in sorted(banks):
            report = memory.banks.doctor(bank_id)
            assert report.ok and report.counts["graph_units"] == report.counts["units"] > 0, (
                bank_id,
                [f.as_dict() for f in report.findings],
            )


def _bank_state(store, bank_id: str) -> dict:
    units = [u for batch in store.iter_units(bank_id) for u in batch]
    return {
        "units": sorted(
            (
                u.id,
                u.chunk_id,
                tuple(u.entity_ids),
                tuple(u.source_turns),
                tuple(sorted((lk.target_id, lk.type.value) for lk in u.links)),
            )
            for u in units
        ),
        "chunks": store.count_chunks(bank_id),
        "entities": sorted((e.entity_id, e.name, e.mention_count) for e in store.list_entities(bank_id)),
    }


def _records(n_banks: int, per_bank: int, prefix: str = "user") -> list[dict]:
    """Records of ``n_banks`` banks ``{prefix}-{b}`` (tests share one Milvus server: each test
    uses its own prefix)."""
    rows = []
    for b in range(n_banks):
        for i in range(per_bank):
            rows.append(
                {
                    "bank_id": f"{prefix}-{b}",
                    "session_id": f"s{i // 5}",
                    "speaker": "Ada" if i % 2 == 0 else "Ben",
                    "text": f"Message {i} of user {b}: we met at the harbour in Lisbon.",
                    "timestamp": f"2024-0{1 + b % 9}-{1 + i // 5:02d}T10:{i % 60:02d}:00Z",
                }
            )
    return rows


# ------------------------------------------------------------------ CLI, own local cluster


@pytest.fixture
def reference(tmp_path, extractor):
    """An engine on the default settings (the backfill's: bge-small embeds), for the plain
    retain the backfill is compared with (semantic links follow the vectors)."""
    from memlane.engine import Memory
    from memlane.settings import Settings

    with Memory(Settings(data_dir=tmp_path / "reference"), extractor=extractor) as m:
        yield m


def test_cli_locomo_same_memories_as_plain_retain_then_resume(tmp_path, reference):
    from memlane.ingest import load_conversations

    memory = reference

    src = write_locomo_fixture(tmp_path / "locomo.json")
    data = tmp_path / "bf"
    result = _invoke(str(src), "--data-dir", str(data), "--json", "--workers", "1")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(summary) >= {
        "banks",
        "turns",
        "memories",
        "entities",
        "links",
        "rejects",
        "wall_s",
        "turns_per_s",
    }

    # The reference: a plain in-process retain of the same file, one bank per conversation.
    conversations = load_conversations(src)
    for conv in conversations:
        memory.retain(conv.document_id, [(conv.document_id, conv.turns)])
    n_turns = sum(len(c.turns) for c in conversations)
    assert (summary["banks"], summary["turns"], summary["rejects"]) == (2, n_turns, 0)
    assert (
        summary["memories"] == sum(memory.store.count_units(c.document_id) for c in conversations) == n_turns
    )

    store = _open_store(data)  # the server is stopped: open the directory as a Lite file
    try:
        for conv in conversations:
            assert _bank_state(store, conv.document_id) == _bank_state(memory.store, conv.document_id)
    finally:
        store.close()

    # Run again: both banks are unchanged and complete, so nothing is retained twice.
    again = _invoke(str(src), "--data-dir", str(data), "--json", "--workers", "1")
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout.strip().splitlines()[-1])
    assert (second["skipped_banks"], second["retained_banks"]) == (2, 0)
    assert second["memories"] == summary["memories"]
    store = _open_store(data)
    try:
        assert sum(store.count_units(c.document_id) for c in conversations) == n_turns
    finally:
        store.close()


def test_cli_reject_share_over_limit_exits_2_before_writing(tmp_path):
    rows = _records(2, 10)
    rows[3].pop("text")
    rows[7]["timestamp"] = "the day after tomorrow-ish"
    src = write_jsonl_fixture(tmp_path / "c.jsonl", rows)
    data = tmp_path / "bf"
    result = _invoke(str(src), "--data-dir", str(data), "--max-reject-share", "0.05")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: 2 of 20 records rejected")
    rejects = [json.loads(x) for x in (data / "backfill-rejects.jsonl").read_text().splitlines()]
    assert [r["where"] for r in rejects] == ["line 4", "line 8"]
    assert not (data / "milvus.db").exists()  # nothing started, nothing written


@pytest.mark.parametrize(
    "args, message",
    [
        (["--format", "csv"], "--format must be one of"),
        (["--workers", "0"], "--workers must be >= 1"),
        (["--max-reject-share", "1.5"], "--max-reject-share must be in [0, 1]"),
        (["--vllm-model", "some/model"], "--vllm-model needs vLLM"),  # not installed on CPU machines
    ],
)
def test_cli_bad_options_exit_2(tmp_path, args, message):
    src = write_jsonl_fixture(tmp_path / "c.jsonl", _records(1, 2))
    result = _invoke(str(src), "--data-dir", str(tmp_path / "bf"), *args)
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_cli_missing_path_exits_2(tmp_path):
    result = _invoke(str(tmp_path / "nope.jsonl"), "--data-dir", str(tmp_path / "bf"))
    assert result.exit_code == 2 and "no such file" in result.stderr


# ------------------------------------------------------------------ shared local cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Milvus Lite server and a 2-CPU Ray, both on 127.0.0.1; stopped at module end."""
    import ray

    from cluster.local import MilvusLiteServer, start_local_ray

    server = MilvusLiteServer(tmp_path_factory.mktemp("milvus"))
    server.start()
    try:
        with ray_env():  # test_metrics_reach_the_prometheus_endpoint waits one export interval
            start_local_ray(num_cpus=2, include_dashboard=False)
            try:
                yield server
            finally:
                ray.shutdown()
    finally:
        server.stop()


def _run(cluster, src: Path, data: Path, **kw):
    from pipelines.backfill import BackfillConfig, run_backfill

    results: list[dict] = []
    cfg = BackfillConfig(path=src, milvus_uri=cluster.uri, data_dir=data, progress=False, **kw)
    return run_backfill(cfg, on_result=results.append), results


def _server_counts(cluster, banks) -> dict[str, int]:
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    store = MilvusStore(Settings(store={"milvus_uri": cluster.uri}), dim=384)
    try:
        return {b: store.count_units(b) for b in banks}
    finally:
        store.close()


@pytest.mark.parametrize("fault", ["kill", "raise"])
def test_worker_fault_mid_job_still_exact(cluster, tmp_path, fault):
    """A worker killed (or raising) mid-batch: Ray restarts it and re-runs the batch (kill), or
    the bank is retried in place (raise); the job ends with exactly one memory per good record."""
    rows = _records(6, 20, prefix=fault)
    bad = dict(rows[0], text="", turn_id="x")  # one reject, under the 1% limit
    rows.append(bad)
    src = write_jsonl_fixture(tmp_path / f"{fault}.jsonl", rows)
    marker = tmp_path / f"{fault}.fired"
    summary, results = _run(
        cluster,
        src,
        tmp_path / "bf",
        workers=2,
        group_turns=40,
        max_reject_share=0.01,
        runtime_env={"env_vars": {"MEMLANE_BACKFILL_FAULT": f"{fault}:{marker}"}},
    )
    assert marker.exists()  # the fault did fire
    expected = Counter(r["bank_id"] for r in rows[:-1])
    assert (summary.banks, summary.failed_banks, summary.rejects) == (6, 0, 1)
    assert summary.memories == summary.turns == 120
    assert _server_counts(cluster, expected) == dict(expected)
    assert sorted(r["bank_id"] for r in results) == sorted(expected)  # each bank reported once
    if fault == "kill":
        assert len({r["worker_pid"] for r in results}) >= 2  # a replacement process took over
    rejects = (tmp_path / "bf" / "backfill-rejects.jsonl").read_text().splitlines()
    # The reason is the engine's JSONL reader's (one reader for memlane retain and the backfill).
    assert len(rejects) == 1 and json.loads(rejects[0])["reason"] == "field 'text': must not be empty"
    _assert_doctor_clean(cluster.uri, expected)


def test_interrupted_run_resumes_without_duplicates(cluster, tmp_path):
    """A re-run skips banks the ledger lists whose units are all in Milvus, and retains the
    rest: a bank missing from the ledger (the run was cut before it finished) and a bank in the
    ledger whose units were deleted since. Counts end exact, with no duplicates."""
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    rows = _records(4, 15, prefix="resume")
    src = write_jsonl_fixture(tmp_path / "c.jsonl", rows)
    data = tmp_path / "bf"
    first, _ = _run(cluster, src, data, workers=1, group_turns=15)
    assert first.retained_banks == 4
    ledger = (data / "backfill-ledger.jsonl").read_text().splitlines()
    kept = [json.loads(x)["bank_id"] for x in ledger[:3]]
    (data / "backfill-ledger.jsonl").write_text("\n".join(ledger[:3]) + "\n")
    store = MilvusStore(Settings(store={"milvus_uri": cluster.uri}), dim=384)
    try:
        store.delete_bank(kept[2])
    finally:
        store.close()
    missing = ({f"resume-{b}" for b in range(4)} - set(kept)) | {kept[2]}
    second, results = _run(cluster, src, data, workers=1, group_turns=15)
    assert (second.skipped_banks, second.retained_banks) == (2, 2)
    assert sorted(r["bank_id"] for r in results) == sorted(missing)
    assert second.memories == 60 and second.retained_turns == 30
    assert _server_counts(cluster, [f"resume-{b}" for b in range(4)]) == {f"resume-{b}": 15 for b in range(4)}
    _assert_doctor_clean(cluster.uri, [f"resume-{b}" for b in range(4)])


def test_metrics_reach_the_prometheus_endpoint(cluster, tmp_path):
    """The workers' and the driver's custom metrics are exported on the node's metrics port
    (what Prometheus scrapes and the dashboard's Metrics view reads)."""
    import time
    import urllib.request

    import ray

    rows = _records(2, 10, prefix="metrics")
    rows.append(dict(rows[0], timestamp="not a time", turn_id="bad"))
    src = write_jsonl_fixture(tmp_path / "m.jsonl", rows)
    summary, _ = _run(cluster, src, tmp_path / "bf", workers=1, max_reject_share=0.1)
    assert summary.memories == 20 and summary.rejects == 1
    node = ray._private.worker._global_node
    assert node.node_ip_address == "127.0.0.1"
    url = f"http://127.0.0.1:{node.metrics_export_port}/metrics"

    def totals() -> dict[str, float]:
        out: dict[str, float] = {}
        for line in urllib.request.urlopen(url, timeout=5).read().decode().splitlines():
            if line.startswith("ray_memlane_backfill_"):
                name = line.split("{")[0]
                out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        return out

    wanted = {
        "ray_memlane_backfill_memories_written_total": 20,
        "ray_memlane_backfill_turns_read_total": 20,
        "ray_memlane_backfill_rejects_total": 1,
        "ray_memlane_backfill_stage_seconds_count": 1,
    }
    deadline = time.monotonic() + 60
    while True:
        got = totals()
        if all(got.get(k, 0) >= v for k, v in wanted.items()) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert {k: got.get(k, 0) >= v for k, v in wanted.items()} == {k: True for k in wanted}


CITY = [
    ("s1", "2025-02-03T09:00:00Z", "Maya", "I work as a nurse in Bristol now."),
    ("s1", "2025-02-03T09:01:00Z", "Sam", "Bristol is lovely this time of year."),
    ("s2", "2025-03-10T18:00:00Z", "Maya", "I got promoted to ward manager last week!"),
    ("s2", "2025-03-10T18:01:00Z", "Sam", "Congrats! How is the commute?"),
    ("s3", "2025-04-14T12:00:00Z", "Maya", "Started my new job at Clyde Robotics today!"),
    ("s3", "2025-04-14T12:01:00Z", "Sam", "How is it going so far?"),
]
NOTE = {
    "content": "I have started Japanese lessons on Tuesday evenings.",
    "speaker": "Maya",
    "document_id": "mcp-note",
    "timestamp": "2025-04-20T20:00:00+00:00",
}


def test_a_second_backfill_of_unchanged_input_keeps_the_tree_and_the_supersessions(cluster, tmp_path):
    """The reported case: a backfill, its bank consolidated, one more memory retained over MCP
    (the catalogue's operation), then the same backfill again. Its input is unchanged and its
    memories are those the ledger names, so the bank is skipped, though it holds one more
    memory. Without the ledger (lost) the bank is retained again: its documents are unchanged
    and nothing of the bank changes (tree, supersessions, links, entities). The bank then equals
    a fresh bank given the same input through the engine, consolidated the same way."""
    from datetime import UTC, datetime

    from derived_state import differences, snapshot

    from memlane import catalogue
    from memlane.engine import Memory
    from memlane.settings import Settings

    now = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        {
            "bank_id": "maya",
            "document_id": "maya",
            "session_id": s,
            "timestamp": at,
            "speaker": who,
            "text": text,
        }
        for s, at, who, text in CITY
    ]
    src = write_jsonl_fixture(tmp_path / "maya.jsonl", rows)
    data = tmp_path / "bf"
    first, _ = _run(cluster, src, data, workers=1)
    assert (first.retained_banks, first.memories) == (1, 6)
    with Memory(Settings(store={"milvus_uri": cluster.uri}, data_dir=tmp_path / "engine")) as memory:
        memory.consolidate("maya", now=now)
        bristol = next(u for p in memory.store.iter_units("maya") for u in p if "Bristol now" in u.text)
        assert (
            bristol.superseded_by is not None
        )  # the promotion superseded it (rules are trusted with job titles)
        note = catalogue.call(memory, "retain", "maya", items=[NOTE])  # what MCP's retain runs
        assert note["stale"]["tree_sessions"] == 1  # its session is not in the tree yet
        before = snapshot(memory, "maya")
        memory.derived.evict("maya")

        second, _ = _run(cluster, src, data, workers=1)
        assert (second.retained_banks, second.skipped_banks) == (0, 1)  # 7 memories, 6 its input's
        (data / "backfill-ledger.jsonl").unlink()
        second, results = _run(cluster, src, data, workers=1)
        assert (second.retained_banks, second.skipped_banks) == (1, 0)
        (rec,) = results
        assert (rec["memories"], rec["unchanged"], rec["bank_units"]) == (6, 6, 7)
        assert (rec["stale_tree_sessions"], rec["stale_facts"]) == (0, 0)
        assert differences(snapshot(memory, "maya"), before) == []
        assert memory.store.get_units("maya", [bristol.id])[0].superseded_by == bristol.superseded_by

        third, _ = _run(cluster, src, data, workers=1)
        assert (third.retained_banks, third.skipped_banks) == (0, 1)  # the ledger holds 7 now

        memory.consolidate("maya", now=now)
        with Memory(Settings(data_dir=tmp_path / "fresh")) as fresh:
            from memlane.ingest import load_conversations

            # the same file as `memlane retain` reads it (the bank id is the backfill's routing key)
            plain = write_jsonl_fixture(
                tmp_path / "plain.jsonl", [{k: v for k, v in r.items() if k != "bank_id"} for r in rows]
            )
            for conv in load_conversations(plain):
                fresh.retain("maya", [(conv.document_id, conv.turns)])
            catalogue.call(fresh, "retain", "maya", items=[NOTE])
            fresh.consolidate("maya", now=now)
            assert differences(snapshot(memory, "maya"), snapshot(fresh, "maya")) == []
    _assert_doctor_clean(cluster.uri, ["maya"])
