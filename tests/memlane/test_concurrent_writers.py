"""Two writers retaining into one bank at once (issue 16, item 4): two threads of one process,
and two processes sharing a Milvus Lite server. Both write documents that name the same people
and places and say similar things, so the second writer's entity resolution and semantic links
depend on what the first one wrote.

The second writer is started once the first one's first batch is in the store, i.e. while
the first one is mid-write. The result must equal retaining the two documents one after the
other (first, then second) in a fresh store: the same unit ids, entity ids per unit, links,
entity records (aliases, mention counts, first and last sighting) and chunk count, and
``Memory.doctor`` clean for a fresh reader.

What happened before bank leases (memlane/leases.py), measured with the thread test and the
lease turned off (Nov 2026): all 40 of the second writer's memories had other semantic links
than in the sequential run (it linked against the first writer's first batch only), and the
entity records ended as the first writer wrote them last, without the second writer's
mentions: "Ada" 600 mentions instead of 640 and last seen 2024-01-12 instead of 2024-03-01,
"Porto" 200 instead of 213. Unit ids and entity ids were equal (exact names, deterministic
ids). With the lease the second writer waits for the first (its wait is asserted) and the
states are equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

BANK = "shared"
# The first writer's document: three retain batches (BATCH_TURNS = 256 in
# memlane/retain/pipeline.py), so there is a window after its first batch is stored.
N_FIRST, N_SECOND = 600, 40
PLACES = ["Lisbon", "Porto", "Kyoto"]


def _items(doc: str, n: int, month: int) -> list[dict]:
    return [
        {
            "content": f"Ada told Ben about the harbour in {PLACES[i % 3]} and boat number {i % 11}.",
            "speaker": "Ada" if i % 2 == 0 else "Ben",
            "document_id": doc,
            "session_id": f"{doc}-s{i // 50}",
            "timestamp": f"2024-{month:02d}-{1 + i // 50:02d}T{8 + (i % 50) // 6:02d}:{i % 60:02d}:00Z",
        }
        for i in range(n)
    ]


FIRST = _items("first", N_FIRST, 1)
SECOND = _items("second", N_SECOND, 3)  # later in time: its memories may link to the first's


def bank_state(store, bank_id: str) -> dict:
    """Everything a retain decides for a bank, in a comparable form."""
    units = [u for batch in store.iter_units(bank_id) for u in batch]
    return {
        "units": sorted(
            (
                u.id,
                u.chunk_id,
                tuple(u.entity_ids),
                tuple(sorted((lk.target_id, lk.type.value, round(lk.weight, 4)) for lk in u.links)),
            )
            for u in units
        ),
        "chunks": store.count_chunks(bank_id),
        "entities": sorted(
            (
                e.entity_id,
                e.name,
                tuple(sorted(e.aliases)),
                e.mention_count,
                str(e.first_seen),
                str(e.last_seen),
            )
            for e in store.list_entities(bank_id)
        ),
    }


def _diff(got: dict, want: dict) -> dict:
    """Where two bank states differ, per record (for the assertion message)."""
    out: dict = {}
    g_units, w_units = {u[0]: u for u in got["units"]}, {u[0]: u for u in want["units"]}
    if set(g_units) != set(w_units):
        out["unit_ids"] = {
            "only_concurrent": len(set(g_units) - set(w_units)),
            "only_sequential": len(set(w_units) - set(g_units)),
        }
    common = sorted(set(g_units) & set(w_units))
    out["units_with_other_links"] = sum(g_units[i][3] != w_units[i][3] for i in common)
    out["units_with_other_entities"] = sum(g_units[i][2] != w_units[i][2] for i in common)
    g_ents, w_ents = {e[0]: e for e in got["entities"]}, {e[0]: e for e in want["entities"]}
    out["entity_ids_only_concurrent"] = len(set(g_ents) - set(w_ents))
    out["entity_ids_only_sequential"] = len(set(w_ents) - set(g_ents))
    out["entities_differing"] = [
        (w_ents[i][1], "concurrent", g_ents[i][2:], "sequential", w_ents[i][2:])
        for i in sorted(set(g_ents) & set(w_ents))
        if g_ents[i] != w_ents[i]
    ][:4]
    if got["chunks"] != want["chunks"]:
        out["chunks"] = (got["chunks"], want["chunks"])
    return out


@pytest.fixture
def sequential(tmp_path, embedder, extractor):
    """The reference: the two documents retained one after the other into a fresh store."""
    from memlane.engine import Memory
    from memlane.settings import Settings

    with Memory(Settings(data_dir=tmp_path / "sequential"), embedder=embedder, extractor=extractor) as m:
        m.retain_items(BANK, FIRST)
        m.retain_items(BANK, SECOND)
        yield bank_state(m.store, BANK)


def _wait_for_units(store, bank_id: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while store.count_units(bank_id) == 0:
        assert time.monotonic() < deadline, "the first writer wrote nothing within the timeout"
        time.sleep(0.05)


def test_two_threads_writing_one_bank_equal_the_sequential_result(settings, embedder, extractor, sequential):
    """Two engines (each with its own derived state, as two Serve replicas) on one store."""
    from memlane.engine import Memory

    errors: list[BaseException] = []
    ends: dict[str, float] = {}

    def run(memory, items, name):
        try:
            memory.retain_items(BANK, items)
            ends[name] = time.monotonic()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    with (
        Memory(settings, embedder=embedder, extractor=extractor) as a,
        Memory(settings, embedder=embedder, extractor=extractor) as b,
        Memory(settings, embedder=embedder, extractor=extractor) as reader,
    ):
        for m in (a, b, reader):  # open the Lite file here, not from two threads at once
            assert m.store is not None
        first = threading.Thread(target=run, args=(a, FIRST, "first"))
        first.start()
        _wait_for_units(reader.store, BANK)
        second = threading.Thread(target=run, args=(b, SECOND, "second"))
        second.start()
        assert first.is_alive()  # the second writer did start while the first was writing
        first.join(300)
        second.join(300)
        assert not errors, errors
        got = bank_state(reader.store, BANK)
        assert got == sequential, _diff(got, sequential)
        # The second writer waited for the first (the lease), rather than running beside it.
        assert ends["second"] >= ends["first"]
        assert b.writer.leases.waited_s > 0.5
        for m in (reader, a, b):  # each engine's own index and graph agree with the store
            report = m.banks.doctor(BANK)
            assert report.ok and report.counts["graph_units"] == report.counts["units"], report.as_dict()
        assert reader.store.list_leases(BANK) == []  # both leases were released


WRITER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from memlane.engine import Memory
    from memlane.settings import Settings

    uri, items_path, work, name = sys.argv[1:5]
    work = Path(work)
    # the reference run's embedder (tests/conftest.py: MiniLM on torch): link weights compare exactly
    models = {"embedder": "minilm", "embedder_backend": "torch"}
    memory = Memory(Settings(data_dir=work / name, store={"milvus_uri": uri}, models=models))
    memory.embedder.embed(["warm up"]), memory.extractor, memory.store  # load the models now
    (work / f"{name}.ready").write_text(str(__import__("os").getpid()))
    while not (work / f"{name}.go").exists():
        time.sleep(0.02)
    t0 = time.time()
    report = memory.retain_items("BANK", json.loads(Path(items_path).read_text()))
    out = {"start": t0, "end": time.time(), "units": report.units,
           "waited_s": memory.writer.leases.waited_s}
    (work / f"{name}.json").write_text(json.dumps(out))
    memory.close()
    """
).replace("BANK", BANK)


