"""Where retain's time goes, beside the raw embedding rate of the same texts in the same run.

``python benchmarks/retain_profile.py [--modes service,inprocess,backfill] [--out F]``

Modes (each bounded, loopback only, on a fresh scratch data directory):

* ``service``: ``memlane serve`` over Milvus Lite, the Hindsight peer's retain workload
  (``benchmarks/peer_bench.py``: the first 2 LoCoMo conversations, one synchronous retain request
  per session). Per stage, the seconds the Memory replica reported (``timings_s`` of each
  retain answer, memlane/timings.py) summed over the requests, as a share of the client's wall
  time; "hops" is the client's wall time less the replica's (the proxy, the Ingress, Ray's
  handle call, validation and serialisation on the way), "unstaged" the replica's time no stage
  names (contention with background work included).
* ``inprocess``: ``Memory.retain`` on this process's Milvus Lite: LoCoMo (``--locomo-conversations``)
  and the LongMemEval dev turns (``--lme-questions`` banks, each question's haystack a bank).
* ``backfill``: the Ray Data backfill of the LoCoMo conversations on a local Ray (workers' stage
  seconds from their reports).

The raw baseline of every mode embeds the memory texts the retain wrote (read back from the
bank), in this process with the engine's embedder and settings: ``raw_best`` in one
length-sorted call over all of them (the model's best rate), ``raw_per_call`` one call per
retain call's texts (what a retain of that size could reach at best). Ratios are retain
turns/s over raw turns/s (turns over the seconds the embedding of their memories took).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED = ROOT.parent / "shared" / "data"
BANK = "profile"


def _say(message: str) -> None:
    print(f"retain profile: {message}", file=sys.stderr, flush=True)


# -- the raw baseline ---------------------------------------------------------------------------
def _texts_by_document(data_dir: Path, bank_ids: list[str]) -> dict[tuple[str, str], list[str]]:
    """The memory texts each (bank, document) holds, read back from the store."""
    from memlane.engine import Memory
    from memlane.settings import Settings

    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    with Memory(Settings(data_dir=data_dir)) as memory:
        for bank_id in bank_ids:
            offset = 0
            while True:
                page, total = memory.browse.list_memories(
                    bank_id, offset=offset, limit=1000, types=["world", "experience"]
                )
                for unit in page:
                    out[(bank_id, unit.document_id or "")].append(unit.text)
                offset += len(page)
                if not page or offset >= total:
                    break
    return out


def raw_rates(groups: list[list[str]]) -> dict[str, Any]:
    """Seconds to embed ``groups`` of texts: all in one call, and one call per group."""
    from memlane.models.embedder import build_embedder
    from memlane.settings import Settings

    embedder = build_embedder(Settings())
    texts = [t for g in groups for t in g]
    embedder.embed(texts[:64])  # warm-up: sessions and arenas
    t0 = time.perf_counter()
    embedder.embed(texts)
    best = time.perf_counter() - t0
    t0 = time.perf_counter()
    for g in groups:
        embedder.embed(g)
    per_call = time.perf_counter() - t0
    return {
        "texts": len(texts),
        "embedder": embedder.name,
        "raw_best_s": round(best, 2),
        "raw_per_call_s": round(per_call, 2),
        "texts_per_s_best": round(len(texts) / best, 1),
    }


def _ratios(turns: int, wall: float, raw: dict[str, Any]) -> dict[str, Any]:
    rate = turns / wall
    return {
        "turns": turns,
        "wall_s": round(wall, 2),
        "turns_per_s": round(rate, 1),
        "raw_best_turns_per_s": round(turns / raw["raw_best_s"], 1),
        "raw_per_call_turns_per_s": round(turns / raw["raw_per_call_s"], 1),
        "ratio_to_raw_best": round(rate / (turns / raw["raw_best_s"]), 2),
        "ratio_to_raw_per_call": round(rate / (turns / raw["raw_per_call_s"]), 2),
    }


def _shares(stages: dict[str, float], wall: float) -> dict[str, dict[str, float]]:
    return {
        k: {"s": round(v, 2), "share": round(v / wall, 3)}
        for k, v in sorted(stages.items(), key=lambda kv: -kv[1])
    }


def _sum_stages(reports: list[dict[str, Any]]) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for r in reports:
        for k, v in r.get("timings_s", {}).items():
            total[k] += v
    return dict(total)


def _serial(stages: dict[str, float]) -> float:
    """The stages that run one after another on the calling thread (the extraction thread's
    own time overlaps them; what it did not hide is ``extract_wait``)."""
    return sum(v for k, v in stages.items() if k != "extract (overlapped)")


# -- service ------------------------------------------------------------------------------------
def _cpu_seconds(root_pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) so far of every process under ``root_pid``, by pid."""
    from benchmarks.footprint import Footprint

    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    for pid in Footprint(root_pid)._tree():
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                name = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        out[pid] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


