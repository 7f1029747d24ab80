"""FastAPI dependencies shared by the routes: the runtime and API-key authentication.

A verified key is cached in-process for `KEY_CACHE_TTL_S`, so a request costs no
database round trip for authentication; `last_used_at` is written at most once per
`KEY_TOUCH_INTERVAL_S` per key, off the request's path. A key revoked through this pod
(`ApiKeyCache.forget`) fails at once; one revoked elsewhere (another pod, the CLI)
fails within the cache TTL.

Each key has a role (`Role`): admin ⊇ operator ⊇ read_only. A route declares the least
role it needs with `require_role`, which authenticates and answers 403 when the key's role
is not enough; the `Caller` it returns names the workspace and the key (the audit log's
actor).

Failed authentications are budgeted per client address (`FailedAuthThrottle`, HTTP and
observer sockets alike): past `API_AUTH_FAILURES_PER_MINUTE`, the address may present only
keys it has already proven, so a guesser gets no more database lookups while valid keys
behind the same NAT keep working.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request, status
from loguru import logger
from starlette.requests import HTTPConnection

from api.bearer import bearer_key
from api.middleware import client_address
from config import Settings
from db import repositories as repo
from lib.event_loop import BackgroundTasks
from runner.runtime import AppRuntime

KEY_CACHE_TTL_S = 30.0
KEY_TOUCH_INTERVAL_S = 60.0
KEY_CACHE_MAX = 10_000  # distinct keys remembered; beyond it the oldest are dropped
AUTH_FAILURE_WINDOW_S = 60.0
AUTH_CLIENTS_MAX = 10_000  # client addresses remembered; beyond it the least recent dropped
PROVEN_KEYS_PER_CLIENT = 16  # keys an address has proven, most recent kept
# Answers any authenticated route may give besides its own: `responses=` for the spec.
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing, invalid or revoked API key"},
    403: {"description": "The key's role cannot do this (the detail names the role needed)"},
    429: {"description": "Rate limit of the key, or the client address's failed-"
                         "authentication budget, exceeded (see Retry-After)"},
    503: {"description": "The database is unavailable or did not answer in time (the "
                         "detail says which); retry later"},
}


def get_runtime(request: Request) -> AppRuntime:
    return request.app.state.runtime


async def own_call(runtime: AppRuntime, call_id: str, workspace_id: str) -> dict[str, Any]:
    """One of the workspace's calls (its row); 404 for an unknown call and another
    workspace's call alike, so a key cannot learn which ids exist elsewhere."""
    call = await runtime.db.bounded(repo.get_call(runtime.db.pool, call_id), what="call read")
    if call is None or str(call.get("workspace_id")) != workspace_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "call not found")
    return call


class Role(StrEnum):
    """What a key may do; each role may do everything the roles below it may."""

    ADMIN = "admin"  # settings, clinic set-up, keys, workspaces, the audit log
    OPERATOR = "operator"  # watch live calls, take over, escalations, the review queue
    READ_ONLY = "read_only"  # call history, recordings, transcripts, insights

    def allows(self, needed: Role) -> bool:
        """May a key of this role do what needs `needed`?"""
        return _RANK[self] >= _RANK[needed]


_RANK = {Role.READ_ONLY: 0, Role.OPERATOR: 1, Role.ADMIN: 2}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the key's workspace, the key, and its role."""

    workspace_id: str
    key_id: str
    key_prefix: str
    role: Role

    @property
    def actor(self) -> str:
        """How the audit log names this caller (never the key itself)."""
        return f"key vk_{self.key_prefix}"

    def may(self, needed: Role) -> bool:
        return self.role.allows(needed)


def not_allowed(role: Role, needed: Role) -> str:
    """The plain reason a key's role is refused."""
    return f"this key's role ({role}) cannot do this; it needs {needed}"


@dataclass
class _CachedKey:
    caller: Caller
    verified_at: float
    touched_at: float


