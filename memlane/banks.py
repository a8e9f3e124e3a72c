"""Banks on the engine: create, update, read, list, delete and check them. Every other part
asks :func:`require_bank` for the bank it works on, so "no such bank" is decided here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from memlane.errors import BankNotFound, InvalidInput
from memlane.interfaces import GraphStore, VectorStore
from memlane.model import Bank, Disposition, check_bank_id, now_utc

if TYPE_CHECKING:
    from memlane.derived import DerivedState
    from memlane.doctor import BankReport
    from memlane.writes import BankWriter


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
        self, store: VectorStore, writer: BankWriter, derived: DerivedState, graph: GraphStore
    ) -> None:
        self.store = store
        self.writer = writer
        self.derived = derived
        self.graph = graph

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
        """The bank a retain writes into, created when missing if ``create``."""
        try:
            return require_bank(self.store, bank_id)
        except BankNotFound:
            if not create:
                raise
            # No owner name: only a bank whose name is set types its owner's turns as
            # experience; naming it after its id made a user called "priya" the agent.
            return self.create(bank_id, name="")

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
        """Check every invariant of the bank and its derived state in this process."""
        from memlane.doctor import check_bank

        return check_bank(self.store, self.derived, bank_id)
