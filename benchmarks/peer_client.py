"""The Hindsight peer's workload through hindsight-client 1.1.0, the peer's own client: the same
client code against a Hindsight server and against Memlane's Hindsight-compatible surface
(``/hindsight``), so the side-by-side figures come from one client. ``benchmarks/peer_bench.py
--client hindsight`` runs it.

The workload is ``../shared/peers/hindsight/peer_load.py``'s: one bank; the first N LoCoMo
conversations, one synchronous retain per session with the session as one item (its turns as
``Speaker: text`` lines, the session's date, ``document_id`` ``<sample>_<session>``, a
context); a bounded wait until the server reports nothing pending (its stats); then the
questions round-robin, recalled with budget mid and max_tokens 4096 one at a time, then
``concurrency`` at a time, after 5 warm-up recalls. Each call is the client's (``aretain``,
``arecall``), in one event loop; a call that raises counts as an error.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from datetime import datetime
from typing import Any


def _pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


def peer_items(conversation: dict) -> list[dict[str, Any]]:
    """One retain item per session, as the peer's script builds them."""
    conv, sid = conversation["conversation"], conversation["sample_id"]
    keys = sorted(
        (k for k in conv if k.startswith("session_") and isinstance(conv[k], list) and conv[k]),
        key=lambda k: int(k.split("_")[1]),
    )
    items = []
    for k in keys:
        at = datetime.strptime(conv[f"{k}_date_time"].strip(), "%I:%M %p on %d %B, %Y")
        items.append(
            {
                "content": "\n".join(f"{t['speaker']}: {t['text']}" for t in conv[k]),
                "timestamp": at.isoformat(),
                "document_id": f"{sid}_{k}",
                "context": f"conversation {sid} {k}",
                "turns": len(conv[k]),
            }
        )
    return items


def _summary(latencies: list[float], errors: int, wall: float) -> dict[str, Any]:
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": round(len(latencies) / wall, 1),
        "p50_ms": round(_pct(latencies, 0.50) * 1000, 1),
        "p95_ms": round(_pct(latencies, 0.95) * 1000, 1),
        "mean_ms": round(statistics.mean(latencies) * 1000, 1) if latencies else 0.0,
    }


def _say(message: str) -> None:
    print(f"peer bench (hindsight-client): {message}", file=sys.stderr, flush=True)


async def workload(
    base: str,
    conversations: list[dict],
    questions: list[str],
    concurrency: int,
    *,
    api_key: str | None = None,
    bank: str | None = None,
    drain_timeout_s: float = 900.0,
) -> dict[str, Any]:
    """Run the workload against ``base`` (the client's base_url); the figures."""
    from hindsight_client import Hindsight

    bank = bank or f"peer-bench-{int(time.time())}"
    out: dict[str, Any] = {"client": "hindsight-client", "base": base, "bank": bank}
    client = Hindsight(base_url=base, api_key=api_key, timeout=600)
    try:
        await client.acreate_bank(bank)
        items = [it for c in conversations for it in peer_items(c)]
        turns = sum(it["turns"] for it in items)
        errors, per = 0, []
        t0 = time.perf_counter()
        for it in items:
            s = time.perf_counter()
            try:
                fields = {k: it[k] for k in ("timestamp", "document_id", "context")}
                await client.aretain(bank, it["content"], **fields)
            except Exception as exc:  # noqa: BLE001 - counted, as the peer's script counts them
                errors += 1
                _say(f"retain error: {type(exc).__name__}: {str(exc)[:200]}")
            per.append(time.perf_counter() - s)
        wall = time.perf_counter() - t0
        out["retain"] = {
            "sessions": len(items),
            "turns": turns,
            "wall_s": round(wall, 1),
            "turns_per_s": round(turns / wall, 1),
            "req_p50_s": round(_pct(per, 0.5), 3),
            "req_p95_s": round(_pct(per, 0.95), 3),
            "errors": errors,
        }
        _say(f"retain: {out['retain']}")
        out["drain_s"] = await _drain(client, bank, drain_timeout_s)

        async def call(q: str) -> tuple[float, bool, int]:
            s = time.perf_counter()
            try:
                r = await client.arecall(bank, q, budget="mid", max_tokens=4096)
                ok, n = True, len(r.results)
            except Exception:  # noqa: BLE001 - an error is a failed request
                ok, n = False, 0
            return time.perf_counter() - s, ok, n

        for q in questions[:5]:
            await call(q)
        lat, errs, found = [], 0, []
        t0 = time.perf_counter()
        for q in questions:
            dt, ok, n = await call(q)
            lat.append(dt)
            errs += not ok
            found.append(n)
        out["recall_seq"] = _summary(lat, errs, time.perf_counter() - t0)
        out["recall_seq"]["mean_results"] = round(statistics.mean(found), 1) if found else 0.0
        _say(f"recall one at a time: {out['recall_seq']}")

        sem = asyncio.Semaphore(concurrency)

        async def guarded(q: str) -> tuple[float, bool, int]:
            async with sem:
                return await call(q)

        t0 = time.perf_counter()
        res = await asyncio.gather(*(guarded(q) for q in questions))
        wall = time.perf_counter() - t0
        out[f"recall_c{concurrency}"] = _summary(
            [r[0] for r in res if r[1]], sum(not r[1] for r in res), wall
        )
        _say(f"recall {concurrency} at a time: {out[f'recall_c{concurrency}']}")
    finally:
        await client.aclose()
    return out


async def _drain(client: Any, bank: str, timeout_s: float) -> float:
    """Wait (bounded) until the server's stats report no pending operation or consolidation,
    as the peer's script does; the seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        stats = await client.banks.get_agent_stats(bank)
        if not stats.pending_operations and not stats.pending_consolidation:
            break
        await asyncio.sleep(2)
    return round(time.perf_counter() - t0, 1)
