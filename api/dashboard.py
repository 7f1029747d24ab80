"""The operator dashboard: one static single-page app served by the service itself.

The page and its assets need no API key (they hold no data); every data call the page
makes carries the operator's key. Only files that exist under `dashboard/` when the
process starts are served, looked up by exact name, so a request path can never reach
outside the folder. The page runs under the app's CSP: same-origin scripts and styles
only (no inline code), sockets to this origin, and `blob:` media (the recording is
fetched with the key, then played from a Blob URL: `<audio src>` cannot send headers).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import FileResponse

DASHBOARD_DIR = Path(__file__).resolve().parents[1] / "dashboard"

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
}

# Security headers (the CSP included) come from api/middleware.py like every response's;
# assets are revalidated so a new release's scripts are never mixed with old ones.
HEADERS = {"Cache-Control": "no-cache"}


def dashboard_assets(root: Path = DASHBOARD_DIR) -> dict[str, Path]:
    """Servable files by their path under `root` ("js/app.js"), known types only."""
    if not root.is_dir():
        return {}
    return {
        path.relative_to(root).as_posix(): path
        for path in root.rglob("*")
        if path.is_file() and path.suffix in MEDIA_TYPES
    }


ASSETS = dashboard_assets()

router = APIRouter(tags=["dashboard"])


def _file(name: str) -> FileResponse:
    path = ASSETS.get(name)
    if path is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "not found")
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=HEADERS)


@router.get("/dashboard", include_in_schema=False)
async def dashboard_page() -> FileResponse:
    """The single page; routing happens in the browser (`#/live`, `#/calls/{id}`, ...)."""
    return _file("index.html")


@router.get("/dashboard/{name:path}", include_in_schema=False)
async def dashboard_asset(name: str) -> FileResponse:
    """A script, stylesheet or icon of the page."""
    return _file(name or "index.html")
