"""FastAPI dependencies shared by the routes: the runtime and API-key authentication.

A verified key is cached in-process for `KEY_CACHE_TTL_S`, so a request costs no
database round trip for authentication; `last_used_at` is written at most once per
`KEY_TOUCH_INTERVAL_S` per key, off the request's path. A key revoked through this pod
(`ApiKeyCache.forget`) fails at once; one revoked elsewhere (another pod, the CLI)
fails within the cache TTL.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request, status
from loguru import logger

from db import repositories as repo
from services.event_loop import BackgroundTasks
from services.runtime import AppRuntime

KEY_CACHE_TTL_S = 30.0
KEY_TOUCH_INTERVAL_S = 60.0
KEY_CACHE_MAX = 10_000  # distinct keys remembered; beyond it the oldest are dropped
# Answers any authenticated route may give besides its own: `responses=` for the spec.
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing, invalid or revoked API key"},
    429: {"description": "Rate limit of the key exceeded (see Retry-After)"},
}


def get_runtime(request: Request) -> AppRuntime:
    return request.app.state.runtime


@dataclass
class _CachedKey:
    key_id: str
    workspace_id: str
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
        key_hash = repo.hash_api_key(plaintext)
        now = time.monotonic()
        cached = self._keys.get(key_hash)
        if cached is None or now - cached.verified_at > self._ttl_s:
            row = await repo.authenticate_api_key(runtime.db.pool, plaintext)
            if row is None:
                self._keys.pop(key_hash, None)
                return None
            touched_at = cached.touched_at if cached else now - self._touch_interval_s - 1
            cached = _CachedKey(row["id"], row["workspace_id"], now, touched_at)
            self._remember(key_hash, cached)
        if now - cached.touched_at > self._touch_interval_s:
            cached.touched_at = now
            self._touches.start(self._touch(runtime, cached.key_id), name="api-key-touch")
        return cached.workspace_id

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
            await repo.touch_api_key(runtime.db.pool, key_id)
        except Exception as error:  # a missed last_used_at is not worth failing anything
            logger.warning("api key last_used_at not recorded: {}", type(error).__name__)


def key_cache(app: FastAPI) -> ApiKeyCache:
    """The app's key cache (made on first use, so any app gets one)."""
    cache = getattr(app.state, "api_key_cache", None)
    if cache is None:
        cache = app.state.api_key_cache = ApiKeyCache()
    return cache


def bearer_key(authorization: str | None) -> str | None:
    """The key of an `Authorization: Bearer <key>` header value, None when absent."""
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return key.strip()


async def require_workspace(request: Request, runtime: AppRuntime = Depends(get_runtime)) -> str:
    """The workspace of a valid `Authorization: Bearer <api key>`; 401 otherwise."""
    key = bearer_key(request.headers.get("authorization"))
    if key is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "missing API key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    workspace_id = await key_cache(request.app).workspace_for(runtime, key)
    if workspace_id is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "invalid API key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return workspace_id
