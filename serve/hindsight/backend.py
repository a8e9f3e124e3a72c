"""What the Hindsight-compatible surface runs its operations on: the service host's own paths
(serve/host.py), as the REST routes use them (recall and reflect on its engine's warm banks,
the rest on its writes through the catalogue). Engine errors become the REST API's errors."""

from __future__ import annotations

import json
from typing import Any

from serve.errors import APIError, engine_error


async def mapped(awaitable: Any) -> Any:
    """Await a deployment or replica call; engine errors become API errors."""
    try:
        return await awaitable
    except APIError:
        raise
    except Exception as exc:  # noqa: BLE001 - mapped, or re-raised as it is
        api = engine_error(exc)
        if api is None:
            raise
        raise api from None


def _validated(model: Any, params: dict[str, Any]) -> Any:
    from pydantic import ValidationError

    from memlane.errors import InvalidInput

    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise engine_error(InvalidInput.from_validation(exc)) from None


class IngressBackend:
    """The operations of one Ingress replica (serve/ingress.py's ``Ingress``)."""

    def __init__(self, ingress: Any) -> None:
        self.ingress = ingress

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any:
        """Operation ``name`` of the catalogue on the host's writes, as the REST routes."""
        return await mapped(self.ingress.writes.call(name, bank_id, params))

    async def recall(self, bank_id: str, params: dict[str, Any]) -> dict[str, Any]:
        from memlane.records import RecallRequest

        data, _state = await mapped(self.ingress.recall_json(bank_id, _validated(RecallRequest, params)))
        return json.loads(data)

    async def reflect(self, bank_id: str, params: dict[str, Any]) -> dict[str, Any]:
        from memlane.reflect.requests import ReflectRequest

        _validated(ReflectRequest, params)
        return json.loads(await mapped(self.ingress.reflect_json(bank_id, params)))

    async def retain_async(self, bank_id: str, body: dict[str, Any], operation_id: str) -> dict[str, Any]:
        return await mapped(self.ingress.writes.retain_async(bank_id, body, operation_id))

    async def operation(self, bank_id: str, operation_id: str) -> dict[str, Any]:
        return await mapped(self.ingress.writes.operation(bank_id, operation_id))

    async def health(self) -> dict[str, Any]:
        return await self.ingress.writes.health()

    def features(self) -> dict[str, bool]:
        """What this service offers, in Hindsight's feature names (VersionResponse)."""
        return {"mcp": True, "worker": True, "bank_config_api": True, "store_document_text": True}
