"""Hostile request bodies and headers get a clear 4xx, never a 500: non-finite numbers in
JSON, a validation error's echo bounded, a `Range` header of thousands of digits."""

from __future__ import annotations

import uuid

import pytest
from loguru import logger

from db import repositories as repo
from tests.api.app_client import bearer, running_app

NON_FINITE = ["NaN", "Infinity", "-Infinity"]


@pytest.fixture
async def key(db, workspace_id) -> str:
    return await repo.create_api_key(db.pool, workspace_id, "hostile")


@pytest.mark.parametrize("constant", NON_FINITE)
async def test_non_finite_numbers_in_a_json_body_are_refused_on_every_route(
        settings, key, constant):
    routes = [
        ("POST", "/api/keys", f'{{"name": {constant}}}'),
        ("PUT", "/api/voice-settings", f'{{"speed": {constant}}}'),
        ("PATCH", "/api/voice-settings", f'{{"volume": [{constant}]}}'),
        ("POST", "/api/safety-concepts", f'{{"key": "k", "name": {constant}}}'),
        ("PUT", "/api/services/00000000-0000-0000-0000-000000000000/keyterms", constant),
        ("POST", "/api/escalations/1/acknowledge", f'{{"operator": {{"x": {constant}}}}}'),
    ]
    async with running_app(settings) as (_, client):
        answers = [await client.request(method, path, content=body.encode(), headers={
                       **bearer(key), "content-type": "application/json"})
                   for method, path, body in routes]

    assert [a.status_code for a in answers] == [422] * len(routes)
    for answer in answers:
        [error] = answer.json()["detail"]
        assert error["type"] == "json_invalid" and "NaN" in error["ctx"]["error"]


async def test_the_words_nan_and_infinity_inside_strings_are_ordinary_text(settings, key):
    async with running_app(settings) as (_, client):
        created = await client.post("/api/keys", json={"name": "NaN Infinity"},
                                    headers=bearer(key))
    assert created.status_code == 201


async def test_a_validation_error_echoes_only_a_bounded_excerpt_of_the_input(settings, key):
    huge = "x" * 500_000
    async with running_app(settings) as (_, client):
        long_name = await client.post("/api/keys", json={"name": huge}, headers=bearer(key))
        wrong_type = await client.post("/api/keys", json={"name": {str(i): "y" * 10_000 for i in range(50)}},
                                       headers=bearer(key))
        many = await client.put("/api/voice-settings", json={f"f{i}": "z" * 2_000 for i in range(400)},
                                headers=bearer(key))

    for answer in (long_name, wrong_type, many):
        assert answer.status_code == 422 and len(answer.content) < 16_000
        assert answer.json()["detail"][0]["loc"][0] == "body"
    [error] = long_name.json()["detail"]
    assert error["loc"] == ["body", "name"] and error["input"].startswith("xxxx")
    assert error["input"].endswith("(500000 characters)")
    assert many.json()["detail"][-1]["type"] == "too_many_errors"


async def test_webhook_values_reach_the_log_bounded_and_on_one_line(settings):
    unsigned = settings.model_copy(update={"telephony": settings.telephony.model_copy(
        update={"twilio_validate_signature": False})})
    huge_number = "+1" + "5" * 100_000
    forged = "ringing\nERROR forged line " + "x" * 100_000
    lines: list[str] = []
    sink = logger.add(lines.append, format="{message}")
    try:
        async with running_app(unsigned) as (_, client):
            answered = await client.post("/voice/answer", data={
                "CallSid": "CA" + uuid.uuid4().hex, "From": huge_number, "To": huge_number})
            status = await client.post("/voice/status", data={
                "CallSid": "CA" + uuid.uuid4().hex, "CallStatus": forged})
    finally:
        logger.remove(sink)

    assert answered.status_code == 200 and status.status_code == 204
    webhook_lines = [line for line in lines if "call" in line.lower()]
    assert any("unknown call" in line for line in webhook_lines)
    assert all(len(line) < 400 and line.count("\n") <= 1 for line in lines)
    assert not any(line.startswith("ERROR forged") for line in "".join(lines).splitlines())
