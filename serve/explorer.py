"""The memory explorer: static pages at /ui, served by the ingress (no build step, no CDN).

The page is plain HTML, CSS and one ES module (``serve/ui/``); it asks for an API key and reads
the /v1 API with it, so it can see exactly what the key may see. Serve ships the FastAPI app
to replicas by value, so the asset folder is resolved from this module's file at request time
rather than captured when the app object is built.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response

from serve.errors import APIError

router = APIRouter(include_in_schema=False)

# The only files served: a fixed list, so no request path ever reaches the file system.
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}

# Everything from this origin only: the page loads its own script and style and talks to this
# API; no inline script or style (the module sets element styles through the DOM, which CSP
# allows), no framing, no form posts elsewhere, no referrer leaking bank names.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def asset_dir() -> Path:
    return Path(__file__).resolve().parent / "ui"


# The page at both addresses, without a redirect (a redirect's empty body is what a user with
# curl saw): its asset URLs are absolute (/ui/app.js), as the API's are (/v1/...), so they
# resolve the same from /ui and /ui/.
@router.get("/ui")
@router.get("/ui/")
async def ui_index() -> Response:
    return _asset("index.html")


@router.get("/ui/{name}")
async def ui_asset(name: str) -> Response:
    return _asset(name)


def _asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    path = asset_dir() / name
    if media_type is None or not path.is_file():
        raise APIError(404, "not_found", f"no explorer asset {name!r}", "name")
    return FileResponse(path, media_type=media_type, headers=SECURITY_HEADERS)
