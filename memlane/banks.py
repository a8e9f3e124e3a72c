"""Banks on the engine: create, update, read, list, delete and check them. Every other part
asks :func:`require_bank` for the bank it works on, so "no such bank" is decided here.

A bank records the embedder (its stable name) and dimension its vectors were written with, on
creation or its first retain, and every later write and search of the bank uses that one
(:class:`BankEmbedders`), so two vector spaces never mix and a process configured for another
embedder still serves it. A bank from before the record is MiniLM's (:data:`LEGACY`)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from memlane.errors import BankNotFound, ConfigError, EmbedderMismatch, InvalidInput
from memlane.interfaces import Embedder, GraphStore, VectorStore
from memlane.records import Bank, Disposition, check_bank_id, now_utc

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


class BankEmbedders:
    """Which embedder reads and writes each bank: the one its vectors were written with (its
    record; :data:`LEGACY` for a bank from before the record), loaded on first use. A process
    configured for bge-small still answers and adds to its MiniLM banks, at no mismatch error,
    and a bank never mixes two vector spaces; ``memlane reembed`` moves a bank to another
    embedder. A new bank gets :attr:`identity`: the embedder the engine was given, else the
    one ``models.embedder`` configures. A bank marked as being re-embedded is refused
    (EmbedderMismatch naming the command that finishes it), as is one whose embedder this
    process has no model for.

    Recall reads each bank's record once per revision of the bank (a re-embed's marking and
    switching each bump it), at no store round trip per recall."""

    def __init__(self, store: VectorStore, settings: Settings, given: Embedder | None = None) -> None:
        self.store = store
        self.settings = settings
        self.identity = (given.name, given.dim) if given is not None else configured_embedder(settings)
        self._loaded: dict[str, Embedder] = {self.identity[0]: given} if given is not None else {}
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[str, Bank]] = {}

    @property
    def default(self) -> Embedder:
        """The embedder of new banks (loaded on first use)."""
        return self.named(self.identity[0])

    def named(self, name: str) -> Embedder:
        """The embedder ``name`` (ConfigError when this process has no model of that name)."""
        embedder = self._loaded.get(name)
        if embedder is None:
            from memlane.models.embedder import build_embedder

            with self._lock:  # concurrent first recalls load the model once
                embedder = self._loaded.get(name)
                if embedder is None:
                    embedder = build_embedder(self.settings, name)
                    dim = self.settings.models.embedding_dim
                    if embedder.dim != dim:
                        raise ConfigError(
                            f"embedder {name} produces {embedder.dim}-d vectors but "
                            f"MEMLANE_MODELS__EMBEDDING_DIM is {dim}"
                        )
                    self._loaded[name] = embedder
        return embedder

    def of(self, bank: Bank) -> Embedder:
        """The embedder of ``bank``'s vectors; EmbedderMismatch while it is being re-embedded
        or when its embedder cannot be loaded here."""
        name, dim = bank_embedder(bank)
        if bank.reembedding:
            raise EmbedderMismatch(bank.bank_id, name, self.identity[0], bank.reembedding)
        try:
            embedder = self.named(name)
        except ConfigError:
            raise EmbedderMismatch(bank.bank_id, name, self.identity[0]) from None
        if embedder.dim != dim:
            raise EmbedderMismatch(bank.bank_id, f"{name} ({dim}-d)", self.identity[0])
        return embedder

    def for_bank(self, bank_id: str, revision: str = "") -> Embedder:
        """:meth:`of` the bank ``bank_id`` at ``revision`` (BankNotFound for an unknown one);
        without a revision its record is read again."""
        return self.of(self._bank(bank_id, revision))

    def writing(self, bank_id: str, revision: str = "") -> str:
        """The name of the embedder whose vectors a write to ``bank_id`` carries (the one a
        re-embed moves it to, while it runs), without loading it; read as :meth:`for_bank`."""
        bank = self._bank(bank_id, revision)
        return bank.reembedding or bank_embedder(bank)[0]

    def _bank(self, bank_id: str, revision: str) -> Bank:
        seen = self._seen.get(bank_id)
        if seen is None or seen[0] != revision or not revision:
            seen = (revision, require_bank(self.store, bank_id))
            self._seen[bank_id] = seen
        return seen[1]


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
        embedders: BankEmbedders,
    ) -> None:
        self.store = store
        self.writer = writer
        self.derived = derived
        self.graph = graph
        self.settings = settings
        self.embedders = embedders

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
            if current is None:  # a new bank is written by this process's default embedder
                data["embedder"], data["embedding_dim"] = self.embedders.identity
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

    def put(
        self,
        bank_id: str,
        *,
        name: str | None = None,
        background: str | None = None,
        disposition: Disposition | dict | None = None,
    ) -> tuple[Bank, bool]:
        """:meth:`create`, and whether the bank was created (False: updated)."""
        try:
            require_bank(self.store, bank_id)
            created = False
        except BankNotFound:
            created = True
        return self.create(bank_id, name=name, background=background, disposition=disposition), created

    def to_retain_into(self, bank_id: str, create: bool) -> Bank:
        """The bank a retain writes into, created when missing if ``create``;
        EmbedderMismatch (nothing written) while it is being re-embedded, or when its
        embedder is not one this process can load."""
        try:
            bank = require_bank(self.store, bank_id)
        except BankNotFound:
            if not create:
                raise
            # No owner name: only a bank whose name is set types its owner's turns as
            # experience; naming it after its id made a user called "priya" the agent.
            return self.create(bank_id, name="")
        if not bank.embedder and not bank.reembedding:
            # A bank without the record: empty, its first retain records the default
            # embedder; else MiniLM wrote it (LEGACY), recorded once it is checked.
            name, dim = self.embedders.identity if self.store.count_units(bank_id) == 0 else LEGACY
            recorded = bank.model_copy(update={"embedder": name, "embedding_dim": dim})
            self.embedders.of(recorded)
            self.writer.put_bank(recorded)
            return recorded
        self.embedders.of(bank)
        return bank

    def get(self, bank_id: str) -> Bank:
        """The bank; InvalidInput for a malformed id, BankNotFound for an unknown one."""
        return require_bank(self.store, bank_id)

    def list_all(self) -> list[Bank]:
        """Every bank, by id."""
        return sorted(self.store.list_banks(), key=lambda b: b.bank_id)

    def delete(self, bank_id: str) -> None:
        """Delete a bank with everything in it: units, chunks, entities, its graph."""
        require_bank(self.store, bank_id)
        self.writer.delete_bank(bank_id)

    def stats(self, bank_id: str) -> dict[str, Any]:
        """Counts of the bank's units, chunks and entities, and its graph's."""
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
        try:
            return self.embedders.named(name)
        except ConfigError:
            return f"its embedder {name!r} is not one this process can load"
