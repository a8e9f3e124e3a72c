"""Small, original test inputs in the shapes the loaders read.

``write_locomo_fixture`` writes a LoCoMo-shaped JSON file with two samples. It is written for
these tests (nothing in it comes from LoCoMo) and reproduces the data's quirks on purpose:

* ``fx-1``: speakers Noor and Felix; sessions 1-3 with 4, 3 and 3 turns (stored out of order in
  the ``conversation`` object, to check numeric session ordering); ``session_4_date_time``
  without a ``session_4`` list (the conv-26 quirk); turn ``D2:2`` carries an image
  (``blip_caption``, ``query``, ``img_url``) and a ``re-download`` flag.
* ``fx-2``: speakers Marta and Olu; sessions 1-2 with 5 turns each.

QA items (``LOCOMO_FIXTURE_QA`` documents the expected normalised evidence of each):

* ``fx-1``: categories 4, 2 (zero-padded ``"D2:01"``), 1 (``"D1:3; D3:2"``), 3 (no evidence),
  5 (adversarial, no ``answer``).
* ``fx-2``: categories 1 (space-separated ``"D1:1 D2:4"``), 4 (``"D"`` plus ``"D2:2"``),
  2 (``"D:1:5"``), 4 (``"D3:1"``, which exists only in fx-1), 4 (an integer answer), 5.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

LOCOMO_FIXTURE_DATES = {
    ("fx-1", "session_1"): "9:05 am on 3 February, 2024",
    ("fx-1", "session_2"): "4:30 pm on 17 February, 2024",
    ("fx-1", "session_3"): "8:15 pm on 2 March, 2024",
    ("fx-2", "session_1"): "11:40 am on 6 January, 2024",
    ("fx-2", "session_2"): "7:20 pm on 21 January, 2024",
}

# (sample_id, category, raw evidence, evidence after normalisation against the sample's ids)
LOCOMO_FIXTURE_QA = [
    ("fx-1", 4, ["D1:2"], ["D1:2"]),
    ("fx-1", 2, ["D2:01"], ["D2:1"]),
    ("fx-1", 1, ["D1:3; D3:2"], ["D1:3", "D3:2"]),
    ("fx-1", 3, [], []),
    ("fx-1", 5, ["D2:3"], ["D2:3"]),
    ("fx-2", 1, ["D1:1 D2:4"], ["D1:1", "D2:4"]),
    ("fx-2", 4, ["D", "D2:2"], ["D2:2"]),
    ("fx-2", 2, ["D:1:5"], ["D1:5"]),
    ("fx-2", 4, ["D3:1"], []),
    ("fx-2", 4, ["D2:5"], ["D2:5"]),
    ("fx-2", 5, ["D1:2"], ["D1:2"]),
]


def _turns(session: int, speakers: tuple[str, str], texts: list[str]) -> list[dict[str, Any]]:
    return [
        {"speaker": speakers[i % 2], "dia_id": f"D{session}:{i + 1}", "text": text}
        for i, text in enumerate(texts)
    ]


def locomo_fixture_data() -> list[dict[str, Any]]:
    """The fixture's samples as Python objects (a fresh copy each call)."""
    nf = ("Noor", "Felix")
    s1 = _turns(
        1,
        nf,
        [
            "Felix, I finally signed the lease on the allotment by the railway bridge.",
            "Brilliant! What are you planting first?",
            "Broad beans and a row of sweet peas for my grandmother.",
            "She'll love that. I'm still stuck on my thesis chapter about glaciers.",
        ],
    )
    s2 = _turns(
        2,
        nf,
        [
            "The broad beans are up already, look at this.",
            "Tiny and green! Did the frost last week hurt them?",
            "Not at all. Also, I adopted a tortoise called Dumpling.",
        ],
    )
    s2[1]["blip_caption"] = "a photo of seedlings in a wooden raised bed"
    s2[1]["query"] = "bean seedlings allotment"
    s2[1]["img_url"] = ["https://example.invalid/seedlings.jpg"]
    s2[1]["re-download"] = True
    s3 = _turns(
        3,
        nf,
        [
            "I submitted the glacier chapter yesterday!",
            "Finally! Celebrating at the allotment?",
            "Of course, with Dumpling and a flask of tea.",
        ],
    )
    mo = ("Marta", "Olu")
    t1 = _turns(
        1,
        mo,
        [
            "Olu, the choir is singing at the harbour festival in April.",
            "Which pieces? I'd like to come.",
            "Mostly sea shanties, and one Estonian folk song.",
            "I'll bring my sister, she sang in a choir in Tartu.",
            "Then she can help me with the pronunciation!",
        ],
    )
    t2 = _turns(
        2,
        mo,
        [
            "Rehearsal ran late last night, my voice is gone.",
            "Honey and ginger tea. Did you pick a dress yet?",
            "A dark green one from the market, only twelve euros.",
            "Bargain. My sister says the festival moved to 13 April.",
            "Good to know, I booked the ferry for the 2024 festival already.",
        ],
    )
    fx1_conv = {
        "speaker_a": "Noor",
        "speaker_b": "Felix",
        "session_3_date_time": LOCOMO_FIXTURE_DATES[("fx-1", "session_3")],
        "session_3": s3,
        "session_1_date_time": LOCOMO_FIXTURE_DATES[("fx-1", "session_1")],
        "session_1": s1,
        "session_2_date_time": LOCOMO_FIXTURE_DATES[("fx-1", "session_2")],
        "session_2": s2,
        "session_4_date_time": "10:00 am on 9 March, 2024",  # no session_4 list: the quirk
    }
    fx2_conv = {
        "speaker_a": "Marta",
        "speaker_b": "Olu",
        "session_1_date_time": LOCOMO_FIXTURE_DATES[("fx-2", "session_1")],
        "session_1": t1,
        "session_2_date_time": LOCOMO_FIXTURE_DATES[("fx-2", "session_2")],
        "session_2": t2,
    }
    questions = {
        ("fx-1", 4): ("Where is Noor's allotment?", "By the railway bridge"),
        ("fx-1", 2): ("When did Noor's broad beans come up?", "Mid February 2024"),
        ("fx-1", 1): (
            "What did Noor plant and celebrate at the allotment?",
            "Broad beans and sweet peas; she celebrated submitting her thesis chapter",
        ),
        ("fx-1", 3): ("Would Noor likely enjoy a gardening show?", "Likely yes"),
        ("fx-2", 1): ("Who is coming to hear Marta's choir?", "Olu and his sister"),
        ("fx-2", 2): ("When is the harbour festival?", "13 April 2024"),
    }
    qa: dict[str, list[dict[str, Any]]] = {"fx-1": [], "fx-2": []}
    n4 = 0
    for sample_id, category, raw, _ in LOCOMO_FIXTURE_QA:
        item: dict[str, Any] = {"evidence": list(raw), "category": category}
        if category == 5:
            item["question"] = f"What did {'Felix' if sample_id == 'fx-1' else 'Olu'} plant?"
            item["adversarial_answer"] = "Sweet peas"
        elif category == 4 and sample_id == "fx-2":
            n4 += 1
            item["question"], item["answer"] = [
                ("What did Marta buy at the market?", "A dark green dress"),
                ("What pet does Marta have?", "A cat"),
                ("Which year's festival did Marta book the ferry for?", 2024),
            ][n4 - 1]
        else:
            item["question"], item["answer"] = questions[(sample_id, category)]
        qa[sample_id].append(item)
    return [
        {
            "sample_id": "fx-1",
            "conversation": fx1_conv,
            "qa": qa["fx-1"],
            "observation": {},
            "session_summary": {},
            "event_summary": {},
        },
        {
            "sample_id": "fx-2",
            "conversation": fx2_conv,
            "qa": qa["fx-2"],
            "observation": {},
            "session_summary": {},
            "event_summary": {},
        },
    ]