class ApiKeyCache:
    """Verified keys by hash, for a short while; the one place a request's key is checked."""

    def __init__(self, *, ttl_s: float = KEY_CACHE_TTL_S,
                 touch_interval_s: float = KEY_TOUCH_INTERVAL_S) -> None:
        self._ttl_s = ttl_s
        self._touch_interval_s = touch_interval_s
        self._keys: dict[str, _CachedKey] = {}
        self._touches = BackgroundTasks()

    async def workspace_for(self, runtime: AppRuntime, plaintext: str) -> str | None:
        """The workspace id of a valid, unrevoked key; None otherwise."""
        caller = await self.caller_for(runtime, plaintext)
        return None if caller is None else caller.workspace_id

    async def caller_for(self, runtime: AppRuntime, plaintext: str) -> Caller | None:
        """The workspace, id, prefix and role of a valid, unrevoked key; None otherwise."""
        key_hash = repo.hash_api_key(plaintext)
        now = time.monotonic()
        cached = self._keys.get(key_hash)
        if cached is None or now - cached.verified_at > self._ttl_s:
            # DatabaseUnavailable here is a 503 (api.app), never a 401: the key may be fine.
            row = await runtime.db.bounded(
                repo.authenticate_api_key(runtime.db.pool, plaintext), what="API key check")
            if row is None:
                self._keys.pop(key_hash, None)
                return None
            touched_at = cached.touched_at if cached else now - self._touch_interval_s - 1
            caller = Caller(workspace_id=row["workspace_id"], key_id=row["id"],
                            key_prefix=row["prefix"], role=Role(row["role"]))
            cached = _CachedKey(caller, now, touched_at)
            self._remember(key_hash, cached)
        if now - cached.touched_at > self._touch_interval_s:
            cached.touched_at = now
            self._touches.start(self._touch(runtime, cached.caller.key_id),
                                name="api-key-touch")
        return cached.caller

    def forget(self, key_hash: str) -> None:
        """Drop a key at once (it was just revoked)."""
        self._keys.pop(key_hash, None)

    async def close(self) -> None:
        await self._touches.wait()

    def _remember(self, key_hash: str, entry: _CachedKey) -> None:
        self._keys.pop(key_hash, None)
        self._keys[key_hash] = entry
        while len(self._keys) > KEY_CACHE_MAX:
            self._keys.pop(next(iter(self._keys)))

    @staticmethod
    async def _touch(runtime: AppRuntime, key_id: str) -> None:
        try:
            await runtime.db.bounded(repo.touch_api_key(runtime.db.pool, key_id),
                                     what="API key use")
        except Exception as error:  # a missed last_used_at is not worth failing anything
            logger.warning("api key last_used_at not recorded: {}", type(error).__name__)


def key_cache(app: FastAPI) -> ApiKeyCache:
    """The app's key cache (made on first use, so any app gets one)."""
    cache = getattr(app.state, "api_key_cache", None)
    if cache is None:
        cache = app.state.api_key_cache = ApiKeyCache()
    return cache


class AuthThrottled(Exception):
    """The client address spent its failed-authentication budget and presented a key it
    has not proven: refused without a database lookup."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"too many failed authentications; retry in {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s

    @property
    def retry_after(self) -> str:
        """The `Retry-After` header value: whole seconds, at least 1."""
        return str(max(1, math.ceil(self.retry_after_s)))


@dataclass(slots=True)
class _ClientAuth:
    window_start: float
    failures: int = 0
    proven: dict[str, None] = field(default_factory=dict)  # key hash prefixes, oldest first


class FailedAuthThrottle:
    """Failed authentications per client address, `per_window` in each `window_s` (a
    window opens at the first failure after the last one closed). Past the budget, only
    keys the address has proven are let through to be checked. Bounded: at most
    `max_clients` addresses, the least recently seen dropped first."""

    def __init__(self, per_window: int, *, window_s: float = AUTH_FAILURE_WINDOW_S,
                 max_clients: int = AUTH_CLIENTS_MAX, clock=time.monotonic) -> None:
        self.per_window = per_window
        self.window_s = window_s
        self.max_clients = max_clients
        self._clock = clock
        self._clients: OrderedDict[str, _ClientAuth] = OrderedDict()

    def retry_after(self, address: str, key_hash: str) -> float:
        """0 when `address` may have `key_hash` checked; else seconds until it may."""
        entry = self._clients.get(address)
        if entry is None or entry.failures < self.per_window or key_hash[:32] in entry.proven:
            return 0.0
        return max(0.0, entry.window_start + self.window_s - self._clock())

    def failed(self, address: str, key_hash: str) -> None:
        """`address` presented a key that is not (or no longer) valid."""
        now = self._clock()
        entry = self._entry(address, now)
        if now - entry.window_start >= self.window_s:
            entry.window_start, entry.failures = now, 0
        entry.failures += 1
        entry.proven.pop(key_hash[:32], None)  # revoked since it was proven
        if entry.failures == self.per_window:
            logger.warning(f"auth throttle: a client address failed {entry.failures} API-key "
                           f"checks within {self.window_s:.0f} s; its unproven keys are refused "
                           "until the window ends")

    def succeeded(self, address: str, key_hash: str) -> None:
        """`address` proved `key_hash` valid: it stays usable from there when throttled."""
        proven = self._entry(address, self._clock()).proven
        proven.pop(key_hash[:32], None)
        proven[key_hash[:32]] = None
        if len(proven) > PROVEN_KEYS_PER_CLIENT:
            del proven[next(iter(proven))]

    def _entry(self, address: str, now: float) -> _ClientAuth:
        entry = self._clients.pop(address, None) or _ClientAuth(window_start=now)
        self._clients[address] = entry
        if len(self._clients) > self.max_clients:
            self._clients.popitem(last=False)
        return entry


def auth_throttle(app: FastAPI, settings: Settings) -> FailedAuthThrottle:
    """The app's failed-authentication throttle (made on first use)."""
    throttle = getattr(app.state, "auth_throttle", None)
    if throttle is None:
        throttle = app.state.auth_throttle = FailedAuthThrottle(
            settings.server.api_auth_failures_per_minute)
    return throttle


