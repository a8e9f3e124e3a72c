"""Banks on the engine: create, update, read, list, delete and check them. Every other part
asks :func:`require_bank` for the bank it works on, so "no such bank" is decided here.

A bank records the embedder (its stable name) and dimension its vectors were written with, on
creation or its first retain; retain (:meth:`Banks.to_retain_into`) and recall
(:class:`EmbedderGuard`) into a bank of another embedder raise :class:`EmbedderMismatch`, so
two vector spaces never mix. A bank from before the record is MiniLM's (:data:`LEGACY`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from pydantic import ValidationError

from memlane.errors import BankNotFound, EmbedderMismatch, InvalidInput
from memlane.interfaces import Embedder, GraphStore, VectorStore
from memlane.model import Bank, Disposition, check_bank_id, now_utc

if TYPE_CHECKING:
    from memlane.derived import DerivedState
    from memlane.doctor import BankReport
    from memlane.settings import Settings
    from memlane.writes import BankWriter

# The embedder of a bank written before banks recorded theirs: MiniLM was the only one then.
LEGACY = ("minilm", 384)


def configured_embedder(settings: Settings) -> tuple[str, int]:
    """The (name, dimension) of the embedder ``settings`` configure, without loading it."""
    from memlane.models.embedder import embedder_identity

    return embedder_identity(settings.models)[0], settings.models.embedding_dim


def bank_embedder(bank: Bank) -> tuple[str, int]:
    """The (name, dimension) of the embedder ``bank``'s vectors were written with."""
    return (bank.embedder, bank.embedding_dim) if bank.embedder else LEGACY


def check_embedder(bank: Bank, embedder: tuple[str, int]) -> None:
    """EmbedderMismatch unless ``bank``'s vectors are all ``embedder``'s (name, dimension)."""
    name, _ = have = bank_embedder(bank)
    if bank.reembedding:
        raise EmbedderMismatch(bank.bank_id, name, embedder[0], bank.reembedding)
    if have != embedder:
        raise EmbedderMismatch(bank.bank_id, name, embedder[0])


class EmbedderGuard:
    """Recall's check that a bank's vectors are this process's embedder's, at no store round
    trip per recall: each bank's record is read once per revision of the bank (a re-embed's
    marking and switching each bump it, memlane/reembed.py) and kept beside it."""

    def __init__(self, store: VectorStore, embedder: tuple[str, int]) -> None:
        self.store = store
        self.embedder = embedder
        self._seen: dict[str, tuple[str, Bank]] = {}

    def check(self, bank_id: str, revision: str) -> None:
        """EmbedderMismatch (or BankNotFound) for ``bank_id`` at ``revision``."""
        seen = self._seen.get(bank_id)
        if seen is None or seen[0] != revision or not revision:
            seen = (revision, require_bank(self.store, bank_id))
            self._seen[bank_id] = seen
        check_embedder(seen[1], self.embedder)


