"""``memlane backfill --consolidate``, ``memlane consolidate`` and ``memlane tree`` end to end:
the CLI's own registration, a real local Ray on 127.0.0.1, Milvus Lite and the embedder. The
module backfills the sample chats once (with the consolidation stage); the other tests read
that data directory."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from fixtures import write_jsonl_fixture
from typer.testing import CliRunner

from cluster.cli import app

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "conversations.jsonl"
LEVELS = ["session", "day", "week", "profile"]


def _one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("logs: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _json(result):
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory):
    """(data dir, the backfill's JSON summary) after ``backfill SAMPLES --consolidate``."""
    data = tmp_path_factory.mktemp("tree-cli") / "data"
    result = CliRunner().invoke(
        app, ["backfill", str(SAMPLES), "--consolidate", "--json", "--data-dir", str(data)]
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return data, _json(result)


def test_backfill_consolidate_leaves_a_sound_tree(backfilled):
    from memlane.engine import Memory
    from memlane.settings import Settings
    from memlane.tree.invariants import tree_problems

    data, summary = backfilled
    tree = summary["consolidate"]
    assert summary["failed_banks"] == 0 and tree["banks"] == summary["banks"] == 2
    assert all(tree["nodes"][lv] > 0 for lv in LEVELS)
    assert tree["written"] == tree["nodes"]  # the retain stage built no tree of its own
    stored = dict.fromkeys(LEVELS, 0)
    with Memory(Settings(data_dir=data, background={"tree": False})) as memory:
        for bank in ("priya", *[b.bank_id for b in memory.banks.list_all() if b.bank_id != "priya"]):
            nodes = memory.tree.nodes(bank)
            units = {u.id: u.mentioned_at for page in memory.store.iter_units(bank) for u in page}
            assert nodes and tree_problems(nodes, units) == [], bank
            for n in nodes:
                stored[n.level.name] += 1
    assert stored == tree["nodes"]


def test_consolidate_again_writes_nothing(backfilled):
    data, summary = backfilled
    result = CliRunner().invoke(app, ["consolidate", "--json", "--data-dir", str(data)])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    again = _json(result)
    assert again["total_written"] == 0 and again["removed"] == 0
    assert again["written"] == dict.fromkeys(LEVELS, 0)
    assert again["unchanged"] == summary["consolidate"]["nodes"]


def test_consolidate_unknown_bank_exits_2_with_one_line(backfilled):
    data, _ = backfilled
    result = CliRunner().invoke(app, ["consolidate", "--bank", "nobody", "--data-dir", str(data)])
    assert result.exit_code == 2
    assert _one_line(result) == "error: unknown bank: nobody"


def test_consolidate_a_corpus_whose_bank_is_not_stored_exits_2(backfilled, tmp_path):
    data, _ = backfilled
    src = write_jsonl_fixture(
        tmp_path / "zed.jsonl",
        [
            {
                "bank_id": "zed",
                "speaker": "Zed",
                "text": "Hello there.",
                "session_id": "s1",
                "timestamp": "2025-01-01T10:00:00Z",
            }
        ],
    )
    result = CliRunner().invoke(app, ["consolidate", str(src), "--data-dir", str(data)])
    assert result.exit_code == 2
    assert _one_line(result) == "error: unknown bank: zed"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bank", "priya", str(SAMPLES)], "give --bank or PATH, not both"),
        (["--consolidator", "magic"], "--consolidator must be one of auto, rules, llm"),
        (["--workers", "0"], "--workers must be >= 1"),
        (["/no/such/corpus.jsonl"], "no such file or directory"),
    ],
)
def test_consolidate_bad_options_exit_2(tmp_path, args, message):
    result = CliRunner().invoke(app, ["consolidate", *args, "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert message in _one_line(result)


def test_tree_prints_every_level_with_interval_and_text(backfilled):
    data, summary = backfilled
    nodes = _json(CliRunner().invoke(app, ["tree", "--bank", "priya", "--json", "--data-dir", str(data)]))
    result = CliRunner().invoke(app, ["tree", "--bank", "priya", "--data-dir", str(data)])
    assert result.exit_code == 0, result.stderr
    head, *lines = result.stdout.splitlines()
    assert head.startswith("bank priya: ")
    assert len(lines) == len(nodes)
    shown = [line.split()[1] for line in lines]
    assert sorted(set(shown), key=LEVELS.index) == LEVELS
    for line, node in zip(lines, nodes):
        level, name = line.split()[:2]
        assert (int(level), name) == (node["level"], node["level_name"])
        assert f"[{node['key']}]" in line
        assert " ".join(node["text"].split()) in line


def test_tree_level_and_window_filters(backfilled):
    data, _ = backfilled

    def nodes(*args: str) -> list[dict]:
        result = CliRunner().invoke(
            app, ["tree", "--bank", "priya", "--json", *args, "--data-dir", str(data)]
        )
        assert result.exit_code == 0, result.stderr
        return _json(result)

    everything = nodes()
    assert (
        nodes("--level", "day") == nodes("--level", "3") == [n for n in everything if n["level"] == 3] != []
    )
    lo, hi = "2025-02-01", "2025-04-01"
    inside = nodes("--from", lo, "--to", hi)
    assert inside and len(inside) < len(everything)

    def at(s: str) -> datetime:
        return datetime.fromisoformat(s.replace("Z", "+00:00"))

    start, end = at(lo + "T00:00:00+00:00"), at(hi + "T00:00:00+00:00")
    overlapping = [n for n in everything if at(n["end"]) >= start and at(n["start"]) < end]
    assert [n["id"] for n in inside] == [n["id"] for n in overlapping]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bank", "priya", "--level", "9"], "unknown tree level '9'"),
        (["--bank", "priya", "--level", "unit"], "level: 1 is the memory units"),
        (["--bank", "priya", "--from", "last tuesday"], "--from: not an ISO date or date-time"),
        (["--bank", "priya", "--from", "2025-03-01", "--to", "2025-02-01"], "--to must be after --from"),
        (["--bank", "nobody"], "nobody"),
    ],
)
def test_tree_bad_input_exits_2_with_one_line(backfilled, args, message):
    data, _ = backfilled
    result = CliRunner().invoke(app, ["tree", *args, "--data-dir", str(data)])
    assert result.exit_code == 2
    assert message in _one_line(result)


