"""The ONNX export of a sentence-transformers model folder, once per model: the only code
that imports torch, run in a child process (``python -m memlane.models.onnx_export``) so that
the processes that embed never do. It lands in a cache folder keyed by the model's content
hash (:func:`onnx_cache_root`), written to a temporary file and renamed into place under a
file lock, so processes that race at first use export once and never read a half-written file.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

import numpy as np

from memlane.errors import ConfigError
from memlane.models.onnx_layout import encode, read_layout, tokenizer

log = logging.getLogger(__name__)

# Bumped when the exported graph changes (inputs, outputs, exporter), so old caches are not used.
EXPORT_FORMAT = 1
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
Variant = Literal["fp32", "int8"]


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
            [sys.executable, "-m", "memlane.models.onnx_export", str(model_dir), str(tmp)],
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
    tok = tokenizer(layout, truncate=True)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in _forward_params(model)]

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args))).last_hidden_state

    sample = ["a short one", "a somewhat longer sentence, so that the batch needs padding"]
    feed = encode(tok, sample, names)
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
        feed = encode(tok, check, names)
        ref = model(**{n: torch.from_numpy(v) for n, v in feed.items()}).last_hidden_state.numpy()
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = session.run(None, feed)[0]
    err = float(np.abs(got - ref).max())
    if not err < 1e-3:
        raise RuntimeError(f"exported model differs from torch by {err} (max abs)")


def _forward_params(model: Any) -> set[str]:
    import inspect

    return set(inspect.signature(model.forward).parameters)


if __name__ == "__main__":  # the child ensure_onnx runs: MODEL_DIR OUT
    if len(sys.argv) != 3:
        print("usage: python -m memlane.models.onnx_export MODEL_DIR OUT", file=sys.stderr)
        raise SystemExit(2)
    export_onnx(sys.argv[1], sys.argv[2])