@pytest.mark.slow
def test_two_processes_writing_one_bank_through_a_milvus_server_equal_the_sequential_result(
    tmp_path, sequential
):
    """Two processes, each with its own engine, retaining into one bank of a Milvus Lite
    server at once (the only way two processes share a Lite directory)."""
    from cluster.local import MilvusLiteServer
    from memlane.engine import Memory
    from memlane.settings import Settings

    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    for name, items in (("first", FIRST), ("second", SECOND)):
        (tmp_path / f"{name}.items.json").write_text(json.dumps(items))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with MilvusLiteServer(tmp_path / "milvus") as server:
        procs = {
            name: subprocess.Popen(
                [
                    sys.executable,
                    str(script),
                    server.uri,
                    str(tmp_path / f"{name}.items.json"),
                    str(tmp_path),
                    name,
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=open(tmp_path / f"{name}.log", "wb"),
            )
            for name in ("first", "second")
        }
        try:
            deadline = time.monotonic() + 180
            while not all((tmp_path / f"{n}.ready").exists() for n in procs):
                assert all(p.poll() is None for p in procs.values()), "a writer died while loading"
                assert time.monotonic() < deadline, "the writers did not load within 180 s"
                time.sleep(0.2)
            with Memory(Settings(data_dir=tmp_path / "reader", store={"milvus_uri": server.uri})) as reader:
                (tmp_path / "first.go").touch()
                _wait_for_units(reader.store, BANK)
                (tmp_path / "second.go").touch()
                assert procs["first"].poll() is None  # the first writer is still writing
                for name, proc in procs.items():
                    assert proc.wait(300) == 0, (tmp_path / f"{name}.log").read_text()[-2000:]
                got = bank_state(reader.store, BANK)
                assert got == sequential, _diff(got, sequential)
                report = reader.banks.doctor(BANK)
                assert report.ok and report.counts["graph_units"] == report.counts["units"], report.as_dict()
                assert reader.store.list_leases(BANK) == []
            first, second = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("first", "second"))
            assert (first["units"], second["units"]) == (N_FIRST, N_SECOND)
            # The second process waited for the first one's lease and wrote after it.
            assert second["end"] > first["end"] and second["waited_s"] > 0.5
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
