"""``memlane recall``: recall memories for a query, from the running service or in process.

The request and the bank id are checked first (pydantic only: a bad argument fails before
pymilvus or a model is imported). Then, as :mod:`cluster.route` decides: through ``--url`` or
the service running on the data directory (its API: no store or model opened here), else the
engine in this process. There an unknown bank is refused from the data directory's files where
they can tell (:func:`cluster.route.bank_absent`: before pymilvus is imported), else by the
engine before it builds the recall stack (embedder, index): the store's opening only.
"""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import typer

from cluster.common import DataDir, counted, errors, fail, open_memory, skip_teardown


def recall(
    query: str = typer.Argument(..., help="What to remember."),
    bank: str = typer.Option(..., "--bank"),
    max_tokens: int = typer.Option(1024, "--max-tokens"),
    budget: str = typer.Option("mid", "--budget", help="low | mid | high"),
    type: list[str] = typer.Option([], "--type", help="world | experience | opinion | observation"),
    tag: list[str] = typer.Option([], "--tag"),
    include_chunks: bool = typer.Option(False, "--chunks"),
    trace: bool = typer.Option(False, "--trace"),
    level: list[int] = typer.Option(
        [], "--level", help="Temporal tree levels to climb to (repeatable, 1-5; 1 alone: flat recall)."
    ),
    planner: str | None = typer.Option(None, "--planner", help="auto | rules | llm | off (flat recall)"),
    as_of: datetime | None = typer.Option(
        None, "--as-of", help="Answer from what was known and valid then (ISO date or datetime, UTC)."
    ),
    history: bool | None = typer.Option(
        None,
        "--history/--no-history",
        help="Include superseded facts (after their successors); default: when the query asks about the past.",
    ),
    json_out: bool = typer.Option(False, "--json"),
    url: str | None = typer.Option(
        None,
        "--url",
        help="Ask this service (http://127.0.0.1:8000); default: the one `memlane serve` runs on "
        "the data directory, else the engine in this process.",
    ),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="MEMLANE_API_KEY", help="Service API key (default MEMLANE_API_KEY)."
    ),
    data_dir: Path | None = DataDir,
) -> None:
    """Recall memories for a query, packed to a token budget."""
    options: dict[str, Any] = dict(
        max_tokens=max_tokens,
        budget=budget,
        types=type or None,
        tags=tag or None,
        include_chunks=include_chunks,
        trace=trace,
        levels=level or None,
        planner=planner,
        as_of=as_of.isoformat() if as_of else None,
        include_history=history,
    )
    with errors():
        request = _request(bank, query, options)
    from cluster import route

    svc = route.remote(url, api_key) if url else route.service(data_dir, bank=bank, api_key=api_key)
    if svc is not None:
        with svc:
            sent = {k: v for k, v in options.items() if v is not None}
            raw = svc.call(svc.client.recall, bank, query, **sent)
        if json_out:
            typer.echo(json.dumps(raw))
            return
        from memlane.records import RecallResult

        print_recall(RecallResult.model_validate(raw), f", via {svc.url}")
        return
    if route.bank_absent(data_dir, bank):  # told from the data directory's files: no client
        unknown_bank(bank, data_dir)
    from memlane.banks import require_bank
    from memlane.errors import BankNotFound
    from memlane.runtime import configure_process

    with errors(), open_memory(data_dir, bank=bank) as memory:
        try:  # an unknown bank fails here, before the recall stack is built
            require_bank(memory.store, bank)
        except BankNotFound:
            unknown_bank(bank, data_dir)
        # The process limits recall was measured with (one BLAS thread), set once the store has
        # loaded NumPy: threadpoolctl limits the libraries loaded when it is called, and at the
        # command's start (where the other commands set them) NumPy was not, so OpenBLAS kept a
        # thread per core. A refusal never pays for threadpoolctl (5-7 ms of CPU).
        configure_process(memory.settings)
        result = memory.recall(bank, request)
    # Read only, and the engine is closed. (Loading the embedder on a thread while the store
    # opens gained nothing here: 1.01-1.44 s against 1.12-1.49 s, 5 runs each, alternated.)
    skip_teardown()
    if json_out:
        from memlane.views import recall_json

        typer.echo(recall_json(result))
        return
    print_recall(result)