def valid_bank_id(bank_id: str) -> str:
    """``bank_id``, or InvalidInput naming what a bank id must be."""
    try:
        return check_bank_id(bank_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def require_bank(store: VectorStore, bank_id: str) -> Bank:
    """The bank ``bank_id``; InvalidInput for a malformed id, BankNotFound for an unknown one."""
    bank = store.get_bank(valid_bank_id(bank_id))
    if bank is None:
        raise BankNotFound(bank_id)
    return bank


class Banks:
    """The bank records (profiles) and their whole-bank operations."""

    def __init__(
        self,
        store: VectorStore,
        writer: BankWriter,
        derived: DerivedState,
        graph: GraphStore,
        settings: Settings,
        embedder: Callable[[], Embedder],
    ) -> None:
        self.store = store
        self.writer = writer
        self.derived = derived
        self.graph = graph
        self.settings = settings
        self.embedder = embedder  # the process's, loaded on first use (doctor only)
        self.vectors = configured_embedder(settings)

    def create(
        self,
        bank_id: str,
        *,
        name: str | None = None,
        background: str | None = None,
        disposition: Disposition | dict | None = None,
    ) -> Bank:
        """Create a bank, or update the given profile fields of an existing one."""
        try:
            check_bank_id(bank_id)
            current = self.store.get_bank(bank_id)
            data: dict[str, Any] = current.model_dump() if current else {"bank_id": bank_id, "name": bank_id}
            if current is None:  # a new bank is written by this process's embedder
                data["embedder"], data["embedding_dim"] = self.vectors
            if name is not None:
                data["name"] = name
            if background is not None:
                data["background"] = background
            if disposition is not None:
                data["disposition"] = (
                    disposition.model_dump() if isinstance(disposition, Disposition) else disposition
                )
            data["updated_at"] = now_utc()
            bank = Bank.model_validate(data)
        except ValidationError as exc:
            raise InvalidInput.from_validation(exc) from None
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        self.writer.put_bank(bank)
        return bank

    def put(self, bank_id: str, **fields: Any) -> tuple[Bank, bool]:
        """:meth:`create`, and whether the bank was created (False: updated)."""
        try:
            require_bank(self.store, bank_id)
            created = False
        except BankNotFound:
            created = True
        return self.create(bank_id, **fields), created

    def to_retain_into(self, bank_id: str, create: bool) -> Bank:
        """The bank a retain writes into, created when missing if ``create``;
        EmbedderMismatch (nothing written) when its vectors are another embedder's."""
        try:
            bank = require_bank(self.store, bank_id)
        except BankNotFound:
            if not create:
                raise
            # No owner name: only a bank whose name is set types its owner's turns as
            # experience; naming it after its id made a user called "priya" the agent.
            return self.create(bank_id, name="")
        if not bank.embedder and not bank.reembedding:
            # A bank without the record: empty, its first retain records this embedder;
            # else MiniLM wrote it (LEGACY), recorded once it is checked.
            name, dim = self.vectors if self.store.count_units(bank_id) == 0 else LEGACY
            recorded = bank.model_copy(update={"embedder": name, "embedding_dim": dim})
            check_embedder(recorded, self.vectors)
            self.writer.put_bank(recorded)
            return recorded
        check_embedder(bank, self.vectors)
        return bank

    def list_all(self) -> list[Bank]:
        return sorted(self.store.list_banks(), key=lambda b: b.bank_id)

    def delete(self, bank_id: str) -> None:
        """Delete a bank with everything in it: units, chunks, entities, its graph."""
        require_bank(self.store, bank_id)
        self.writer.delete_bank(bank_id)

    def stats(self, bank_id: str) -> dict[str, Any]:
        require_bank(self.store, bank_id)
        self.derived.ensure(bank_id)
        return {
            "bank_id": bank_id,
            "units": self.store.count_units(bank_id),
            "chunks": self.store.count_chunks(bank_id),
            "entities": len(self.store.list_entities(bank_id)),
            "graph": self.graph.stats(bank_id),
        }

    def doctor(self, bank_id: str) -> BankReport:
        """Check every invariant of the bank and its derived state in this process, and that a
        sample of its vectors is its recorded embedder's (loaded here when it is not this
        process's)."""
        from memlane.doctor import check_bank

        bank = require_bank(self.store, bank_id)
        return check_bank(self.store, self.derived, bank_id, embedder=self._embedder_of(bank))

    def _embedder_of(self, bank: Bank) -> Embedder | str:
        """The embedder ``bank`` was written with, or why it cannot be loaded here."""
        name, _ = bank_embedder(bank)
        if name == self.vectors[0]:
            return self.embedder()
        if name not in ("minilm", "bge-small"):
            return f"its embedder {name!r} is not one this process can load"
        from memlane.models.embedder import build_embedder

        models = self.settings.models.model_copy(update={"embedder": name})
        return build_embedder(self.settings.model_copy(update={"models": models}))