def test_recall_levels_and_planner_options(backfilled):
    data, _ = backfilled
    q = "How has Priya's running changed over the months?"

    def recall(*extra):
        return CliRunner().invoke(app, ["recall", q, "--bank", "priya", "--data-dir", str(data), *extra])

    tree = recall("--level", "1", "--level", "2", "--max-tokens", "4096", "--json")
    assert tree.exit_code == 0, tree.stderr
    body = _json(tree)
    assert body["plan"]["levels"] == [1, 2] and body["nodes"]
    assert {n["node"]["level"] for n in body["nodes"]} == {2}
    flat = _json(recall("--planner", "off", "--json"))
    assert flat["nodes"] == [] and flat["plan"] is None
    text = recall("--level", "1", "--level", "2", "--max-tokens", "4096")
    assert text.exit_code == 0 and "[session " in text.stdout
    shown = sum(1 for line in text.stdout.splitlines() if "[session " in line)
    assert f", {shown} tree node{'' if shown == 1 else 's'}, " in text.stderr  # the count, in its number
    bad = recall("--level", "7")
    assert bad.exit_code == 2 and "levels" in _one_line(bad)


MOVES = [
    ("s1", "2025-03-01T09:00:00Z", "Ana", "I work as a nurse in Bristol now."),
    ("s1", "2025-03-01T09:01:00Z", "Ben", "Bristol is lovely!"),
    ("s2", "2025-03-05T18:00:00Z", "Ana", "I got promoted to ward manager last week!"),
    ("s2", "2025-03-05T18:01:00Z", "Ben", "Congrats! How is the commute?"),
    ("s3", "2025-03-20T12:00:00Z", "Ana", "Started my new job at Acme Corp today!"),
    ("s3", "2025-03-20T12:01:00Z", "Ben", "How is it going so far?"),
]


