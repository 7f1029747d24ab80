"""Webhook and media-stream signatures (valid, invalid, missing) and the TwiML we answer with."""

import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from twilio.request_validator import RequestValidator

from api import media_stream
from api.twilio_auth import media_stream_url, verified_form
from api.voice import stream_twiml, unavailable_twiml
from config import Settings

TOKEN = "12345678901234567890123456789012"
POLICY_VIOLATION = 1008
FORM = {"CallSid": "CA" + "0" * 32, "From": "+15550100123", "To": "+15550100100"}


def app_with(settings: Settings) -> TestClient:
    app = FastAPI()

    @app.post("/voice/answer")
    async def answer(request: Request) -> dict:
        return await verified_form(request, settings)

    return TestClient(app, base_url="https://agent.example.com")


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path, twilio_auth_token=TOKEN)


def sign(url: str, form: dict, token: str = TOKEN) -> str:
    return RequestValidator(token).compute_signature(url, form)


def test_a_correctly_signed_webhook_is_accepted(settings):
    client = app_with(settings)
    url = "https://agent.example.com/voice/answer"
    response = client.post("/voice/answer", data=FORM, headers={"X-Twilio-Signature": sign(url, FORM)})
    assert response.status_code == 200 and response.json()["CallSid"] == FORM["CallSid"]


def test_a_webhook_signed_with_another_token_is_forbidden(settings):
    client = app_with(settings)
    url = "https://agent.example.com/voice/answer"
    bad = sign(url, FORM, token="x" * 32)
    response = client.post("/voice/answer", data=FORM, headers={"X-Twilio-Signature": bad})
    assert response.status_code == 403


def test_a_tampered_field_breaks_the_signature(settings):
    client = app_with(settings)
    url = "https://agent.example.com/voice/answer"
    signature = sign(url, FORM)
    response = client.post(
        "/voice/answer", data={**FORM, "From": "+15550199999"},
        headers={"X-Twilio-Signature": signature},
    )
    assert response.status_code == 403


def test_a_webhook_without_a_signature_is_forbidden(settings):
    assert app_with(settings).post("/voice/answer", data=FORM).status_code == 403


def test_the_public_url_is_what_gets_signed_behind_a_proxy(tmp_path):
    settings = Settings(
        _env_file=None, data_dir=tmp_path, twilio_auth_token=TOKEN, public_url="https://public.example.org/"
    )
    client = app_with(settings)
    signature = sign("https://public.example.org/voice/answer", FORM)
    response = client.post("/voice/answer", data=FORM, headers={"X-Twilio-Signature": signature})
    assert response.status_code == 200


def test_validation_can_be_turned_off_explicitly(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, twilio_validate_signature=False)
    assert app_with(settings).post("/voice/answer", data=FORM).status_code == 200


def test_without_a_twilio_token_the_local_development_token_signs(tmp_path):
    from runner.dev_credentials import twilio_auth_token

    settings = Settings(_env_file=None, data_dir=tmp_path)
    token = twilio_auth_token(settings)
    assert (tmp_path / "dev_twilio_auth_token").stat().st_mode & 0o077 == 0
    client = app_with(settings)
    url = "https://agent.example.com/voice/answer"
    ok = client.post("/voice/answer", data=FORM, headers={"X-Twilio-Signature": sign(url, FORM, token)})
    assert ok.status_code == 200


def test_twiml_connects_a_stream_carrying_the_call_id():
    root = ET.fromstring(stream_twiml("wss://agent.example.com/ws", "call-42"))
    stream = root.find("./Connect/Stream")
    assert stream is not None and stream.get("url") == "wss://agent.example.com/ws"
    parameter = stream.find("Parameter")
    assert parameter.get("name") == "call_id" and parameter.get("value") == "call-42"


def test_when_the_call_cannot_be_taken_the_caller_hears_why():
    root = ET.fromstring(unavailable_twiml())
    assert "technical problem" in root.find("Say").text
    assert root.find("Hangup") is not None


def test_stream_url_follows_the_public_scheme(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, public_url="https://agent.example.com")

    class FakeRequest:
        base_url = "http://10.0.0.5:7860/"

    assert media_stream_url(FakeRequest(), settings) == "wss://agent.example.com/ws"
    local = Settings(_env_file=None, data_dir=tmp_path)
    assert media_stream_url(FakeRequest(), local) == "ws://10.0.0.5:7860/ws"


def ws_app(settings: Settings, monkeypatch) -> tuple[TestClient, list[bool]]:
    """The real `/ws` route; the call behind it replaced by one that records the upgrade."""
    served: list[bool] = []

    async def serve(websocket, runtime, *, signed):
        served.append(signed)
        await websocket.accept()
        await websocket.close()

    monkeypatch.setattr(media_stream, "serve_media_stream", serve)
    app = FastAPI()
    app.include_router(media_stream.router)
    app.state.runtime = SimpleNamespace(settings=settings)
    return TestClient(app), served


def upgrade(client: TestClient, url: str, headers: dict | None = None) -> bool:
    """True when the socket was accepted, False when refused before accept."""
    try:
        with client.websocket_connect(url, headers=headers or {}) as ws:
            ws.receive()
    except WebSocketDisconnect as refused:
        return refused.code != POLICY_VIOLATION
    return True


def test_the_media_stream_upgrade_must_carry_twilios_signature(settings, monkeypatch):
    client, served = ws_app(settings, monkeypatch)
    url = "wss://agent.example.com/ws"

    signed = upgrade(client, url, {"X-Twilio-Signature": sign(url, {})})
    unsigned = upgrade(client, url)
    other_token = upgrade(client, url, {"X-Twilio-Signature": sign(url, {}, token="x" * 32)})
    other_url = upgrade(client, url + "?call_id=other", {"X-Twilio-Signature": sign(url, {})})

    assert (signed, unsigned, other_token, other_url) == (True, False, False, False)
    assert served == [True]


def test_the_stream_url_signed_is_the_public_one_behind_a_proxy(tmp_path, monkeypatch):
    settings = Settings(_env_file=None, data_dir=tmp_path, twilio_auth_token=TOKEN,
                        public_url="https://public.example.org/")
    client, _ = ws_app(settings, monkeypatch)
    public = "wss://public.example.org/ws?x=1"
    assert upgrade(client, "ws://10.0.0.5:7860/ws?x=1", {"X-Twilio-Signature": sign(public, {})})


def test_unsigned_streams_pass_only_when_validation_is_off_or_for_eval(tmp_path, monkeypatch):
    off = Settings(_env_file=None, data_dir=tmp_path, twilio_validate_signature=False)
    open_eval = Settings(_env_file=None, data_dir=tmp_path, twilio_auth_token=TOKEN,
                         allow_open_eval_sessions=True)
    client, served_off = ws_app(off, monkeypatch)
    assert upgrade(client, "ws://testserver/ws") and served_off == [True]
    client, served_eval = ws_app(open_eval, monkeypatch)
    assert upgrade(client, "ws://testserver/ws") and served_eval == [False]  # text only
