"""What every benchmark run shares: the systems compared (Memlane, its baselines and any
channel ablations, ranked on the same bank in the same run; specs in :mod:`evals.systems`),
the progress display and the QA step.

Baselines rank the bank's units straight from the store of record, with no fusion, graph,
temporal channel or boosts: plain BM25 over the same analysed text, and plain dense (COSINE)
similarity with the same embedder. They see exactly the memories Memlane's recall sees, so
the difference between the rows is recall's doing. An ablation is Memlane's recall with only
some of its channels, everything else (budget, as_of, reference time) identical.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Callable, Sequence

from evals.dense_baseline import DenseBaseline
from evals.metrics import ranked_turns
from evals.systems import DEFAULT_SYSTEMS, DENSE_EMBEDDERS, FLAT, MEMLANE, NODECOMP, channels_of

SYSTEMS = DEFAULT_SYSTEMS
# QA rows: Memlane's recall, plain BM25's best units and the whole history (or as much of it
# as the answerer's window holds), each read by the same answerer and graded by the same judge.
QA_SYSTEMS = ("memlane", "bm25", "full-context")
# Deep enough that every system returns more distinct turns than the largest k (50).
RECALL_TOKENS = 65536
BASELINE_DEPTH = 100
# The context budget the answerer gets from Memlane in QA mode.
QA_TOKENS = 4096


def _turns_of(hits) -> list[str]:
    return ranked_turns([list(h.fields.get("source_turns") or ()) for h in hits])


def result_turns(result) -> list[str]:
    """The turn ranking of a recall result: memories and tree nodes in their one ranking
    (:meth:`~memlane.records.RecallResult.ranked`); a memory counts its source turns, a node only
    the turns its text quotes (``cited_turns``), never everything under it."""
    return ranked_turns(
        [x.unit.source_turns if hasattr(x, "unit") else x.node.cited_turns for x in result.ranked()]
    )


def consolidate(memory, bank_id: str) -> float:
    """Build the bank's temporal tree before its questions (what the service does in the
    background after a retain; a bank already consolidated is left as it is). Seconds taken."""
    start = time.perf_counter()
    memory.wait_background()  # a background consolidation the retain queued writes the same nodes
    memory.consolidate(bank_id)
    return time.perf_counter() - start


_DENSE: dict[str, DenseBaseline] = {}


def dense_baseline(memory, system: str) -> DenseBaseline:
    """The named-embedder dense baseline of ``system`` (one embedder per process, built from the
    memory's settings with only ``models.embedder`` changed)."""
    if system not in _DENSE:
        from memlane.models.embedder import build_embedder

        settings = memory.settings.model_copy(deep=True)
        settings.models.embedder = DENSE_EMBEDDERS[system]
        _DENSE[system] = DenseBaseline(build_embedder(settings))
    return _DENSE[system]


def rank_all(
    memory,
    bank_id: str,
    query: str,
    *,
    systems: Sequence[str] = SYSTEMS,
    reference_time: datetime | None = None,
    as_of: datetime | None = None,
    recall_tokens: int = RECALL_TOKENS,
    depth: int = BASELINE_DEPTH,
    budget: str = "mid",
):
    """Rank the bank's source turns for ``query`` with each of ``systems`` (specs of
    :mod:`evals.systems`; Memlane's recall always runs). ``reference_time`` is recall's "now"
    for relative time expressions and recency (no filter); ``as_of`` is recall's validity filter;
    ``budget`` is every recall's budget (low/mid/high: how deep channels search, and where the
    cross-encoder reranks).

    Returns ``(rankings, result, latency_ms, tokens)``: turn rankings by system name (only the
    systems asked for), Memlane's :class:`~memlane.records.RecallResult` (for QA), its recall
    latency and the tokens each recall-based system returned (memlane, flat, nodecomp, ablations)."""
    options: dict[str, Any] = {
        "max_tokens": recall_tokens,
        "as_of": as_of,
        "reference_time": reference_time,
        "budget": budget,
    }
    start = time.perf_counter()
    result = memory.recall(bank_id, query, **options)
    latency_ms = (time.perf_counter() - start) * 1000
    rankings: dict[str, list[str]] = {}
    tokens: dict[str, int] = {}
    for system in systems:
        if system == MEMLANE:
            rankings[system] = result_turns(result)
            tokens[system] = result.tokens
        elif system == FLAT:
            flat = memory.recall(bank_id, query, planner="off", **options)
            rankings[system] = result_turns(flat)
            tokens[system] = flat.tokens
        elif system == NODECOMP:
            plain = memory.recall(bank_id, query, decompose="off", **options)
            rankings[system] = result_turns(plain)
            tokens[system] = plain.tokens
        elif system == "bm25":
            hits = memory.store.search_lexical(bank_id, query, depth, fields=["source_turns"])
            rankings[system] = _turns_of(hits)
        elif system == "dense":
            vector = memory.embedder.embed_queries([query])
            hits = memory.store.search_dense(bank_id, vector, depth, fields=["source_turns"])[0]
            rankings[system] = _turns_of(hits)
        elif system in DENSE_EMBEDDERS:
            rankings[system] = dense_baseline(memory, system).rank(memory.store, bank_id, query, depth)
        else:
            channels = channels_of(system)
            if channels is None:
                raise ValueError(f"unknown system {system!r}")
            ablated = memory.recall(bank_id, query, channels=channels, **options)
            rankings[system] = result_turns(ablated)
            tokens[system] = ablated.tokens
    return rankings, result, latency_ms, tokens


def spread(items: Sequence[Any], n: int | None) -> list[Any]:
    """``n`` of ``items`` evenly spread over them (indices ``floor(j * len / n)``), in order; all
    of them when ``n`` is None or not smaller. A bounded sample that still covers every part of
    a file grouped by type (LongMemEval's is)."""
    items = list(items)
    if n is None or n >= len(items):
        return items
    return [items[(j * len(items)) // n] for j in range(n)]


def _bm25_context(memory, bank_id: str, question: str, qa_tokens: int) -> tuple[str, int]:
    """Plain BM25's best units of the bank, packed like Memlane's recall (greedy, best first, up
    to ``qa_tokens``), as ``[date] text`` lines."""
    from datetime import UTC

    hits = memory.store.search_lexical(
        bank_id, question, BASELINE_DEPTH, fields=["text", "occurred_start", "mentioned_at"]
    )
    texts = [str(h.fields.get("text") or "") for h in hits]
    lines, used = [], 0
    for h, text, n in zip(hits, texts, memory.embedder.count_tokens(texts)):
        if used + n > qa_tokens:
            continue
        when = h.fields.get("occurred_start") or h.fields.get("mentioned_at")
        day = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d") if when else None
        lines.append(f"[{day}] {text}" if day else text)
        used += n
    return "\n".join(lines), used


def _window_context(memory, history: Sequence[Any], window: int | None) -> tuple[str, int]:
    """The whole history as context, or, with a ``window`` in tokens, its latest turns that fit
    in it with their session headers (the most a model with that context can read)."""
    from evals.qa import history_context

    turns = list(history)
    if window is not None:
        count = memory.embedder.count_tokens
        lines = count([f"{t.speaker}: {t.text}" for t in turns])
        headers = count([f"### Session {t.session_id} ({t.timestamp:%Y-%m-%d %H:%M})" for t in turns])
        used, first = 0, len(turns)
        for i in reversed(range(len(turns))):
            opens_run = i == len(turns) - 1 or turns[i + 1].session_id != turns[i].session_id
            # a run's header is counted once, from its newest turn (+2: its date may differ)
            cost = lines[i] + (headers[i] + 2 if opens_run else 0)
            if used + cost > window:
                break
            used, first = used + cost, i
        turns = turns[first:]
    context = history_context(turns)
    # Line by line: one huge string would only trip the tokenizer's length warning.
    return context, sum(memory.embedder.count_tokens(context.split("\n"))) if context else 0


def qa_for(
    memory,
    llm,
    *,
    bank_id: str,
    question: str,
    result,
    history: Sequence[Any],
    grade,
    verdict,
    qa_tokens: int = QA_TOKENS,
    question_date: datetime | None = None,
    full_context: bool = True,
    qa_window: int | None = None,
) -> dict[str, Any]:
    """QA entries for one question: Memlane answers from the best ``qa_tokens`` of its recall,
    plain BM25 from its best ``qa_tokens`` of the same bank, the full-context baseline from the
    whole history (its latest ``qa_window`` tokens when given); the same answerer and judge
    grade all. Context tokens are counted with the embedder's tokenizer (not the answerer's,
    which the harness cannot know), the same way for every system."""
    from evals.qa import answer_and_grade, memory_context, pack

    def graded(context: str, tokens: int) -> dict[str, Any]:
        return answer_and_grade(
            llm,
            question=question,
            context=context,
            context_tokens=tokens,
            grade=grade,
            verdict=verdict,
            question_date=question_date,
        )

    packed = pack(result.ranked(), qa_tokens)
    out = {
        "memlane": graded(memory_context(packed), sum(m.tokens for m in packed)),
        "bm25": graded(*_bm25_context(memory, bank_id, question, qa_tokens)),
    }
    if full_context:
        out["full-context"] = graded(*_window_context(memory, history, qa_window))
    return out


def qa_systems(enabled: bool, full_context: bool = True) -> tuple[str, ...]:
    """The QA rows a run reports: none without QA, Memlane and BM25 (and the full-context
    baseline)."""
    if not enabled:
        return ()
    return QA_SYSTEMS if full_context else QA_SYSTEMS[:2]


def percentile(xs: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not xs:
        return None
    ordered = sorted(xs)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def progress_bar(enabled: bool):
    """A rich progress display on stderr (disabled: a no-op with the same API)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # stderr: stdout carries the report (text, Markdown or JSON).
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )


Advance = Callable[[int], None]
