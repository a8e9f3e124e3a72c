"""The engine a service process works with, and the writes over it: Ray-free, so both
runtimes use them. Under Ray Serve (serve/deployments.py) each replica builds its engine here
and the Memory deployment runs :class:`MemoryWrites`; in the one-process runtime
(serve/process.py) the process builds one engine and runs :class:`MemoryWrites` and recall
over it.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from memlane import catalogue

if TYPE_CHECKING:
    from memlane.engine import Memory

log = logging.getLogger("memlane.serve")


def service_memory(embedder_handle=None, reranker_handle=None, *, ray_metrics: bool = False):
    """The engine a replica (or the one-process service) works with. Queries and retained text
    are embedded in the process (``embedder_handle`` None, the default
    ``MEMLANE_SERVE__EMBEDDER=local``) or by the Embedder deployment (``remote``: a GPU replica
    that batches for every other); with a cross-encoder configured, reranking is the Rerank
    deployment's. ``ray_metrics``: export the store's metrics through Ray (a Serve replica)."""
    from memlane.engine import Memory
    from memlane.models.embedder import build_embedder, embedder_identity
    from memlane.models.tokens import TokenCounter
    from memlane.runtime import configure_process
    from memlane.settings import Settings
    from memlane.settings.entry_points import with_entry_point
    from serve.remote import RemoteEmbedder, RemoteReranker

    if ray_metrics:
        from actors.store_metrics import install_store_metrics

        install_store_metrics()  # this replica's Milvus calls, as ray_memlane_store_*
    # The service's changes to the defaults (the tree kept current after writes, cold banks
    # answered from the store), unless the user set them: memlane/settings/entry_points.py.
    settings = with_entry_point("serve", Settings())
    if embedder_handle is None:
        embedder = build_embedder(settings)
    else:
        name, tokenizer_dir = embedder_identity(settings.models)
        embedder = RemoteEmbedder(
            embedder_handle, TokenCounter(tokenizer_dir), settings.models.embedding_dim, name
        )
    # Without a cross-encoder the reranker is the RRF-rank fallback, a few microseconds of
    # arithmetic: a round trip to another replica would cost more than it does.
    reranker = None
    if settings.models.reranker_model and reranker_handle is not None:
        reranker = RemoteReranker(reranker_handle, settings.models.reranker_model)
    configure_process(settings)
    return Memory(settings, embedder=embedder, reranker=reranker)


def keep_torch_out(memory: Memory) -> None:
    """Keep torch out of this replica's process when its engine needs none: with the ONNX
    or bge embedder and no torch cross-encoder nothing uses it, but spaCy's thinc imports it when it is
    installed (+180 MB RSS, +130 MB PSS per process, measured). A finder first on
    ``sys.meta_path`` makes ``import torch`` fail (ModuleNotFoundError), which thinc takes as
    "no torch". Not ``sys.modules["torch"] = None``: scipy's array-API helpers look torch up
    in ``sys.modules`` and read ``.Tensor`` from what they find, so importing lightgbm (the
    learned ranker, at a recall) raised AttributeError and every recall answered 500.

    It changes the whole process, so only a replica's entry point calls it: the constructor of
    the deployment that builds the engine (Serve runs it first in each replica's actor
    process), right after :func:`service_memory` and before the engine's first use loads spaCy
    (the engine builds its models lazily). A Ray ``worker_process_setup_hook`` would be the
    earlier place, but it runs in every worker of the application before it is known which
    replica the worker hosts: the Embedder, Rerank and LLM replicas that need torch included."""
    import sys

    from memlane.models.bge_embedder import BgeEmbedder
    from memlane.models.onnx_embedder import OnnxEmbedder
    from memlane.models.reranker import reranker_needs_torch

    if (
        isinstance(memory.embedder, (OnnxEmbedder, BgeEmbedder))
        and not reranker_needs_torch(memory.settings.models.reranker_model)
        and "torch" not in sys.modules
        and not any(isinstance(f, _NoTorch) for f in sys.meta_path)
    ):
        sys.meta_path.insert(0, _NoTorch())


class _NoTorch:
    """A meta path finder that refuses torch and its submodules (see :func:`keep_torch_out`)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r} (kept out of this replica)", name=name)
        return None