def unknown_bank(bank: str, data_dir: Path | None) -> NoReturn:
    """Exit code 2 with one line naming the bank and the command that lists the banks."""
    listing = "memlane banks" + (f" --data-dir {shlex.quote(str(data_dir))}" if data_dir else "")
    fail(f"unknown bank {bank!r}: `{listing}` lists the banks")


def _request(bank: str, query: str, options: dict[str, Any]):
    """The recall request, validated with the bank id before anything is opened."""
    from pydantic import ValidationError

    from memlane.errors import InvalidInput
    from memlane.records import RecallRequest, check_bank_id

    check_bank_id(bank)
    try:
        return RecallRequest(query=query, **options)
    except ValidationError as exc:
        raise InvalidInput.from_validation(exc) from None


def print_recall(result, via: str = "") -> None:
    """The memories, tree nodes and chunks of a recall on stdout; its plan and totals on stderr."""
    from memlane.views import memory_dates

    for m in result.memories:
        u = m.unit
        when = memory_dates(u)  # said date, then the events it dates
        replaced = f"  (superseded {u.invalid_at:%Y-%m-%d})" if u.invalid_at else ""
        typer.echo(f"{m.score:.3f}  [{u.fact_type.value} {when}] {u.text}{replaced}")
        if m.trace:  # --trace: where the memory came from, each score on its own scale
            typer.echo(f"       {_trace_line(m.trace)}")
            if facts := _facts_line(u.metadata):
                typer.echo(f"       {facts}")
    for r in result.nodes:
        n = r.node
        typer.echo(f"{r.score:.3f}  [{n.level.name} {n.start:%Y-%m-%d} - {n.end:%Y-%m-%d}] {n.text}")
    for c in result.chunks:
        typer.echo(f"--- chunk {c.document_id}/{c.session_id}#{c.index}\n{c.text}")
    if result.plan and result.plan.get("plan"):
        plan = result.plan["plan"]
        typer.echo(
            f"(plan: {plan['complexity']} by {plan['planner']}, levels {result.plan['levels']})", err=True
        )
    typer.echo(
        f"({counted(len(result.memories), 'memory', 'memories')}, "
        f"{counted(len(result.nodes), 'tree node')}, {counted(result.tokens, 'token')}, "
        f"{result.timings_ms.get('total', 0):.0f} ms{via})",
        err=True,
    )


def _facts_line(metadata: dict) -> str:
    """The facts a memory states (memlane/facts/slots.py), each with its extractor and, for a
    superseded one, when and by which fact; "" when it states none."""
    from datetime import UTC, datetime

    from memlane.facts.slots import unit_facts

    out = []
    for slot, rec in unit_facts(metadata):
        fact = f"{slot.subject} {slot.predicate} = {slot.object} ({slot.by}"
        if rec.get("invalid_at") is not None:
            when = datetime.fromtimestamp(float(rec["invalid_at"]), UTC)
            fact += f"; superseded {when:%Y-%m-%d} by {rec.get('superseded_by')}"
        elif rec.get("possibly_superseded_by"):
            fact += f"; possibly superseded by {rec['possibly_superseded_by']}"
        out.append(fact + ")")
    return "facts: " + "; ".join(out) if out else ""


def _trace_line(trace: dict) -> str:
    """One line of a memory's trace: its rank in each channel and in fusion, its fused and
    cross-encoder scores, the learned ranker's rank and raw score where it ranked, and the
    final score (the one the list is ordered by)."""
    channels = " ".join(f"{name} #{c['rank']}" for name, c in trace.get("channels", {}).items())
    scores = trace.get("scores") or {}
    cross = "-" if scores.get("cross") is None else f"{scores['cross']:.3f} (#{trace['rerank'].get('rank')})"
    learned = trace.get("learned")
    ranker = f"learned #{learned['rank']} {learned['score']:.2f}; " if learned else ""
    moved = " (lowered to follow an ordering rule)" if trace.get("moved") else ""
    return (
        f"channels: {channels or '-'}; fused #{trace['rrf']['rank']} {scores.get('fused', 0):.3f}; "
        f"cross-encoder {cross}; {ranker}final {trace.get('final', 0):.3f}{moved}"
    )
