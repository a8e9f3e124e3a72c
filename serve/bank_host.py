"""Recall and reflect where the HTTP app runs (the Ingress replica under Ray Serve, or the
one process of ``memlane serve --runtime process``), over the banks its engine holds warm.

Why in the Ingress: on the Hindsight peer's workload (benchmarks/peer_bench.py) a served
recall cost ~118 ms of CPU for ~22 ms of engine work when it crossed four processes (proxy,
ingress, recall replica, embedder replica), each hop a serialisation and a Ray RPC on 2 cores.
Here the proxy hands the request to the replica that answers it, which embeds the query itself.

Bank-affine routing: the proxy tags every ``/v1/banks/{bank_id}/...`` request with the bank id
as Serve's multiplexed model id (serve/routing.py), and a recall registers its bank with
Serve's model multiplexer (:meth:`BankHost._bank`), so the next request for the bank goes to
a replica that holds it warm. A replica holds banks under the engine's one budget for derived
state (``MEMLANE_RECALL__STATE_MAX_MB`` and ``STATE_MAX_BANKS``, the size of Serve's routing
table too; :class:`WarmBanks` counts them); losing a replica loses only that cache.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from memlane.derived import DerivedState
from memlane.views import recall_json, reflect_json

if TYPE_CHECKING:
    from memlane.engine import Memory

log = logging.getLogger("memlane.serve")


class WarmBanks:
    """What a replica holds warm, as its metrics and Serve's multiplexer see it.

    The holding itself is the engine's derived state under the process's one budget
    (``MEMLANE_RECALL__STATE_MAX_MB`` / ``STATE_MAX_BANKS``, memlane/derived.py), which evicts
    the least recently used banks as every process that holds banks does; this class counts
    recalls that found their bank warm or loaded it, and evictions (the budget's and Serve's
    unloads), and drops a bank's state when Serve's multiplexer unloads it."""

    def __init__(self, derived: DerivedState) -> None:
        """``derived``: the engine's derived state."""
        self.derived = derived
        self._lock = threading.Lock()
        self._budget_seen = derived.budget_evictions
        self.hits = self.loads = self.evictions = 0

    def held(self, bank_id: str) -> bool:
        return self.derived.held(bank_id)

    def used(self, bank_id: str, *, loaded: bool) -> int:
        """Record a recall of the bank (``loaded``: it was not held before). Returns how many
        banks the budget evicted since the last call (the recall's load may have pushed them
        out)."""
        with self._lock:
            if loaded:
                self.loads += 1
            else:
                self.hits += 1
            now = self.derived.budget_evictions
            evicted, self._budget_seen = now - self._budget_seen, now
            self.evictions += evicted
        return evicted

    def forget(self, bank_id: str) -> bool:
        """Drop the bank's state (Serve's multiplexer unloaded it)."""
        held = self.held(bank_id)
        self.derived.evict(bank_id)
        if held:
            with self._lock:
                self.evictions += 1
        return held

    def total_bytes(self) -> int:
        return self.derived.held_bytes()

    def __len__(self) -> int:
        return self.derived.held_banks()


class _Registered:
    """What Serve's multiplexer holds for a bank: unloading it (Serve's LRU by count) drops the
    replica's state for the bank. Serve calls ``__del__`` on unload and Python may call it again
    at collection; only the registration still current acts."""

    def __init__(self, host: BankHost, bank_id: str) -> None:
        self.host, self.bank_id = host, bank_id
        host._registered[bank_id] = self

    def __del__(self) -> None:
        if self.host._registered.get(self.bank_id) is self:
            del self.host._registered[self.bank_id]
            self.host.recall_metrics.evicted(int(self.host.warm.forget(self.bank_id)))


class BankHost:
    """Recall and reflect over the banks an engine holds warm (a mixin of
    :class:`serve.host.ServiceHost`, which calls :meth:`init_host`). Ray-free: the Ray runtime's
    Ingress (serve/app.py) adds bank-affine routing by overriding :meth:`_bank`."""

    def init_host(self, engine: Memory, recall_metrics: Callable[..., Any], replica: str) -> None:
        """``recall_metrics``: built with the engine's held-banks count and the warm banks
        (serve/metrics.py); ``replica``: the name the recall's ``X-Memlane-Replica`` gives."""
        self.engine = engine
        self.replica = replica
        self._registered: dict[str, _Registered] = {}
        derived = self.engine.derived
        self.warm = WarmBanks(derived)
        self.recall_metrics = recall_metrics(derived.held_banks, self.warm)
        self._warm_up()

    def _warm_up(self) -> None:
        # Serve routes to a replica once __init__ returns. A cold replica builds a bank's
        # index on its first request (3.4 s for 10k memories here), and requests routed to a
        # freshly autoscaled replica waited that long (p99 9.5 s at concurrency 8 in the load
        # benchmark), so the banks named in MEMLANE_SERVE__RECALL_WARM_BANKS, or all banks of
        # a small store, are loaded before it takes traffic.
        settings = self.engine.settings
        banks = list(settings.serve.recall_warm_banks)
        if not banks:
            every = self.engine.banks.list_all()
            if len(every) <= settings.serve.recall_warm_max_banks:
                banks = [b.bank_id for b in every]
        for bank_id in banks:
            try:
                self.engine.derived.ensure(bank_id)
                self.recall_metrics.evicted(self.warm.used(bank_id, loaded=True))
            except Exception:  # noqa: BLE001 - a bank deleted meanwhile; recall loads lazily
                log.warning("could not warm bank %s", bank_id, exc_info=True)

    async def _bank(self, bank_id: str) -> Any:
        """Where requests are routed by bank (the Ray runtime's Ingress registers the bank
        with Serve's multiplexer, serve/app.py); nothing to do in one process."""
        return None

    def _recall(self, bank_id: str, request: Any) -> tuple[bytes, str]:
        held = self.engine.derived.held(bank_id)
        t0 = time.perf_counter()
        result = self.engine.recall(bank_id, request)
        if not held:
            self.recall_metrics.loaded((time.perf_counter() - t0) * 1000)
        self.recall_metrics.evicted(self.warm.used(bank_id, loaded=not held))
        self.recall_metrics.record(result.timings_ms, hit=held)
        state = "warm" if held else "cold" if result.cold else "loaded"
        return recall_json(result).encode(), state

    async def recall_json(self, bank_id: str, request: Any) -> tuple[bytes, str]:
        """The recall's answer as JSON bytes (pydantic-core serialises it; re-encoding a
        100-memory dict in FastAPI cost more than the recall's search), and how this replica
        held the bank: ``warm``, ``cold`` (it did not: the store answered while the bank loads,
        ``MEMLANE_RECALL__COLD_BANK=store``, the service's default) or ``loaded`` (it loaded
        the bank first, ``wait``). ``request``: a validated :class:`memlane.records.RecallRequest`."""
        answer = await asyncio.to_thread(self._recall, bank_id, request)
        # Registered once answered: a request for a bank that does not exist (404) must not
        # push real banks out of Serve's routing table.
        if self.engine.settings.serve.bank_affinity:
            await self._bank(bank_id)
        return answer

    async def reflect_json(self, bank_id: str, options: dict[str, Any]) -> bytes:
        """CARA reflect (LLMNotConfigured, HTTP 503, until an LLM is configured)."""
        options = dict(options)

        def run() -> bytes:
            result = self.engine.reflect(bank_id, options.pop("query"), **options)
            return reflect_json(result).encode()

        answer = await asyncio.to_thread(run)
        if self.engine.settings.serve.bank_affinity:
            await self._bank(bank_id)
        return answer
