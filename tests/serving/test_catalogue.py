"""Every surface against the one catalogue of operations (memlane/catalogue.py).

The REST API (its OpenAPI document), both SDK clients, the MCP tools, the CLI and the engine's
facade each offer exactly the catalogue's operations under the names it declares, with its
parameter names, and the MCP tools' defaults and limits are the REST API's (or a difference
the catalogue declares). A surface that lacks an operation, serves an undeclared one or names
a parameter differently fails here; the rules the catalogue fixes are run on a real engine.
"""

from __future__ import annotations

import inspect
import json
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
import typer.main

from cluster.cli import app as cli_app
from memlane import catalogue
from memlane.catalogue import OPERATIONS, Operation
from memlane.engine import Memory
from memlane.errors import BankNotFound, InvalidInput
from memlane.records import RetainItem
from memlane_client import AsyncMemlaneClient, MemlaneClient
from serve.ingress import api
from serve.mcp_server import build_mcp_server

BOUNDS = ("default", "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "maxLength", "minLength")
HTTP_OPS = [op for op in OPERATIONS if op.http]


def _openapi() -> dict[str, Any]:
    return api.openapi()


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _rest_params(op: Operation) -> dict[str, dict[str, Any]]:
    """The route's parameters (path but the bank, query, JSON body fields) by wire name."""
    doc = _openapi()
    method, path = op.http  # type: ignore[misc]
    spec = doc["paths"][path][method.lower()]
    out = {p["name"]: p.get("schema", {}) for p in spec.get("parameters", []) if p["name"] != "bank_id"}
    body = spec.get("requestBody", {}).get("content", {}).get("application/json")
    if body:
        schema = body["schema"]
        if "anyOf" in schema:  # an optional body
            schema = next(s for s in schema["anyOf"] if s.get("type") != "null")
        out.update(_resolve(doc, schema).get("properties", {}))
    return out


def _expected_wire(op: Operation) -> set[str]:
    if op.request is not None:
        return {f.alias or name for name, f in op.request.model_fields.items()}
    return {p.http for p in op.params if p.http != catalogue.RAW_BODY}


@pytest.mark.parametrize("op", HTTP_OPS, ids=lambda op: op.name)
def test_each_route_is_declared_with_the_catalogues_parameter_names(op: Operation) -> None:
    method, path = op.http  # type: ignore[misc]
    assert method.lower() in _openapi()["paths"].get(path, {}), f"{op.name}: no route {method} {path}"
    assert set(_rest_params(op)) == _expected_wire(op)


def test_the_api_serves_no_operation_the_catalogue_lacks() -> None:
    declared = {(m.lower(), p) for m, p in (op.http for op in HTTP_OPS)}  # type: ignore[misc]
    served = {(m, p) for p, item in _openapi()["paths"].items() for m in item if p.startswith("/v1/")}
    assert served == declared


def _sdk_names(fn: Any) -> tuple[set[str], bool]:
    sig = inspect.signature(fn)
    names = {n for n, p in sig.parameters.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    var_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    return names - {"self", "bank_id"}, var_kw


def _sample(name: str) -> Any:
    return {"items": ["x"], "data": b"{}\n", "documents": ["x"], "wait": False}.get(name, "v1")


@pytest.mark.parametrize("op", [op for op in OPERATIONS if op.sdk_method], ids=lambda op: op.name)
def test_both_sdk_clients_send_each_operation_to_its_route(op: Operation) -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(
            200,
            json={
                k: []
                for k in (
                    "banks",
                    "documents",
                    "entities",
                    "sessions",
                    "nodes",
                    "models",
                    "directives",
                    "scores",
                )
            },
        )

    for client_cls in (MemlaneClient, AsyncMemlaneClient):
        assert hasattr(client_cls, op.sdk_method), f"{client_cls.__name__} lacks {op.sdk_method}"
    names, var_kw = _sdk_names(getattr(MemlaneClient, op.sdk_method))  # type: ignore[arg-type]
    if op.request is not None:  # recall, reflect: the query, then the request's fields
        assert names == {"query"} and var_kw
        names = op.param_names()
    else:
        assert names == op.param_names() and not var_kw
    if op.http is None:
        return
    args = {n: _sample(n) for n in (names if op.request is None else {"query"})}
    bank = ("b",) if op.bank else ()
    with MemlaneClient("http://memlane.test", transport=httpx.MockTransport(answer)) as client:
        getattr(client, op.sdk_method)(*bank, **args)  # type: ignore[arg-type]

    async def async_call() -> None:
        transport = httpx.MockTransport(answer)
        async with AsyncMemlaneClient("http://memlane.test", transport=transport) as client:
            await getattr(client, op.sdk_method)(*bank, **args)  # type: ignore[arg-type]

    anyio.run(async_call)
    method, path = op.http
    want = path.replace("{bank_id}", "b")
    for key in ("memory_id", "document_id", "entity_id", "model_id", "directive_id", "operation_id"):
        want = want.replace("{" + key + "}", "v1")
    assert [(r.method, r.url.path) for r in sent] == [(method, want)] * 2
    body = json.loads(sent[0].content) if sent[0].content and op.name != "import_bank" else {}
    on_wire = set(sent[0].url.params) | set(body)
    in_path = {p.name for p in op.params if "{" + p.name + "}" in path}
    assert {p.http for p in op.params if p.http != catalogue.RAW_BODY} - in_path <= on_wire | (
        {"query"} if op.request else set()
    )


def _tools() -> dict[str, Any]:
    @asynccontextmanager
    async def nothing(_: Any):
        yield lambda _headers: None

    return {t.name: t for t in anyio.run(build_mcp_server(nothing).list_tools)}


def test_the_mcp_tools_are_the_catalogues() -> None:
    assert set(_tools()) == {op.mcp for op in OPERATIONS if op.mcp}


@pytest.mark.parametrize("op", [op for op in OPERATIONS if op.mcp], ids=lambda op: op.name)
def test_each_tool_names_limits_and_defaults_its_parameters_as_the_api(op: Operation) -> None:
    props = dict(_tools()[op.mcp].input_schema["properties"])  # type: ignore[index]
    props.pop("bank", None)  # the bank id, a path parameter on HTTP
    rest = _rest_params(op)
    allowed = set(rest) | (set(RetainItem.model_fields) if op.name == "retain" else set())
    assert set(props) <= allowed, f"{op.mcp}: {set(props) - allowed} are not the API's names"
    for name, schema in props.items():
        if name not in rest:
            continue
        theirs, ours = _resolve(_openapi(), rest[name]), schema
        for key in BOUNDS:
            want = op.mcp_defaults.get(name, theirs.get(key)) if key == "default" else theirs.get(key)
            got = ours.get(key)
            if key == "default" and want is None and got == []:
                continue  # an empty list where the API's body field defaults to an empty list
            assert got == want, f"{op.mcp}.{name}: {key} {got!r} != {want!r}"


def _commands(group: Any, prefix: str = "") -> set[str]:
    out = set()
    for name, sub in getattr(group, "commands", {}).items():
        out.add(prefix + name)
        out |= _commands(sub, prefix + name + " ")
    return out


def test_each_declared_cli_command_exists() -> None:
    commands = _commands(typer.main.get_command(cli_app))
    assert {op.cli for op in OPERATIONS if op.cli} <= commands


# The facade's members that are not operations: its parts, for the layers that drive them.
PARTS = {
    "store", "graph", "derived", "writer", "embedder", "reranker", "extractor",
    "retainer", "reflection", "scheduler", "consolidator", "close", "wait_background",
    "plan_items", "retain", "retain_file", "create_bank",
}  # fmt: skip


def test_the_facade_offers_the_catalogues_operations_and_its_parts_only() -> None:
    roots = {op.engine.split(".")[0] for op in OPERATIONS if op.engine}
    public = {n for n in dir(Memory) if not n.startswith("_")}
    assert public == roots | PARTS


@pytest.mark.parametrize("op", [op for op in OPERATIONS if op.engine], ids=lambda op: op.name)
def test_each_engine_callable_takes_the_catalogues_parameters(op: Operation, engine: Memory) -> None:
    fn: Any = engine
    for part in op.engine.split("."):  # type: ignore[union-attr]
        fn = getattr(fn, part)
    sig = inspect.signature(fn)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        assert op.request is not None  # recall, reflect: **options are the request's fields
        return
    wanted = {p.name for p in op.params if p.engine} | set(op.fixed)
    assert wanted <= set(sig.parameters), f"{op.engine}{sig} lacks {wanted - set(sig.parameters)}"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    from memlane.settings import Settings

    memory = Memory(Settings(data_dir=tmp_path_factory.mktemp("catalogue") / "data"))
    yield memory
    memory.close()


def test_the_rules_apply_on_the_engine(engine: Memory) -> None:
    with pytest.raises(BankNotFound):  # retain needs a bank on every surface
        catalogue.call(engine, "retain", "ghost", items=[{"content": "hello"}])
    assert engine.store.get_bank("ghost") is None
    out = catalogue.call(engine, "put_bank", "ghost", name="Ghost")
    assert out["created"] is True and out["bank"]["name"] == "Ghost"
    report = catalogue.call(engine, "retain", "ghost", items=[{"content": "My cat is Miso"}], wait=True)
    assert report["units"] >= 1
    with pytest.raises(InvalidInput, match="colour"):
        catalogue.call(engine, "list_memories", "ghost", colour="red")
    page = catalogue.call(engine, "list_memories", "ghost", limit=5)
    assert page["total"] == report["units"] and page["limit"] == 5 and "embedding" not in page["items"][0]


def test_the_docs_table_is_the_catalogue() -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text()
    assert catalogue.markdown() in docs


# The Hindsight-compatible surface (serve/hindsight/) -----------------------------------------
HS_OPS = [op for op in OPERATIONS if op.hindsight]


def _hindsight_routes() -> dict[tuple[str, str], Any]:
    """The surface's routes (method, path under /hindsight) and their endpoints, but the
    catch-all that answers 501."""
    from fastapi.routing import APIRoute

    from serve.hindsight import routes

    out = {}
    for route in routes.router.routes:
        assert isinstance(route, APIRoute)
        if route.endpoint is routes.not_offered:
            continue
        for method in route.methods:
            out[(method, route.path.removeprefix(routes.PREFIX))] = route.endpoint
    return out


def test_the_hindsight_surface_serves_exactly_the_catalogues_routes() -> None:
    declared = {route for op in HS_OPS for route in op.hindsight}
    assert set(_hindsight_routes()) == declared
    assert len(declared) == sum(len(op.hindsight) for op in HS_OPS)  # each route runs one operation


class _EngineBackend:
    """The surface's backend over a real engine in this process: every operation through
    catalogue.call (an undeclared parameter name fails it), recording what ran. The LLM of
    reflect and the Memory deployment's queue are the edges: their requests are validated and
    answered here."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.ran: list[str] = []

    async def call(self, name: str, bank_id: str | None, params: dict[str, Any]) -> Any:
        from serve.errors import engine_error

        self.ran.append(name)
        try:
            return catalogue.call(self.memory, name, bank_id, **params)
        except Exception as exc:
            raise (engine_error(exc) or exc) from None

    async def recall(self, bank_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.call("recall", bank_id, params)

    async def reflect(self, bank_id: str, params: dict[str, Any]) -> dict[str, Any]:
        from memlane.reflect.requests import ReflectRequest

        self.ran.append("reflect")
        assert set(params) <= catalogue.operation("reflect").param_names()
        ReflectRequest.model_validate(params)
        self.memory.banks.get(bank_id)
        return {"answer": "scripted", "memories": []}

    async def retain_async(self, bank_id: str, body: dict[str, Any], operation_id: str) -> dict[str, Any]:
        self.ran.append("retain")
        assert set(body) <= catalogue.operation("retain").param_names()
        self.memory.plan_items(bank_id, body["items"])
        return {"operation_id": operation_id, "bank_id": bank_id, "kind": "retain", "status": "queued"}

    async def operation(self, bank_id: str, operation_id: str) -> dict[str, Any]:
        self.ran.append("get_operation")
        return {"operation_id": operation_id, "bank_id": bank_id, "kind": "retain", "status": "succeeded"}

    async def health(self) -> dict[str, Any]:
        self.ran.append("health")
        return {"store": "ok"}

    def features(self) -> dict[str, bool]:
        self.ran.append("version")
        return {"mcp": True}


# Request bodies as hindsight-client 1.1.0 sends them (captured: explicit nulls, defaults sent).
HS_BODIES: dict[str, dict[str, Any]] = {
    "BankBody": {"name": "Ana", "mission": "Help Ana", "disposition_skepticism": 4},
    "ConfigUpdateBody": {"updates": {"reflect_mission": "rm", "retain_chunk_size": 1000}},
    "RetainBody": {
        "items": [
            {
                "content": "Ana: My cat is Miso.\nBen: Lovely!",
                "resolve_entities": True,
                "timestamp": "2024-01-15T10:30:00Z",
                "context": None,
                "metadata": None,
                "document_id": "d/1",
                "entities": None,
                "tags": ["pets"],
                "observation_scopes": None,
                "strategy": None,
                "update_mode": None,
            }
        ],
        "async": False,
        "document_tags": None,
    },
    "RecallBody": {
        "query": "What is the cat called?",
        "budget": "mid",
        "max_tokens": 4096,
        "trace": True,
        "include": {"entities": {"max_tokens": 500}, "chunks": {"max_tokens": 1000}, "source_facts": None},
        "tags_match": "any",
        "types": ["world", "opinion"],
        "prefer_observations": None,
        "query_timestamp": "2024-02-01T00:00:00",
        "tags": ["pets"],
        "tag_groups": None,
        "min_scores": None,
        "temporal_window": None,
    },
    "ReflectBody": {
        "query": "What do I know about Miso?",
        "budget": "low",
        "context": "ctx",
        "max_tokens": 500,
        "response_schema": {"type": "object"},
        "tags": None,
        "tags_match": "any_strict",
        "tag_groups": None,
        "fact_types": None,
    },
}


def _route_args(endpoint: Any, surface: Any) -> dict[str, Any]:
    import uuid

    from starlette.requests import Request

    from serve.auth import Principal
    from serve.hindsight import requests as hs_requests

    args: dict[str, Any] = {}
    for name, param in inspect.signature(endpoint).parameters.items():
        kind = param.annotation if isinstance(param.annotation, str) else param.annotation.__name__
        model = kind.split(" ")[0]
        if model in HS_BODIES:
            args[name] = getattr(hs_requests, model).model_validate(HS_BODIES[model])
        else:
            args[name] = {
                "bank_id": "hs ana",
                "s": surface,
                "who": Principal("k", None),
                "operation_id": str(uuid.uuid4()),
                "document_id": "d/1",
                "q": None,
                "limit": 100,
                "offset": 0,
                "request": Request({"type": "http", "query_string": b"tags=x"}),
            }[name]
    return args


def test_each_hindsight_route_runs_its_declared_operation_on_the_engine(engine: Memory) -> None:
    """Every route, with the client's bodies, in the order a client would use them: it runs the
    operation the catalogue declares for it, with the catalogue's parameter names."""
    from serve.hindsight.surface import Surface

    routes = _hindsight_routes()
    # create the bank, retain, read, delete the document and then the bank
    rank = {"PUT": 0, "POST": 1, "PATCH": 2, "GET": 3, "DELETE": 4}
    order = sorted(routes, key=lambda r: (rank[r[0]], r[1].count("/") * (-1 if r[0] == "DELETE" else 1), r))
    for method, path in order:
        backend = _EngineBackend(engine)
        op = next(op for op in HS_OPS if (method, path) in op.hindsight)
        endpoint = routes[(method, path)]
        args = _route_args(endpoint, Surface(backend))
        response = anyio.run(lambda: endpoint(**args))  # noqa: B023
        assert response.status_code == 200, (method, path, response.body)
        assert op.name in backend.ran, f"{method} {path} ran {backend.ran}, not {op.name}"


def _hindsight_servers() -> dict[bool, Any]:
    from serve.hindsight.mcp import build_hindsight_mcp

    return {single: build_hindsight_mcp(lambda _h: None, single=single) for single in (False, True)}


def test_the_hindsight_mcp_tools_are_the_catalogues_and_the_rest_are_refused() -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    from serve.hindsight.mcp import HINDSIGHT_TOOLS, MULTI_BANK_ONLY

    declared = {t for op in OPERATIONS for t in op.hindsight_mcp}
    assert declared <= HINDSIGHT_TOOLS
    for single, server in _hindsight_servers().items():
        tools = {t.name for t in anyio.run(server.list_tools)}
        assert tools == (declared - MULTI_BANK_ONLY if single else declared)
        assert server.refused == HINDSIGHT_TOOLS - tools
        for tool in anyio.run(server.list_tools):  # as Hindsight's two servers: no bank_id on a bank's
            takes_bank = (not single and tool.name != "list_banks") or tool.name == "create_bank"
            assert ("bank_id" in tool.input_schema["properties"]) == takes_bank, tool.name
        with pytest.raises(ToolError, match="not_offered: get_bank_stats is a Hindsight tool"):
            anyio.run(lambda: server.call_tool("get_bank_stats", {"bank_id": "x"}))  # noqa: B023


TOOL_ARGS: dict[str, dict[str, Any]] = {
    "create_bank": {"bank_id": "hs ana", "name": "Ana"},
    "retain": {"content": "Ana: I play the cello."},
    "sync_retain": {"content": "Ana: My dog is Rex.", "document_id": "d/2", "tags": ["pets"]},
    "recall": {"query": "dog", "include_entities": True, "tags": ["pets"], "tags_match": "all_strict"},
    "reflect": {"query": "Who is Rex?", "include_based_on": True},
    "list_banks": {},
    "list_documents": {"q": "rex"},
    "get_document": {"document_id": "d/2"},
    "create_mental_model": {"name": "Pets", "source_query": "Which pets do I have?"},
    "list_mental_models": {},
    "get_mental_model": {"mental_model_id": "pets"},
    "refresh_mental_model": {"mental_model_id": "pets"},
    "delete_mental_model": {"mental_model_id": "pets"},
    "delete_document": {"document_id": "d/2"},
}


def test_each_hindsight_tool_runs_its_declared_operation_on_the_engine(engine: Memory) -> None:
    from types import SimpleNamespace

    from serve.auth import Principal
    from serve.hindsight import mcp
    from serve.hindsight.surface import Surface

    declared = {t: op.name for op in OPERATIONS for t in op.hindsight_mcp}
    assert set(TOOL_ARGS) == declared.keys()
    for name, args in TOOL_ARGS.items():
        backend = _EngineBackend(engine)
        resolve = lambda _headers, b=backend: (Surface(b), Principal("k", None))  # noqa: E731
        ctx = SimpleNamespace(request_context=SimpleNamespace(lifespan_context=resolve), headers={})
        fn = next(f for f in mcp.TOOLS if f.__name__ == name)
        kwargs = args if name in ("list_banks", "create_bank") else {"bank_id": "hs ana", **args}
        out = anyio.run(lambda: fn(ctx, **kwargs))  # noqa: B023
        assert isinstance(out, dict) and "error" not in out
        assert declared[name] in backend.ran, f"{name} ran {backend.ran}, not {declared[name]}"
