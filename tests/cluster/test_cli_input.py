"""The CLI checks its input before anything is opened or started: bad arguments, a turn over
the store's limits, a data directory another process holds. Each is exit code 2 with one line,
and nothing is left behind (no bank, no store). Also the small jobs that now run in process, and
counts printed in the right number. In-process runner, real engine and Milvus Lite."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures import write_jsonl_fixture
from typer.testing import CliRunner

from cluster.cli import app
from memlane.records.limits import MAX_TEXT_BYTES

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
BIG = 5_000_000  # one turn of 5 MB: far past a memory's text


@pytest.fixture
def data(tmp_path) -> Path:
    return tmp_path / "data"


def run(data: Path, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, [*args, "--data-dir", str(data)], env=env)


def one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def banks(data: Path) -> list[dict]:
    r = run(data, "banks", "--json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_retain_of_a_turn_over_the_store_limit_fails_first_and_leaves_no_bank(data, tmp_path):
    big = write_jsonl_fixture(tmp_path / "big.jsonl", [ROWS[0], {**ROWS[1], "text": "x" * BIG}])
    r = run(data, "retain", str(big), "--bank", "ana")
    assert r.exit_code == 2
    line = one_line(r)
    assert "big.jsonl line 2" in line and "turn 's1:2'" in line
    assert f"{BIG + len('Ben: '):,} bytes" in line and f"the limit is {MAX_TEXT_BYTES:,}" in line
    assert not data.exists()  # refused before the store was opened
    assert banks(data) == []


def test_backfill_of_a_turn_over_the_store_limit_fails_before_ray_and_leaves_no_bank(data, tmp_path):
    big = write_jsonl_fixture(tmp_path / "big.jsonl", [{"bank_id": "ana", **ROWS[0], "text": "y" * BIG}])
    r = run(data, "backfill", str(big))
    assert r.exit_code == 2
    line = one_line(r)
    assert "big.jsonl line 1" in line and "turn 's1:1'" in line and f"the limit is {MAX_TEXT_BYTES:,}" in line
    assert not (data / "milvus.db").exists()  # no store, so no Ray and no bank either
    assert banks(data) == []


def test_long_turns_that_fit_alone_are_retained_in_chunks_that_fit(data, tmp_path):
    """Three 30 KB turns of one session: 8 turns would make a chunk, but their text would pass
    what a chunk holds, so the chunk closes early; every turn is a memory."""
    rows = [
        {**ROWS[0], "text": f"turn {i} " + "word " * 6000, "timestamp": f"2025-03-10T09:0{i}:00Z"}
        for i in range(3)
    ]
    r = run(
        data, "retain", str(write_jsonl_fixture(tmp_path / "long.jsonl", rows)), "--bank", "ana", "--json"
    )
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["turns"] == 3 and report["units"] == 3 and report["chunks"] == 2


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ("recall", "--bank", "ana", "hello", "--max-tokens", "-5"),
            "max_tokens: Input should be greater than 0",
        ),
        (("recall", "--bank", "ana", "   "), "query"),
        (("recall", "--bank", "no spaces", "hello"), "invalid bank id 'no spaces'"),
        (("recall", "--bank", "ana", "hello", "--budget", "huge"), "budget"),
        (("recall", "--bank", "ghost", "hello"), "unknown bank 'ghost'"),
        (("delete", "--bank", "ghost"), "unknown bank 'ghost'"),
        (("tree", "--bank", "ghost"), "unknown bank 'ghost'"),
        (("consolidate", "--bank", "ghost"), "unknown bank: ghost"),
        (("consolidate", "--runner", "fast"), "--runner must be one of auto, process, ray"),
        (("reembed", "--all", "--runner", "fast"), "--runner must be one of auto, process, ray"),
        (("retain", "chat.jsonl", "--bank", "ana", "--tag", " "), "tags: invalid tag ' '"),
    ],
)
def test_bad_arguments_on_an_empty_directory_exit_2_and_create_nothing(data, tmp_path, args, needle):
    args = tuple(str(tmp_path / a) if a == "chat.jsonl" else a for a in args)
    write_jsonl_fixture(tmp_path / "chat.jsonl", ROWS)
    r = run(data, *args)
    assert r.exit_code == 2
    assert needle in one_line(r)
    assert not data.exists()  # checked before the store was opened (or created)


def test_a_directory_another_process_holds_is_named_in_one_line(data, tmp_path):
    assert (
        run(data, "retain", str(write_jsonl_fixture(tmp_path / "c.jsonl", ROWS)), "--bank", "ana").exit_code
        == 0
    )
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from memlane.engine import Memory; from memlane.settings import Settings; "
            f"m = Memory(Settings(data_dir={str(data)!r})); m.store; print('open', flush=True); "
            "sys.stdin.read(); m.close()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        for args in (("recall", "--bank", "ana", "dog"), ("banks",), ("doctor", "--all"), ("consolidate",)):
            r = run(data, *args)
            assert r.exit_code == 2, (args, r.stderr)
            assert f"the store is open in process {holder.pid}" in one_line(r), args
    finally:
        holder.communicate("", timeout=120)
    assert banks(data)[0]["memories"] == 2  # nothing changed


def test_counts_are_printed_in_the_right_number(data, tmp_path):
    one = write_jsonl_fixture(tmp_path / "one.jsonl", ROWS[:1])
    r = run(data, "retain", str(one), "--bank", "ana")
    assert r.exit_code == 0, r.stderr
    assert "bank ana: 1 turn -> 1 memory written (0 unchanged, 0 removed), 1 chunk," in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("bank ana:")
    assert run(data, "banks").stdout == "ana\t1 memory\t\n"
    recalled = run(data, "recall", "--bank", "ana", "Who is Pixel?")
    assert "(1 memory, 0 tree nodes, " in recalled.stderr


def test_retains_summary_counts_the_time_its_progress_bar_counts(data, tmp_path):
    """One clock: the summary's time runs from where the bar starts (the store's opening and the
    models' loading included), the engine's own writing time beside it."""
    path = write_jsonl_fixture(tmp_path / "c.jsonl", ROWS)
    t0 = time.perf_counter()
    r = run(data, "retain", str(path), "--bank", "ana", "--json")
    wall = time.perf_counter() - t0
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["seconds"] < report["total_s"] <= wall
    text = run(data, "retain", str(path), "--bank", "ana").stdout
    assert "s writing, the rest opening the store and loading the models)" in text


def test_a_json_error_names_its_column_once(data, tmp_path):
    bad = tmp_path / "ctl.jsonl"
    bad.write_text(
        '{"speaker": "Ana", "text": "a\tb", "timestamp": "2025-01-01T00:00:00Z", "session_id": "s1"}\n'
    )
    line = one_line(run(data, "retain", str(bad), "--bank", "ana"))
    assert "Invalid control character at column 30" in line and "at at" not in line


def test_a_small_consolidate_and_reembed_run_in_this_process(data, tmp_path):
    assert (
        run(data, "retain", str(write_jsonl_fixture(tmp_path / "c.jsonl", ROWS)), "--bank", "ana").exit_code
        == 0
    )
    r = run(data, "consolidate", "--bank", "ana", "--json")
    assert r.exit_code == 0, r.stderr
    first = json.loads(r.stdout.strip().splitlines()[-1])
    assert first["workers"] == 1 and first["banks"] == 1 and first["total_written"] > 0
    again = json.loads(run(data, "consolidate", "--json").stdout.strip().splitlines()[-1])
    assert again["total_written"] == 0 and again["unchanged"] == first["nodes"]
    assert "logs:" not in r.stderr  # no Ray, so no Ray log to point at
    r = run(data, "reembed", "--bank", "ana", "--embedder", "minilm", "--json")
    assert r.exit_code == 0, r.stderr
    done = json.loads(r.stdout.strip().splitlines()[-1])
    assert done["workers"] == 1 and done["done"] == 1 and done["units"] == 2
    found = run(data, "recall", "--bank", "ana", "What is the beagle called?", "--json")
    assert "Pixel" in json.loads(found.stdout)["memories"][0]["unit"]["text"]


COMMANDS = [
    ("banks",),
    ("recall", "--bank", "ana", "dog"),
    ("retain", "CHAT", "--bank", "ana"),
    ("backfill", "CORPUS"),
    ("consolidate", "--bank", "ana"),
    ("reembed", "--bank", "ana"),
    ("tree", "--bank", "ana"),
    ("doctor", "--bank", "ana"),
    ("status",),
    ("delete", "--bank", "ana"),
    ("export", "--bank", "ana"),
    ("model", "list", "--bank", "ana"),
    ("reflect", "why?", "--bank", "ana"),
]


def _args(args: tuple[str, ...], tmp_path: Path) -> list[str]:
    chat = write_jsonl_fixture(tmp_path / "chat.jsonl", ROWS)
    corpus = write_jsonl_fixture(tmp_path / "corpus.jsonl", [{"bank_id": "ana", **r} for r in ROWS])
    return [{"CHAT": str(chat), "CORPUS": str(corpus)}.get(a, a) for a in args]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_a_bad_setting_is_one_line_naming_it(data, tmp_path, args):
    r = run(data, *_args(args, tmp_path), env={"MEMLANE_RECALL__RRF_K": "many"})
    assert r.exit_code == 2
    assert (
        one_line(r)
        == "error: recall.rrf_k: Input should be a valid integer, unable to parse string as an integer"
    )


@pytest.mark.parametrize("args", [a for a in COMMANDS if a[0] in ("retain", "backfill")], ids=lambda a: a[0])
def test_a_data_directory_that_is_a_file_is_one_line(tmp_path, args):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    r = run(not_a_dir, *_args(args, tmp_path))
    assert r.exit_code == 2
    assert one_line(r) == f"error: {not_a_dir}: File exists"


def test_recall_ends_its_process_early_with_all_its_output_written(data, tmp_path):
    """The entry point ends an in-process recall without the interpreter's teardown: what it
    printed reaches a pipe whole, with its exit code."""
    rows = [
        {**ROWS[i % 2], "text": f"{ROWS[i % 2]['text']} ({i})", "session_id": f"s{i // 8}"} for i in range(40)
    ]
    assert (
        run(data, "retain", str(write_jsonl_fixture(tmp_path / "c.jsonl", rows)), "--bank", "ana").exit_code
        == 0
    )
    exe = Path(sys.executable).with_name("memlane")
    args = [str(exe), "recall", "Pixel", "--bank", "ana", "--chunks", "--max-tokens", "100000", "--json"]
    p = subprocess.run([*args, "--data-dir", str(data)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    answer = json.loads(p.stdout)  # whole: it parses
    assert len(answer["memories"]) == 40 and answer["chunks"]
    bad = subprocess.run(
        [*args[:4], "ghost", "--data-dir", str(data)], capture_output=True, text=True, timeout=300
    )
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: unknown bank 'ghost': ")
