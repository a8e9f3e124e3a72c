"""Question answering with an LLM judge: answer from recalled memories (or from the full
history, the baseline), then grade with the benchmarks' judge prompts.

Judges:

* **LongMemEval**: the official category-specific prompts of ``src/evaluation/evaluate_qa.py``
  (xiaowu0162/LongMemEval, MIT), reproduced word for word because a different wording gives
  incomparable numbers; graded as the official script does (``"yes"`` anywhere in the lower-cased
  reply, at temperature 0 with 10 tokens).
* **LoCoMo**: LoCoMo itself scores answers with token F1 and publishes no judge prompt; the LLM
  judge that published memory systems report on LoCoMo (the "J" score of Mem0, Zep, Hindsight
  and others) is Mem0's ``ACCURACY_PROMPT`` (mem0ai/mem0, ``evaluation/metrics/llm_judge.py``,
  Apache-2.0), reproduced word for word; its JSON ``label`` is read.

The answer prompt is our own and the same for every system, so systems differ only in the
context they hand the answerer. Everything here takes an :class:`~memlane.interfaces.LLM`; the
LLM clients come from the LLM layer.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Callable, Sequence

from memlane.interfaces import LLM

# --- LongMemEval's official judge prompts (evaluate_qa.py, get_anscheck_prompt) -------------
_LME_PREFIX = (
    "I will give you a question, a correct answer, and a response from a model. Please "
    "answer yes if the response contains the correct answer. Otherwise, answer no. If "
    "the response is equivalent to the correct answer or contains all the intermediate "
    "steps to get the correct answer, you should also answer yes. If the response only "
    "contains a subset of the information required by the answer, answer no. "
)
_LME_SUFFIX = (
    "\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model "
    "response correct? Answer yes or no only."
)
LME_JUDGE_TEMPLATES = {
    "single-session-user": _LME_PREFIX + _LME_SUFFIX,
    "single-session-assistant": _LME_PREFIX + _LME_SUFFIX,
    "multi-session": _LME_PREFIX + _LME_SUFFIX,
    "temporal-reasoning": _LME_PREFIX
    + (
        "In addition, do not penalize off-by-one errors for the number of days. If the question "
        "asks for the number of days/weeks/months, etc., and the model makes off-by-one errors "
        "(e.g., predicting 19 days when the answer is 18), the model's response is still "
        "correct. "
    )
    + _LME_SUFFIX,
    "knowledge-update": (
        "I will give you a question, a correct answer, and a response from a model. Please answer "
        "yes if the response contains the correct answer. Otherwise, answer no. If the response "
        "contains some previous information along with an updated answer, the response should be "
        "considered as correct as long as the updated answer is the required answer."
    )
    + _LME_SUFFIX,
    "single-session-preference": (
        "I will give you a question, a rubric for desired personalized response, and a response "
        "from a model. Please answer yes if the response satisfies the desired response. "
        "Otherwise, answer no. The model does not need to reflect all the points in the rubric. "
        "The response is correct as long as it recalls and utilizes the user's personal "
        "information correctly.\n\nQuestion: {}\n\nRubric: {}\n\nModel Response: {}\n\nIs the "
        "model response correct? Answer yes or no only."
    ),
}
LME_ABSTENTION_TEMPLATE = (
    "I will give you an unanswerable question, an explanation, and a response from a model. "
    "Please answer yes if the model correctly identifies the question as unanswerable. The model "
    "could say that the information is incomplete, or some other information is given but the "
    "asked information is not.\n\nQuestion: {}\n\nExplanation: {}\n\nModel Response: {}\n\nDoes "
    "the model correctly identify the question as unanswerable? Answer yes or no only."
)

# --- The LoCoMo LLM judge (Mem0's ACCURACY_PROMPT) ------------------------------------------
LOCOMO_JUDGE_TEMPLATE = """
Your task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will be given the following data:
    (1) a question (posed by one user to another user), 
    (2) a ’gold’ (ground truth) answer, 
    (3) a generated answer
which you will score as CORRECT/WRONG.

The point of the question is to ask about something one user should know about the other user based on their prior conversations.
The gold answer will usually be a concise and short answer that includes the referenced topic, for example:
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer might be much longer, but you should be generous with your grading - as long as it touches on the same topic as the gold answer, it should be counted as CORRECT. 

For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer might be much longer or use relative time references (like "last Tuesday" or "next month"), but you should be generous with your grading - as long as it refers to the same date or time period as the gold answer, it should be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT if it's the same date.

Now it's time for the real question:
Question: {question}
Gold answer: {gold_answer}
Generated answer: {generated_answer}

First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG. 
Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.

Just return the label CORRECT or WRONG in a json format with the key as "label".
"""

# --- Answering (ours, identical for every system) ---------------------------------------------
ANSWER_SYSTEM = (
    "You answer questions about a user's past conversations using only the context "
    "given. Be brief: answer in a few words or one sentence. If the context does not "
    "contain the answer, say that the information is not available."
)
ANSWER_TEMPLATE = (
    "Context (memories from past conversations, with dates):\n{context}\n\n"
    "{today}Question: {question}\nAnswer:"
)

ANSWER_MAX_TOKENS = 256
LME_JUDGE_MAX_TOKENS = 10  # as the official script
LOCOMO_JUDGE_MAX_TOKENS = 128  # room for the one-sentence reason the prompt asks for


def lme_judge_prompt(
    question_type: str, question: str, answer: str, response: str, *, abstention: bool = False
) -> str:
    """The official LongMemEval judge prompt for a question type (the abstention prompt for
    ``_abs`` questions). Raises ValueError for a type the official script does not know."""
    if abstention:
        return LME_ABSTENTION_TEMPLATE.format(question, answer, response)
    template = LME_JUDGE_TEMPLATES.get(question_type)
    if template is None:
        raise ValueError(f"no LongMemEval judge prompt for question type {question_type!r}")
    return template.format(question, answer, response)


def lme_verdict(reply: str) -> bool:
    """The official reading of the judge's reply: ``"yes"`` anywhere in it, case-insensitive."""
    return "yes" in reply.lower()


