"""Token counting without the model: the embedder's ``tokenizer.json`` through the tokenizers
library. Recall replicas that embed remotely (serve/) use it to pack results, so they never
load torch (a replica without it starts in about a second and holds about 300 MB less)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from memlane.errors import ConfigError


class TokenCounter:
    """Counts tokens exactly as the embedder's fast tokenizer does (no special tokens)."""

    def __init__(self, model_dir: str | Path) -> None:
        from tokenizers import Tokenizer

        path = Path(model_dir) / "tokenizer.json"
        if not path.is_file():
            raise ConfigError(f"no tokenizer.json in {model_dir}")
        self._tok = Tokenizer.from_file(str(path))
        self._tok.no_truncation()
        self._tok.no_padding()

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if len(texts) == 0:
            return []
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]
