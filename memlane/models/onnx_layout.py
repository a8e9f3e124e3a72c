"""A sentence-transformers model folder as the ONNX path reads it: its pipeline around the
transformer (:class:`ModelLayout`), tokenisation through ``tokenizers``, and pooling in numpy,
as sentence-transformers does, so vectors match the torch path. Shared by the export
(memlane/models/onnx_export.py) and the runtime (memlane/models/onnx_embedder.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from memlane.errors import ConfigError

_POOLING_ORDER = (  # sentence-transformers' Pooling concatenates the enabled modes in this order
    "pooling_mode_cls_token",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
)


@dataclass(frozen=True)
class ModelLayout:
    """What the sentence-transformers folder says about the pipeline around the transformer."""

    transformer_dir: Path
    pooling_modes: tuple[str, ...]
    normalize: bool
    max_seq_length: int
    do_lower_case: bool
    dim: int


def read_layout(model_dir: str | Path) -> ModelLayout:
    """Read ``modules.json`` (Transformer -> Pooling [-> Normalize]) and the pooling config.

    Anything else (a Dense layer, a prompt-aware or weighted pooling) is a :class:`ConfigError`:
    the ONNX path would silently differ from the torch one, so ``auto`` falls back instead.
    """
    root = Path(model_dir)
    modules_file = root / "modules.json"
    if not modules_file.is_file():
        raise ConfigError(f"no modules.json in {root}: not a sentence-transformers model folder")
    modules = json.loads(modules_file.read_text())
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise ConfigError(
            f"{root}: modules {kinds} are not supported on ONNX (Transformer, Pooling[, Normalize])"
        )
    transformer_dir = root / modules[0].get("path", "")
    pooling_cfg = json.loads((root / modules[1]["path"] / "config.json").read_text())
    modes = tuple(k for k in _POOLING_ORDER if pooling_cfg.get(k))
    unsupported = [
        k for k, v in pooling_cfg.items() if k.startswith("pooling_mode_") and v and k not in _POOLING_ORDER
    ]
    if unsupported or not modes or pooling_cfg.get("include_prompt") is False:
        raise ConfigError(f"{root}: pooling config {pooling_cfg} is not supported on ONNX")
    st_cfg_file = transformer_dir / "sentence_bert_config.json"
    st_cfg = json.loads(st_cfg_file.read_text()) if st_cfg_file.is_file() else {}
    max_seq = st_cfg.get("max_seq_length")
    if max_seq is None:  # as sentence-transformers: the smaller of the model's and tokenizer's
        hf_cfg = json.loads((transformer_dir / "config.json").read_text())
        tok_file = transformer_dir / "tokenizer_config.json"
        tok_cfg = json.loads(tok_file.read_text()) if tok_file.is_file() else {}
        limits = [
            v
            for v in (hf_cfg.get("max_position_embeddings"), tok_cfg.get("model_max_length"))
            if isinstance(v, int)
        ]
        if not limits:
            raise ConfigError(f"{root}: no max sequence length in its configs")
        max_seq = min(limits)
    width = int(pooling_cfg["word_embedding_dimension"])
    return ModelLayout(
        transformer_dir=transformer_dir,
        pooling_modes=modes,
        normalize=kinds[-1] == "Normalize",
        max_seq_length=int(max_seq),
        do_lower_case=bool(st_cfg.get("do_lower_case", False)),
        dim=width * len(modes),
    )


def tokenizer(layout: ModelLayout, *, truncate: bool) -> Any:
    """The folder's fast tokenizer, padding to the longest text of a batch; ``truncate``: at
    the model's max sequence length (for embedding; token counts are not truncated)."""
    from tokenizers import Tokenizer

    path = layout.transformer_dir / "tokenizer.json"
    if not path.is_file():
        raise ConfigError(
            f"no tokenizer.json in {layout.transformer_dir} (the ONNX path needs a fast tokenizer)"
        )
    tok = Tokenizer.from_file(str(path))
    # The file carries its own truncation/padding (MiniLM's: fixed 128); sentence-transformers
    # truncates at max_seq_length and pads to the longest text of the batch.
    if truncate:
        tok.enable_truncation(max_length=layout.max_seq_length)
    else:
        tok.no_truncation()
    pad = (tok.padding or {}).get("pad_token", "[PAD]")
    pad_id = tok.token_to_id(pad)
    tok.enable_padding(pad_id=pad_id if pad_id is not None else 0, pad_token=pad)
    return tok


def encode(tok: Any, texts: Sequence[str], names: Sequence[str]) -> dict[str, np.ndarray]:
    """The model's inputs ``names`` for ``texts``, as int64 arrays ``[batch, seq]``."""
    enc = tok.encode_batch(list(texts))
    cols = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
    return {n: np.array([getattr(e, cols[n]) for e in enc], dtype=np.int64) for n in names}


def pool(token_embeddings: np.ndarray, attention_mask: np.ndarray, modes: Sequence[str]) -> np.ndarray:
    """sentence-transformers' Pooling in numpy: the enabled modes, concatenated in its order."""
    mask = attention_mask[..., None].astype(np.float32)
    parts = []
    for mode in modes:
        if mode == "pooling_mode_cls_token":
            parts.append(token_embeddings[:, 0])
        elif mode == "pooling_mode_max_tokens":
            parts.append(np.where(mask > 0, token_embeddings, -1e9).max(axis=1))
        else:
            summed = (token_embeddings * mask).sum(axis=1)
            count = np.clip(mask.sum(axis=1), 1e-9, None)
            parts.append(summed / (count if mode == "pooling_mode_mean_tokens" else np.sqrt(count)))
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
