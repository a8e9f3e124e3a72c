"""The OpenAPI schema's error answers: every operation documents the statuses it can answer
with the service's error body (serve/errors.py), so a client generator, or a schema-driven
fuzzer checking responses against the schema (tests/serving/test_fuzz.py), sees the shape the
service really sends, not FastAPI's default ``HTTPValidationError``.

Which statuses an operation documents follows from what it takes: a key (401, 429), a bank
(403; 404 unless it creates the bank), a JSON body (400 malformed), any body (413 too
large), any parameter or body (422); reflect, consolidate and health add 503.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from serve.errors import ErrorBody

_REF = "#/components/schemas/ErrorBody"
_WHY = {
    "400": "the body is not valid JSON",
    "401": "missing or unknown API key",
    "403": "the bank is outside the key's banks",
    "404": "unknown bank, memory, document, entity or operation",
    "413": "the body is over MEMLANE_SERVE__MAX_BODY_BYTES",
    "422": "a bad field (named in error.field)",
    "429": "the key's rate limit (Retry-After says when to retry)",
    "503": "a dependency is missing or failing: the store (health), or the LLM (reflect, consolidate "
    "with llm): not configured, unreachable, timed out, or no valid reply after a repair",
}
_UNAVAILABLE = {
    ("get", "/v1/health"),
    ("post", "/v1/banks/{bank_id}/reflect"),
    ("post", "/v1/banks/{bank_id}/consolidate"),
}
_BANK = "/v1/banks/{bank_id}"
# Success answers besides FastAPI's 200.
_SUCCESS = {
    ("put", _BANK): {"201": "the bank was created (200: updated)"},
    ("post", _BANK + "/memories"): {"202": "async: the operation to poll (Location names it)"},
    ("put", _BANK + "/models/{model_id}"): {"201": "the model was created (200: updated or unchanged)"},
    ("put", _BANK + "/directives/{directive_id}"): {
        "201": "the directive was created (200: updated or unchanged)"
    },
    ("post", _BANK + "/consolidate"): {"202": "async: the operation to poll (Location names it)"},
}
_NDJSON = {("get", _BANK + "/export")}
# Links: where one operation's answer names what another takes (OpenAPI 3 links; clients and
# schema-driven testers follow them to chain calls).
_IN_BANK = {
    "GetBank": ("get", _BANK, {}),
    "RetainIntoBank": ("post", _BANK + "/memories", {}),
    "ListMemories": ("get", _BANK + "/memories", {}),
    "ListDocuments": ("get", _BANK + "/documents", {}),
    "ListEntities": ("get", _BANK + "/entities", {}),
    "Recall": ("post", _BANK + "/recall", {}),
    # curated memory (serve/curated_routes.py): the ids are the user's, so a constant starts them
    "ListMentalModels": ("get", _BANK + "/models", {}),
    "PutMentalModel": ("put", _BANK + "/models/{model_id}", {"model_id": "linked-model"}),
    "ListDirectives": ("get", _BANK + "/directives", {}),
    "PutDirective": ("put", _BANK + "/directives/{directive_id}", {"directive_id": "linked-rule"}),
    "RefreshMentalModel": ("post", _BANK + "/models/{model_id}/refresh", {"model_id": "linked-model"}),
    "DeleteDirective": ("delete", _BANK + "/directives/{directive_id}", {"directive_id": "linked-rule"}),
    "GetTree": ("get", _BANK + "/tree", {}),
    "Consolidate": ("post", _BANK + "/consolidate", {}),
}
_MODEL = _BANK + "/models/{model_id}"
_ON_MODEL = {
    "GetMentalModel": ("get", _MODEL, {}),
    "RefreshMentalModel": ("post", _MODEL + "/refresh", {}),
    "DeleteMentalModel": ("delete", _MODEL, {}),
}
_ON_DIRECTIVE = {"DeleteDirective": ("delete", _BANK + "/directives/{directive_id}", {})}


def _with(links: dict, name: str, value: str) -> dict:
    return {k: (m, p, {name: value}) for k, (m, p, _) in links.items()}


_LINKS: dict[tuple[str, str, str], dict[str, tuple[str, str, dict[str, str]]]] = {
    ("put", _BANK, "201"): _IN_BANK,
    ("put", _BANK, "200"): _IN_BANK,
    ("post", _BANK + "/memories", "200"): {k: v for k, v in _IN_BANK.items() if k != "RetainIntoBank"},
    ("post", _BANK + "/memories", "202"): {
        "GetOperation": (
            "get",
            _BANK + "/operations/{operation_id}",
            {"operation_id": "$response.body#/operation_id"},
        ),
    },
    ("post", _BANK + "/consolidate", "200"): {"GetTree": ("get", _BANK + "/tree", {})},
    ("post", _BANK + "/consolidate", "202"): {
        "GetOperation": (
            "get",
            _BANK + "/operations/{operation_id}",
            {"operation_id": "$response.body#/operation_id"},
        ),
    },
    ("get", _BANK + "/memories", "200"): {
        "GetMemory": ("get", _BANK + "/memories/{memory_id}", {"memory_id": "$response.body#/items/0/id"}),
        "DeleteMemory": (
            "delete",
            _BANK + "/memories/{memory_id}",
            {"memory_id": "$response.body#/items/0/id"},
        ),
    },
    ("get", _BANK + "/documents", "200"): {
        "DeleteDocument": (
            "delete",
            _BANK + "/documents/{document_id}",
            {"document_id": "$response.body#/documents/0/document_id"},
        ),
    },
    ("put", _MODEL, "201"): _with(_ON_MODEL, "model_id", "$response.body#/id"),
    ("put", _MODEL, "200"): _with(_ON_MODEL, "model_id", "$response.body#/id"),
    ("get", _BANK + "/models", "200"): _with(_ON_MODEL, "model_id", "$response.body#/models/0/id"),
    ("put", _BANK + "/directives/{directive_id}", "201"): _with(
        _ON_DIRECTIVE, "directive_id", "$response.body#/id"
    ),
    ("get", _BANK + "/directives", "200"): _with(
        _ON_DIRECTIVE, "directive_id", "$response.body#/directives/0/id"
    ),
    ("get", _BANK + "/entities", "200"): {
        "GetEntity": (
            "get",
            _BANK + "/entities/{entity_id}",
            {"entity_id": "$response.body#/entities/0/entity_id"},
        ),
    },
}


def error_statuses(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    """The error statuses ``operation`` (FastAPI's generated OpenAPI object) can answer."""
    statuses = set()
    if operation.get("security"):
        statuses |= {"401", "429"}
    if "{bank_id}" in path:
        statuses.add("403")
        if method != "put" or path != _BANK:  # only PUT of the bank itself creates it
            statuses.add("404")
    if "requestBody" in operation:
        statuses.add("400")
    if "requestBody" in operation or method in ("post", "put"):  # import reads its body raw
        statuses.add("413")
    if "requestBody" in operation or operation.get("parameters"):
        statuses.add("422")
    if (method, path) in _UNAVAILABLE:
        statuses.add("503")
    return sorted(statuses)


def document_errors(app: FastAPI) -> None:
    """Make ``app.openapi()`` document the error statuses of every operation with ErrorBody."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        components.update(
            ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}").pop("$defs")
        )
        components["ErrorBody"] = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
        components["ErrorBody"].pop("$defs", None)
        paths = schema.get("paths", {})
        for path, operations in paths.items():
            for method, operation in operations.items():
                responses = operation.setdefault("responses", {})
                for status, why in _SUCCESS.get((method, path), {}).items():
                    responses[status] = {**responses.get("200", {}), "description": why}
                if (method, path) in _NDJSON:
                    responses["200"]["content"] = {"application/x-ndjson": {"schema": {"type": "string"}}}
                responses.pop("422", None)
                for status in error_statuses(method, path, operation):
                    responses[status] = {
                        "description": _WHY[status],
                        "content": {"application/json": {"schema": {"$ref": _REF}}},
                    }
        for (method, path, status), links in _LINKS.items():
            response = paths[path][method]["responses"][status]
            response["links"] = {
                name: {
                    "operationId": paths[to_path][to_method]["operationId"],
                    "parameters": {"bank_id": "$request.path.bank_id", **params},
                }
                for name, (to_method, to_path, params) in links.items()
            }
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
