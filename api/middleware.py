"""HTTP hardening as pure ASGI middleware: security headers, a request body limit, a
per-key rate limit and the refusal of JSON bodies with non-finite numbers.

Pure ASGI (not `BaseHTTPMiddleware`) so WebSockets, streamed bodies and range responses
pass through untouched: each layer only looks at `http` scopes, wraps `send` to add
headers, and wraps `receive` to count body bytes.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import time
from collections import OrderedDict
from dataclasses import dataclass

from loguru import logger
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.bearer import bearer_key
from config import Settings

# Same-origin dashboard with its own scripts, styles and media; observer sockets to itself.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self' blob:; connect-src 'self'; font-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
# FastAPI's interactive docs load Swagger UI / ReDoc from a CDN with an inline bootstrap.
DOCS_CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "img-src 'self' data: https://fastapi.tiangolo.com https://cdn.redoc.ly; "
    "font-src 'self' https://fonts.gstatic.com; worker-src 'self' blob:; "
    "connect-src 'self'; object-src 'none'; frame-ancestors 'none'"
)
DOCS_PATHS = ("/docs", "/redoc")
HSTS = "max-age=31536000; includeSubDomains"
RATE_LIMITED_PREFIX = "/api"
MAX_BUCKETS = 50_000  # distinct callers remembered by the limiter


def security_headers(path: str, *, https: bool) -> list[tuple[bytes, bytes]]:
    """The headers every response to `path` carries."""
    docs = path.startswith(DOCS_PATHS)
    headers = [
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"no-referrer"),
        (b"content-security-policy",
         (DOCS_CONTENT_SECURITY_POLICY if docs else CONTENT_SECURITY_POLICY).encode()),
    ]
    if https:
        headers.append((b"strict-transport-security", HSTS.encode()))
    return headers


class SecurityHeaders:
    """Adds `security_headers` to every HTTP response, and `Cache-Control: no-store` to
    API responses (call records are PHI) unless the route chose its own caching."""

    def __init__(self, app: ASGIApp, *, https: bool) -> None:
        self.app = app
        self.https = https

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        extra = security_headers(path, https=self.https)
        api = path.startswith("/api")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in extra if name not in present]
                if api and b"cache-control" not in present:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class _BodyTooLarge(HTTPException):
    """Raised from `receive` once a streamed body passes the limit: an HTTPException, so
    the app's own handler answers 413 wherever the route happened to be reading."""

    def __init__(self) -> None:
        super().__init__(413, "request body too large")


async def _json_error(send: Send, status: int, detail: object,
                      headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class BodySizeLimit:
    """413 for a request body over `max_bytes`, before the route parses it: at once from
    `Content-Length`, else as soon as the streamed body passes the limit."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            status = 413 if declared.isdigit() else 400
            await _json_error(send, status, "request body too large" if status == 413
                              else "invalid Content-Length")
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge:
            if started:
                raise
            await _json_error(send, 413, "request body too large")


NON_FINITE_TOKENS = (b"NaN", b"Infinity")
NON_FINITE_ERROR = "NaN, Infinity and -Infinity are not valid JSON numbers"


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str) -> float:
    raise _NonFinite(name)


def has_non_finite_numbers(body: bytes) -> bool:
    """Whether a JSON body writes a number as `NaN`, `Infinity` or `-Infinity` (Python's
    parser takes them, JSON has no such numbers, and no response can carry them back).
    The same words inside strings are text; a body that is not JSON at all is left for
    the route's own parser to refuse."""
    if not any(token in body for token in NON_FINITE_TOKENS):
        return False
    try:
        json.loads(body, parse_constant=_refuse_constant)
    except _NonFinite:
        return True
    except ValueError:
        return False
    return False


def _is_json(scope: Scope) -> bool:
    """A body the routes parse as JSON: `application/json` or `application/*+json`."""
    media_type = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json"))


class NonFiniteJson:
    """422 for a JSON body with non-finite numbers, for every route at once, before any
    route parses it (the body is read whole; the body limit outside this layer bounds it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        body = bytearray()
        pending: list[Message] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending.append(message)
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        if has_non_finite_numbers(bytes(body)):
            await _json_error(send, 422, [{"type": "json_invalid", "loc": ["body"],
                                           "msg": "JSON decode error", "input": {},
                                           "ctx": {"error": NON_FINITE_ERROR}}])
            return
        pending.insert(0, {"type": "http.request", "body": bytes(body), "more_body": False})

        async def replay() -> Message:
            return pending.pop(0) if pending else await receive()

        await self.app(scope, replay, send)


@dataclass
class _Bucket:
    tokens: float
    updated: float


class TokenBuckets:
    """A token bucket per caller: `per_minute` requests a minute, bursts of a tenth."""

    def __init__(self, per_minute: int, *, clock=time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, per_minute / 10.0)
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def take(self, caller: str) -> float:
        """0 when the request may go ahead, else the seconds until it could."""
        now = self._clock()
        bucket = self._buckets.pop(caller, None) or _Bucket(self.capacity, now)
        bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now
        self._buckets[caller] = bucket
        if len(self._buckets) > MAX_BUCKETS:
            self._buckets.popitem(last=False)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate


def client_address(scope: Scope) -> str:
    """The client a request or socket comes from, as limits count it: its IP address, an
    IPv6 one by its /64 (one site holds a whole /64, so single addresses are free)."""
    client = scope.get("client")
    host = client[0] if client else "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def rate_limit_caller(scope: Scope) -> str:
    """Who a request counts against: its bearer key as authentication reads it (hashed,
    never kept in clear), else its client address — unauthenticated guessing and headers
    that carry no key are limited too."""
    key = bearer_key(_header(scope, b"authorization"))
    if key is not None:
        return "key:" + hashlib.sha256(key.encode()).hexdigest()[:32]
    return f"ip:{client_address(scope)}"


class RateLimit:
    """429 with `Retry-After` once a caller spends its bucket on /api routes."""

    def __init__(self, app: ASGIApp, *, per_minute: int) -> None:
        self.app = app
        self.buckets = TokenBuckets(per_minute)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path", "").startswith(RATE_LIMITED_PREFIX):
            wait_s = self.buckets.take(rate_limit_caller(scope))
            if wait_s > 0:
                logger.info("rate limited {} {}", scope.get("method"), scope.get("path"))
                await _json_error(send, 429, "rate limit exceeded",
                                  [(b"retry-after", str(math.ceil(wait_s)).encode())])
                return
        await self.app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def add_hardening(app, settings: Settings) -> None:
    """Register the layers: headers outermost (so 413/429 carry them too), then the
    body limit, then the rate limit, then the refusal of non-finite JSON numbers."""
    app.add_middleware(NonFiniteJson)
    app.add_middleware(RateLimit, per_minute=settings.server.api_rate_limit_per_minute)
    app.add_middleware(BodySizeLimit, max_bytes=settings.server.api_max_body_bytes)
    https = (settings.server.public_url or "").lower().startswith("https://")
    app.add_middleware(SecurityHeaders, https=https)