def _moves(path: Path, edit: str | None = None) -> Path:
    rows = [
        {"document_id": "ana", "session_id": s, "timestamp": at, "speaker": who, "text": text}
        for s, at, who, text in MOVES
    ]
    if edit is not None:
        rows[-1]["text"] = edit
    return write_jsonl_fixture(path, rows)


def _said(result) -> list[str]:
    """The report's lines (the progress bar's aside)."""
    return [line for line in result.stdout.splitlines() if line.startswith(("bank ", "left for "))]


def _validity(data: Path, bank: str) -> dict[str, tuple]:
    from memlane.engine import Memory
    from memlane.settings import Settings

    with Memory(Settings(data_dir=data, background={"tree": False})) as memory:
        return {
            u.text: (u.invalid_at, u.superseded_by, u.metadata.get("engram"))
            for page in memory.store.iter_units(bank)
            for u in page
        }


def test_retaining_an_unchanged_file_keeps_the_tree_and_a_changed_one_says_what_it_left(tmp_path):
    """The reported case: `memlane consolidate`, then `memlane retain` of the same file; the tree
    and the supersessions stay, and the command says it wrote nothing. A changed file says
    what it left for `memlane consolidate`, and the tree holds no node it made outdated."""
    data = tmp_path / "data"

    def run(*args: str):
        result = CliRunner().invoke(app, [*args, "--data-dir", str(data)])
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return result

    src = _moves(tmp_path / "ana.jsonl")
    run("retain", str(src), "--bank", "ana")
    run("consolidate", "--bank", "ana", "--json")
    tree = _json(run("tree", "--bank", "ana", "--json"))
    assert sorted({n["level_name"] for n in tree}, key=LEVELS.index) == LEVELS
    validity = _validity(data, "ana")
    bristol = validity["Ana: I work as a nurse in Bristol now."]
    # the promotion supersedes its fact (a job title: rules are trusted with those); the turn
    # stays valid, its superseded_by names the successor
    assert bristol[0] is None and bristol[1] is not None

    again = run("retain", str(src), "--bank", "ana")
    assert _said(again)[0].startswith("bank ana: 6 turns -> 0 memories written (6 unchanged, 0 removed)")
    assert len(_said(again)) == 1  # nothing left for consolidation
    assert _json(run("tree", "--bank", "ana", "--json")) == tree
    assert _validity(data, "ana") == validity

    changed = run("retain", str(_moves(tmp_path / "ana2.jsonl", edit="Going well, thanks!")), "--bank", "ana")
    lines = _said(changed)
    # the edited turn and its neighbour (whose context quotes it) are written again
    assert lines[0].startswith("bank ana: 6 turns -> 2 memories written (4 unchanged, 2 removed)")
    assert lines[1] == "left for `memlane consolidate --bank ana`: 1 tree sessions and 1 facts changed"
    left = _json(run("tree", "--bank", "ana", "--json"))
    # the edited session's node and its day, week and the profile are gone; the rest as it was
    assert [n for n in tree if n["key"] not in ("ana|s3", "2025-03-20", "2025-W12", "profile")] == left
    now = _validity(data, "ana")
    rewritten = {"Ana: Started my new job at Acme Corp today!", "Ben: Going well, thanks!"}
    assert {k: v for k, v in now.items() if k not in rewritten} == {
        k: v for k, v in validity.items() if k not in rewritten | {"Ben: How is it going so far?"}
    }
    assert all(now[k] == (None, None, None) for k in rewritten)
