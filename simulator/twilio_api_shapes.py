"""The shapes every answer of Twilio's REST API takes, shared by the stand-in's resources
(twilio.com/docs/usage/twilios-response, /docs/usage/twilios-response#pagination,
/docs/errors): a paged list, and the error body."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from aiohttp import web


def page(request: web.Request, key: str, found: list[dict[str, Any]]) -> web.Response:
    """Twilio's paged list shape, everything on the first page."""
    page_size = int(request.query.get("PageSize", "50"))
    found = found[:page_size]
    query = {k: v for k, v in request.query.items() if k not in ("Page", "PageToken")}
    uri = f"{request.path}?{urlencode({**query, 'PageSize': page_size, 'Page': 0})}"
    return web.json_response({
        key: found, "end": max(len(found) - 1, 0), "first_page_uri": uri,
        "next_page_uri": None, "page": 0, "page_size": page_size, "previous_page_uri": None,
        "start": 0, "uri": uri,
    })


def error(status: int, code: int, message: str) -> web.Response:
    """Twilio's error body: `{code, message, more_info, status}`."""
    return web.json_response({"code": code, "message": message,
                              "more_info": f"https://www.twilio.com/docs/errors/{code}",
                              "status": status}, status=status)
