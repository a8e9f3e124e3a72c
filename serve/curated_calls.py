"""The Memory deployment's calls for curated memory (memlane/curated/): mental models and
directives as JSON, for serve/curated_routes.py. ``MemoryDeployment`` inherits them."""

from __future__ import annotations

from typing import Any


class CuratedCalls:
    """Needs ``self.memory``, the replica's engine."""

    memory: Any

    def put_mental_model(self, bank_id: str, model_id: str, question: str) -> dict[str, Any]:
        model, created = self.memory.put_mental_model(bank_id, model_id, question)
        return {"model": model.model_dump(mode="json"), "created": created}

    def get_mental_model(self, bank_id: str, model_id: str) -> dict[str, Any]:
        return self.memory.get_mental_model(bank_id, model_id).model_dump(mode="json")

    def list_mental_models(self, bank_id: str) -> list[dict[str, Any]]:
        return [m.model_dump(mode="json") for m in self.memory.list_mental_models(bank_id)]

    def delete_mental_model(self, bank_id: str, model_id: str) -> None:
        self.memory.delete_mental_model(bank_id, model_id)

    def refresh_mental_model(self, bank_id: str, model_id: str) -> dict[str, Any]:
        return self.memory.refresh_mental_model(bank_id, model_id).model_dump(mode="json")

    def put_directive(self, bank_id: str, directive_id: str, text: str, tags: list[str]) -> dict[str, Any]:
        directive, created = self.memory.put_directive(bank_id, directive_id, text, tags)
        return {"directive": directive.model_dump(mode="json"), "created": created}

    def list_directives(self, bank_id: str) -> list[dict[str, Any]]:
        return [d.model_dump(mode="json") for d in self.memory.list_directives(bank_id)]

    def delete_directive(self, bank_id: str, directive_id: str) -> None:
        self.memory.delete_directive(bank_id, directive_id)
