"""The OpenAPI schema documents what the service really answers (serve/openapi.py): the error
body on every error status, the bearer key as a security scheme, the non-200 successes and the
links between operations. Built from the app alone: no service needed."""

from __future__ import annotations

import pytest

ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


@pytest.fixture(scope="module")
def schema():
    from serve.ingress import api

    return api.openapi()


def _operations(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            yield method, path, operation


def test_every_error_status_documents_the_error_body(schema):
    # Before: 422 was FastAPI's HTTPValidationError ({"detail": [...]}), which the service never
    # sends, and 401/403/404/413/429 were not documented at all (schemathesis: ST103).
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    body = schema["components"]["schemas"]["ErrorBody"]
    assert body["required"] == ["error"]
    detail = schema["components"]["schemas"]["ErrorDetail"]
    assert {"code", "message", "field"} <= set(detail["properties"])
    seen = 0
    for method, path, operation in _operations(schema):
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                assert response["content"]["application/json"]["schema"] == ERROR_REF, (method, path)
                seen += 1
    assert seen > 60


def test_statuses_follow_what_each_operation_takes(schema):
    paths = schema["paths"]
    assert set(paths["/v1/health"]["get"]["responses"]) == {"200", "503"}
    assert set(paths["/v1/banks/{bank_id}/recall"]["post"]["responses"]) == {
        "200",
        "400",
        "401",
        "403",
        "404",
        "413",
        "422",
        "429",
    }
    put = paths["/v1/banks/{bank_id}"]["put"]["responses"]
    assert "201" in put and "404" not in put
    assert "202" in paths["/v1/banks/{bank_id}/memories"]["post"]["responses"]
    assert "503" in paths["/v1/banks/{bank_id}/reflect"]["post"]["responses"]
    export = paths["/v1/banks/{bank_id}/export"]["get"]["responses"]["200"]["content"]
    assert list(export) == ["application/x-ndjson"]


def test_the_key_is_a_bearer_security_scheme_not_a_header_parameter(schema):
    # Before: every keyed operation took an "authorization" header parameter, so a fuzzer
    # generated random keys instead of using the configured one.
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for method, path, operation in _operations(schema):
        names = {p["name"].lower() for p in operation.get("parameters", [])}
        assert "authorization" not in names, (method, path)
        keyed = path != "/v1/health"
        assert bool(operation.get("security")) == keyed, (method, path)


def test_links_name_existing_operations(schema):
    ids = {op["operationId"] for _, _, op in _operations(schema)}
    links = [
        link
        for _, _, op in _operations(schema)
        for response in op["responses"].values()
        for link in response.get("links", {}).values()
    ]
    assert len(links) >= 6
    for link in links:
        assert link["operationId"] in ids
        assert link["parameters"]["bank_id"] == "$request.path.bank_id"
