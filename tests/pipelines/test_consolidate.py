"""The Ray Data consolidation job end to end: real Ray on 127.0.0.1, a real Milvus Lite server,
the real embedder. One cluster for the module: the sample chats are backfilled once, then
consolidated, re-run, changed and re-run."""

from __future__ import annotations

from datetime import UTC, timedelta
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "conversations.jsonl"
LEVELS = ("session", "day", "week", "profile")


def _store(uri: str):
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    return MilvusStore(Settings(store={"milvus_uri": uri}), dim=384)


def _tree_state(uri: str, banks) -> dict[str, dict[str, tuple]]:
    """{bank: {node id: (level, signature, children)}} as stored."""
    store = _store(uri)
    try:
        return {
            b: {n.id: (int(n.level), n.signature, tuple(n.children)) for n in store.list_tree_nodes(b)}
            for b in banks
        }
    finally:
        store.close()


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """(config, bank ids, first run's summary) over the sample chats backfilled on a 2-CPU
    local Ray and a Milvus Lite server; both stopped at module end."""
    import ray

    from cluster.local import MilvusLiteServer, start_local_ray
    from pipelines.backfill import BackfillConfig, run_backfill
    from pipelines.consolidate import ConsolidateConfig, resolve_banks, run_consolidate

    data = tmp_path_factory.mktemp("consolidate")
    server = MilvusLiteServer(data)
    server.start()
    try:
        start_local_ray(num_cpus=2, include_dashboard=False)
        try:
            retained = run_backfill(
                BackfillConfig(path=SAMPLES, milvus_uri=server.uri, data_dir=data, progress=False)
            )
            assert retained.failed_banks == 0 and retained.memories > 0
            cfg = ConsolidateConfig(milvus_uri=server.uri, data_dir=data, progress=False)
            banks = resolve_banks(cfg, None)
            results: list[dict] = []
            first = run_consolidate(cfg, banks, on_result=results.append)
            yield cfg, [b for b, _ in banks], first, results
        finally:
            ray.shutdown()
    finally:
        server.stop()


def test_backfill_alone_builds_no_tree(job):
    """The backfill's workers do not consolidate online: before the job ran, no bank had a
    tree, so the first run wrote every node it reports."""
    _, banks, first, _ = job
    assert first.written == first.nodes
    assert first.unchanged == dict.fromkeys(LEVELS, 0)


def test_job_builds_every_level_and_the_invariants_hold(job):
    from memlane.tree.invariants import tree_problems

    cfg, banks, first, results = job
    assert sorted(r["bank_id"] for r in results) == sorted(banks) and len(banks) == 2
    assert first.failed_banks == 0 and first.banks == 2
    store = _store(cfg.milvus_uri)
    try:
        stored = {lv: 0 for lv in LEVELS}
        n_units = 0
        for b in banks:
            nodes = store.list_tree_nodes(b)
            units = {u.id: u.mentioned_at for page in store.iter_units(b) for u in page}
            assert nodes, b
            assert tree_problems(nodes, units) == [], b
            # Each bank has one profile over its weeks.
            assert sum(1 for n in nodes if n.level.name == "profile") == 1
            for n in nodes:
                stored[n.level.name] += 1
            n_units += len(units)
    finally:
        store.close()
    assert stored == first.nodes
    # Without an LLM every memory is a world or experience fact from a chunk: all are leaves.
    assert first.leaves == n_units
    assert all(stored[lv] > 0 for lv in LEVELS)


def test_nodes_metric_by_level_reaches_the_prometheus_endpoint(job):
    """The workers' ``memlane_consolidate_nodes_total{level, outcome}`` on the node's metrics
    port (what Prometheus scrapes) sums, per level, to the nodes the first run wrote."""
    import re
    import time
    import urllib.request

    import ray

    _, _, first, _ = job
    node = ray._private.worker._global_node
    url = f"http://127.0.0.1:{node.metrics_export_port}/metrics"
    pattern = re.compile(r"^ray_memlane_consolidate_nodes_total\{(.*)\} ([0-9.e+]+)$")

    def written() -> dict[str, float]:
        out: dict[str, float] = {}
        for line in urllib.request.urlopen(url, timeout=5).read().decode().splitlines():
            m = pattern.match(line)
            if m and 'outcome="written"' in m.group(1):
                level = re.search(r'level="(\w+)"', m.group(1))
                assert level is not None
                out[level.group(1)] = out.get(level.group(1), 0.0) + float(m.group(2))
        return out

    want = {lv: float(n) for lv, n in first.written.items()}
    deadline = time.monotonic() + 60
    got = written()
    while got != want and time.monotonic() < deadline:
        time.sleep(2)
        got = written()
    assert got == want


def test_rerun_writes_nothing(job):
    from pipelines.consolidate import resolve_banks, run_consolidate

    cfg, banks, first, _ = job
    before = _tree_state(cfg.milvus_uri, banks)
    again = run_consolidate(cfg, resolve_banks(cfg, None))
    assert again.total_written == 0 and again.removed == 0
    assert again.unchanged == first.nodes and again.nodes == first.nodes
    assert _tree_state(cfg.milvus_uri, banks) == before


def test_a_new_session_rewrites_only_its_windows(job):
    """A turn retained into one bank on a new day: the re-run writes that bank's new session,
    day and week and its profile, and nothing of the other bank."""
    from memlane.engine import Memory
    from memlane.records import Turn
    from memlane.settings import Settings
    from pipelines.consolidate import resolve_banks, run_consolidate

    cfg, banks, first, _ = job
    target, other = banks[0], banks[1]
    before = _tree_state(cfg.milvus_uri, banks)
    store = _store(cfg.milvus_uri)
    try:
        latest = max(u.mentioned_at for page in store.iter_units(target) for u in page)
    finally:
        store.close()
    when = (latest + timedelta(days=30)).astimezone(UTC)
    settings = Settings(
        data_dir=cfg.data_dir, store={"milvus_uri": cfg.milvus_uri}, background={"tree": False}
    )
    with Memory(settings) as memory:
        memory.retain(
            target,
            [
                (
                    "later-chat",
                    [
                        Turn(
                            document_id="later-chat",
                            session_id="s1",
                            turn_id="s1:1",
                            index=0,
                            speaker="user",
                            text="I adopted a second dog called Pepper last weekend.",
                            timestamp=when,
                        )
                    ],
                )
            ],
        )
    rerun = run_consolidate(cfg, resolve_banks(cfg, [target, other]))
    assert rerun.written == {"session": 1, "day": 1, "week": 1, "profile": 1}
    after = _tree_state(cfg.milvus_uri, banks)
    assert after[other] == before[other]
    changed = {i for i, v in after[target].items() if before[target].get(i) != v}
    assert len(changed) == 4
    assert {after[target][i][0] for i in changed} == {2, 3, 4, 5}


def test_unknown_banks_are_named(job):
    from pipelines.consolidate import UnknownBanks, resolve_banks

    cfg, banks, _, _ = job
    with pytest.raises(UnknownBanks, match="unknown banks: nobody, ghost"):
        resolve_banks(cfg, [banks[0], "nobody", "ghost"])


def test_corpus_maps_to_the_banks_the_backfill_wrote(job):
    from pipelines.consolidate import corpus_banks

    _, banks, _, _ = job
    assert sorted(corpus_banks(SAMPLES)) == sorted(banks)
