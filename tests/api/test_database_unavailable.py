"""A frozen database costs each request its bound, never the length of the stall: the
webhooks answer (the "having trouble" TwiML, a 503 for a status report), /health says
degraded and why, and the API answers 503 with a reason (key checks included, never a
401 or a 500). Once the database is back, /health is ok again without a restart."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr
from twilio.request_validator import RequestValidator

from api.unavailable import add_database_errors
from config import Settings
from db import repositories as repo
from tests.api.app_client import bearer, running_app
from tests.db.stall import frozen, service_processes

TOKEN = "0123456789abcdef0123456789abcdef"
BASE = "http://test"
BOUND_S = 0.5
GUARD_S = 4.0  # past this the request is taken to hang


@pytest.fixture
def bounded_settings(settings: Settings) -> Settings:
    storage = settings.storage.model_copy(update={
        "db_request_timeout_s": BOUND_S, "db_ping_timeout_s": BOUND_S,
        "db_check_interval_s": 0.2})
    telephony = settings.telephony.model_copy(update={"twilio_auth_token": SecretStr(TOKEN)})
    server = settings.server.model_copy(update={"public_url": BASE})
    return settings.model_copy(update={"storage": storage, "telephony": telephony,
                                       "server": server})


async def timed(request: Awaitable[httpx.Response]) -> tuple[httpx.Response, float]:
    """The response and its seconds; fails the test if it takes past GUARD_S."""
    started = time.monotonic()
    task = asyncio.ensure_future(request)
    done, _ = await asyncio.wait({task}, timeout=GUARD_S)
    assert done, f"no answer within {GUARD_S} s: the request waited on the frozen database"
    return task.result(), time.monotonic() - started


def signed(path: str, form: dict[str, str]) -> dict[str, Any]:
    signature = RequestValidator(TOKEN).compute_signature(f"{BASE}{path}", form)
    return {"data": form, "headers": {"X-Twilio-Signature": signature}}


async def test_every_request_path_answers_within_its_bound_while_the_database_is_frozen(
    bounded_settings, db, pg_dsn, workspace_id
):
    warm_key = await repo.create_api_key(db.pool, workspace_id, "warm")
    cold_key = await repo.create_api_key(db.pool, workspace_id, "cold")
    ring = {"CallSid": "CA" + uuid.uuid4().hex, "AccountSid": "AC" + "0" * 32,
            "From": "+15550100123", "To": "+15550100100", "CallStatus": "ringing"}
    ended = {**ring, "CallStatus": "completed"}
    async with running_app(bounded_settings) as (_app, client):
        assert (await client.get("/api/calls", headers=bearer(warm_key))).status_code == 200
        with frozen(await service_processes(pg_dsn)):
            health, health_s = await timed(client.get("/health"))
            answer, answer_s = await timed(client.post("/voice/answer",
                                                       **signed("/voice/answer", ring)))
            status, status_s = await timed(client.post("/voice/status",
                                                       **signed("/voice/status", ended)))
            read, read_s = await timed(client.get("/api/calls", headers=bearer(warm_key)))
            auth, auth_s = await timed(client.get("/api/calls", headers=bearer(cold_key)))
        healthy_again = await _healthy_within(client, 5.0)

    assert health.status_code == 503 and health.json()["status"] == "degraded"
    assert health.json()["database"]["reason"] == f"no answer within {BOUND_S:g} s"
    assert answer.status_code == 200 and "technical problem" in answer.text
    assert "<Stream" not in answer.text
    assert status.status_code == 503
    assert read.status_code == 503 and read.json()["detail"].startswith(
        "database unavailable: call list: no answer within")
    assert auth.status_code == 503 and "API key check" in auth.json()["detail"]
    assert max(health_s, answer_s, status_s, read_s, auth_s) < BOUND_S + 0.7
    assert healthy_again


async def test_a_caller_answered_while_the_database_is_frozen_is_on_the_clinics_record_after(
    bounded_settings, db, pg_dsn, workspace_id
):
    clinic_number = "+1555" + str(uuid.uuid4().int)[:7]
    clinic = await repo.create_service(db.pool, workspace_id, "Frozen Clinic",
                                       phone_number=clinic_number)
    earlier, during = ({"CallSid": "CA" + uuid.uuid4().hex, "AccountSid": "AC" + "0" * 32,
                        "From": "+15550100123", "To": clinic_number, "CallStatus": "ringing"}
                       for _ in range(2))
    storage = bounded_settings.storage.model_copy(update={
        "db_write_timeout_s": BOUND_S, "db_write_retries": 0})
    settings = bounded_settings.model_copy(update={"storage": storage})
    async with running_app(settings) as (app, client):
        writer = app.state.runtime.writer
        await client.post("/voice/answer", **signed("/voice/answer", earlier))
        with frozen(await service_processes(pg_dsn)):
            answer, answer_s = await timed(client.post("/voice/answer",
                                                       **signed("/voice/answer", during)))
            await writer.flush(GUARD_S)
            spilled = writer.spilled
        replayed = await _replayed_within(client, 5.0)

    assert answer.status_code == 200 and "technical problem" in answer.text
    assert answer_s < BOUND_S + 0.7
    assert spilled == 1 and replayed  # spooled while frozen; the supervisor replayed it
    [call] = await db.pool.fetch("SELECT * FROM calls WHERE call_sid = $1", during["CallSid"])
    assert str(call["workspace_id"]) == workspace_id
    assert str(call["service_id"]) == str(clinic["id"])
    assert call["status"] == "completed" and call["ended_at"] is not None
    assert call["completion_reason"] == "database_unavailable"
    assert (call["from_number"], call["to_number"]) == (during["From"], clinic_number)
    events = await db.pool.fetch("SELECT type, data FROM call_events WHERE call_id = $1",
                                 call["id"])
    assert [(e["type"], e["data"]) for e in events] == [
        ("database_unavailable", {"stage": "call lookup", "error": "DatabaseUnavailable"})]


async def _replayed_within(client: httpx.AsyncClient, seconds: float) -> bool:
    """Whether /health says ok with a replay of the spool behind it, within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        database = (await client.get("/health")).json()["database"]
        if database["state"] == "ok" and database["replayed"] >= 1:
            return True
        await asyncio.sleep(0.1)
    return False


async def _healthy_within(client: httpx.AsyncClient, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        response = await client.get("/health")
        if response.status_code == 200 and response.json()["database"]["state"] == "ok":
            return True
        await asyncio.sleep(0.1)
    return False


async def test_a_server_side_connection_error_the_route_did_not_bound_is_a_503_too():
    app = FastAPI()
    add_database_errors(app)

    @app.get("/starting")
    async def starting() -> None:
        raise asyncpg.CannotConnectNowError("the database system is starting up")

    @app.get("/bad-input")
    async def bad_input() -> None:
        raise asyncpg.exceptions.DataError("invalid input for query argument $1")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        starting_up = await client.get("/starting")
        refused = await client.get("/bad-input")

    assert starting_up.status_code == 503 and starting_up.headers["retry-after"] == "5"
    assert starting_up.json()["detail"] == (
        "database unavailable: request: CannotConnectNowError")
    assert refused.status_code == 500  # a bad query is not an outage
