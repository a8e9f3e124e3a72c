"""Bulk backfill on Ray Data: a corpus of chat logs -> retained banks in Milvus.

Stages::

    driver:  read + validate + group (pipelines.corpus)   -> rejects file, resume ledger
             pack banks into groups of ~GROUP_TURNS turns  -> one Dataset row per group
    actors:  map_batches(RetainWorker, batch_size=1, compute=ActorPoolStrategy(size=workers,
             max_tasks_in_flight_per_actor=1))
             each call retains whole banks with the engine's Memory.retain
    driver:  stream results (iter_batches) -> ledger lines, summary, metrics

Why this shape (measured on the 2-core reference machine, see ``benchmarks/backfill_bench.py``
and the issue's closing notes):

* The unit of parallelism is the bank. Entity resolution and semantic links read what earlier
  batches of the same bank wrote, so a bank is retained in order by one worker; that is also
  what makes the memory ids, chunks, entities and links identical to an in-process
  ``Memory.retain`` of the same input.
* Ray's per-row overhead is kept out: a Dataset row is a *group* of whole banks (~GROUP_TURNS
  turns, seconds of work), so Ray Data schedules a few hundred tasks for 100k turns instead of
  100k rows. A row-per-turn actor pool measured 100 rows/s against 160 for a plain loop here.
* Embedding is not split into its own actor stage: on CPU it would only add a hop, and a
  separate stage cannot precede the retainer's per-batch link search without changing the
  engine. On a GPU cluster each retain actor takes a GPU share (``num_gpus``) and embeds there.

Idempotence and resume: every id is deterministic and every write an upsert, so a re-run, a
retried task or a restarted actor converges to the same state. Finished banks are appended to
``backfill-ledger.jsonl`` in the data directory as results stream in; a re-run skips a bank
whose input fingerprint is in the ledger *and* whose memories of that input are still those
the ledger names (whatever else the bank received since), and retains everything else again
(a crash mid-bank simply redoes that bank).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from actors.wire import encode_bank
from pipelines import ledger
from pipelines.corpus import BankInput, fingerprint, read_corpus
from pipelines.job import Progress, cluster_pool, run_pool, worker_settings

log = logging.getLogger(__name__)

# Turns per Dataset row (a group of whole banks). A group is ~10 s of retain on 2 CPU cores:
# large enough that Ray's per-task overhead (a few ms) vanishes, small enough to balance a
# pool and to show progress. Banks larger than this go alone.
GROUP_TURNS = 1024
REJECTS_FILE = "backfill-rejects.jsonl"


class RejectLimitExceeded(Exception):
    """The share of rejected records passed the configured limit."""

    def __init__(self, message: str, summary: BackfillSummary) -> None:
        super().__init__(message)
        self.summary = summary


@dataclass
class BackfillSummary:
    """What a backfill did. ``banks``/``turns``/``memories``/``entities``/``links`` cover the
    whole corpus (banks skipped by resume count with their ledger figures); ``turns_per_s`` is
    turns retained in this run per second of wall time."""

    banks: int = 0
    turns: int = 0
    memories: int = 0
    entities: int = 0
    links: int = 0
    rejects: int = 0
    wall_s: float = 0.0
    turns_per_s: float = 0.0
    retained_banks: int = 0
    skipped_banks: int = 0
    failed_banks: int = 0
    retained_turns: int = 0
    # What the banks retained in this run that were consolidated before were left for
    # `memlane consolidate` (the retain report's stale): tree sessions and facts.
    stale_tree_sessions: int = 0
    stale_facts: int = 0
    read_s: float = 0.0
    reject_share: float = 0.0
    workers: int = 0
    rejects_path: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(out.pop("extra"))
        return out


@dataclass
class BackfillConfig:
    """Inputs of :func:`run_backfill`. ``settings`` are :class:`memlane.settings.Settings`
    keyword overrides sent to every worker; ``milvus_uri`` must be reachable from all of them."""

    path: Path
    milvus_uri: str
    data_dir: Path
    fmt: str = "auto"
    workers: int | None = None
    max_reject_share: float = 0.01
    group_turns: int = GROUP_TURNS
    resume: bool = True
    progress: bool = True
    use_gpu: bool | None = None  # None: when the cluster has GPUs
    settings: dict[str, Any] = field(default_factory=dict)
    max_restarts: int = 3
    runtime_env: dict[str, Any] | None = None  # e.g. {"env_vars": {...}} for the workers
    # LLM extraction on GPUs with ray.data.llm (pipelines/llm_extract.py): a VLLMExtractConfig.
    # Its replies travel with each bank to the retain workers, which validate them and fall
    # back to the rules per chunk.
    vllm: Any = None


def _pack(
    rows: list[tuple[BankInput, str, str]], group_turns: int, replies: dict[str, dict[str, str]] | None = None
) -> list[dict[str, list]]:
    """Greedy packing of banks (largest first, so stragglers come early) into groups of at most
    ``group_turns`` turns; a bank larger than that is a group alone. With ``replies`` (batch
    LLM extraction, ``{bank_id: {chunk_id: reply}}``) each bank carries its own as JSON."""
    rows = sorted(rows, key=lambda r: -r[0].n_turns)
    keys = ("bank_id", "payload", "fingerprint") + (("replies",) if replies is not None else ())
    groups: list[dict[str, list]] = []
    cur: dict[str, list] = {k: [] for k in keys}
    size = 0
    for bank, payload, fp in rows:
        if cur["bank_id"] and size + bank.n_turns > group_turns:
            groups.append(cur)
            cur, size = {k: [] for k in keys}, 0
        cur["bank_id"].append(bank.bank_id)
        cur["payload"].append(payload)
        cur["fingerprint"].append(fp)
        if replies is not None:
            cur["replies"].append(json.dumps(replies.get(bank.bank_id, {})))
        size += bank.n_turns
    if cur["bank_id"]:
        groups.append(cur)
    return groups


class _GroupAdapter:
    """Unpacks a group row (lists of banks) for :class:`actors.retain.RetainWorker`."""

    def __init__(self, settings: dict[str, Any], use_gpu: bool = False) -> None:
        from actors.retain import RetainWorker

        self.worker = RetainWorker(settings, use_gpu=use_gpu)

    def __call__(self, batch):
        # batch_format="pyarrow": one table of group rows with list columns.
        cols: dict[str, list] = {}
        for row in batch.to_pylist():
            for key, values in row.items():
                cols.setdefault(key, []).extend(values)
        return self.worker(cols)


def _driver_metrics():
    try:
        from ray.util.metrics import Counter

        return (
            Counter("memlane_backfill_turns_read", "Turns read and accepted by the backfill."),
            Counter("memlane_backfill_rejects", "Records rejected by the backfill.", tag_keys=("stage",)),
        )
    except Exception:  # noqa: BLE001
        return None, None


@dataclass
class BackfillPlan:
    """The read, validated and grouped corpus: what :func:`run_backfill` will retain."""

    banks: list[tuple[BankInput, str, str]]  # (bank, payload, fingerprint)
    summary: BackfillSummary
    rejects_path: Path
    ledger_path: Path
    data_dir: Path


def _append_rejects(path: Path, records: list[dict[str, Any]]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")


def prepare_backfill(cfg: BackfillConfig) -> BackfillPlan:
    """Read and validate the corpus; write the rejects file; check the reject share. Needs no
    Ray and no Milvus, so bad input fails before anything starts.

    Raises :class:`RejectLimitExceeded` (nothing written) when the share of rejected records
    passes ``cfg.max_reject_share``, ValueError / FileNotFoundError for unusable input.
    """
    if not 0.0 <= cfg.max_reject_share <= 1.0:
        raise ValueError(f"--max-reject-share must be in [0, 1], got {cfg.max_reject_share}")
    if cfg.workers is not None and cfg.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {cfg.workers}")
    t0 = time.perf_counter()
    data_dir = Path(cfg.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    rejects_path = data_dir / REJECTS_FILE
    summary = BackfillSummary(rejects_path=str(rejects_path))
    first: list[str] = []  # the first reject's place and reason, for the error line
    with open(rejects_path, "w", encoding="utf-8") as rejects_file:

        def reject(rec: dict[str, Any]) -> None:
            if not first:
                first.append(f"{rec.get('source')} {rec.get('where')}: {rec.get('reason')}")
            rejects_file.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")

        corpus = read_corpus(cfg.path, cfg.fmt, reject=reject)
    summary.read_s = round(time.perf_counter() - t0, 3)
    summary.rejects = corpus.rejects
    summary.extra["turns_read"] = corpus.turns
    total = corpus.turns + corpus.rejects
    summary.reject_share = round(corpus.rejects / total, 6) if total else 0.0
    why = f"the first: {first[0]}; " if first else ""
    if corpus.turns == 0:
        raise ValueError(
            f"{cfg.path}: no valid turns to retain ({corpus.rejects} rejected, {why}see {rejects_path})"
        )
    if summary.reject_share > cfg.max_reject_share:
        summary.wall_s = summary.read_s
        raise RejectLimitExceeded(
            f"{corpus.rejects} of {total} records rejected ({summary.reject_share:.2%} > "
            f"--max-reject-share {cfg.max_reject_share:.2%}; {why}nothing written); reasons in "
            f"{rejects_path}",
            summary,
        )
    banks = []
    for bank in corpus.bank_inputs():
        payload = encode_bank(bank)
        banks.append((bank, payload, fingerprint(payload)))
    corpus.banks.clear()
    return BackfillPlan(
        banks=banks,
        summary=summary,
        rejects_path=rejects_path,
        ledger_path=data_dir / ledger.LEDGER_FILE,
        data_dir=data_dir,
    )


def _skip_done(cfg: BackfillConfig, plan: BackfillPlan) -> tuple[list, list[dict[str, Any]]]:
    """Split the plan into banks to retain and ledger records of banks to skip (the rule:
    pipelines/ledger.py)."""
    from memlane.settings import Settings
    from memlane.stores.milvus import MilvusStore

    # Opening the store once here also creates its global collections before the workers
    # start, so they do not race to create them (harmless, but each loser logs an RPC error).
    s = Settings(**worker_settings(cfg.settings, cfg.milvus_uri, plan.data_dir))
    store = MilvusStore(s, dim=s.models.embedding_dim)
    try:
        return ledger.split_done(plan.banks, ledger.read(plan.ledger_path) if cfg.resume else {}, store)
    finally:
        store.close()


def _batch_extract(todo: list[tuple[BankInput, str, str]], cfg: BackfillConfig) -> dict[str, dict[str, str]]:
    """Run the vLLM extraction stage over every chunk of the banks to retain (one ray.data.llm
    job for the whole corpus, so the GPUs see full batches); ``{bank_id: {chunk_id: reply}}``.
    Prompts are built as for a bank without an owner name, which is what a backfill creates."""
    from actors.wire import decode_bank
    from memlane.records import Bank
    from memlane.settings import Settings
    from pipelines import llm_extract

    chunk_max_turns = Settings(**cfg.settings).retain.chunk_max_turns
    rows, bank_of = [], {}
    for bank, payload, _ in todo:
        for row in llm_extract.chunk_rows(
            Bank(bank_id=bank.bank_id, name=""), decode_bank(payload), chunk_max_turns
        ):
            bank_of[row["chunk_id"]] = bank.bank_id
            rows.append(row)
    out: dict[str, dict[str, str]] = {}
    for chunk_id, reply in llm_extract.extract_replies(rows, cfg.vllm).items():
        if chunk_id in bank_of:
            out.setdefault(bank_of[chunk_id], {})[chunk_id] = reply
    return out


def run_backfill(
    cfg: BackfillConfig, plan: BackfillPlan | None = None, *, on_result: Callable[[dict], None] | None = None
) -> BackfillSummary:
    """Run the backfill on the Ray cluster this process is connected to (``ray.init`` first).

    ``plan`` comes from :func:`prepare_backfill` (read here when omitted). Raises
    :class:`RejectLimitExceeded` when rejected records pass ``cfg.max_reject_share``: before
    anything is written when the read finds too many, or at the end when banks failed to
    retain (the other banks are written).
    """
    t0 = time.perf_counter()
    if plan is None:
        plan = prepare_backfill(cfg)
    summary = plan.summary
    started = t0 - summary.read_s
    turns_read, rejects_metric = _driver_metrics()
    if turns_read is not None:
        turns_read.inc(summary.extra.get("turns_read", 0) or 0)
        if summary.rejects:
            rejects_metric.inc(summary.rejects, tags={"stage": "read"})

    todo, skipped = _skip_done(cfg, plan)
    plan.banks = []
    progress = Progress("backfill", len(todo))
    for prev in skipped:
        summary.banks += 1
        summary.skipped_banks += 1
        for key in ("turns", "memories", "entities", "links"):
            setattr(summary, key, getattr(summary, key) + int(prev.get(key, 0)))

    if todo:
        pool = cluster_pool(cfg.workers, cfg.use_gpu)
        summary.workers = pool.workers
        summary.extra["gpu"] = pool.on_gpu
        replies = _batch_extract(todo, cfg) if cfg.vllm is not None else None
        n_turns = {b.bank_id: b.n_turns for b, _, _ in todo}
        results = run_pool(
            _pack(todo, cfg.group_turns, replies),
            _GroupAdapter,
            {
                "settings": worker_settings(cfg.settings, cfg.milvus_uri, plan.data_dir),
                "use_gpu": pool.on_gpu,
            },
            pool,
            progress=cfg.progress,
            runtime_env=cfg.runtime_env,
            max_restarts=cfg.max_restarts,
        )
        del todo
        failed: list[dict[str, Any]] = []
        with open(plan.ledger_path, "a", encoding="utf-8") as ledger_file:
            for rec in results:
                summary.banks += 1
                if rec["status"] == "ok":
                    summary.retained_banks += 1
                    summary.retained_turns += rec["turns"]
                    for key in (
                        "turns",
                        "memories",
                        "entities",
                        "links",
                        "stale_tree_sessions",
                        "stale_facts",
                    ):
                        setattr(summary, key, getattr(summary, key) + rec[key])
                    ledger_file.write(ledger.line(rec))
                    ledger_file.flush()
                else:
                    summary.failed_banks += 1
                    n = n_turns.get(rec["bank_id"], 1)
                    summary.rejects += n
                    failed.append(
                        {
                            "source": "retain",
                            "where": f"bank {rec['bank_id']}",
                            "reason": rec["error"],
                            "records": n,
                            "bank_id": rec["bank_id"],
                        }
                    )
                    if rejects_metric is not None:
                        rejects_metric.inc(n, tags={"stage": "retain"})
                progress.done(summary.retained_banks + summary.failed_banks)
                if on_result is not None:
                    on_result(rec)
        if failed:
            _append_rejects(plan.rejects_path, failed)

    summary.wall_s = round(time.perf_counter() - started, 3)
    summary.turns_per_s = round(summary.retained_turns / summary.wall_s, 2) if summary.wall_s else 0.0
    total = summary.turns + summary.rejects
    summary.reject_share = round(summary.rejects / total, 6) if total else 0.0
    if summary.reject_share > cfg.max_reject_share:
        raise RejectLimitExceeded(
            f"{summary.rejects} of {total} records rejected ({summary.reject_share:.2%} > "
            f"--max-reject-share {cfg.max_reject_share:.2%}; {summary.failed_banks} banks failed "
            f"to retain); reasons in {plan.rejects_path}",
            summary,
        )
    return summary
