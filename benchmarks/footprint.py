"""The memory footprint of a running service: PSS (proportional set size: a shared page counts
1/n in each of the n processes that map it, so the sum is what the service really holds) and
RSS, summed over a process and all its descendants, sampled twice a second; the peak of the
sum, and what each process held at that moment. With ``every_s``, also the PSS of each Serve
replica (``ray::ServeReplica:...`` processes) every ``every_s`` seconds: a budget holding shows
as a plateau."""

from __future__ import annotations

import os
import threading
import time
from typing import Any


class Footprint:
    """Samples PSS and RSS of a process tree twice a second; keeps the peak of the sum."""

    def __init__(self, root_pid: int, every_s: float = 0.0) -> None:
        self.root = root_pid
        self.peak_pss = 0
        self.peak_rss = 0
        self.at_peak: list[tuple[str, int, int]] = []
        self.every_s = every_s
        #: (seconds since start, {replica process (name and pid): PSS MB}) every ``every_s``
        self.series: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Footprint:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, []))
        return out

    def cpu_s(self) -> dict[str, float]:
        """CPU seconds (user + system) each process of the tree has used so far, by its command
        line (80 characters): a phase's difference is its CPU cost, which other load on the
        machine moves far less than its wall time."""
        tick = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for pid in self._tree():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                name = _cmdline(pid)
            except (OSError, ValueError, IndexError):
                continue  # exited meanwhile
            # utime, stime (stat fields 14 and 15)
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
        return out

    @staticmethod
    def _sample(pid: int) -> tuple[str, int, int] | None:
        try:
            fields = {}
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    parts = line.split()
                    if parts and parts[0] in ("Pss:", "Rss:"):
                        fields[parts[0]] = int(parts[1]) * 1024
            name = _cmdline(pid)
        except OSError:
            return None
        return name, fields.get("Pss:", 0), fields.get("Rss:", 0)

    def _run(self) -> None:
        t0 = next_at = time.monotonic()
        while not self._stop.is_set():
            sampled = {pid: r for pid in self._tree() if (r := self._sample(pid)) is not None}
            rows = list(sampled.values())
            if self.every_s and time.monotonic() >= next_at:
                next_at += self.every_s
                replicas = {  # Ray retitles a replica with the call it runs: keep the deployment
                    f"{r[0].split()[0].removeprefix('ray::ServeReplica:').split('.')[0]} {pid}": round(
                        r[1] / 2**20
                    )
                    for pid, r in sampled.items()
                    if r[0].startswith("ray::ServeReplica:")
                }
                self.series.append((round(time.monotonic() - t0, 1), replicas))
            pss, rss = sum(r[1] for r in rows), sum(r[2] for r in rows)
            if pss > self.peak_pss:
                self.peak_pss, self.at_peak = pss, sorted(rows, key=lambda r: -r[1])
            self.peak_rss = max(self.peak_rss, rss)
            self._stop.wait(0.5)

    def report(self) -> dict[str, Any]:
        return {
            **({"replica_pss_mb_over_time": self.series} if self.every_s else {}),
            "peak_pss_mb": round(self.peak_pss / 2**20),
            "peak_rss_mb": round(self.peak_rss / 2**20),
            "processes_at_peak": [
                {"process": name, "pss_mb": round(p / 2**20), "rss_mb": round(r / 2**20)}
                for name, p, r in self.at_peak
                if p >= 2**20
            ],
        }


def _cmdline(pid: int) -> str:
    """A process's command line, its first 80 characters (how reports name it)."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:80]