def _cpu_by_process(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds each process of the service spent between two samples, by a short name."""
    spent: dict[str, float] = defaultdict(float)
    for pid, (name, cpu) in after.items():
        used = cpu - before.get(pid, (name, 0.0))[1]
        if used < 0.05:
            continue
        short = name.split()[0].rsplit("/", 1)[-1]
        for tag in ("ray::", "milvus", "gcs_server", "raylet", "serve"):
            if tag in name:
                short = next((w for w in name.split() if tag in w), short)
                break
        spent[short[:60]] += used
    return {k: round(v, 1) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])}


async def _retain_sessions(url: str, bodies: list[dict]) -> tuple[list[float], list[dict], int]:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600.0, connect=10.0)) as http:
        (await http.put(f"/v1/banks/{BANK}", json={})).raise_for_status()
        walls, reports, errors = [], [], 0
        for body in bodies:
            t0 = time.perf_counter()
            r = await http.post(f"/v1/banks/{BANK}/memories", json=body)
            walls.append(time.perf_counter() - t0)
            if r.status_code == 200:
                reports.append(r.json())
            else:
                errors += 1
    return walls, reports, errors


def profile_service(locomo: Path, scratch: Path, conversations: int) -> dict[str, Any]:
    from benchmarks.peer_bench import sessions
    from cluster.local import free_port
    from cluster.service import DEFAULT_CONFIG, start_background, stop

    convs = json.loads(locomo.read_text())[:conversations]
    bodies = [b for c in convs for b in sessions(c)]
    data_dir = scratch / "service"
    data_dir.mkdir(parents=True)
    os.environ.setdefault("MEMLANE_SERVE__AUTH", "off")
    _say(f"service: starting over {data_dir}")
    state = start_background(data_dir, free_port(), DEFAULT_CONFIG, timeout_s=600)
    try:
        _say(f"service: {len(bodies)} retain requests")
        cpu0 = _cpu_seconds(int(state["pid"]))
        t0 = time.perf_counter()
        walls, reports, errors = asyncio.run(_retain_sessions(state["url"], bodies))
        wall = time.perf_counter() - t0
        cpu = _cpu_by_process(cpu0, _cpu_seconds(int(state["pid"])))
    finally:
        stop(data_dir)
    turns = sum(r["turns"] for r in reports)
    stages = _sum_stages(reports)
    replica = sum(r["seconds"] for r in reports)
    stages["hops"] = sum(walls) - replica
    stages["unstaged"] = replica - _serial(_sum_stages(reports))
    texts = _texts_by_document(data_dir, [BANK])
    raw = raw_rates(list(texts.values()))
    return {
        "requests": len(bodies),
        "errors": errors,
        **_ratios(turns, wall, raw),
        "raw": raw,
        "stages": _shares(stages, wall),
        # where the 2 cores went meanwhile (background jobs of the replica included)
        "cpu_s_by_process": cpu,
    }


# -- in process ---------------------------------------------------------------------------------
def _inprocess(name: str, banks: list[tuple[str, list]], data_dir: Path) -> dict[str, Any]:
    from memlane.engine import Memory
    from memlane.settings import Settings

    memory = Memory(Settings(data_dir=data_dir))
    _ = memory.embedder, memory.extractor, memory.store  # model loading excluded
    memory.embedder.embed(["warm up"])
    reports = []
    t0 = time.perf_counter()
    for bank_id, documents in banks:
        reports.append(memory.retain(bank_id, documents).as_dict())
    wall = time.perf_counter() - t0
    memory.close()
    stages = _sum_stages(reports)
    stages["unstaged"] = sum(r["seconds"] for r in reports) - _serial(stages)
    texts = _texts_by_document(data_dir, [b for b, _ in banks])
    # one call per bank's texts: Memory.retain embeds a bank in batches of BATCH_TURNS turns
    per_bank: dict[str, list[str]] = defaultdict(list)
    for (bank_id, _), ts in texts.items():
        per_bank[bank_id].extend(ts)
    raw = raw_rates(list(per_bank.values()))
    out = {"corpus": name, "banks": len(banks), **_ratios(sum(r["turns"] for r in reports), wall, raw)}
    return {**out, "raw": raw, "stages": _shares(stages, wall)}


def _documents(turns: list) -> list[tuple[str, list]]:
    docs: dict[str, list] = defaultdict(list)
    for t in turns:
        docs[t.document_id].append(t)
    return list(docs.items())


def profile_inprocess(
    locomo: Path, lme: Path, scratch: Path, conversations: int, questions: int
) -> list[dict]:
    from memlane.ingest import load_conversations
    from memlane.ingest.longmemeval import load_longmemeval

    out = []
    convs = load_conversations(locomo)[:conversations]
    _say(f"in process: LoCoMo, {len(convs)} conversations")
    out.append(
        _inprocess(
            "locomo",
            [(f"locomo-{i}", [(c.document_id, c.turns)]) for i, c in enumerate(convs)],
            scratch / "ip-locomo",
        )
    )
    if lme.is_file():
        qs = load_longmemeval(lme, limit=questions)
        _say(f"in process: LongMemEval dev, {len(qs)} banks")
        out.append(
            _inprocess(
                "longmemeval",
                [(f"lme-{i}", _documents(q.turns)) for i, q in enumerate(qs)],
                scratch / "ip-lme",
            )
        )
    return out


# -- backfill -----------------------------------------------------------------------------------
def profile_backfill(locomo: Path, scratch: Path, conversations: int) -> dict[str, Any]:
    from cluster.local import local_cluster
    from pipelines.backfill import BackfillConfig, run_backfill

    corpus = scratch / "backfill.json"
    corpus.write_text(json.dumps(json.loads(locomo.read_text())[:conversations]))
    data_dir = scratch / "backfill"
    rows: list[dict] = []
    _say(f"backfill: {conversations} LoCoMo conversations on a local Ray")
    with local_cluster(data_dir) as uri:
        t0 = time.perf_counter()
        cfg = BackfillConfig(path=corpus, data_dir=data_dir, milvus_uri=uri, progress=False, resume=False)
        summary = run_backfill(cfg, on_result=rows.append)
        wall = time.perf_counter() - t0
    reports = [{"timings_s": json.loads(r.get("timings") or "{}")} for r in rows]
    banks = sorted({r["bank_id"] for r in rows})
    texts = _texts_by_document(data_dir, banks)
    per_bank: dict[str, list[str]] = defaultdict(list)
    for (bank_id, _), ts in texts.items():
        per_bank[bank_id].extend(ts)
    raw = raw_rates(list(per_bank.values()))
    stages = _sum_stages(reports)
    return {
        "workers": summary.workers,
        **_ratios(summary.retained_turns, wall, raw),
        "raw": raw,
        "stages (summed over workers)": _shares(stages, wall),
    }


def _table(name: str, result: dict[str, Any]) -> str:
    head = (
        f"{name}: {result['turns']} turns in {result['wall_s']} s = {result['turns_per_s']} turns/s; "
        f"raw embedding of the same texts {result['raw_best_turns_per_s']} turns/s "
        f"(x{result['ratio_to_raw_best']}), per call {result['raw_per_call_turns_per_s']} "
        f"(x{result['ratio_to_raw_per_call']})"
    )
    stages = result.get("stages") or result.get("stages (summed over workers)") or {}
    rows = [f"  {k:<24} {v['s']:>8.2f} s  {100 * v['share']:5.1f}%" for k, v in stages.items()]
    return "\n".join([head, *rows])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--modes", default="service,inprocess,backfill")
    p.add_argument("--locomo", type=Path, default=SHARED / "locomo10.json")
    p.add_argument("--lme", type=Path, default=SHARED / "longmemeval_s_dev60.json")
    p.add_argument("--locomo-conversations", type=int, default=2, help="as the peer workload: 2")
    p.add_argument("--backfill-conversations", type=int, default=10, help="all of LoCoMo: 10")
    p.add_argument("--lme-questions", type=int, default=2, help="LongMemEval banks (~500 turns each)")
    p.add_argument("--out", type=Path, help="also write the report here (JSON)")
    a = p.parse_args()
    if not a.locomo.is_file():
        print(f"error: LoCoMo file not found: {a.locomo} (pass --locomo)", file=sys.stderr)
        raise SystemExit(2)
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    unknown = set(modes) - {"service", "inprocess", "backfill"}
    if unknown:
        print(f"error: unknown mode(s) {sorted(unknown)}: service, inprocess, backfill", file=sys.stderr)
        raise SystemExit(2)
    scratch = Path(tempfile.mkdtemp(prefix="memlane-retain-profile-"))
    report: dict[str, Any] = {}
    try:
        if "service" in modes:
            report["service"] = profile_service(a.locomo, scratch, a.locomo_conversations)
        if "inprocess" in modes:
            report["inprocess"] = profile_inprocess(
                a.locomo, a.lme, scratch, a.locomo_conversations, a.lme_questions
            )
        if "backfill" in modes:
            report["backfill"] = profile_backfill(a.locomo, scratch, a.backfill_conversations)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if a.out:
        a.out.write_text(json.dumps(report, indent=1))
    for name, result in report.items():
        for r in result if isinstance(result, list) else [result]:
            print(_table(f"{name} {r.get('corpus', '')}".strip(), r))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
