"""The LLM adjudicator: the escalation tier of conflict resolution, for ambiguous pairs only.

Asked whether a newer fact replaces an older one of (nearly) the same slot; the reply is
validated JSON. A failure of any kind (transport, a malformed reply after the repair round)
answers None: the caller keeps both facts valid (memlane/facts/resolve.py), so a bad model
never invalidates a true fact.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from memlane.facts.resolve import SlotFact, Verdict
from memlane.llm.errors import LLMError
from memlane.llm.structured import complete_json

log = logging.getLogger(__name__)

SYSTEM = """You keep a person's memory consistent. Two statements were recorded at different
times about (nearly) the same attribute of the same subject. Decide:
- "supersedes": the newer statement replaces the older one (the value changed);
- "elaboration": the newer one adds detail to the older one, both are true;
- "both_valid": they are about different things, or both stay true.
Reply with JSON: {"verdict": "supersedes" | "elaboration" | "both_valid"}."""


class AdjudicatorReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    verdict: Literal["supersedes", "elaboration", "both_valid"]


def _line(f: SlotFact) -> str:
    when = datetime.fromtimestamp(f.at, UTC).date().isoformat()
    s = f.slot
    return f"[{when}] {f.text} (subject: {s.subject}; {s.predicate} = {s.object})"


class LLMAdjudicator:
    """Callable on (older, newer): the model's verdict, or None when it could not give one."""

    def __init__(self, llm) -> None:
        self.llm = llm
        self.failures = 0

    def __call__(self, old: SlotFact, new: SlotFact) -> Verdict | None:
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Older: {_line(old)}\nNewer: {_line(new)}"},
        ]
        try:
            return complete_json(self.llm, messages, AdjudicatorReply, max_tokens=64).verdict
        except (LLMError, ValueError) as exc:
            self.failures += 1
            log.warning("adjudicator failed on %s / %s: %s", old.id, new.id, exc)
            return None
