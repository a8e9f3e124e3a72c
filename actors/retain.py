"""The retain worker: a Ray Data actor that holds one engine (embedder, spaCy NER, a Milvus
client, a graph store) and retains whole banks.

One call gets a batch of bank rows (``bank_id``, ``payload`` = the bank's documents as JSON,
``fingerprint``) and runs the engine's own ``Memory.retain`` per bank, so memory ids, chunks,
entities and links are exactly those of an in-process retain of the same input. A bank is never
split across calls: entity resolution and semantic links read what earlier batches of the same
bank wrote, so one bank must be retained in order by one worker. Parallelism is across banks.

After a bank is retained, its in-process state (graph, search index) is evicted so an actor's
memory stays bounded over thousands of banks; both are derived and rebuilt from Milvus on demand.

Failures: an exception while retaining a bank is retried once in place (every write is an
upsert of a deterministic id, so a repeat converges); a bank that fails twice comes back with
``status="failed"`` and its error, and the driver counts it as rejected. A worker process that
dies (OOM, a killed node) is restarted by Ray and its batch re-run (``max_restarts`` /
``max_task_retries``), safe for the same reason.

Fault injection for tests: ``MEMLANE_BACKFILL_FAULT=kill:<marker path>`` makes the first call
that finds no file at the marker path create it and kill its own process mid-batch (before the
batch's second bank, so the first is already written); ``raise:<marker path>`` raises once instead.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from typing import Any

from actors.gauges import export_held_state

log = logging.getLogger(__name__)

# Stage latency buckets in seconds: a bank's stage on 2 cores runs from ~10 ms to a minute.
_BOUNDARIES = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180]


class _Metrics:
    """Custom Ray metrics (exported on each node's Prometheus endpoint, shown in the dashboard's
    Metrics view when Prometheus/Grafana are set up)."""

    def __init__(self) -> None:
        from ray.util.metrics import Counter, Histogram

        self.banks = Counter(
            "memlane_backfill_banks", "Banks retained by the backfill.", tag_keys=("status",)
        )
        self.turns = Counter("memlane_backfill_turns_retained", "Turns retained by the backfill.")
        self.memories = Counter("memlane_backfill_memories_written", "Memory units written by the backfill.")
        self.stage = Histogram(
            "memlane_backfill_stage_seconds",
            "Seconds per retain stage, per bank.",
            boundaries=_BOUNDARIES,
            tag_keys=("stage",),
        )
        self.bank_seconds = Histogram(
            "memlane_backfill_bank_seconds", "Seconds to retain one bank.", boundaries=_BOUNDARIES
        )


def input_units(store: Any, bank_id: str, document_ids: list[str]) -> str:
    """A digest of the memories the bank holds of ``document_ids`` (invalidated ones included),
    each by id and text: what a backfill's retain of them left, to tell at the next run whether
    they are still there as it left them. Ids derive from bank, document, chunk and position,
    so the text is what tells a document another path rewrote with as many turns."""
    from memlane.interfaces import UnitFilter

    h = hashlib.sha256()
    for doc in sorted(set(document_ids)):
        h.update(doc.encode() + b"\x1e")
        ids = store.list_unit_ids(bank_id, UnitFilter(document_id=doc, only_valid=False))
        for i in range(0, len(ids), 2000):
            for unit in sorted(store.get_units(bank_id, ids[i : i + 2000]), key=lambda u: u.id):
                h.update(unit.id.encode() + b"\x1f" + unit.text.encode() + b"\x1f")
    return h.hexdigest()[:24]


def _maybe_fault() -> None:
    spec = os.environ.get("MEMLANE_BACKFILL_FAULT", "")
    if not spec:
        return
    kind, _, marker = spec.partition(":")
    if not marker:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # once, across restarts
    except FileExistsError:
        return
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    if kind == "kill":
        log.warning("MEMLANE_BACKFILL_FAULT: killing worker %d mid-batch", os.getpid())
        os._exit(1)
    if kind == "raise":
        raise RuntimeError("MEMLANE_BACKFILL_FAULT: injected failure")


class RetainWorker:
    """Callable class for ``Dataset.map_batches`` (one engine per actor).

    ``settings``: keyword arguments of :class:`memlane.settings.Settings` (``store.milvus_uri``
    must name a server every worker can reach), completed by
    :func:`actors.engine_settings.engine_settings` (torch threads: the actor's CPUs unless set;
    the GPU with ``use_gpu``).
    """

    def __init__(self, settings: dict[str, Any], use_gpu: bool = False) -> None:
        from actors.engine_settings import engine_settings
        from memlane.engine import Memory
        from memlane.runtime import configure_process

        try:
            import ray

            self.node_id = ray.get_runtime_context().get_node_id() or ""
        except Exception:  # noqa: BLE001 - outside Ray
            self.node_id = ""
        self.settings = engine_settings(settings, use_gpu=use_gpu)
        configure_process(self.settings)  # the engine's process limits: set by the entry point
        self.memory = Memory(self.settings)
        # Load the models now, so the first batch's timing is the retain's, not the load's.
        _ = self.memory.embedder, self.memory.extractor, self.memory.store
        from actors.store_metrics import install_store_metrics

        install_store_metrics()  # this worker's Milvus calls, as ray_memlane_store_*
        try:
            self.metrics: _Metrics | None = _Metrics()
        except Exception:  # noqa: BLE001 - metrics are optional outside a Ray worker
            self.metrics = None
        export_held_state(self.memory.derived, kind=type(self).__name__)

    def retain_bank(self, bank_id: str, payload: str, replies: str | None = None) -> dict[str, Any]:
        """Retain one bank's documents; return its report (counts and stage seconds).
        ``replies`` (JSON ``{chunk_id: reply}`` from the vLLM batch stage) replaces the
        extractor for this bank; chunks without a valid reply fall back to the rules."""
        from actors.wire import decode_bank

        documents = decode_bank(payload)
        extractor = None  # the configured one
        if replies is not None:
            from memlane.retain.extract_precomputed import PrecomputedExtractor

            extractor = PrecomputedExtractor(json.loads(replies), self._rules(), model="vllm-batch")
        report = self.memory.retain(bank_id, documents, extractor=extractor)
        # Consolidation jobs (observations, opinions; only with an LLM) finish before the
        # bank is evicted, so they do not reload it.
        self.memory.wait_background()
        out = report.as_dict()
        # what the bank holds now (memories other paths retained included) and what its input's
        # documents hold: the ledger's figures, so that a re-run skips the bank while its
        # input's memories stay so, whatever else the bank receives
        out["bank_units"] = self.memory.store.count_units(bank_id)
        out["input_units"] = input_units(self.memory.store, bank_id, [doc for doc, _ in documents])
        self.memory.derived.evict(bank_id)  # derived from Milvus; keep actor memory bounded
        return out

    def _rules(self):
        """The LLM-free extractor, the fallback of batch-extracted chunks."""
        if getattr(self, "_rules_extractor", None) is None:
            from memlane.retain.extract_rules import RuleExtractor
            from memlane.retain.ner import SpacyNER

            ext = self.memory.extractor
            self._rules_extractor = (
                ext if ext.name == "rules" else RuleExtractor(SpacyNER(self.settings.models.spacy_model))
            )
        return self._rules_extractor

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, list] = {
            k: []
            for k in (
                "bank_id",
                "fingerprint",
                "status",
                "error",
                "turns",
                "memories",
                "chunks",
                "entities",
                "links",
                "unchanged",
                "bank_units",
                "input_units",
                "stale_tree_sessions",
                "stale_facts",
                "seconds",
                "timings",
                "worker_pid",
                "node_id",
            )
        }
        ids = list(batch["bank_id"])
        fault_at = 2 if len(ids) > 1 else 1  # after the first bank is written, when there is one
        replies = batch.get("replies") or [None] * len(ids)
        for n, (bank_id, payload, fp, reply) in enumerate(
            zip(ids, batch["payload"], batch["fingerprint"], replies), start=1
        ):
            bank_id = str(bank_id)
            t0 = time.perf_counter()
            report, error = None, ""
            for attempt in (0, 1):
                try:
                    if n == fault_at and attempt == 0:
                        _maybe_fault()
                    report = self.retain_bank(bank_id, str(payload), None if reply is None else str(reply))
                    break
                except Exception as exc:  # noqa: BLE001 - reported per bank, job goes on
                    error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]
                    log.warning("bank %s attempt %d failed: %s", bank_id, attempt + 1, error)
                    self.memory.derived.evict(bank_id)
            ok = report is not None
            out["bank_id"].append(bank_id)
            out["fingerprint"].append(str(fp))
            out["status"].append("ok" if ok else "failed")
            out["error"].append("" if ok else error)
            # memories: those the bank's documents hold (written now or kept as they were)
            out["memories"].append(int(report["units"] + report["unchanged"]) if ok else 0)
            for key in ("turns", "chunks", "entities", "links", "unchanged", "bank_units"):
                out[key].append(int(report[key]) if ok else 0)
            out["input_units"].append(str(report["input_units"]) if ok else "")
            # what a bank consolidated before was left for `memlane consolidate`
            for key in ("tree_sessions", "facts"):
                out[f"stale_{key}"].append(int(report["stale"][key]) if ok else 0)
            out["seconds"].append(time.perf_counter() - t0)
            # seconds per retain stage (memlane/timings.py), JSON: benchmarks/retain_profile.py
            out["timings"].append(json.dumps(report["timings_s"]) if ok else "{}")
            out["worker_pid"].append(os.getpid())
            out["node_id"].append(self.node_id)
            if self.metrics is not None:
                self.metrics.banks.inc(1, tags={"status": "ok" if ok else "failed"})
                if ok:
                    self.metrics.turns.inc(report["turns"])
                    if report["units"]:  # a Ray counter takes no 0: a bank retained unchanged
                        self.metrics.memories.inc(report["units"])
                    for stage, seconds in report["timings_s"].items():
                        self.metrics.stage.observe(float(seconds), tags={"stage": stage})
                    self.metrics.bank_seconds.observe(time.perf_counter() - t0)
        return out

    def __del__(self) -> None:
        try:
            self.memory.close()
        except Exception:  # noqa: BLE001
            pass
