"""``memlane eval dates``: the labelled set's files, the split they were made with, the scoring and
the command (in-process runner). The lines written here are fresh, not lines of the set."""

from __future__ import annotations

import json
from datetime import date

import pytest
from typer.testing import CliRunner

from cluster.cli import app
from evals.dates import (
    DATA_DIR,
    KINDS,
    SPLIT_SEED,
    load_cases,
    report,
    resolve_rules,
    resolvers,
    run,
    split_cases,
)


def _line(**over) -> dict:
    row = {
        "id": "T-1",
        "said_at": "2026-08-12T18:00:00+00:00",
        "text": "the removal van comes on 3 September",
        "expression": "3 September",
        "kind": "plan",
        "start": "2026-09-03",
        "end": "2026-09-03",
    }
    return {**row, **over}


def _write(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_the_shipped_halves_are_the_seeded_stratified_split_of_the_whole_set():
    calibration = [json.loads(x) for x in (DATA_DIR / "calibration.jsonl").read_text().splitlines()]
    held = [json.loads(x) for x in (DATA_DIR / "held.jsonl").read_text().splitlines()]
    again = split_cases(calibration + held, SPLIT_SEED)
    assert (again[0], again[1]) == (calibration, held)
    for kind in KINDS:  # half of each kind on each side (rounded down for calibration)
        n_cal = sum(r["kind"] == kind for r in calibration)
        n_held = sum(r["kind"] == kind for r in held)
        assert n_cal == (n_cal + n_held) // 2
    assert {r["id"] for r in calibration}.isdisjoint(r["id"] for r in held)
    assert not {r["text"] for r in calibration} & {r["text"] for r in held}


@pytest.mark.parametrize(
    "over, message",
    [
        ({"kind": "wish"}, "kind must be one of plan, report, relative"),
        ({"expression": "4 September"}, "is not in the text"),
        ({"start": "2026-09-04"}, "is after end"),
        ({"said_at": "yesterday"}, "Invalid isoformat"),
    ],
)
def test_a_bad_line_is_refused_naming_it(tmp_path, over, message):
    path = tmp_path / "set.jsonl"
    _write(path, [_line(id="T-1"), _line(id="T-2", **over)])
    with pytest.raises(ValueError, match=f"set.jsonl:2: .*{message}"):
        load_cases([path])


def test_a_missing_field_and_a_duplicate_id_are_refused(tmp_path):
    path = tmp_path / "set.jsonl"
    row = _line()
    del row["end"]
    _write(path, [row])
    with pytest.raises(ValueError, match="set.jsonl:1: missing field 'end'"):
        load_cases([path])
    _write(path, [_line(), _line()])
    with pytest.raises(ValueError, match="duplicate id 'T-1'"):
        load_cases([path])


def test_the_score_is_exact_first_and_last_day_per_kind(tmp_path):
    path = tmp_path / "set.jsonl"
    _write(
        path,
        [
            _line(id="T-1"),  # right: the next 3 September
            _line(id="T-2", start="2025-09-03", end="2025-09-03"),  # labelled a year off: a miss
            _line(
                id="T-3",
                kind="report",
                text="we painted the hall in June",
                expression="in June",
                start="2026-06-01",
                end="2026-06-30",
            ),
            _line(
                id="T-4",
                kind="relative",
                text="pick-up is in ten days",
                expression="in ten days",
                start="2026-08-22",
                end="2026-08-22",
            ),
        ],
    )
    cases = load_cases([path])
    assert resolve_rules(cases[2]) == ((date(2026, 6, 1), date(2026, 6, 30)),)
    rep = report(run(cases, {"rules": resolve_rules}), [path])
    kinds = rep["resolvers"]["rules"]["kinds"]
    assert kinds["plan"] == {"right": 1, "n": 2, "fraction": 0.5}
    assert kinds["report"] == {"right": 1, "n": 1, "fraction": 1.0}
    assert kinds["relative"] == {"right": 1, "n": 1, "fraction": 1.0}
    assert kinds["all"] == {"right": 3, "n": 4, "fraction": 0.75}
    (miss,) = rep["resolvers"]["rules"]["misses"]
    assert (miss["id"], miss["want"], miss["got"]) == (
        "T-2",
        ["2025-09-03", "2025-09-03"],
        [["2026-09-03", "2026-09-03"]],
    )


def test_each_library_row_reads_a_plain_date(tmp_path):
    path = tmp_path / "set.jsonl"
    _write(path, [_line(text="the van comes on 14 October 2026", expression="14 October 2026")])
    (case,) = load_cases([path])
    for name, resolve in resolvers().items():
        assert (date(2026, 10, 14), date(2026, 10, 14)) in resolve(case), name


def test_the_command_prints_the_table_and_json(tmp_path):
    path = tmp_path / "set.jsonl"
    _write(path, [_line()])
    runner = CliRunner()
    r = runner.invoke(app, ["eval", "dates", str(path), "--resolver", "rules", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["resolvers"]["rules"]["kinds"]["plan"]["right"] == 1
    r = runner.invoke(app, ["eval", "dates", str(path), "--resolver", "rules"])
    assert r.stdout.splitlines()[0] == "| resolver | plan | report | relative | all |"
    assert r.stdout.splitlines()[2] == "| rules | 1/1 (1.000) | 0/0 (-) | 0/0 (-) | 1/1 (1.000) |"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--split", "training"], "--split must be one of calibration, held, all"),
        (["--resolver", "parsedatetime"], "unknown resolver 'parsedatetime'"),
        (["nope.jsonl"], "date set not found: nope.jsonl"),
        (["--resolver", "rules", "--misses", "ctparse"], "--misses names 'ctparse'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, message):
    r = CliRunner().invoke(app, ["eval", "dates", *args])
    assert r.exit_code == 2
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0], r.stderr


# ----------------------------------------------------------------------------- the events set


def _event(**over) -> dict:
    row = {
        "id": "V-1",
        "said_at": "2026-05-07T18:00:00+00:00",  # a Thursday
        "text": "the plasterer finally turned up this afternoon",
        "expression": "this afternoon",
        "kind": "deictic",
        "start": "2026-05-07",
        "end": "2026-05-07",
        "turn_date": "2026-05-07",
    }
    return {**row, **over}


def _events_file(path):
    two = "we collected the puppy yesterday and her jabs are on 20 May"
    rows = [
        _event(),
        _event(
            id="V-2",
            text=two,
            expression="yesterday",
            kind="multi",
            start="2026-05-06",
            end="2026-05-06",
            turn_date=None,
        ),
        _event(
            id="V-3",
            text=two,
            expression="on 20 May",
            kind="multi",
            start="2026-05-20",
            end="2026-05-20",
            turn_date=None,
        ),
        _event(
            id="V-4",
            text="bell ringing practice is every Monday night",
            expression="every Monday night",
            kind="habit",
            start=None,
            end=None,
            turn_date=None,
        ),
        # labelled wrong on purpose: the rules read the coming Saturday, and the day is that one
        _event(
            id="V-5",
            text="the bake sale is on Saturday",
            expression="on Saturday",
            start="2026-05-16",
            end="2026-05-16",
            turn_date="2026-05-16",
        ),
    ]
    _write(path, rows)
    return path


def test_the_events_score_counts_expressions_and_turns_per_kind(tmp_path):
    from evals.date_events import load_event_cases, report_events, run_events

    rep = report_events(run_events(load_event_cases([_events_file(tmp_path / "ev.jsonl")])), "t")
    kinds = rep["kinds"]
    assert kinds["multi"] == {
        "expressions": {"right": 2, "n": 2, "fraction": 1.0},
        "turns": {"right": 1, "n": 1, "fraction": 1.0},  # two days: no one event day, as labelled
    }
    assert kinds["habit"]["expressions"]["right"] == 1 and kinds["habit"]["turns"]["right"] == 1
    assert kinds["deictic"]["expressions"] == {"right": 1, "n": 2, "fraction": 0.5}
    assert kinds["deictic"]["turns"] == {"right": 1, "n": 2, "fraction": 0.5}
    (miss,) = rep["misses"]
    assert miss["id"] == "V-5" and miss["got"] == ["2026-05-09", "2026-05-09"]
    assert miss["turn_got"] == "2026-05-09"


@pytest.mark.parametrize(
    "over, message",
    [
        ({"kind": "plan"}, "kind must be one of multi, habit, deictic"),
        ({"kind": "habit"}, "a habit has start and end null"),
        ({"end": None}, "a habit has start and end null"),
        ({"turn_date": "7 May"}, "Invalid isoformat"),
    ],
)
def test_a_bad_events_line_is_refused_naming_it(tmp_path, over, message):
    from evals.date_events import load_event_cases

    path = tmp_path / "ev.jsonl"
    _write(path, [_event(**over)])
    with pytest.raises(ValueError, match=message) as err:
        load_event_cases([path])
    assert f"{path}:1" in str(err.value)


def test_the_command_reads_an_events_file_beside_a_dated_one(tmp_path):
    events = _events_file(tmp_path / "ev.jsonl")
    dated = tmp_path / "set.jsonl"
    _write(dated, [_line()])
    runner = CliRunner()
    r = runner.invoke(app, ["eval", "dates", str(dated), str(events), "--resolver", "rules", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["resolvers"]["rules"]["kinds"]["all"]["n"] == 1  # the dated set alone
    assert rep["events"]["kinds"]["all"]["expressions"] == {"right": 4, "n": 5, "fraction": 0.8}
    r = runner.invoke(app, ["eval", "dates", str(events), "--misses", "rules", "--resolver", "rules"])
    lines = r.stdout.splitlines()
    assert lines[1:5] == [
        "| | multi | habit | deictic | all |",
        "| --- | --- | --- | --- | --- |",
        "| expressions | 2/2 (1.000) | 1/1 (1.000) | 1/2 (0.500) | 4/5 (0.800) |",
        "| turns | 1/1 (1.000) | 1/1 (1.000) | 1/2 (0.500) | 3/4 (0.750) |",
    ]
    assert lines[-1] == (
        "V-5 deictic said 2026-05-07: 'on Saturday' want 2026-05-16 .. 2026-05-16, got 2026-05-09 .. "
        "2026-05-09; turn want 2026-05-16, got 2026-05-09 | the bake sale is on Saturday"
    )


def test_the_default_run_adds_the_events_half_of_the_same_split():
    r = CliRunner().invoke(app, ["eval", "dates", "--split", "held", "--resolver", "rules", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["events"]["set"] == "events.jsonl, held"
    assert rep["events"]["kinds"]["all"]["expressions"]["n"] == 46  # the held turns' lines
    assert rep["resolvers"]["rules"]["kinds"]["all"]["n"] == 115
