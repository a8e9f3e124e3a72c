"""Wall time of the CLI commands a new user runs first, on two checkouts in the same run.

    memlane bench cli-timings --before-rev COMMIT [--runs 3] [--only recall] [--service] [--json]
    python benchmarks/cli_timings.py --before /tmp/main-38a1f69 [--runs 3] [--service] [--json]

``--before`` is a checkout of the code to compare with (``git worktree add DIR COMMIT`` or
``git archive COMMIT | tar -x -C DIR``), ``--before-rev`` a commit of this repository (archived
into the work directory for the run); with neither, one column: this checkout's.
``--after`` defaults to this checkout. Both run on this
Python (its installed packages), each command as ``python -c 'from cluster.cli import main'``
from the checkout's root, before and after alternated ``--runs`` times on fresh copies of one
prepared data directory. Per row: the median wall time (min-max), the median CPU time (user and
system: a busy machine moves it less than the wall time), the exit code and the lines on stderr
of the last run, the peak RSS (``/usr/bin/time`` where present) and whether a bank was left
behind. The load average is printed at the start and the end: the figures are
only comparable within one run.

Rows: recall on a small bank (4 memories) and on the sample history's bank ``priya``
(samples/conversations.jsonl, 81 turns); three bad arguments (``--max-tokens -5``, a blank
query, an unknown bank); consolidate of that bank; retain and backfill of a file with one 5 MB
turn; with ``--service``, recall without ``--url`` while ``memlane serve`` (the after checkout's,
auth off) runs on the data directory.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "import sys; from cluster.cli import main; sys.argv[0] = 'memlane'; main()"
TURNS = [
    ("Ana", "I adopted a beagle called Pixel last week.", "2025-03-10T09:00:00Z", "s1"),
    ("Ben", "Lovely! Is Pixel settling in?", "2025-03-10T09:01:00Z", "s1"),
    ("Ana", "Yes, and I started a pottery class in Porto.", "2025-04-02T18:00:00Z", "s2"),
    ("Ben", "Porto is lovely in spring.", "2025-04-02T18:01:00Z", "s2"),
]
BIG_TURN = 5_000_000  # bytes of one turn's text
SAMPLES = ROOT / "samples" / "conversations.jsonl"
SAMPLE_BANK = "priya"  # its turns: a history a new user recalls from first (README)


@dataclass
class Run:
    wall_s: float
    code: int
    stderr_lines: int
    rss_mb: float | None
    cpu_s: float | None = None  # user + system CPU: less moved by a busy machine than wall time
    banks_after: int | None = None


@dataclass
class Row:
    name: str
    args: list[str]
    fresh: bool = False  # each run on a fresh copy of the prepared data directory
    empty: bool = False  # each run on an empty data directory (then: banks left behind)
    runs: dict[str, list[Run]] = field(default_factory=lambda: {"before": [], "after": []})


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env.update(extra or {})
    return env


def cli(tree: Path, args: list[str], env: dict[str, str] | None = None, timeout: float = 900) -> Run:
    """Run the CLI of ``tree`` once: wall time, exit code, stderr lines, peak RSS."""
    cmd = [sys.executable, "-c", ENTRY, *args]
    timer = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    if timer:
        cmd = [timer, "-f", "__peak_rss_kb=%M cpu=%U+%S", *cmd]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env or _env(), timeout=timeout)
    wall = time.perf_counter() - t0
    lines = p.stderr.splitlines()
    rss = cpu = None
    if lines and lines[-1].startswith("__peak_rss_kb="):
        kb, used = lines.pop().split("=", 1)[1].split(" cpu=")
        rss = round(int(kb) / 1024, 1)
        cpu = round(sum(float(x) for x in used.split("+")), 2)
    shown = [line for line in lines if line.strip() and not line.startswith("Command exited")]
    return Run(round(wall, 3), p.returncode, len(shown), rss, cpu)


def prepare(work: Path, after: Path) -> dict[str, Path]:
    """The prepared data directory (a bank "ana" of 4 memories, written by the after checkout's
    engine through its CLI), the chat file and the two 5 MB-turn files."""
    chat = work / "chat.jsonl"
    chat.write_text(
        "".join(
            json.dumps({"speaker": s, "text": t, "timestamp": ts, "session_id": sid}) + "\n"
            for s, t, ts, sid in TURNS
        )
    )
    big = work / "big.jsonl"
    big.write_text(
        json.dumps({"speaker": "Ana", "text": "x" * BIG_TURN, "timestamp": TURNS[0][2], "session_id": "s1"})
        + "\n"
    )
    big_corpus = work / "big-corpus.jsonl"
    big_corpus.write_text(
        json.dumps(
            {
                "bank_id": "big",
                "speaker": "Ana",
                "text": "x" * BIG_TURN,
                "timestamp": TURNS[0][2],
                "session_id": "s1",
            }
        )
        + "\n"
    )
    sample = work / f"{SAMPLE_BANK}.jsonl"
    sample.write_text(
        "".join(
            line for line in SAMPLES.read_text().splitlines(keepends=True) if _bank_of(line) == SAMPLE_BANK
        )
    )
    data = work / "prepared"
    for file, bank in ((chat, "ana"), (sample, SAMPLE_BANK)):
        done = cli(after, ["retain", str(file), "--bank", bank, "--data-dir", str(data)])
        if done.code != 0:
            raise SystemExit(f"could not prepare the data directory (memlane retain --bank {bank} failed)")
    return {"data": data, "chat": chat, "big": big, "big_corpus": big_corpus}


def _bank_of(line: str) -> str | None:
    return json.loads(line).get("bank_id") if line.strip() else None


def archive(rev: str, into: Path) -> Path:
    """A checkout of commit ``rev`` of this repository in ``into`` (``git archive``: no worktree
    is registered in the repository)."""
    into.mkdir(parents=True)
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, timeout=300)
    if tar.returncode != 0:
        raise SystemExit(f"git archive {rev} failed: {tar.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar.stdout, check=True, timeout=300)
    return into


def bank_count(data: Path) -> int:
    p = subprocess.run(
        [sys.executable, "-c", ENTRY, "banks", "--json", "--data-dir", str(data)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    try:
        return len(json.loads(p.stdout))
    except ValueError:
        return -1


def rows(files: dict[str, Path]) -> list[Row]:
    return [
        Row("recall, small bank", ["recall", "What is the name of the beagle?", "--bank", "ana"]),
        Row(
            f"recall, sample bank {SAMPLE_BANK}",
            ["recall", "What is the name of Priya's dog?", "--bank", SAMPLE_BANK],
        ),
        Row("bad argument: --max-tokens -5", ["recall", "dog", "--bank", "ana", "--max-tokens", "-5"]),
        Row("bad argument: blank query", ["recall", "   ", "--bank", "ana"]),
        Row("bad argument: unknown bank", ["recall", "dog", "--bank", "ghost"]),
        Row("consolidate --bank (4 memories)", ["consolidate", "--bank", "ana"], fresh=True),
        Row("retain, one 5 MB turn", ["retain", str(files["big"]), "--bank", "big"], empty=True),
        Row("backfill, one 5 MB turn", ["backfill", str(files["big_corpus"])], empty=True),
    ]


def measure(row: Row, trees: dict[str, Path], files: dict[str, Path], runs: int, work: Path) -> None:
    for i in range(runs):
        for side, tree in trees.items():  # alternated: before, after, before, ...
            data = files["data"]
            if row.fresh or row.empty:
                data = work / f"run-{side}-{i}-{abs(hash(row.name))}"
                if row.fresh:
                    shutil.copytree(files["data"], data)
            run = cli(tree, [*row.args, "--data-dir", str(data)])
            if row.empty:
                run.banks_after = bank_count(data)
                shutil.rmtree(data, ignore_errors=True)
            elif row.fresh:
                shutil.rmtree(data, ignore_errors=True)
            row.runs[side].append(run)


def with_service(trees: dict[str, Path], files: dict[str, Path], runs: int, work: Path) -> Row:
    """Recall without --url while the after checkout's `memlane serve` runs on the data
    directory (auth off)."""
    data = work / "served"
    shutil.copytree(files["data"], data)
    env = _env({"MEMLANE_SERVE__AUTH": "off"})
    port = _free_port()
    started = subprocess.run(
        [sys.executable, "-c", ENTRY, "serve", "--port", str(port), "--data-dir", str(data), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    row = Row("recall while memlane serve runs (no --url)", ["recall", "What is the name of the beagle?"])
    if started.returncode != 0:
        raise SystemExit(f"memlane serve did not start: {started.stderr[-500:]}")
    try:
        for _ in range(runs):
            for side, tree in trees.items():
                args = [*row.args, "--bank", "ana", "--data-dir", str(data)]
                row.runs[side].append(cli(tree, args, env=_env()))
    finally:
        subprocess.run(
            [sys.executable, "-c", ENTRY, "serve", "--stop", "--data-dir", str(data)],
            cwd=ROOT,
            capture_output=True,
            env=env,
            timeout=300,
        )
    return row


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cell(runs: list[Run]) -> str:
    walls = [r.wall_s for r in runs]
    last = runs[-1]
    out = f"{statistics.median(walls):.2f} s ({min(walls):.2f}-{max(walls):.2f})"
    cpus = [r.cpu_s for r in runs if r.cpu_s is not None]
    if cpus:
        out += f", CPU {statistics.median(cpus):.2f} s"
    out += f", exit {last.code}"
    out += f", {last.stderr_lines} stderr line{'s' if last.stderr_lines != 1 else ''}"
    if last.rss_mb is not None:
        out += f", {max(r.rss_mb or 0 for r in runs):.0f} MB peak"
    if last.banks_after is not None:
        out += f", {last.banks_after} bank{'s' if last.banks_after != 1 else ''} left"
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, help="checkout of the code to compare with")
    ap.add_argument("--before-rev", help="commit of this repository to compare with (git archive)")
    ap.add_argument("--after", type=Path, default=ROOT, help="checkout measured (default: this one)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--service", action="store_true", help="also recall while memlane serve runs")
    ap.add_argument("--only", action="append", default=[], help="rows whose name contains this")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.before and args.before_rev:
        ap.error("--before and --before-rev exclude each other")
    trees = {"before": args.before.resolve()} if args.before else {}
    trees["after"] = args.after.resolve()
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cli-timings-") as tmp:
        work = Path(tmp)
        if args.before_rev:
            trees = {"before": archive(args.before_rev, work / "before"), "after": trees["after"]}
        files = prepare(work, trees["after"])
        table = [r for r in rows(files) if not args.only or any(o in r.name for o in args.only)]
        for row in table:
            measure(row, trees, files, args.runs, work)
            print(f"measured: {row.name}", file=sys.stderr, flush=True)
        if args.service:
            table.append(with_service(trees, files, args.runs, work))
    load1 = os.getloadavg()
    report: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "load_start": [round(x, 2) for x in load0],
        "load_end": [round(x, 2) for x in load1],
        "minutes": round((time.perf_counter() - t0) / 60, 1),
        "runs": args.runs,
        "before": args.before_rev or (str(trees["before"]) if "before" in trees else None),
        "after": str(trees["after"]),
        "rows": [
            {"row": r.name, "args": r.args, **{side: [vars(x) for x in r.runs[side]] for side in trees}}
            for r in table
        ],
    }
    if args.json:
        print(json.dumps(report))
        return
    print(
        f"{report['cpus']} CPUs; load average {load0[0]:.2f} at the start, {load1[0]:.2f} at the end; "
        f"{args.runs} runs each{', alternated' if len(trees) > 1 else ''}; {report['minutes']} min"
    )
    if "before" in trees:
        print(f"before: {report['before']}")
    print(f"after:  {trees['after']}\n")
    sides = list(trees)
    print(f"| command | {' | '.join(sides)} |\n| --- |{' --- |' * len(sides)}")
    for r in table:
        print(f"| {r.name} | {' | '.join(_cell(r.runs[side]) for side in sides)} |")


if __name__ == "__main__":
    main()
