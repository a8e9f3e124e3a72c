"""``memlane reembed`` and the embedder mismatch on the CLI (in-process runner, real engine
and Milvus Lite; the Ray job itself runs in tests/pipelines/test_reembed.py)."""

from __future__ import annotations

import json

from fixtures import write_jsonl_fixture
from typer.testing import CliRunner

from cluster.cli import app

ROWS = [
    {
        "speaker": "Ana",
        "text": "I adopted a beagle called Pixel.",
        "timestamp": "2025-03-10T09:00:00Z",
        "session_id": "s1",
    },
    {
        "speaker": "Ben",
        "text": "Ben lives in Porto.",
        "timestamp": "2025-03-10T09:01:00Z",
        "session_id": "s1",
    },
]


def _one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_reembed_bad_input_and_a_mismatched_bank_exit_2_with_one_line(tmp_path):
    runner = CliRunner()
    data = str(tmp_path / "data")
    src = write_jsonl_fixture(tmp_path / "c.jsonl", ROWS)
    assert runner.invoke(app, ["retain", str(src), "--bank", "ana", "--data-dir", data]).exit_code == 0

    neither = runner.invoke(app, ["reembed", "--data-dir", data])
    assert neither.exit_code == 2 and "--bank" in _one_line(neither)
    name = runner.invoke(app, ["reembed", "--bank", "ana", "--embedder", "e5", "--data-dir", data])
    assert name.exit_code == 2
    assert _one_line(name) == "error: unknown embedder 'e5': --embedder takes minilm or bge-small"
    unknown = runner.invoke(app, ["reembed", "--bank", "ana", "--bank", "zed", "--data-dir", data])
    assert unknown.exit_code == 2 and _one_line(unknown) == "error: unknown bank: zed"
    # already on the target (a new bank gets the default, bge-small): said so, no Ray, exit 0
    same = runner.invoke(app, ["reembed", "--bank", "ana", "--data-dir", data])
    assert same.exit_code == 0, same.stderr
    assert "1 already on bge-small (nothing to do)" in same.stdout

    # a process configured for MiniLM recalls the bge bank with bge-small: the same answer
    mini = {"MEMLANE_MODELS__EMBEDDER": "minilm"}
    ask = ["recall", "dog", "--bank", "ana", "--data-dir", data, "--json"]
    here, there = runner.invoke(app, ask), runner.invoke(app, ask, env=mini)
    assert here.exit_code == there.exit_code == 0, there.stderr
    ranked = [
        [(x["unit"]["id"], round(x["score"], 3)) for x in json.loads(r.stdout)["memories"]]
        for r in (here, there)
    ]
    assert ranked[0] == ranked[1] and len(ranked[0]) == 2

    # a bank whose embedder no model here provides: recall and retain refuse it
    from memlane.engine import Memory
    from memlane.settings import Settings

    with Memory(Settings(data_dir=data)) as m:
        m.store.upsert_bank(m.banks.get("ana").model_copy(update={"embedder": "e5-large"}))
    expected = (
        "error: bank 'ana' was embedded with e5-large, which this process cannot load: run `memlane "
        "reembed --bank ana --embedder bge-small` (or set MEMLANE_MODELS__EMBEDDER_MODEL to e5-large's "
        "model folder)"
    )
    recalled = runner.invoke(app, ["recall", "dog", "--bank", "ana", "--data-dir", data])
    assert recalled.exit_code == 2 and _one_line(recalled) == expected
    retained = runner.invoke(app, ["retain", str(src), "--bank", "ana", "--data-dir", data])
    assert retained.exit_code == 2 and _one_line(retained) == expected
    bad_setting = runner.invoke(
        app, ["recall", "dog", "--bank", "ana", "--data-dir", data], env={"MEMLANE_MODELS__EMBEDDER": "e5"}
    )
    assert bad_setting.exit_code == 2 and "embedder" in _one_line(bad_setting)
    missing = {"MEMLANE_MODELS__RERANKER_MODEL": str(tmp_path / "no-such-model")}
    bad_reranker = runner.invoke(app, ["recall", "dog", "--bank", "ana", "--data-dir", data], env=missing)
    assert bad_reranker.exit_code == 2 and "no-such-model" in _one_line(bad_reranker)
    assert "neither 'cross-encoder'" in _one_line(bad_reranker)
    banks = runner.invoke(app, ["banks", "--data-dir", data, "--json"])
    assert banks.exit_code == 0 and '"memories": 2' in banks.stdout  # nothing written by the refusals
