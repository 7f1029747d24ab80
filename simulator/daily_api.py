"""A local stand-in for Daily's REST API: the rooms and meeting tokens
services/telehealth/daily.py uses, in the shapes Daily documents
(docs.daily.co/reference/rest-api: rooms, create-room, delete-room,
meeting-tokens/create-meeting-token, docs/rest-api/errors).

In memory; a real HTTP server on 127.0.0.1 under `/v1`. Every request is recorded
(`requests`, without its Authorization header), then checked like Daily does: no
`Authorization: Bearer` header is 400 `authorization-header-error`, a wrong key 401
`authentication-error`. Errors are Daily's body `{"error": TYPE, "info": TEXT}`.

Rooms: `POST /v1/rooms` takes `name` (letters, digits, `-` and `_`, at most 128; a
random one when absent), `privacy` (`public`, the default, or `private`) and
`properties` (`nbf` and `exp` whole unix seconds, the flags booleans) and answers the
room object; a name already taken is 400 `invalid-request-error` "a room named X already
exists". `GET` and `DELETE /v1/rooms/{name}` read and delete one (404 `not-found`).
`POST /v1/meeting-tokens` issues a token for an existing room (`properties.room_name`),
remembered so a test can ask whether a link's token lets it into its room
(`token_valid`). Tests queue faults: `fail_next` (a status and any body, a string sent
as it is) and `stall_next` (a late answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from aiohttp import web

from simulator.loopback import serve_on_loopback

API = "/v1"
ROOM_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
PRIVACY = ("public", "private")
TIMES = ("nbf", "exp")
FLAGS = ("eject_at_room_exp", "enable_prejoin_ui", "is_owner", "eject_at_token_exp")
ERROR_TYPES = {400: "invalid-request-error", 401: "authentication-error",
               403: "forbidden-error", 404: "not-found", 429: "rate-limit-error"}


@dataclass(frozen=True)
class Received:
    """A request the stand-in received: its JSON body (None when it had none or it was
    not JSON) and its headers without Authorization."""

    method: str
    path: str
    json: Any
    headers: dict[str, str]


@dataclass(frozen=True)
class Fault:
    """What the next request gets: `status` and `body` instead of its answer, or (with
    no status) its own answer `stall_s` late."""

    status: int | None
    body: Any = None
    stall_s: float = 0.0


@dataclass(frozen=True)
class Grant:
    """A meeting token Daily issued: which room it opens, with its properties."""

    room: str
    properties: dict[str, Any]


@dataclass
class FakeDaily:
    """One Daily domain for one test: point the adapter at it with its key."""

    api_key: str = field(default_factory=lambda: secrets.token_hex(32))
    domain: str = "clinic-test"
    base_url: str = ""
    rooms: dict[str, dict[str, Any]] = field(default_factory=dict)  # by name
    tokens: dict[str, Grant] = field(default_factory=dict)  # by token
    requests: list[Received] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    _closing: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)

    def fail_next(self, status: int, body: Any = None) -> None:
        """The next request is answered with `status` and `body` (Daily's error body for
        the status when None; a string is sent as it is, JSON or not)."""
        self.faults.append(Fault(status, body))

    def stall_next(self, seconds: float) -> None:
        """The next request is answered `seconds` late (or when the stand-in stops)."""
        self.faults.append(Fault(None, stall_s=seconds))

    def token_valid(self, url: str) -> bool:
        """Whether the link's `t` token lets it into the room it names, on this domain,
        now: issued here, for that room, the room still there, neither expired."""
        parts = urlsplit(url)
        name = parts.path.strip("/")
        token = parse_qs(parts.query).get("t", [""])[0]
        grant = self.tokens.get(token)
        room = self.rooms.get(name)
        if grant is None or room is None or grant.room != name:
            return False
        if parts.scheme != "https" or parts.netloc != f"{self.domain}.daily.co":
            return False
        now = datetime.now(UTC).timestamp()
        return all(limit.get("exp") is None or limit["exp"] > now
                   for limit in (grant.properties, room["config"]))

    def close(self) -> None:
        """Answer every stalled request now (the stand-in is stopping)."""
        self._closing.set()

    def room_requests(self) -> list[Received]:
        """The requests that created rooms."""
        return [r for r in self.requests if (r.method, r.path) == ("POST", f"{API}/rooms")]

    # --- HTTP -------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
        self.requests.append(Received(request.method, request.path, body, headers))
        if self.faults:
            fault = self.faults.pop(0)
            if fault.status is not None:
                return _faulted(fault)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), fault.stall_s)
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        if scheme != "Bearer" or not key:
            return _error(400, "authorization-header-error", "bad Authorization header format")
        if not secrets.compare_digest(key, self.api_key):
            return _error(401, "authentication-error", "the API key is not valid")
        if raw and body is None:
            return _error(400, "json-parsing-error", "the request body is not JSON")
        path, method = request.path, request.method
        one = re.fullmatch(rf"{API}/rooms/([^/]+)", path)
        if path == f"{API}/rooms" and method == "POST":
            return self._create_room(body if isinstance(body, dict) else {})
        if one and method == "GET":
            return self._room(one.group(1))
        if one and method == "DELETE":
            return self._delete_room(one.group(1))
        if path == f"{API}/meeting-tokens" and method == "POST":
            return self._issue_token(body if isinstance(body, dict) else {})
        return _error(404, "not-found", f"no endpoint {method} {path}")

    def _create_room(self, body: dict[str, Any]) -> web.Response:
        name = body.get("name", secrets.token_urlsafe(15).replace("-", "")[:20])
        if not isinstance(name, str) or not ROOM_NAME.match(name):
            return _error(400, "invalid-request-error",
                          "name may hold only letters, digits, - and _, at most 128")
        privacy = body.get("privacy", "public")
        if privacy not in PRIVACY:
            return _error(400, "invalid-request-error", "privacy must be public or private")
        properties = body.get("properties", {})
        problem = _properties_problem(properties)
        if problem:
            return _error(400, "invalid-request-error", problem)
        if name in self.rooms:
            return _error(400, "invalid-request-error", f"a room named {name} already exists")
        self.rooms[name] = {
            "id": str(uuid.uuid4()), "name": name, "api_created": True, "privacy": privacy,
            "url": f"https://{self.domain}.daily.co/{name}",
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "config": dict(properties),
        }
        return web.json_response(self.rooms[name])

    def _room(self, name: str) -> web.Response:
        if name not in self.rooms:
            return _error(404, "not-found", f"room {name} was not found")
        return web.json_response(self.rooms[name])

    def _delete_room(self, name: str) -> web.Response:
        if self.rooms.pop(name, None) is None:
            return _error(404, "not-found", f"room {name} was not found")
        self.tokens = {t: g for t, g in self.tokens.items() if g.room != name}
        return web.json_response({"deleted": True, "name": name})

    def _issue_token(self, body: dict[str, Any]) -> web.Response:
        properties = body.get("properties")
        if not isinstance(properties, dict):
            return _error(400, "invalid-request-error", "properties must be an object")
        problem = _properties_problem(properties)
        if problem:
            return _error(400, "invalid-request-error", problem)
        room = properties.get("room_name")
        if room not in self.rooms:
            return _error(400, "invalid-request-error", f"room_name {room} does not exist")
        token = secrets.token_urlsafe(32)
        self.tokens[token] = Grant(room, dict(properties))
        return web.json_response({"token": token})


def _properties_problem(properties: Any) -> str | None:
    """What is wrong with a room's or a token's properties, if anything."""
    if not isinstance(properties, dict):
        return "properties must be an object"
    for name in TIMES:
        value = properties.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            return f"{name} must be a whole number of seconds since the epoch"
    for name in FLAGS:
        if name in properties and not isinstance(properties[name], bool):
            return f"{name} must be true or false"
    return None


def _faulted(fault: Fault) -> web.Response:
    status = fault.status or 200
    if fault.body is None:
        return _error(status, ERROR_TYPES.get(status, "server-error"), "injected fault")
    if isinstance(fault.body, str):
        return web.Response(status=status, text=fault.body, content_type="application/json")
    return web.json_response(fault.body, status=status)


def _error(status: int, kind: str, info: str) -> web.Response:
    return web.json_response({"error": kind, "info": info}, status=status)


@asynccontextmanager
async def serve_daily(fake: FakeDaily, port: int = 0) -> AsyncIterator[str]:
    """Serve the stand-in on a loopback port (a free one by default); yields the API base
    URL (`…/v1`, Daily's `https://api.daily.co/v1` in production). A stalled answer is
    cut short when it stops."""
    async with serve_on_loopback(fake.handle, port) as url:
        fake.base_url = f"{url}{API}"
        try:
            yield fake.base_url
        finally:
            fake.close()


__all__ = ["FakeDaily", "Grant", "Received", "serve_daily"]
