"""A retain whose process dies between two of its batches (after the first batch's memories
are stored, before the rest), then run again, leaves the bank exactly as one uninterrupted
retain does: the same memories, links, chunks and entity records with their mention counts.
Before, entity records were written once after every batch, so the memories the dead process
stored named entities that did not exist, and the second run kept those memories as they were
(their input unchanged) and never wrote the entities.

The process really dies (``os._exit`` from retain's progress callback, which runs after a batch's
memories are written), in a subprocess on a Milvus Lite data directory; nothing is mocked."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memlane.engine import Memory
from memlane.records import Turn
from memlane.retain.pipeline import BATCH_TURNS
from memlane.settings import Settings

BANK = "killed"
PEOPLE = ["Ines", "Tomasz", "Farida", "Oskar", "Mireille", "Bartek"]
PLACES = ["Valencia", "Gdansk", "Tangier", "Bergen"]
N_TURNS = BATCH_TURNS + 60  # two batches: the process dies after the first


def _rows() -> list[dict[str, str]]:
    start = datetime(2025, 5, 1, 9, 0, tzinfo=UTC)
    return [
        {
            "session_id": f"s{i // 20}",
            "turn_id": f"t{i}",
            "speaker": "Lena" if i % 2 == 0 else "Assistant",
            "text": f"On walk {i} I ran into {PEOPLE[i % 6]} near the market in {PLACES[i % 4]}.",
            "timestamp": (start + timedelta(hours=3 * i)).isoformat(),
        }
        for i in range(N_TURNS)
    ]


def _turns(rows: list[dict[str, str]]) -> list[Turn]:
    return [
        Turn(
            document_id="diary",
            session_id=r["session_id"],
            turn_id=r["turn_id"],
            index=int(r["turn_id"][1:]),
            speaker=r["speaker"],
            text=r["text"],
            timestamp=datetime.fromisoformat(r["timestamp"]),
        )
        for r in rows
    ]


# Run in a subprocess: retain, and die (no cleanup, no close) once the first batch is stored.
KILLED = """
import json, os, sys
sys.path.insert(0, {tests!r})
from test_retain_killed import BANK, _turns
from memlane.engine import Memory
from memlane.settings import Settings
rows = json.load(open({rows!r}))
memory = Memory(Settings(data_dir={data!r}))
def progress(done):
    print("stored", done, flush=True)
    os._exit(9)
memory.retain(BANK, [("diary", _turns(rows))], progress=progress)
print("finished", flush=True)
"""


def _state(memory: Memory) -> dict[str, Any]:
    memory.wait_background()
    store = memory.store
    units = [u for page in store.iter_units(BANK) for u in page]
    return {
        "units": sorted(
            (u.id, u.text, tuple(sorted(u.entity_ids)), tuple(sorted((x.target_id, x.type) for x in u.links)))
            for u in units
        ),
        "chunks": sorted(c.chunk_id for page in store.iter_chunks(BANK) for c in page),
        "entities": sorted(
            (
                e.entity_id,
                e.name,
                e.type,
                tuple(sorted(e.aliases)),
                e.mention_count,
                e.first_seen,
                e.last_seen,
            )
            for e in store.list_entities(BANK)
        ),
    }


def test_a_retain_killed_between_batches_then_run_again_is_exact(tmp_path: Path) -> None:
    rows = _rows()
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    killed = tmp_path / "killed"
    script = KILLED.format(
        tests=str(Path(__file__).parent), rows=str(tmp_path / "rows.json"), data=str(killed)
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert run.returncode == 9, run.stderr[-2000:]
    assert run.stdout.split() == ["stored", str(BATCH_TURNS)]

    with Memory(Settings(data_dir=killed)) as memory:
        half = _state(memory)
        # the dead run stored the first batch's memories and every entity they name
        assert 0 < len(half["units"]) < N_TURNS
        named = {e for _, _, ids, _ in half["units"] for e in ids}
        assert named <= {e[0] for e in half["entities"]}
        memory.retain(BANK, [("diary", _turns(rows))])
        again = _state(memory)
        report = memory.banks.doctor(BANK)
        assert report.ok, [f.as_dict() for f in report.findings]

    with Memory(Settings(data_dir=tmp_path / "clean")) as memory:
        memory.retain(BANK, [("diary", _turns(rows))])
        clean = _state(memory)

    assert len(clean["units"]) == N_TURNS
    assert {e[1] for e in clean["entities"]} >= {*PEOPLE, *PLACES}
    assert again == clean