def write_locomo_fixture(path: str | Path) -> Path:
    """Write the two-sample LoCoMo-shaped fixture to ``path`` and return the path."""
    path = Path(path)
    path.write_text(json.dumps(locomo_fixture_data(), indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def write_jsonl_fixture(path: str | Path, rows: Iterable[dict[str, Any] | str]) -> Path:
    """Write ``rows`` as JSON Lines to ``path`` and return the path.

    A dict is written as one JSON object line; a str is written verbatim as one line (to build
    blank, broken or non-object lines)."""
    path = Path(path)
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------
# LongMemEval-shaped fixture (original text, nothing from LongMemEval)
#
# Three questions, each with its own haystack of three sessions (dates in LongMemEval's
# "2023/05/20 (Sat) 02:21" form):
#
# * ``fx-kayak`` (single-session-user): the user names their kayak in ``answer_k1`` turn 1
#   (has_answer); the other two sessions are about other things.
# * ``fx-trip`` (multi-session): the evidence is split over ``answer_t1`` turn 1 (the city)
#   and ``answer_t2`` turn 3 (the month), one has_answer turn each.
# * ``fx-cello_abs`` (abstention, single-session-user): asks about a cello teacher nobody
#   mentioned; no has_answer turn, no answer sessions.

LME_FIXTURE_EVIDENCE = {
    "fx-kayak": ["answer_k1:1"],
    "fx-trip": ["answer_t1:1", "answer_t2:3"],
    "fx-cello_abs": [],
}


def _lme_turn(role: str, content: str, has_answer: bool = False) -> dict[str, Any]:
    return {"role": role, "content": content, "has_answer": has_answer}


def longmemeval_fixture_data() -> list[dict[str, Any]]:
    """The fixture's questions as Python objects (a fresh copy each call)."""
    noise_garden = [
        _lme_turn("user", "How deep should I plant tulip bulbs in clay soil?"),
        _lme_turn("assistant", "About three times the bulb's height; add grit to clay for drainage."),
    ]
    noise_bread = [
        _lme_turn("user", "My sourdough starter smells like nail polish, is it ruined?"),
        _lme_turn("assistant", "That acetone smell means it is hungry. Feed it twice a day."),
        _lme_turn("user", "Thanks, I will feed it tonight."),
    ]
    return [
        {
            "question_id": "fx-kayak",
            "question_type": "single-session-user",
            "question": "What did I name my new kayak?",
            "question_date": "2024/06/20 (Thu) 10:00",
            "answer": "Minnow",
            "answer_session_ids": ["answer_k1"],
            "haystack_session_ids": ["noise_g1", "answer_k1", "noise_b1"],
            "haystack_dates": ["2024/05/02 (Thu) 09:15", "2024/05/18 (Sat) 17:40", "2024/06/01 (Sat) 08:05"],
            "haystack_sessions": [
                noise_garden,
                [
                    _lme_turn("user", "I bought a bright yellow kayak and named it Minnow.", True),
                    _lme_turn("assistant", "Minnow is a lovely name for a kayak! Where will you paddle?"),
                    _lme_turn("user", "Probably on the reservoir near my flat."),
                ],
                noise_bread,
            ],
        },
        {
            "question_id": "fx-trip",
            "question_type": "multi-session",
            "question": "Which city am I visiting for the climbing festival, and in which month?",
            "question_date": "2024/07/10 (Wed) 12:00",
            "answer": "Innsbruck, in September",
            "answer_session_ids": ["answer_t1", "answer_t2"],
            "haystack_session_ids": ["answer_t1", "noise_b2", "answer_t2"],
            "haystack_dates": ["2024/06/03 (Mon) 19:30", "2024/06/15 (Sat) 11:00", "2024/06/29 (Sat) 21:10"],
            "haystack_sessions": [
                [
                    _lme_turn("user", "I booked a trip to Innsbruck for the climbing festival!", True),
                    _lme_turn("assistant", "Exciting! Innsbruck has great crags nearby."),
                ],
                noise_bread,
                [
                    _lme_turn("user", "Can you suggest stretches for sore forearms?"),
                    _lme_turn("assistant", "Try wrist flexor and extensor stretches, 30 seconds each."),
                    _lme_turn(
                        "user", "The climbing festival is in September, so I have time to train.", True
                    ),
                ],
            ],
        },
        {
            "question_id": "fx-cello_abs",
            "question_type": "single-session-user",
            "question": "What is the name of my cello teacher?",
            "question_date": "2024/06/20 (Thu) 10:00",
            "answer": "The information provided is not enough. You did not mention a cello teacher.",
            "answer_session_ids": [],
            "haystack_session_ids": ["noise_g2", "noise_b3", "noise_g3"],
            "haystack_dates": ["2024/05/02 (Thu) 09:15", "2024/05/20 (Mon) 18:00", "2024/06/01 (Sat) 08:05"],
            "haystack_sessions": [
                noise_garden,
                noise_bread,
                [
                    _lme_turn("user", "Which violin strings suit a beginner?"),
                    _lme_turn("assistant", "Synthetic-core strings are forgiving and stay in tune."),
                ],
            ],
        },
    ]


def write_longmemeval_fixture(path: str | Path, data: list[dict[str, Any]] | None = None) -> Path:
    """Write the LongMemEval-shaped fixture (or ``data``) to ``path`` and return the path."""
    path = Path(path)
    path.write_text(
        json.dumps(longmemeval_fixture_data() if data is None else data, indent=1), encoding="utf-8"
    )
    return path
