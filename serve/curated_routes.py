"""HTTP routes of curated memory (memlane/curated/): mental models and directives of a bank,
with the bank's key permissions like every other bank route. The ingress includes the router
this builds (serve/ingress.py), handing it its own dependencies."""

# No ``from __future__ import annotations``: Serve ships the app by value (cloudpickle), and
# the route functions below are closures whose pickled globals hold only the names their code
# uses, so FastAPI could not resolve string annotations (Request, the bodies) on the replica.
from typing import Any, Awaitable, Callable

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from memlane.records import CURATED_ID_PATTERN

ModelId = Path(..., pattern=CURATED_ID_PATTERN, description="1-64 lowercase letters, digits, '_', '-'")
DirectiveId = Path(..., pattern=CURATED_ID_PATTERN, description="1-64 lowercase letters, digits, '_', '-'")


class ModelBody(BaseModel):
    """PUT .../models/{model_id}: the question the model answers."""

    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, max_length=1000)


class DirectiveBody(BaseModel):
    """PUT .../directives/{directive_id}: the rule, and the request tags it is scoped to
    (none: every reflect)."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=2000)
    tags: list[str] = Field(default_factory=list, max_length=32)


def router(bank_access: Callable[..., str], op: Callable[..., Awaitable[Any]]) -> APIRouter:
    """The routes, over the ingress's ``bank_access`` dependency and its ``op`` (runs an
    operation of the catalogue on the Memory deployment; engine errors to API errors)."""
    api = APIRouter(tags=["curated"])
    bank = Depends(bank_access)

    @api.put("/v1/banks/{bank_id}/models/{model_id}")
    async def put_mental_model(
        request: Request, response: Response, body: ModelBody, model_id: str = ModelId, bank_id: str = bank
    ) -> dict:
        """Pin a question on the bank and answer it from its memories now (201 when created;
        the same question again changes nothing)."""
        out = await op(request, "put_mental_model", bank_id, model_id=model_id, question=body.question)
        response.status_code = 201 if out["created"] else 200
        return out["model"]

    @api.get("/v1/banks/{bank_id}/models")
    async def list_mental_models(request: Request, bank_id: str = bank) -> dict:
        return {"models": await op(request, "list_mental_models", bank_id)}

    @api.get("/v1/banks/{bank_id}/models/{model_id}")
    async def get_mental_model(request: Request, model_id: str = ModelId, bank_id: str = bank) -> dict:
        """The model's question, answer and sources (the memories it cites, with their turns)."""
        return await op(request, "get_mental_model", bank_id, model_id=model_id)

    @api.post("/v1/banks/{bank_id}/models/{model_id}/refresh")
    async def refresh_mental_model(request: Request, model_id: str = ModelId, bank_id: str = bank) -> dict:
        """Recall the question again and rewrite the answer (retain does this in the background
        for the models new facts touch)."""
        return await op(request, "refresh_mental_model", bank_id, model_id=model_id)

    @api.delete("/v1/banks/{bank_id}/models/{model_id}")
    async def delete_mental_model(request: Request, model_id: str = ModelId, bank_id: str = bank) -> dict:
        await op(request, "delete_mental_model", bank_id, model_id=model_id)
        return {"deleted": model_id}

    @api.put("/v1/banks/{bank_id}/directives/{directive_id}")
    async def put_directive(
        request: Request,
        response: Response,
        body: DirectiveBody,
        directive_id: str = DirectiveId,
        bank_id: str = bank,
    ) -> dict:
        """Create or replace a rule for reflect (201 when created)."""
        out = await op(
            request, "put_directive", bank_id, directive_id=directive_id, text=body.text, tags=body.tags
        )
        response.status_code = 201 if out["created"] else 200
        return out["directive"]

    @api.get("/v1/banks/{bank_id}/directives")
    async def list_directives(request: Request, bank_id: str = bank) -> dict:
        return {"directives": await op(request, "list_directives", bank_id)}

    @api.delete("/v1/banks/{bank_id}/directives/{directive_id}")
    async def delete_directive(
        request: Request, directive_id: str = DirectiveId, bank_id: str = bank
    ) -> dict:
        await op(request, "delete_directive", bank_id, directive_id=directive_id)
        return {"deleted": directive_id}

    return api
