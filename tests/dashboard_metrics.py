"""What the Grafana dashboards query, and what a Ray metrics endpoint exports: the two sides
of the tests that keep infra/grafana/ honest (tests/infra/, tests/serving/, tests/pipelines/).

Metric names are read out of each target's PromQL by removing what cannot be a metric name
(string literals, label matchers, ranges, grouping clauses, function calls, keywords); every
name left must carry Ray's ``ray_`` prefix, so a construct this reader does not know shows up
as a failure, not as a silently skipped metric."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

GRAFANA = Path(__file__).resolve().parents[1] / "infra" / "grafana"

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_IDENT = re.compile(r"(?<![\w:$])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")
_KEYWORDS = {
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "inf",
    "nan",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    text = _STRINGS.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGES.sub("", text)
    text = _GROUPING.sub(" ", text)
    return {m for m in _IDENT.findall(text) if m.lower() not in _KEYWORDS}


def grouping_labels(expr: str) -> set[str]:
    """Labels named in ``by (...)`` clauses (``le`` excluded: it is the buckets' own)."""
    out: set[str] = set()
    for kind, labels in _GROUPING.findall(_STRINGS.sub('""', expr)):
        if kind == "by":
            out.update(x.strip() for x in labels.split(",") if x.strip())
    return out - {"le"}


# Ray's agent drops a gauge no process refreshed within two export intervals (2 x 10 s by
# default; actors/gauges.py). The live tests scrape this long after their workload, so a gauge
# that is only set once, and would vanish from Prometheus, fails them. Their Ray exports every
# 5 s (RAY_ENV, in every Ray process through the environment): a 10 s TTL, still 3 s more
# than the longest gap between two exports of a gauge actors/gauges.py re-sets every 2 s, and
# 12.5 s of waiting where the default interval took 25 s.
REPORT_INTERVAL_MS = 5000
RAY_ENV = {"RAY_metrics_report_interval_ms": str(REPORT_INTERVAL_MS)}
GAUGE_TTL_S = 2.5 * REPORT_INTERVAL_MS / 1000


@contextlib.contextmanager
def ray_env() -> Iterator[None]:
    """RAY_ENV in this process's environment while a Ray started inside runs (its processes
    inherit it); a test that waits for a metric to reach the node's endpoint waits one export
    interval, 5 s instead of 10."""
    with pytest.MonkeyPatch.context() as env:
        for key, value in RAY_ENV.items():
            env.setenv(key, value)
        yield


def dashboard_files() -> list[Path]:
    return sorted(GRAFANA.glob("*.json"))


def targets(path: Path) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel, rows' nested panels included."""
    dash = json.loads(path.read_text())
    out = []

    def walk(panels):
        for panel in panels:
            for target in panel.get("targets") or []:
                out.append((panel.get("title", ""), target["expr"]))
            walk(panel.get("panels") or [])

    walk(dash.get("panels") or [])
    return out


def queried(path: Path) -> dict[str, set[str]]:
    """Metric name -> labels grouped by in the targets that query it, for one dashboard."""
    out: dict[str, set[str]] = {}
    for _, expr in targets(path):
        labels = grouping_labels(expr)
        for name in metric_names(expr):
            out.setdefault(name, set()).update(labels)
    return out


def parse_exposition(text: str) -> dict[str, set[str]]:
    """Prometheus text format -> metric name -> label keys seen on its samples."""
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
        if m is None:
            continue
        keys = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
        out.setdefault(m.group(1), set()).update(keys)
    return out


def scrape(port: int, host: str = "127.0.0.1") -> dict[str, set[str]]:
    response = httpx.get(f"http://{host}:{port}/metrics", timeout=30)
    response.raise_for_status()
    return parse_exposition(response.text)


def missing(wanted: dict[str, set[str]], exported: dict[str, set[str]]) -> list[str]:
    """What ``wanted`` (name -> grouping labels) lacks in ``exported``: absent names, and
    labels a query groups by that no sample of the name carries."""
    problems = []
    for name, labels in sorted(wanted.items()):
        if name not in exported:
            problems.append(f"{name} (not exported)")
        elif labels - exported[name]:
            problems.append(f"{name} lacks labels {sorted(labels - exported[name])}")
    return problems


def wait_for(port: int, wanted: dict[str, set[str]], timeout_s: float = 150.0) -> list[str]:
    """Scrape until every wanted metric is exported with its labels or ``timeout_s`` passed
    (Ray exports each process's metrics every report interval, 10 s by default); what is
    still missing at the end ([] when nothing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        problems = missing(wanted, scrape(port))
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(3)
