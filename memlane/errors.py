"""Engine errors. Each carries a message that names the problem; callers map them to HTTP 4xx
or CLI exit code 2."""

import re
from typing import Any


class MemlaneError(Exception):
    """Base class of every error the engine raises on purpose."""


class InvalidInput(MemlaneError, ValueError):
    """A request or input value is invalid; nothing was written.

    ``field`` names the input at fault (``"items.0.content"``), or is None when no one field
    is. Left out, it is read from the message's ``"field: problem"`` prefix, the convention
    every raiser follows, so callers read ``exc.field`` and never parse the message."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field if field is not None else _prefix_field(message)

    def __reduce__(self):  # picklable across processes (Ray re-raises it in the caller)
        return (type(self), (str(self), self.field))

    @classmethod
    def from_validation(cls, exc: Any) -> "InvalidInput":
        """One line that names each bad field of a pydantic ``ValidationError``."""
        parts = [f"{'.'.join(str(x) for x in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()]
        return cls("; ".join(parts))


# A field path as messages name one: "types", "items.0.content"; not "line 3" or a file path.
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,63}")


def _prefix_field(message: str) -> str | None:
    head, colon, _ = message.partition(":")
    return head if colon and _FIELD.fullmatch(head) else None


class NotFound(MemlaneError, LookupError):
    """Something a request names (a memory, a document, an operation) does not exist."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field

    def __reduce__(self):  # picklable across processes (Ray re-raises it in the caller)
        return (type(self), (str(self), self.field))


class BankNotFound(NotFound):
    def __init__(self, bank_id: str) -> None:
        super().__init__(f"unknown bank {bank_id!r}", "bank_id")
        self.bank_id = bank_id

    def __reduce__(self):
        return (BankNotFound, (self.bank_id,))


class Conflict(MemlaneError):
    """A request names something that exists as something else (an operation id already used
    for another bank's or kind's operation)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field

    def __reduce__(self):  # picklable across processes (Ray re-raises it in the caller)
        return (type(self), (str(self), self.field))


class ConfigError(MemlaneError):
    """A setting points at something that is not there (a model path, a server)."""


class StoreUnavailable(ConfigError):
    """The Milvus server the store settings name does not answer; nothing was written (REST
    answers 503 ``store_unavailable``, the CLI exits 2)."""


class StoreCapabilityError(ConfigError, ValueError):
    """The store's Milvus cannot do what a setting or a call asks; the message names its
    version (memlane/stores/milvus/capabilities.py). Nothing was written."""


class LLMNotConfigured(ConfigError):
    """An operation needs an LLM and none is configured for its role; the message names the
    setting to set."""


class EmbedderMismatch(MemlaneError):
    """A bank's vectors come from an embedder this process cannot load (or a re-embed of the
    bank stopped before it finished): searching or adding to them would mix two vector spaces.
    Nothing was written. The message names the bank, both embedders and the command that fixes
    it; REST answers 409, the CLI exits 2."""

    def __init__(
        self, bank_id: str, bank_embedder: str, process_embedder: str, reembedding: str = ""
    ) -> None:
        if reembedding:
            message = (
                f"bank {bank_id!r} is being re-embedded from {bank_embedder} to {reembedding} (a "
                f"re-embed stopped before it finished): run `memlane reembed --bank {bank_id} "
                f"--embedder {reembedding}` to finish it"
            )
        else:
            message = (
                f"bank {bank_id!r} was embedded with {bank_embedder}, which this process cannot "
                f"load: run `memlane reembed --bank {bank_id} --embedder {process_embedder}` (or "
                f"set MEMLANE_MODELS__EMBEDDER_MODEL to {bank_embedder}'s model folder)"
            )
        super().__init__(message)
        self.bank_id, self.bank_embedder = bank_id, bank_embedder
        self.process_embedder, self.reembedding = process_embedder, reembedding
        self.field = "bank_id"

    def __reduce__(self):  # picklable across processes (Ray re-raises it in the caller)
        return (EmbedderMismatch, (self.bank_id, self.bank_embedder, self.process_embedder, self.reembedding))
