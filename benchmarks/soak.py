"""A soak: a bounded mixed workload through a running service, for minutes.

:func:`run_soak` drives ``memlane serve`` over HTTP with ``concurrency`` workers. Each worker
loops until the deadline, choosing an operation by weight: retain (a document from a fixed
pool, so the banks' size stays bounded and a re-retain replaces), recall, delete-document,
reflect (only when the service has an LLM), and the listing reads. Every answer outside
the expected set is an error; the only expected 4xx is a 404 from deleting a document another
worker deleted first. It samples the resident memory of the service's processes after
``warmup_s`` and at the end, and reports the growth per process.

Used by tests/serving/test_soak.py (10 minutes in CI, the "slow" mark) with the fake LLM.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

WEIGHTS = {"retain": 25, "recall": 50, "delete_document": 8, "reflect": 7, "list": 10}
CITIES = ["Lisbon", "Kyoto", "Nairobi", "Quito", "Oslo", "Hanoi", "Accra", "Lima", "Perth", "Riga"]
PEOPLE = ["Ana", "Ben", "Carla", "Dev", "Eli", "Fatima"]


def rss_mb(pid: int) -> float | None:
    """Resident set size of ``pid`` in MB (VmRSS), None when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _name(pid: int) -> str:
    """The process's command line, 80 characters at most, each absolute path in it cut to its
    last part: "python3 milvus-lite server ..." whatever directory the checkout is in (a long
    one cut the server's name off the end)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return "?"
    args = [Path(a).name if a.startswith("/") else a for a in raw.split("\0") if a]
    return " ".join(" ".join(args).split())[:80]


def _items(rng: random.Random) -> list[dict[str, Any]]:
    who, city, other = rng.choice(PEOPLE), rng.choice(CITIES), rng.choice(PEOPLE)
    return [
        {"content": f"{who} flew to {city} with {other} for a conference.", "speaker": who},
        {"content": f"{other} said the food in {city} was the best part.", "speaker": other},
    ][: rng.randint(1, 2)]


def run_soak(
    url: str,
    api_key: str,
    *,
    seconds: float,
    concurrency: int = 4,
    banks: int = 4,
    documents: int = 12,
    reflect: bool = True,
    pids: list[int] | None = None,
    warmup_s: float = 30.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Run the workload; the figures as a dict (counts, errors with samples, latency
    percentiles per operation, RSS per process at warm-up and end)."""
    bank_ids = [f"soak-{i}" for i in range(banks)]
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        for b in bank_ids:
            r = http.put(f"/v1/banks/{b}", json={"name": ""})
            if r.status_code not in (200, 201):
                raise RuntimeError(f"cannot create bank {b}: {r.status_code} {r.text[:200]}")
    counts: Counter[str] = Counter()
    expected_404: Counter[str] = Counter()
    errors: list[str] = []
    latency: dict[str, list[float]] = {op: [] for op in WEIGHTS}
    lock = threading.Lock()
    ops = [op for op in WEIGHTS if reflect or op != "reflect"]
    weights = [WEIGHTS[op] for op in ops]
    deadline = time.monotonic() + seconds
    rss_start: dict[int, float] = {}

    def one(http: httpx.Client, rng: random.Random, op: str) -> None:
        bank = rng.choice(bank_ids)
        doc = f"doc-{rng.randrange(documents)}"
        t0 = time.perf_counter()
        if op == "retain":
            r = http.post(f"/v1/banks/{bank}/memories", json={"items": _items(rng), "document_id": doc})
            ok = r.status_code == 200
        elif op == "recall":
            q = f"Who went to {rng.choice(CITIES)}?"
            r = http.post(f"/v1/banks/{bank}/recall", json={"query": q, "max_tokens": 512})
            ok = r.status_code == 200 and "memories" in r.json()
        elif op == "delete_document":
            r = http.delete(f"/v1/banks/{bank}/documents/{doc}")
            ok = r.status_code == 200
            if r.status_code == 404:  # never retained, or deleted by another worker first
                with lock:
                    expected_404[op] += 1
                ok = True
        elif op == "reflect":
            r = http.post(f"/v1/banks/{bank}/reflect", json={"query": "What do you think of the trips?"})
            ok = r.status_code == 200 and "answer" in r.json()
        else:
            r = http.get(f"/v1/banks/{bank}/memories", params={"limit": 20})
            ok = r.status_code == 200
        ms = (time.perf_counter() - t0) * 1000
        with lock:
            counts[op] += 1
            latency[op].append(ms)
            if not ok:
                errors.append(f"{op} {bank}/{doc}: {r.status_code} {r.text[:200]}")

    def worker(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
            while time.monotonic() < deadline:
                op = rng.choices(ops, weights)[0]
                try:
                    one(http, rng, op)
                except httpx.HTTPError as exc:
                    with lock:
                        counts[op] += 1
                        errors.append(f"{op}: {type(exc).__name__}: {exc}")

    def sample_after_warmup() -> None:
        time.sleep(min(warmup_s, seconds / 2))
        for pid in pids or []:
            value = rss_mb(pid)
            if value is not None:
                rss_start[pid] = value

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(concurrency)]
    sampler = threading.Thread(target=sample_after_warmup, daemon=True)
    for t in [*threads, sampler]:
        t.start()
    for t in [*threads, sampler]:
        t.join(timeout=seconds + 300)
    wall = time.monotonic() - started

    processes = []
    for pid, before in sorted(rss_start.items()):
        after = rss_mb(pid)
        processes.append(
            {
                "pid": pid,
                "name": _name(pid),
                "rss_mb_after_warmup": round(before, 1),
                "rss_mb_end": None if after is None else round(after, 1),
                "growth_mb": None if after is None else round(after - before, 1),
            }
        )

    def pct(xs: list[float], q: float) -> float:
        return round(sorted(xs)[min(len(xs) - 1, int(q * len(xs)))], 1) if xs else 0.0

    return {
        "seconds": round(wall, 1),
        "concurrency": concurrency,
        "requests": sum(counts.values()),
        "by_operation": {
            op: {
                "count": counts[op],
                "p50_ms": pct(latency[op], 0.5),
                "p95_ms": pct(latency[op], 0.95),
                "expected_404": expected_404[op],
            }
            for op in ops
        },
        "errors": len(errors),
        "error_samples": errors[:20],
        "processes": processes,
    }


def format_soak(report: dict[str, Any]) -> str:
    """The figures as a few lines of text."""
    lines = [
        f"soak: {report['requests']} requests in {report['seconds']} s at concurrency "
        f"{report['concurrency']}, {report['errors']} errors"
    ]
    for op, f in report["by_operation"].items():
        lines.append(f"  {op:<16} {f['count']:>6}  p50 {f['p50_ms']:>7} ms  p95 {f['p95_ms']:>7} ms")
    grown = sorted(report["processes"], key=lambda p: -(p["growth_mb"] or 0))
    total_start = sum(p["rss_mb_after_warmup"] for p in grown)
    total_end = sum(p["rss_mb_end"] or 0 for p in grown)
    lines.append(
        f"  RSS of {len(grown)} processes: {total_start:.0f} MB after warm-up -> {total_end:.0f} MB at the end"
    )
    for p in grown[:8]:
        lines.append(
            f"    {p['growth_mb']:+7.1f} MB  {p['rss_mb_after_warmup']:7.1f} -> {p['rss_mb_end']} MB  {p['name']}"
        )
    return "\n".join(lines)
