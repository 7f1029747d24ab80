"""The failed-authentication budget per client address: one throttle for HTTP requests and
observer sockets, no database lookup while throttled, proven keys and other addresses
unaffected, recovery when the window ends."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import FastAPI
from pydantic import ValidationError

from api.deps import FailedAuthThrottle
from api.middleware import client_address, rate_limit_caller
from config import Settings
from db import repositories as repo
from tests.api.app_client import bearer, running_app

OFFICE = ("203.0.113.7", 40001)
ELSEWHERE = ("198.51.100.9", 40002)


def wrong_key() -> str:
    """A well-formed key that no workspace has: each check of it is a database lookup."""
    return f"vk_{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"


@pytest.fixture
async def key(db, workspace_id) -> str:
    return await repo.create_api_key(db.pool, workspace_id, "throttle")


@pytest.fixture
def lookups(monkeypatch) -> list[str]:
    """Every key the database is asked about."""
    seen: list[str] = []
    real = repo.authenticate_api_key

    async def counting(pool, plaintext: str):
        seen.append(plaintext)
        return await real(pool, plaintext)

    monkeypatch.setattr(repo, "authenticate_api_key", counting)
    return seen


@asynccontextmanager
async def throttled_app(settings: Settings, now: list[float]
                        ) -> AsyncIterator[tuple[FastAPI, Callable[..., httpx.AsyncClient]]]:
    """The real app with the throttle on a fake clock, and clients from chosen addresses."""
    async with running_app(settings) as (app, _):
        app.state.auth_throttle = FailedAuthThrottle(
            settings.server.api_auth_failures_per_minute, clock=lambda: now[0])

        def client_from(address: tuple[str, int]) -> httpx.AsyncClient:
            return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=address),
                                     base_url="http://test")

        yield app, client_from


async def observe(app: FastAPI, address: tuple[str, int], *, header_key: str | None = None,
                  message: str | None = None) -> list[dict]:
    """What the app sends on one `WS /api/observe` connection, driven in-process."""
    inbox: asyncio.Queue[dict] = asyncio.Queue()
    await inbox.put({"type": "websocket.connect"})
    if message is not None:
        await inbox.put({"type": "websocket.receive", "text": message})
    sent: list[dict] = []

    async def send(event: dict) -> None:
        sent.append(event)
        if event["type"] == "websocket.close":
            await inbox.put({"type": "websocket.disconnect", "code": event["code"]})

    headers = [(b"host", b"test")]
    if header_key is not None:
        headers.append((b"authorization", f"Bearer {header_key}".encode()))
    scope = {"type": "websocket", "asgi": {"version": "3.0"}, "scheme": "ws",
             "http_version": "1.1", "path": "/api/observe", "raw_path": b"/api/observe",
             "query_string": b"", "root_path": "", "headers": headers, "client": address,
             "server": ("test", 80), "subprotocols": [], "state": {}}
    await asyncio.wait_for(app(scope, inbox.get, send), 10)
    return sent


def closed_with(sent: list[dict]) -> tuple[int, str]:
    [close] = [event for event in sent if event["type"] == "websocket.close"]
    return close["code"], close["reason"]


async def test_an_address_past_its_budget_gets_429_without_a_lookup(settings, key, lookups):
    now = [1000.0]
    async with throttled_app(settings, now) as (app, client_from):
        async with client_from(OFFICE) as office, client_from(ELSEWHERE) as elsewhere:
            proven = await office.get("/api/calls", headers=bearer(key))
            failures = [(await office.get("/api/calls", headers=bearer(wrong_key()))).status_code
                        for _ in range(20)]
            lookups_before = len(lookups)
            now[0] += 10
            refused = await office.get("/api/calls", headers=bearer(wrong_key()))
            lookups_while_throttled = len(lookups) - lookups_before
            still_works = await office.get("/api/calls", headers=bearer(key))
            other_address = await elsewhere.get("/api/calls", headers=bearer(wrong_key()))
            now[0] += 50  # the window that opened at the first failure has ended
            recovered = await office.get("/api/calls", headers=bearer(wrong_key()))

    assert proven.status_code == 200
    assert failures == [401] * 20
    assert refused.status_code == 429 and refused.headers["retry-after"] == "50"
    assert refused.json() == {"detail": "too many failed authentications"}
    assert refused.headers["x-frame-options"] == "DENY"  # every layer still applies
    assert lookups_while_throttled == 0
    assert still_works.status_code == 200
    assert other_address.status_code == 401
    assert recovered.status_code == 401 and len(lookups) == lookups_before + 2


async def test_a_valid_key_the_address_never_proved_waits_like_any_other(
        settings, key, db, workspace_id, lookups):
    now = [0.0]
    small = settings.model_copy(update={"server": settings.server.model_copy(
        update={"api_auth_failures_per_minute": 3})})
    unproven = await repo.create_api_key(db.pool, workspace_id, "new")
    async with throttled_app(small, now) as (_, client_from):
        async with client_from(OFFICE) as office:
            await office.get("/api/calls", headers=bearer(key))
            for _ in range(3):
                await office.get("/api/calls", headers=bearer(wrong_key()))
            asked = len(lookups)
            new_key = await office.get("/api/calls", headers=bearer(unproven))
            missing = await office.get("/api/calls")
            proven = await office.get("/api/calls", headers=bearer(key))
            now[0] = 60.0
            new_key_later = await office.get("/api/calls", headers=bearer(unproven))

    assert new_key.status_code == 429 and len(lookups) == asked + 1  # + the later check only
    assert missing.status_code == 401  # no key presented: nothing to guess, nothing throttled
    assert proven.status_code == 200
    assert new_key_later.status_code == 200


async def test_observer_sockets_share_the_budget_and_are_refused_when_throttled(
        settings, key, lookups):
    now = [0.0]
    async with throttled_app(settings, now) as (app, client_from):
        socket_failures = [closed_with(await observe(app, OFFICE, header_key=wrong_key()))
                           for _ in range(20)]
        asked = len(lookups)
        by_message = await observe(app, OFFICE, message=f'{{"type": "auth", "api_key": '
                                                        f'"{wrong_key()}"}}')
        by_header = await observe(app, OFFICE, header_key=wrong_key())
        async with client_from(OFFICE) as office:
            http = await office.get("/api/calls", headers=bearer(wrong_key()))
        lookups_while_throttled = len(lookups) - asked
        elsewhere = await observe(app, ELSEWHERE, header_key=wrong_key())

    assert socket_failures == [(1008, "invalid or missing API key")] * 20
    assert by_message[0]["type"] == "websocket.accept"
    assert closed_with(by_message) == (1008, "too many failed attempts")
    assert closed_with(by_header) == (1008, "too many failed attempts")
    assert http.status_code == 429
    assert lookups_while_throttled == 0
    assert closed_with(elsewhere) == (1008, "invalid or missing API key")


def test_the_throttle_recovers_forgets_revoked_keys_and_stays_bounded():
    now = [0.0]
    throttle = FailedAuthThrottle(2, window_s=60.0, max_clients=3, clock=lambda: now[0])
    throttle.succeeded("a", "good")
    throttle.failed("a", "x")
    assert throttle.retry_after("a", "y") == 0.0  # one failure of two: still checked
    now[0] = 15.0
    throttle.failed("a", "y")
    assert throttle.retry_after("a", "z") == 45.0
    assert throttle.retry_after("a", "good") == 0.0
    throttle.failed("a", "good")  # revoked since: no longer proven
    assert throttle.retry_after("a", "good") == 45.0
    now[0] = 60.0
    assert throttle.retry_after("a", "z") == 0.0
    throttle.failed("a", "z")  # a new window: one failure again
    assert throttle.retry_after("a", "w") == 0.0
    throttle.failed("a", "w")
    assert throttle.retry_after("a", "v") == 60.0

    for address in ("b", "c", "d"):  # a fourth address: the least recently seen goes
        throttle.failed(address, "x")
        throttle.failed(address, "y")
    assert throttle.retry_after("d", "z") == 60.0
    assert throttle.retry_after("a", "v") == 0.0 and len(throttle._clients) == 3  # noqa: SLF001


def test_proven_keys_per_address_are_bounded():
    throttle = FailedAuthThrottle(1, clock=lambda: 0.0)
    hashes = [repo.hash_api_key(str(index)) for index in range(40)]
    for key_hash in hashes:
        throttle.succeeded("a", key_hash)
    throttle.failed("a", repo.hash_api_key("bad"))
    assert [throttle.retry_after("a", h) for h in hashes] == [60.0] * 24 + [0.0] * 16


def test_addresses_are_counted_by_ip_and_ipv6_by_its_64():
    def scope(host: str) -> dict:
        return {"headers": [], "client": (host, 1)}

    assert client_address(scope("10.0.0.7")) == "10.0.0.7"
    assert client_address(scope("::ffff:10.0.0.7")) == "10.0.0.7"
    assert client_address(scope("2001:db8:0:1::5")) == client_address(scope("2001:db8:0:1::9"))
    assert client_address(scope("2001:db8:0:1::5")) != client_address(scope("2001:db8:0:2::5"))
    assert client_address({"headers": []}) == "unknown"
    assert rate_limit_caller(scope("2001:db8:0:1::5")) == "ip:2001:db8:0:1::/64"


def test_the_budget_setting_is_validated(tmp_path):
    assert Settings(_env_file=None, data_dir=tmp_path).server.api_auth_failures_per_minute == 20
    for bad in (0, -1, 10_001):
        with pytest.raises(ValidationError):
            Settings(_env_file=None, data_dir=tmp_path, api_auth_failures_per_minute=bad)
