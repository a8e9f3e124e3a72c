"""A trivial Serve endpoint, the load benchmark's baseline: the same proxy and FastAPI path as
the Memlane ingress, and no work behind it."""

from __future__ import annotations

from fastapi import FastAPI
from ray import serve

api = FastAPI()


@serve.deployment(name="Trivial")
@serve.ingress(api)
class Trivial:
    @api.post("/")
    async def ping(self) -> dict:
        return {"ok": True}


app = Trivial.bind()
