"""A small history with a job change and a move (21 turns, 7 sessions on 7 days of 7 weeks), as
the JSON Lines a user backfills: what the tests of a retain after a consolidation read."""

from __future__ import annotations

from datetime import datetime
from typing import Any

BANK = "dana"
SESSIONS = [
    (
        "2025-01-06T19:00:00+00:00",
        [
            "I work as a junior accountant at Fenwick & Hale in Bristol.",
            "Nice to meet you, Dana. How long have you been there?",
            "Two years now. I live in Bristol with my cat Miso.",
        ],
    ),
    (
        "2025-01-15T18:30:00+00:00",
        [
            "Month end close at Fenwick & Hale was brutal this week.",
            "That sounds tiring. Anything I can help plan?",
            "Remind me to book a climbing session on Saturday.",
        ],
    ),
    (
        "2025-02-03T20:00:00+00:00",
        [
            "Big news: I accepted an offer as a financial analyst at Northwind Energy.",
            "Congratulations! When do you start?",
            "I start on 1 March, so I am leaving Fenwick & Hale at the end of February.",
        ],
    ),
    (
        "2025-02-20T19:10:00+00:00",
        [
            "I am moving to Leeds next week because Northwind Energy is based there.",
            "Good luck with the move. Is Miso coming too?",
            "Of course, Miso comes with me.",
        ],
    ),
    (
        "2025-03-04T19:00:00+00:00",
        [
            "I moved to Leeds last weekend and the new flat is near Roundhay Park.",
            "How was the first day at Northwind Energy?",
            "Great, my manager Priya Shah walked me through the forecasting models.",
        ],
    ),
    (
        "2025-03-18T18:45:00+00:00",
        [
            "I joined a climbing gym in Leeds called The Depot.",
            "Do you go with anyone?",
            "With my colleague Tom from Northwind Energy, on Tuesdays.",
        ],
    ),
    (
        "2025-04-02T20:00:00+00:00",
        [
            "My sister Ella is visiting me in Leeds next month.",
            "Lovely. Any plans for her visit?",
            "We will hike in the Yorkshire Dales.",
        ],
    ),
]
TURNS = sum(len(texts) for _, texts in SESSIONS)  # 21: one memory each (the rules)


def rows() -> list[dict[str, Any]]:
    """The history as JSON Lines records (one bank, the document named after the file)."""
    out = []
    for s, (start, texts) in enumerate(SESSIONS, start=1):
        at = datetime.fromisoformat(start)
        for i, text in enumerate(texts):
            out.append(
                {
                    "bank_id": BANK,
                    "session_id": f"s{s}",
                    "speaker": "Assistant" if i == 1 else "Dana",
                    "timestamp": at.replace(minute=at.minute + i).isoformat(),
                    "text": text,
                }
            )
    return out
