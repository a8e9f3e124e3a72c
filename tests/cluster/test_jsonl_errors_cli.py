"""A malformed JSON Lines record is reported at the same, right place by ``memlane retain``
(all or nothing) and ``memlane backfill`` (rejects it alone): both read the line with the
engine's one reader (memlane/ingest/jsonl.py), which does not count the line's terminator as
part of the record. In-process CLI runner, real engine and Milvus Lite."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cluster.cli import app

# A record cut short after its last comma: the parser fails just past the line's last
# character, whatever the line ends in.
CUT = (
    '{"bank_id": "ana", "speaker": "Ana", "text": "I adopted a beagle called Pixel.", '
    '"timestamp": "2025-03-10T09:00:00Z", "session_id": "s1",'
)
WHERE = f"bad.jsonl line 1: not valid JSON: Expecting property name enclosed in double quotes at column {len(CUT) + 1}"


def _error(result) -> str:
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("end", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_retain_and_backfill_name_the_same_column_of_a_cut_record(tmp_path, end):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes((CUT + end).encode())
    runner = CliRunner()
    retained = runner.invoke(app, ["retain", str(bad), "--bank", "ana", "--data-dir", str(tmp_path / "r")])
    assert _error(retained) == f"error: {WHERE}"
    backfilled = runner.invoke(app, ["backfill", str(bad), "--data-dir", str(tmp_path / "b")])
    assert WHERE in _error(backfilled)
    rejects = [json.loads(x) for x in (tmp_path / "b" / "backfill-rejects.jsonl").read_text().splitlines()]
    assert [f"{r['source']} {r['where']}: {r['reason']}" for r in rejects] == [WHERE]


def test_backfill_names_a_bad_byte_by_its_column(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"bank_id": "ana", "text": "caf\xc3\xa9 \xff"}\n')
    result = CliRunner().invoke(app, ["backfill", str(bad), "--data-dir", str(tmp_path / "b")])
    assert "bad.jsonl line 1: not UTF-8 text (invalid byte 0xff at column 34)" in _error(result)
