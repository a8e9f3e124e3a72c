"""A backfill and an eval of the same file use the same banks (issue 10, item 5): the backfill's
per-bank plan and the eval's inputs have the same bank ids and the same documents, retaining
either gives the same memory ids, and ``--reuse-banks`` finds the banks a backfill wrote.

Small original data built here: a 2-conversation LoCoMo-shaped file (tests/fixtures.py) and a
2-question LongMemEval-shaped file with the format's quirks (an id that is no valid bank id, a
session repeated in one haystack, an empty turn, turns without ``has_answer``)."""

from __future__ import annotations

import json

import pytest
from fixtures import write_locomo_fixture

from actors.wire import decode_bank
from memlane.ingest import bank_id_for, load_conversations, load_longmemeval
from pipelines.backfill import BackfillConfig, prepare_backfill


def _lme_file(path):
    def turn(role, content, has_answer=None):
        out = {"role": role, "content": content}
        if has_answer is not None:
            out["has_answer"] = has_answer
        return out

    data = [
        {
            "question_id": "q-rowing",
            "question_type": "single-session-user",
            "question": "Which rowing club did I join?",
            "answer": "Dockside",
            "question_date": "2024/04/02 (Tue) 09:00",
            "answer_session_ids": ["s-club"],
            "haystack_session_ids": ["s-weather", "s-club", "s-weather"],
            "haystack_dates": ["2024/03/01 (Fri) 08:00", "2024/03/10 (Sun) 19:30", "2024/03/20 (Wed) 07:45"],
            "haystack_sessions": [
                [
                    turn("user", "Is it going to rain on Saturday?"),
                    turn("assistant", "Light showers are expected in the afternoon."),
                ],
                [
                    turn("user", "I joined the Dockside rowing club today!", True),
                    turn("assistant", ""),  # empty: left out, keeps its place in the numbering
                    turn("assistant", "Congratulations, enjoy the river.", False),
                ],
                [turn("user", "Windy again this morning.")],
            ],
        },
        {
            "question_id": "q 2/abs_abs",
            "question_type": "temporal-reasoning",
            "question": "When did I buy the cello?",
            "answer": "not mentioned",
            "question_date": "2024/05/01 (Wed) 10:00",
            "answer_session_ids": [],
            "haystack_session_ids": ["s-a"],
            "haystack_dates": ["2024/04/12 (Fri) 12:00"],
            "haystack_sessions": [
                [turn("user", "I practised the violin for an hour."), turn("assistant", "Nice, which piece?")]
            ],
        },
    ]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _plan(path, tmp_path, fmt):
    cfg = BackfillConfig(
        path=path, milvus_uri="unused-by-the-plan", data_dir=tmp_path / "bf", fmt=fmt, max_reject_share=1.0
    )
    plan = prepare_backfill(cfg)
    return {bank.bank_id: decode_bank(payload) for bank, payload, _ in plan.banks}


def _eval_inputs(path, fmt):
    """What ``memlane eval locomo|longmemeval`` retains: {bank id: documents}."""
    if fmt == "locomo":
        return {c.bank_id: [(c.document_id, c.turns)] for c in load_conversations(path, "locomo")}
    return {q.bank_id: q.documents for q in load_longmemeval(path)}


@pytest.mark.parametrize("fmt", ["locomo", "longmemeval"])
def test_backfill_plan_and_eval_have_the_same_banks_and_documents(tmp_path, fmt):
    path = (
        write_locomo_fixture(tmp_path / "locomo.json")
        if fmt == "locomo"
        else _lme_file(tmp_path / "lme.json")
    )
    planned, evaluated = _plan(path, tmp_path, fmt), _eval_inputs(path, fmt)
    expected = {"fx-1", "fx-2"} if fmt == "locomo" else {"q-rowing", bank_id_for("q 2/abs_abs")}
    assert set(planned) == set(evaluated) == expected
    for bank in expected:
        assert planned[bank] == evaluated[bank]  # pydantic equality: every turn field
    if fmt == "longmemeval":
        [(doc, turns)] = planned["q-rowing"]
        assert doc == "q-rowing"
        assert [t.turn_id for t in turns] == [
            "s-weather:1",
            "s-weather:2",
            "s-club:1",
            "s-club:3",
            "s-weather#3:1",
        ]
        assert [t.index for t in turns] == [0, 1, 0, 2, 0]
        assert [t.metadata["has_answer"] for t in turns] == [False, False, True, False, False]


def _unit_ids(memory, banks):
    return {b: sorted(u.id for page in memory.store.iter_units(b) for u in page) for b in banks}


def test_memories_written_by_a_backfill_are_the_evals(memory, embedder, extractor, tmp_path):
    """Retain the backfill's payloads as the retain actor does, then evaluate with
    --reuse-banks: nothing is retained again, and a fresh eval retain writes the same ids."""
    from evals.locomo import run_locomo
    from evals.longmemeval import run_longmemeval
    from memlane.engine import Memory
    from memlane.settings import Settings

    locomo = write_locomo_fixture(tmp_path / "locomo.json")
    lme = _lme_file(tmp_path / "lme.json")
    planned = {**_plan(locomo, tmp_path, "locomo"), **_plan(lme, tmp_path, "longmemeval")}
    for bank_id, documents in planned.items():  # actors.retain.RetainWorker.retain_bank
        memory.retain(bank_id, documents)
    backfilled = _unit_ids(memory, planned)
    assert all(backfilled.values())

    report = run_longmemeval(memory, lme, progress=False, reuse_banks=True)
    assert report["info"]["banks reused"] == 2
    run_locomo(memory, locomo, progress=False, reuse_banks=True)
    assert _unit_ids(memory, planned) == backfilled  # reused, not retained beside

    fresh = Memory(Settings(data_dir=tmp_path / "eval-data"), embedder=embedder, extractor=extractor)
    try:
        run_longmemeval(fresh, lme, progress=False)
        run_locomo(fresh, locomo, progress=False)
        assert _unit_ids(fresh, planned) == backfilled
    finally:
        fresh.close()