def locomo_judge_prompt(question: str, gold: str, response: str) -> str:
    """The LoCoMo judge prompt (Mem0's) filled in."""
    return LOCOMO_JUDGE_TEMPLATE.format(question=question, gold_answer=gold, generated_answer=response)


_LABEL_RE = re.compile(r"\b(CORRECT|WRONG)\b")


def locomo_verdict(reply: str) -> bool:
    """True when the judge labels the answer CORRECT: the ``label`` of a JSON object in the
    reply, else the last CORRECT/WRONG word in it. A reply with neither is WRONG."""
    for candidate in re.findall(r"\{[^{}]*\}", reply):
        try:
            label = json.loads(candidate).get("label")
        except (ValueError, AttributeError):
            continue
        if isinstance(label, str):
            return label.strip().upper() == "CORRECT"
    words = _LABEL_RE.findall(reply.upper())
    return bool(words) and words[-1] == "CORRECT"


def answer_messages(
    question: str, context: str, question_date: datetime | None = None
) -> list[dict[str, str]]:
    """The chat messages the answerer gets (same for every system)."""
    today = f"Today's date: {question_date:%Y-%m-%d}\n" if question_date else ""
    return [
        {"role": "system", "content": ANSWER_SYSTEM},
        {
            "role": "user",
            "content": ANSWER_TEMPLATE.format(context=context or "(none)", today=today, question=question),
        },
    ]


def pack(memories: Sequence[Any], max_tokens: int) -> list[Any]:
    """Greedy packing of recalled memories (objects with ``tokens``), best first, skipping one
    that does not fit: the first ``max_tokens`` worth of a deeper recall, as recall itself packs."""
    out, used = [], 0
    for m in memories:
        if used + m.tokens <= max_tokens:
            out.append(m)
            used += m.tokens
    return out


def memory_context(memories: Sequence[Any]) -> str:
    """Recalled memories as context lines: ``[date] text``, in recall order; a tree node as
    ``[first date - last date] text``."""
    lines = []
    for m in memories:
        if not hasattr(m, "unit"):  # a RecalledNode
            n = m.node
            lines.append(f"[{n.start:%Y-%m-%d} - {n.end:%Y-%m-%d}] {n.text}")
            continue
        u = m.unit
        when = u.occurred_start or u.mentioned_at
        lines.append(f"[{when:%Y-%m-%d}] {u.text}" if when else u.text)
    return "\n".join(lines)


def history_context(turns: Sequence[Any]) -> str:
    """A whole history (turns with ``session_id``, ``timestamp``, ``speaker``, ``text``) as
    context: a dated header per session, then ``speaker: text`` lines (the full-context
    baseline)."""
    lines, session = [], None
    for t in turns:
        if t.session_id != session:
            session = t.session_id
            lines.append(f"\n### Session {session} ({t.timestamp:%Y-%m-%d %H:%M})")
        lines.append(f"{t.speaker}: {t.text}")
    return "\n".join(lines).strip()


def answer_and_grade(
    llm: LLM,
    *,
    question: str,
    context: str,
    context_tokens: int,
    grade: Callable[[str], tuple[str, int]],
    verdict: Callable[[str], bool],
    question_date: datetime | None = None,
) -> dict[str, Any]:
    """Answer ``question`` from ``context`` and grade it. ``grade(answer)`` returns the judge
    prompt and its token limit; ``verdict(reply)`` reads the reply. Returns the log entry
    (``answer``, ``correct``, ``judge``, ``context_tokens``), or one with ``error`` when the LLM
    call fails, so one failed call does not end a long run."""
    entry: dict[str, Any] = {"context_tokens": context_tokens}
    try:
        answer = llm.complete(
            answer_messages(question, context, question_date), max_tokens=ANSWER_MAX_TOKENS, temperature=0.0
        ).strip()
        entry["answer"] = answer
        prompt, limit = grade(answer)
        reply = llm.complete([{"role": "user", "content": prompt}], max_tokens=limit, temperature=0.0).strip()
        entry["judge"] = reply
        entry["correct"] = verdict(reply)
    except Exception as exc:  # noqa: BLE001 - logged per question, counted as an error
        entry["error"] = f"{type(exc).__name__}: {exc}"[:500]
    return entry


def lme_grader(question_type: str, question: str, gold: str, abstention: bool):
    """The ``grade`` callable for a LongMemEval question."""
    return lambda answer: (
        lme_judge_prompt(question_type, question, gold, answer, abstention=abstention),
        LME_JUDGE_MAX_TOKENS,
    )


def locomo_grader(question: str, gold: str):
    """The ``grade`` callable for a LoCoMo question."""
    return lambda answer: (locomo_judge_prompt(question, gold, answer), LOCOMO_JUDGE_MAX_TOKENS)
