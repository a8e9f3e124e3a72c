"""The API's documentation pages, /docs (Swagger UI) and /redoc, with every asset served by the
service itself: FastAPI's own pages load Swagger UI and ReDoc from a CDN (and ReDoc's fonts
from Google), so offline, or behind a firewall, /docs was a blank page.

The assets are the files the ``fastapi-offline`` package ships (Swagger UI 5, which reads the
OpenAPI 3.1 schema FastAPI writes; ReDoc standalone); only the page HTML comes from FastAPI
(``get_swagger_ui_html``, ``get_redoc_html``). As for the explorer (serve/explorer.py), a fixed
list of files is served, so no request path reaches the file system, and the folder is found
at request time (Serve ships the app to replicas by value).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse, Response

from serve.errors import APIError

router = APIRouter(include_in_schema=False)

DOCS_URL, REDOC_URL, ASSETS_URL = "/docs", "/redoc", "/docs/assets"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
# validatorUrl: Swagger UI would otherwise load a badge from the public validator's site.
SWAGGER_PARAMETERS = {"validatorUrl": None}


def asset_dir() -> Path:
    """The ``static`` folder of the fastapi-offline package, found without importing it."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:
        raise APIError(503, "unavailable", "the API docs' assets (fastapi-offline) are not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "static"


def _root(request: Request) -> str:
    return request.scope.get("root_path", "") or ""


@router.get(DOCS_URL)
async def swagger_ui(request: Request) -> HTMLResponse:
    root = _root(request)
    return get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - API",
        oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT_URL}",
        swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        swagger_ui_parameters=SWAGGER_PARAMETERS,
    )


@router.get(OAUTH2_REDIRECT_URL)
async def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get(REDOC_URL)
async def redoc(request: Request) -> HTMLResponse:
    root = _root(request)
    return get_redoc_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - API",
        redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        with_google_fonts=False,
    )


@router.get(ASSETS_URL + "/{name}")
async def asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    path = asset_dir() / name
    if media_type is None or not path.is_file():
        raise APIError(404, "not_found", f"no docs asset {name!r}", "name")
    return FileResponse(path, media_type=media_type, headers={"Cache-Control": "max-age=86400"})
