"""A live ``memlane serve`` for tests: the CLI run as a subprocess, and a service started on a
free loopback port for the length of a block (stopped, and its stop checked, afterwards)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def memlane(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Run the installed ``memlane`` entry point from the repository root."""
    exe = Path(sys.executable).with_name("memlane")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
    )


@contextmanager
def live_service(
    root: Path,
    *,
    keys: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    replicas: dict[str, int] | None = None,
    ray_dashboard: bool = False,
    runtime: str | None = None,
) -> Iterator[dict[str, Any]]:
    """``memlane serve`` over ``root/data``; yields its state (``url``, ``pid``, ...).

    ``keys``: the API keys (auth on); None turns auth off. ``env``: extra variables, over the
    test's environment without its MEMLANE_LLM* (no test reaches a real LLM by accident).
    ``replicas``: a fixed replica count per deployment name (a config written under root).
    ``ray_dashboard``: start the Ray dashboard too (``memlane serve --ray-dashboard``).
    ``runtime``: ``memlane serve --runtime`` ("process" or "ray"; default: the CLI's, which is
    Ray with ``replicas`` or ``ray_dashboard``, else one process)."""
    from cluster.local import free_port

    data = root / "data"
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_LLM")}
    if keys is None:
        base["MEMLANE_SERVE__AUTH"] = "off"
    else:
        base.update(MEMLANE_SERVE__AUTH="on", MEMLANE_SERVE__API_KEYS=json.dumps(keys))
    base.update(env or {})
    args = ["serve", "--port", str(free_port()), "--data-dir", str(data), "--timeout", "420", "--json"]
    if ray_dashboard:
        args.append("--ray-dashboard")
    if runtime:
        args += ["--runtime", runtime]
    if replicas:
        config = yaml.safe_load((ROOT / "serve" / "config.yaml").read_text())
        for dep in config["applications"][0]["deployments"]:
            if dep["name"] in replicas:
                n = replicas[dep["name"]]
                dep["autoscaling_config"].update(min_replicas=n, max_replicas=n)
        path = root / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        args += ["--config", str(path)]
    started = memlane(*args, env=base, timeout=480)
    assert started.returncode == 0, started.stderr
    state = json.loads(started.stdout.strip().splitlines()[-1])
    try:
        yield state
    finally:
        stopped = memlane("serve", "--stop", "--data-dir", str(data), timeout=200)
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
