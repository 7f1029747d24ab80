"""Hardening of the whole HTTP surface: security headers, the body limit (webhooks too),
the per-key rate limit, key management and its cache, validation, PHI-free logs (nested
extras too). The failed-authentication throttle: test_auth_throttle.py."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import FileResponse
from loguru import logger

import main
from api.deps import ApiKeyCache, bearer_key
from api.middleware import SecurityHeaders, TokenBuckets, add_hardening, rate_limit_caller
from config import Settings
from db import repositories as repo
from lib.log_privacy import MAX_EXTRA_DEPTH, mask_phi, mask_record
from main import configure_logging
from tests.api.app_client import bearer, running_app


@pytest.fixture
async def key(db, workspace_id) -> str:
    return await repo.create_api_key(db.pool, workspace_id, "test")


async def test_every_response_carries_the_security_headers(settings, key):
    https = settings.model_copy(update={"server": settings.server.model_copy(
        update={"public_url": "https://clinic.example"})})
    async with running_app(settings) as (_, client):
        api = await client.get("/api/calls", headers=bearer(key))
        refused = await client.get("/api/calls")
        health = await client.get("/health")
        docs = await client.get("/docs")
    async with running_app(https) as (_, client):
        secure = await client.get("/health")

    for response in (api, refused, health, docs):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert "strict-transport-security" not in response.headers
    assert api.headers["cache-control"] == refused.headers["cache-control"] == "no-store"
    assert "cache-control" not in health.headers
    policy = api.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "connect-src 'self'" in policy
    assert "cdn.jsdelivr.net" in docs.headers["content-security-policy"]
    assert secure.headers["strict-transport-security"].startswith("max-age=31536000")


async def test_bodies_over_the_limit_are_refused_before_anything_parses_them(settings, key):
    small = settings.model_copy(update={"server": settings.server.model_copy(
        update={"api_max_body_bytes": 2048})})
    big = b"x" * 4096

    async def chunks():
        for _ in range(4):
            yield b"y" * 1024

    async with running_app(small) as (_, client):
        declared = await client.post("/api/keys", content=big, headers=bearer(key))
        streamed = await client.post("/api/keys", content=chunks(), headers=bearer(key))
        webhook = await client.post("/voice/answer", content=big, headers={
            "content-type": "application/x-www-form-urlencoded"})
        fits = await client.post("/api/keys", json={"name": "ok"}, headers=bearer(key))

    assert declared.status_code == streamed.status_code == webhook.status_code == 413
    assert declared.json() == {"detail": "request body too large"}
    assert declared.headers["x-frame-options"] == "DENY"
    assert fits.status_code == 201


async def test_a_key_past_its_rate_is_told_to_retry_and_recovers(settings, key, db, workspace_id):
    limited = settings.model_copy(update={"server": settings.server.model_copy(
        update={"api_rate_limit_per_minute": 60})})  # burst of 6, 1/s
    other_key = await repo.create_api_key(db.pool, workspace_id, "other")
    async with running_app(limited) as (_, client):
        burst = [(await client.get("/api/calls", headers=bearer(key))).status_code
                 for _ in range(7)]
        refused = await client.get("/api/calls", headers=bearer(key))
        others = await client.get("/api/calls", headers=bearer(other_key))
        health = [(await client.get("/health")).status_code for _ in range(10)]
        await asyncio.sleep(int(refused.headers["retry-after"]) + 0.05)
        recovered = await client.get("/api/calls", headers=bearer(key))

    assert burst == [200] * 6 + [429]
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert others.status_code == 200 and set(health) == {200}
    assert recovered.status_code == 200


async def test_a_key_written_with_another_case_or_spacing_spends_the_same_budget(settings, key):
    limited = settings.model_copy(update={"server": settings.server.model_copy(
        update={"api_rate_limit_per_minute": 60})})  # burst of 6
    spellings = [f"Bearer {key}", f"bearer {key}", f"BEARER  {key}", f"BeArEr\t{key}",
                 f"  Bearer \t {key}  ", f"bearer\t\t{key}", f"Bearer   {key}"]
    async with running_app(limited) as (_, client):
        answers = [(await client.get("/api/calls", headers={"Authorization": spelling}))
                   .status_code for spelling in spellings]

    assert answers == [200] * 6 + [429]


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer a b", "", "vk_x"])
def test_a_header_without_exactly_one_bearer_key_counts_against_the_address(header):
    scope = {"headers": [(b"authorization", header.encode())], "client": ("10.0.0.7", 5)}
    assert bearer_key(header) is None
    assert rate_limit_caller(scope) == "ip:10.0.0.7"


def test_token_buckets_refill_at_the_rate_and_cap_at_a_tenth():
    now = [0.0]
    buckets = TokenBuckets(600, clock=lambda: now[0])  # 10 a second, burst 60
    assert all(buckets.take("a") == 0 for _ in range(60))
    assert buckets.take("a") == pytest.approx(0.1)
    assert buckets.take("b") == 0
    now[0] = 0.25
    assert [buckets.take("a") == 0 for _ in range(3)] == [True, True, False]
    now[0] = 1000.0
    assert sum(buckets.take("a") == 0 for _ in range(100)) == 60


def test_the_limiter_counts_keys_hashed_and_anonymous_callers_by_address():
    caller = rate_limit_caller({"headers": [(b"authorization", b"Bearer vk_secret")]})
    assert caller.startswith("key:") and "secret" not in caller
    assert rate_limit_caller({"headers": [], "client": ("10.0.0.7", 5)}) == "ip:10.0.0.7"


async def test_websockets_pass_the_header_layer_untouched():
    seen = []

    async def app(scope, receive, send):
        await send({"type": "websocket.accept", "headers": []})

    async def send(message):
        seen.append(message)

    await SecurityHeaders(app, https=True)({"type": "websocket", "path": "/ws"}, None, send)
    assert seen == [{"type": "websocket.accept", "headers": []}]


async def test_keys_are_managed_within_the_workspace_and_revoking_works_at_once(
        db, settings, workspace_id, key):
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    other_key = await repo.create_api_key(db.pool, other["id"], "theirs")
    async with running_app(settings) as (_, client):
        created = await client.post("/api/keys", json={"name": "dashboard"}, headers=bearer(key))
        new = created.json()
        works = await client.get("/api/calls", headers=bearer(new["key"]))
        listed = (await client.get("/api/keys", headers=bearer(key))).json()
        theirs = (await client.get("/api/keys", headers=bearer(other_key))).json()
        foreign_delete = await client.delete(f"/api/keys/{new['id']}", headers=bearer(other_key))
        deleted = await client.delete(f"/api/keys/{new['id']}", headers=bearer(key))
        after = await client.get("/api/calls", headers=bearer(new["key"]))
        again = await client.delete(f"/api/keys/{new['id']}", headers=bearer(key))
        bad_name = await client.post("/api/keys", json={"name": "x" * 101}, headers=bearer(key))

    assert created.status_code == 201 and new["key"].startswith(f"vk_{new['prefix']}_")
    assert works.status_code == 200
    assert {k["name"] for k in listed} == {"test", "dashboard"}
    assert all("key" not in k and "key_hash" not in k for k in listed)
    assert [k["name"] for k in theirs] == ["theirs"]
    assert foreign_delete.status_code == 404 and deleted.status_code == 204
    assert after.status_code == 401 and again.status_code == 404
    assert bad_name.status_code == 422


async def test_the_key_cache_spares_the_database_and_marks_use_once_a_minute(db, workspace_id):
    runtime = SimpleNamespace(db=db)
    key = await repo.create_api_key(db.pool, workspace_id, "cached")
    cache = ApiKeyCache(ttl_s=30.0)

    assert await cache.workspace_for(runtime, key) == workspace_id
    await cache.close()
    first_use = await db.pool.fetchval(
        "SELECT last_used_at FROM api_keys WHERE key_hash = $1", repo.hash_api_key(key))
    assert await repo.revoke_api_key(db.pool, key)  # revoked elsewhere (another pod, the CLI)
    still_cached = await cache.workspace_for(runtime, key)
    await cache.close()
    later_use = await db.pool.fetchval(
        "SELECT last_used_at FROM api_keys WHERE key_hash = $1", repo.hash_api_key(key))
    fresh = ApiKeyCache(ttl_s=0.0)

    assert first_use is not None and later_use == first_use
    assert still_cached == workspace_id  # within the TTL: no database round trip
    assert await fresh.workspace_for(runtime, key) is None
    assert await cache.workspace_for(runtime, "vk_nope") is None


async def test_invalid_parameters_are_422_not_500(settings, key):
    async with running_app(settings) as (_, client):
        responses = [
            await client.get("/api/calls", params={"limit": "many"}, headers=bearer(key)),
            await client.get("/api/calls", params={"limit": 0}, headers=bearer(key)),
            await client.get("/api/calls", params={"escalated": "perhaps"}, headers=bearer(key)),
            await client.post("/api/keys", content=b"{not json", headers={
                **bearer(key), "content-type": "application/json"}),
        ]
    assert [r.status_code for r in responses] == [422] * 4
    assert all("detail" in r.json() for r in responses)


@pytest.mark.parametrize(("text", "hidden", "kept"), [
    ("caller +15551234567 joined", "5551234567", "+*********67"),
    ("callback on (555) 123-4567 please", "123-4567", "67"),
    ("number 555 123 4567", "123 4567", "67"),
    ("dob 1970-01-02", "1970-01-02", "<date>"),
    ("born 01/02/1970", "01/02/1970", "<date>"),
    ("born January 2nd, 1970", "January", "<date>"),
    ("born 2 March 1985", "March", "<date>"),
    ("write to ada.byrne@example.com", "ada.byrne", "<email>"),
    ("patient name=Ada Byrne state=greeting", "Byrne", "state=greeting"),
    ('{"name": "Ada Byrne", "seq": 3}', "Ada", '"seq": 3'),
    ("{'last_name': 'Byrne'}", "Byrne", "'last_name': '<redacted>'"),
    ("call 123e4567-e89b-12d3-a456-426614174000 took 1234 ms", "<", "426614174000"),
])
def test_phi_is_masked_and_ids_are_kept(text, hidden, kept):
    masked = mask_phi(text)
    assert hidden not in masked and kept in masked


def test_configured_logging_masks_every_line(settings):
    lines: list[str] = []
    configure_logging(settings)
    sink = logger.add(lines.append, format="{message} {extra}")
    try:
        logger.bind(phone="+15551234567").info("booked for {} born {}", "Ada Byrne <ada@x.org>",
                                               "1970-01-02")
    finally:
        logger.remove(sink)
        logger.configure(patcher=None)
    [line] = lines
    assert "ada@x.org" not in line and "1970-01-02" not in line and "5551234567" not in line
    assert "<email>" in line and "<date>" in line and "'phone': '<redacted>'" in line


def test_nested_extras_are_masked_without_touching_the_callers_objects():
    caller = {"name": "Ada Byrne", "phone": 15551234567, "note": "call +15551234567",
              "visits": [{"dob": "1970-01-02", "slot": 3}, ("ada@x.org", None)],
              "tags": {"vip"}, "ok": True, "id": 42}
    deep: dict = {"phone": "+15551234567"}
    for _ in range(MAX_EXTRA_DEPTH):
        deep = {"next": deep}
    record = {"message": "booked", "extra": {"patient": caller, "deep": deep, "turns": 2,
                                             "numbers": ["+15551234567", 7]}}
    mask_record(record)
    extra = record["extra"]
    patient = extra["patient"]

    assert patient["name"] == "<redacted>" and patient["phone"] == "<redacted>"
    assert "5551234567" not in patient["note"] and patient["note"].endswith("67")
    assert patient["visits"] == [{"dob": "<redacted>", "slot": 3}, ("<email>", None)]
    assert patient["tags"] == {"vip"} and patient["ok"] is True and patient["id"] == 42
    assert extra["turns"] == 2 and extra["numbers"][1] == 7
    assert "5551234567" not in extra["numbers"][0]
    assert "5551234567" not in repr(extra["deep"]) and "<too deep>" in repr(extra["deep"])
    assert caller["name"] == "Ada Byrne" and caller["visits"][0]["dob"] == "1970-01-02"


async def test_range_responses_pass_through_every_layer(tmp_path):
    audio = tmp_path / "call.wav"
    audio.write_bytes(bytes(range(256)) * 64)
    app = FastAPI()

    @app.get("/api/file")
    async def file() -> FileResponse:
        return FileResponse(audio, media_type="audio/wav")

    add_hardening(app, Settings(_env_file=None, data_dir=tmp_path))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as client:
        part = await client.get("/api/file", headers={"Range": "bytes=256-511"})

    assert part.status_code == 206 and part.content == bytes(range(256))
    assert part.headers["content-range"] == "bytes 256-511/16384"
    assert part.headers["cache-control"] == "no-store" and part.headers["x-frame-options"] == "DENY"


def test_the_cli_lists_and_revokes_a_workspaces_keys(db, pg_dsn, tmp_path, monkeypatch, capsys):
    name = f"ws-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("DATABASE_URL", pg_dsn)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    monkeypatch.setattr(main, "configure_logging", lambda settings: None)  # keep the test's
    assert main.main(["api-key", "create", "--workspace", name]) == 2  # no such workspace
    asyncio.run(_create_workspace(pg_dsn, name))
    assert main.main(["api-key", "create", "--workspace", name, "--name", "ops"]) == 0
    key = capsys.readouterr().out.strip().splitlines()[-1]
    prefix = key.split("_")[1]
    assert main.main(["api-key", "list", "--workspace", name]) == 0
    listed = capsys.readouterr().out
    assert main.main(["api-key", "revoke", prefix, "--workspace", name]) == 0
    assert main.main(["api-key", "revoke", prefix, "--workspace", name]) == 2
    assert main.main(["api-key", "list", "--workspace", name]) == 0
    after = capsys.readouterr().out

    assert f"vk_{prefix}_…  ops  active" in listed and key not in listed
    assert "revoked" in after


async def _create_workspace(dsn: str, name: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("INSERT INTO workspaces (name) VALUES ($1)", name)
    finally:
        await connection.close()
