"""A job's Ray workers run the memlane code its driver runs, whatever directory the driver is in.

Ray puts the driver's working directory (and its script's directory, when the driver has that on
its own path) at the front of every worker's ``sys.path`` (``py_driver_sys_path``, Ray 2.60).
The driver of a console script (``memlane backfill``) does not have its working directory on its
path, so a copy of the sources there, an older checkout or a copy of the repository, shadows the
installed memlane in the workers only. Run in such a copy made before the events dating, a
backfill stored the old dating (the first date expression of a turn) while ``memlane retain`` of
the same file stored the events, until this wrapper (tests/pipelines/test_backfill_driver_code.py).

:func:`driver_code` wraps a job's actor class: the wrapper, shipped by value, drops those
directories from the worker's path before it imports the actor's module by name, so the worker
imports what a process without them imports (on a local cluster, the driver's installation).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# The project's top-level packages (pyproject.toml's setuptools include).
PACKAGES = ("memlane", "memlane_client", "actors", "pipelines", "serve", "cluster", "evals", "benchmarks")


def _package_dir(name: str) -> Path | None:
    """The directory this process imports package ``name`` from (without importing it)."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None) if module is not None else None
    if spec is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]).resolve() if locations else None


def shadowing_paths(cwd: str | Path | None = None) -> list[str]:
    """The directories Ray puts first on the workers' path (this process's working directory,
    or ``cwd``, and its script's directory when this process has that on its path) that hold
    another copy of one of the project's packages than the one this process imports."""
    candidates = [os.path.abspath(cwd if cwd is not None else os.curdir)]
    script_dir = os.path.dirname(os.path.realpath(sys.argv[0])) if sys.argv and sys.argv[0] else ""
    if script_dir and script_dir in sys.path:
        candidates.append(script_dir)
    out = []
    for path in dict.fromkeys(candidates):
        for name in PACKAGES:
            copy = Path(path) / name
            if (copy / "__init__.py").is_file() and copy.resolve() != _package_dir(name):
                out.append(path)
                break
    return out


def driver_code(actor: type) -> type:
    """``actor`` itself, or, when a directory shadows the project's packages in the workers
    (:func:`shadowing_paths`), a class of the same name that drops it from the worker's path,
    then imports ``actor`` by module and name and delegates to an instance of it.

    The wrapper is defined here, inside a function, so cloudpickle ships it by value: its methods
    name nothing of this module (an import of it would come from the shadowing copy)."""
    drop = shadowing_paths()
    if not drop:
        return actor
    log.info("the workers will not import the project's packages from %s (not this process's copy)", drop)
    module_name, qualname = actor.__module__, actor.__qualname__
    packages = PACKAGES

    class DriverCode:
        def __init__(self, *args, **kwargs) -> None:
            import importlib
            import os
            import sys

            dropped = {os.path.abspath(p) for p in drop}
            sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) not in dropped]
            # anything of the project this worker imported from there before: imported again
            for name, module in list(sys.modules.items()):
                path = getattr(module, "__file__", None) or ""
                if name.split(".")[0] in packages and any(
                    os.path.abspath(path).startswith(d + os.sep) for d in dropped
                ):
                    del sys.modules[name]
            target: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                target = getattr(target, part)
            self._actor = target(*args, **kwargs)

        def __call__(self, batch):
            return self._actor(batch)

    DriverCode.__name__ = actor.__name__  # Ray Data's operator name, as without the wrapper
    return DriverCode
