"""What one retain request of the Hindsight peer's workload costs the one-process service.

``python -m benchmarks.retain_cost [--rounds N] [--py-spy FILE] [--out F]``

The workload is peer_bench's retain phase (benchmarks/peer_bench.py: the first 2 LoCoMo
conversations, one synchronous retain request per session) against ``memlane serve --runtime
process`` on a fresh scratch data directory. Each round starts the service, runs the 38
requests and stops it. Reported per round: turns/s of the phase (its wall time), the CPU
seconds per request of the service's process and of its Milvus Lite server (from
``/proc/PID/stat`` before and after the phase: less sensitive to other load on the machine
than the wall time), the request p50, and the stages the engine timed (``timings_s`` of each
answer, memlane/timings.py) summed over the requests. ``--py-spy FILE``: a py-spy sampling
profile of the service process (every thread) during the phase of the first round, as raw
collapsed stacks.

Bounded and loopback only; the service is stopped at the end of each round.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BANK = "retain-cost"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"


def _say(message: str) -> None:
    print(f"retain cost: {message}", file=sys.stderr, flush=True)


def _cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _round(bodies: list[dict], scratch: Path, py_spy: Path | None) -> dict[str, Any]:
    import httpx

    from cluster.local import free_port
    from cluster.service import start_background, stop

    data_dir = scratch / "data"
    shutil.rmtree(data_dir, ignore_errors=True)
    os.environ.setdefault("MEMLANE_SERVE__AUTH", "off")
    state = start_background(data_dir, free_port(), timeout_s=600, runtime="process")
    spy = None
    try:
        pid = int(state["pid"])
        lite = [
            c for c in _children(pid) if "milvus" in Path(f"/proc/{c}/cmdline").read_text(errors="replace")
        ]
        with httpx.Client(base_url=state["url"], timeout=httpx.Timeout(600.0, connect=10.0)) as http:
            http.put(f"/v1/banks/{BANK}", json={}).raise_for_status()
            if py_spy is not None:
                spy = subprocess.Popen(
                    [
                        str(ROOT / ".venv/bin/py-spy"),
                        "record",
                        "--pid",
                        str(pid),
                        "--format",
                        "raw",
                        "--rate",
                        "100",
                        "--threads",
                        "--nonblocking",
                        "--output",
                        str(py_spy),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1.0)  # py-spy attaches
            cpu0 = (_cpu(pid), sum(_cpu(p) for p in lite))
            walls, reports, errors = [], [], 0
            t0 = time.perf_counter()
            for body in bodies:
                s = time.perf_counter()
                r = http.post(f"/v1/banks/{BANK}/memories", json=body)
                walls.append(time.perf_counter() - s)
                if r.status_code == 200:
                    reports.append(r.json())
                else:
                    errors += 1
            wall = time.perf_counter() - t0
            cpu1 = (_cpu(pid), sum(_cpu(p) for p in lite))
    finally:
        if spy is not None:
            spy.send_signal(2)
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
        stop(data_dir)
    turns = sum(len(b["items"]) for b in bodies)
    stages: dict[str, float] = defaultdict(float)
    for r in reports:
        for k, v in (r.get("timings_s") or {}).items():
            stages[k] += v
    n = len(bodies)
    return {
        "requests": n,
        "errors": errors,
        "turns": turns,
        "wall_s": round(wall, 2),
        "turns_per_s": round(turns / wall, 1),
        "req_p50_ms": round(statistics.median(walls) * 1000, 1),
        "service_cpu_ms_per_req": round((cpu1[0] - cpu0[0]) / n * 1000, 1),
        "lite_cpu_ms_per_req": round((cpu1[1] - cpu0[1]) / n * 1000, 1),
        "engine_s_per_req_ms": round(sum(r.get("seconds", 0.0) for r in reports) / n * 1000, 1),
        "stages_ms_per_req": {
            k: round(v / n * 1000, 1) for k, v in sorted(stages.items(), key=lambda kv: -kv[1])
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--locomo", type=Path, default=LOCOMO)
    p.add_argument("--conversations", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--py-spy", type=Path, default=None, help="raw py-spy profile of round 1's phase")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    from benchmarks.peer_bench import sessions

    convs = json.loads(a.locomo.read_text())[: a.conversations]
    bodies = [b for c in convs for b in sessions(c)]
    rounds = []
    with tempfile.TemporaryDirectory(prefix="memlane-retain-cost-") as tmp:
        for i in range(a.rounds):
            got = _round(bodies, Path(tmp), a.py_spy if i == 0 else None)
            _say(json.dumps(got))
            rounds.append(got)
    out = json.dumps({"rounds": rounds}, indent=1)
    if a.out:
        a.out.write_text(out)
    print(out)


if __name__ == "__main__":
    main()
