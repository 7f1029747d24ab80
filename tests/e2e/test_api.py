"""The running service: health, signed webhooks, and the API-key-protected call records."""

import uuid
import xml.etree.ElementTree as ET

import httpx
import pytest
from twilio.request_validator import RequestValidator

from runner.dev_credentials import twilio_auth_token

pytestmark = pytest.mark.e2e


def signed_answer(server, form: dict) -> httpx.Response:
    url = f"{server.url}/voice/answer"
    signature = RequestValidator(twilio_auth_token(server.settings)).compute_signature(url, form)
    return httpx.post(url, data=form, headers={"X-Twilio-Signature": signature})


def answer_form() -> dict:
    return {
        "CallSid": "CA" + uuid.uuid4().hex, "AccountSid": "AC" + "0" * 32,
        "From": "+15550100123", "To": "+15550100100", "CallStatus": "ringing",
        "Direction": "inbound", "ApiVersion": "2010-04-01",
    }


def test_health_reports_the_database_and_local_providers(server):
    body = httpx.get(f"{server.url}/health").json()
    assert body["status"] == "ok" and body["database"]["ok"]
    assert body["providers"] == {
        "stt": "local", "tts": "local", "llm": "local", "navigator": "deterministic",
        "emotion_audio": "local", "emotion_text": "local", "director": "local",
        "safety_judge": "local", "embeddings": "local", "world_model": "local",
        "audio_verification": "local",
    }


def test_unsigned_and_badly_signed_webhooks_are_forbidden(server):
    form = answer_form()
    assert httpx.post(f"{server.url}/voice/answer", data=form).status_code == 403
    bad = httpx.post(f"{server.url}/voice/answer", data=form, headers={"X-Twilio-Signature": "AAAA"})
    assert bad.status_code == 403


def test_a_signed_answer_creates_the_call_and_returns_a_stream(server):
    response = signed_answer(server, answer_form())
    assert response.status_code == 200
    stream = ET.fromstring(response.text).find("./Connect/Stream")
    assert stream.get("url").endswith("/ws")
    call_id = stream.find("Parameter").get("value")
    detail = httpx.get(
        f"{server.url}/api/calls/{call_id}", headers={"Authorization": f"Bearer {server.api_key}"}
    ).json()
    assert detail["status"] == "ringing" and detail["direction"] == "inbound"


def test_status_callback_closes_a_call_that_never_connected(server):
    form = answer_form()
    call_id = ET.fromstring(signed_answer(server, form).text).find("./Connect/Stream/Parameter").get("value")
    status = {"CallSid": form["CallSid"], "CallStatus": "no-answer", "AccountSid": form["AccountSid"]}
    url = f"{server.url}/voice/status"
    signature = RequestValidator(twilio_auth_token(server.settings)).compute_signature(url, status)
    assert httpx.post(url, data=status, headers={"X-Twilio-Signature": signature}).status_code == 204
    detail = httpx.get(
        f"{server.url}/api/calls/{call_id}", headers={"Authorization": f"Bearer {server.api_key}"}
    ).json()
    assert detail["twilio_status"] == "no-answer" and detail["completion_reason"] == "twilio_no_answer"


def test_call_records_need_a_valid_api_key(server):
    assert httpx.get(f"{server.url}/api/calls").status_code == 401
    wrong = httpx.get(f"{server.url}/api/calls", headers={"Authorization": "Bearer vk_nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    ok = httpx.get(f"{server.url}/api/calls", headers={"Authorization": f"Bearer {server.api_key}"})
    assert ok.status_code == 200 and isinstance(ok.json()["calls"], list)


def test_an_unknown_call_is_not_found(server):
    response = httpx.get(
        f"{server.url}/api/calls/{uuid.uuid4()}", headers={"Authorization": f"Bearer {server.api_key}"}
    )
    assert response.status_code == 404


def test_once_up_the_service_says_where_the_dashboard_is_and_how_to_get_in(server):
    log = server.log()
    assert f"Dashboard: {server.url}/dashboard" in log
    assert "python main.py api-key create --workspace demo" in log