class MemoryWrites:
    """The operations of the catalogue that write or list (recall and reflect run on the
    Ingress), retain and consolidation in the background, export and import, over an engine.
    A plain class, no Serve in it: :class:`MemoryDeployment` is the deployment that builds
    the engine and runs it in a replica, and a test or another host can run it in process."""

    def __init__(self, memory: Memory, *, warm_embedder: bool = True) -> None:
        """``warm_embedder``: embed once now (False when a remote Embedder warms itself)."""
        from memlane.operations import OperationLog

        self.memory = memory
        # Serve routes to a replica once __init__ returns: build what retain uses (the
        # extractor's spaCy model, the embedder's first pass) now, or the first retain waits
        # for it (856 ms more than the next ones on the peer workload, Nov 2026).
        self.memory.retainer  # noqa: B018 - a lazily built part: this builds it
        if warm_embedder:
            self.memory.embedder.embed(["warm-up"])
        self.ops = OperationLog(self.memory.store, stale_after_s=self.memory.settings.serve.operation_stale_s)
        # One background retain at a time per replica: retain already keeps both cores busy
        # (extraction overlapped with embedding), a second one would only interleave.
        self._jobs = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlane-async-retain")
        self._pending: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)
        self._beat.start()

    def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any:
        """Run one operation of the catalogue (memlane/catalogue.py) on this replica's engine:
        its answer as the REST API's JSON, its rules (retain needs a bank) applied."""
        return catalogue.call(self.memory, name, bank_id, **params)

    # export and import (memlane/transfer.py): the whole bank in one answer or body, so bounded
    # by the replica's memory and, for import, by serve.max_body_bytes
    def export_bank(self, bank_id: str, vectors: bool) -> bytes:
        from memlane.transfer import export_lines

        return "".join(export_lines(self.memory, bank_id, vectors=vectors)).encode("utf-8")

    def import_bank(self, bank_id: str, body: bytes) -> dict[str, Any]:
        from memlane.transfer import import_bank

        return import_bank(self.memory, body.splitlines(), bank_id=bank_id)

    # retain in the background
    def retain_async(
        self, bank_id: str, body: dict[str, Any], operation_id: str | None = None
    ) -> dict[str, Any]:
        """Queue a retain; its operation. ``operation_id``: the caller's id for it (the
        Hindsight surface's): sent again, the operation it already names is answered and
        nothing is queued; Conflict when it names another bank's or kind's operation."""
        from memlane.errors import Conflict

        # Validate now, so bad input is a 4xx on the request, not a failed operation later.
        self.memory.banks.get(bank_id)
        self.memory.plan_items(
            bank_id, body["items"], document_id=body.get("document_id"), tags=body.get("tags") or ()
        )
        if operation_id is not None and (known := self.ops.get(operation_id)) is not None:
            if known["bank_id"] != bank_id or known["kind"] != "retain":
                raise Conflict(f"operation {operation_id!r} is another operation", "operation_id")
            return known
        op = self.ops.create(bank_id, "retain", total=len(body["items"]), op_id=operation_id)
        with self._lock:
            self._pending[op["operation_id"]] = op
        self._jobs.submit(self._run_op, op, lambda: self.call("retain", bank_id, body))
        return {k: v for k, v in op.items() if k != "heartbeat"}

    def _run_op(self, op: dict, work: Any) -> None:
        """Run one queued operation: ``work()`` returns its answer as JSON."""
        from memlane.operations import FAILED, RUNNING, SUCCEEDED

        try:
            self.ops.update(op, status=RUNNING)
            result = work()
            op["done"] = op["total"]
            self.ops.update(op, status=SUCCEEDED, result=result)
        except Exception as exc:  # noqa: BLE001 - reported on the operation
            log.exception("async %s %s failed", op.get("kind", "operation"), op["operation_id"])
            self.ops.update(op, status=FAILED, error=f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._pending.pop(op["operation_id"], None)

    def consolidate_async(self, bank_id: str, consolidator: str | None) -> dict[str, Any]:
        # Check now what can be checked (the bank, the consolidator's model), so bad input is
        # a 4xx on the request, not a failed operation later.
        self.memory.banks.get(bank_id)
        self.memory.consolidator(consolidator)
        op = self.ops.create(bank_id, "consolidate", total=1)
        with self._lock:
            self._pending[op["operation_id"]] = op
        work = lambda: self.call("consolidate", bank_id, {"consolidator": consolidator})  # noqa: E731
        self._jobs.submit(self._run_op, op, work)
        return {k: v for k, v in op.items() if k != "heartbeat"}

    def _heartbeat(self) -> None:
        # Queued and running operations are refreshed well inside the stale window, so only
        # a dead replica's operations go stale.
        period = max(1.0, self.memory.settings.serve.operation_stale_s / 4)
        while not self._stop.wait(period):
            with self._lock:
                pending = list(self._pending.values())
            for op in pending:
                try:
                    self.ops.update(op)
                except Exception:  # noqa: BLE001 - next beat retries
                    log.warning("heartbeat of %s failed", op["operation_id"], exc_info=True)

    def operation(self, bank_id: str, op_id: str) -> dict[str, Any]:
        from memlane.errors import NotFound

        self.memory.banks.get(bank_id)
        op = self.ops.get(op_id, bank_id)
        if op is None:
            raise NotFound(f"operation {op_id!r} is not in bank {bank_id!r}", "operation_id")
        return op

    def health(self) -> dict[str, Any]:
        self.memory.store.list_banks()  # raises when Milvus is unreachable
        return {"store": "ok"}

    def close(self) -> None:
        """Let a running background retain finish rather than leave a half-written document."""
        self._stop.set()
        self._jobs.shutdown(wait=True, cancel_futures=False)