async def authenticate_key(connection: HTTPConnection, runtime: AppRuntime,
                           key: str) -> Caller | None:
    """Who presents `key` on `connection` (a request or a socket); None: not a valid
    key. Raises `AuthThrottled`, before any lookup, when the client address is past its
    failure budget and has not proven this key."""
    throttle = auth_throttle(connection.app, runtime.settings)
    address = client_address(connection.scope)
    key_hash = repo.hash_api_key(key)
    wait_s = throttle.retry_after(address, key_hash)
    if wait_s > 0:
        raise AuthThrottled(wait_s)
    caller = await key_cache(connection.app).caller_for(runtime, key)
    if caller is None:
        throttle.failed(address, key_hash)
    else:
        throttle.succeeded(address, key_hash)
    return caller


async def authenticated_caller(request: Request,
                               runtime: AppRuntime = Depends(get_runtime)) -> Caller:
    """The caller of a valid `Authorization: Bearer <api key>`; 401 otherwise, 429
    while the client address is throttled for failed authentications."""
    key = bearer_key(request.headers.get("authorization"))
    if key is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "missing API key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    try:
        caller = await authenticate_key(request, runtime, key)
    except AuthThrottled as throttled:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS, "too many failed authentications",
            headers={"Retry-After": throttled.retry_after},
        ) from None
    if caller is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "invalid API key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return caller


RoleDependency = Callable[..., Awaitable[Caller]]
_ROLE_DEPENDENCIES: dict[Role, RoleDependency] = {}


def require_role(needed: Role) -> RoleDependency:
    """The dependency of a route that needs `needed` (or a role above it): the `Caller`;
    401/429/503 as for any key, 403 when the key's role is not enough. One function per
    role, marked with `required_role` so the route table can be checked."""
    if needed in _ROLE_DEPENDENCIES:
        return _ROLE_DEPENDENCIES[needed]

    async def dependency(caller: Caller = Depends(authenticated_caller)) -> Caller:
        if not caller.may(needed):
            raise HTTPException(status.HTTP_403_FORBIDDEN, not_allowed(caller.role, needed))
        return caller

    dependency.__name__ = f"require_{needed}"
    dependency.required_role = needed  # type: ignore[attr-defined]
    _ROLE_DEPENDENCIES[needed] = dependency
    return dependency


def socket_role(needed: Role) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the role a WebSocket endpoint needs. A socket authenticates after it is
    accepted (its first message may carry the key), so no dependency can check it: the
    endpoint checks `Caller.may(needed)` itself and closes the socket when it is not."""
    def declare(endpoint: Callable[..., Any]) -> Callable[..., Any]:
        endpoint.required_role = needed  # type: ignore[attr-defined]
        return endpoint
    return declare


def declared_role(call: Callable[..., Any] | None) -> Role | None:
    """The role a dependency or WebSocket endpoint declares (None: it declares none)."""
    return getattr(call, "required_role", None)
