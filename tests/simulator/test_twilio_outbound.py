"""The Twilio stand-in answers the calls the service places as Twilio would: progress
events to the status callback, signed the way the service checks them (api/twilio_auth.py),
the TwiML URL requested once answered (with `AnsweredBy` under machine detection), and for
a person, the media stream the TwiML names opened with Twilio's messages and the person
played on it. A tiny service stands in for ours and records what it received."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response, WebSocket
from starlette.websockets import WebSocketDisconnect
from twilio.twiml.voice_response import Connect, Stream, VoiceResponse

from api.twilio_auth import verified_form, websocket_signed
from config import Settings
from services.twilio.calls import TwilioCalls
from services.twilio.numbers import TwilioAccount
from simulator.outbound_callee import Callee, CalleeError, CallTiming, person_callee, script_callee
from simulator.twilio_rest import FakeTwilioRest, main, serve_twilio_rest
from tests.simulator.conftest import tone_voice
from tests.simulator.fake_service import ULAW_SILENT_CODES, serving, tone_ulaw

CLINIC = "+15550108001"
PATIENT = "+15550108100"
MESSAGE = "Hello, this is Harbour Clinic. Please call us back on 555 0100."
GOODBYE_SAY = "Thanks, goodbye."
TIMING = CallTiming(ring_s=0.0, no_answer_s=0.05, voicemail_s=0.5, person_quiet_s=0.3)
REPLY_AFTER_FRAMES = 10  # the tiny agent replies after 200 ms of the caller's silence
COMMON = ("AccountSid", "CallSid", "From", "To", "Direction", "ApiVersion")


@dataclass
class TinyService:
    """Answers outbound calls as ours does: a stream for a person, a message for a machine."""

    settings: Settings
    stream_agent_s: float = 0.4
    voice_forms: list[dict[str, str]] = field(default_factory=list)
    status_forms: list[dict[str, str]] = field(default_factory=list)
    stream_messages: list[dict[str, Any]] = field(default_factory=list)
    stream_signed: list[bool] = field(default_factory=list)
    stream_started: threading.Event = field(default_factory=threading.Event)
    stream_over: threading.Event = field(default_factory=threading.Event)
    hang_up_stream: bool = False

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/voice/outbound")
        async def answer(request: Request) -> Response:
            form = await verified_form(request, self.settings)
            self.voice_forms.append(form)
            response = VoiceResponse()
            if form.get("AnsweredBy", "human") == "human":
                connect, stream = Connect(), Stream(url=f"ws://{request.url.netloc}/ws")
                stream.parameter(name="call_id", value="call-1")
                connect.append(stream)
                response.append(connect)
            else:
                response.say(MESSAGE)
                response.hangup()
            return Response(str(response), media_type="application/xml")

        @app.post("/voice/outbound/status")
        async def status(request: Request) -> Response:
            self.status_forms.append(await verified_form(request, self.settings))
            return Response(status_code=204)

        @app.websocket("/ws")
        async def stream(websocket: WebSocket) -> None:
            self.stream_signed.append(websocket_signed(websocket, self.settings))
            await websocket.accept()
            heard = quiet = 0  # voiced frames of the caller's line, silent frames since
            try:
                while True:
                    message = json.loads(await websocket.receive_text())
                    self.stream_messages.append(message)
                    if message["event"] == "start":
                        self.stream_started.set()
                        await self._speak(websocket, message["streamSid"])
                    if message["event"] == "media":
                        voiced = voiced_frame(message)
                        heard, quiet = heard + voiced, 0 if voiced else quiet + 1
                        if heard and quiet == REPLY_AFTER_FRAMES:  # the caller is done
                            heard = 0
                            await self._speak(websocket, message["streamSid"])
                    if message["event"] == "stop":
                        break
                    if self.hang_up_stream and self.caller_spoke():
                        await websocket.close()
                        break
            except WebSocketDisconnect:
                pass
            finally:
                self.stream_over.set()

        return app

    async def _speak(self, websocket: WebSocket, stream_sid: str) -> None:
        audio = tone_ulaw(self.stream_agent_s)
        for at in range(0, len(audio), 320):
            payload = base64.b64encode(audio[at:at + 320]).decode()
            await websocket.send_text(json.dumps(
                {"event": "media", "streamSid": stream_sid, "media": {"payload": payload}}))

    def caller_spoke(self) -> bool:
        return any(voiced_frame(m) for m in self.stream_messages if m["event"] == "media")

    def events(self, name: str) -> list[dict[str, Any]]:
        return [m for m in self.stream_messages if m["event"] == name]

    def call_statuses(self) -> list[str]:
        return [form["CallStatus"] for form in self.status_forms]


def voiced_frame(message: dict[str, Any]) -> bool:
    return bool(set(base64.b64decode(message["media"]["payload"])) - ULAW_SILENT_CODES)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Callable[..., tuple[TinyService, str]]]:
    """`service, url = service(fake)`: a tiny service checking the stand-in's signatures."""
    with serving_many() as start:
        def begin(fake: FakeTwilioRest, **options: Any) -> tuple[TinyService, str]:
            settings = Settings(_env_file=None, data_dir=tmp_path,
                                twilio_auth_token=fake.auth_token)
            tiny = TinyService(settings, **options)
            return tiny, start(tiny.app())

        yield begin


@contextmanager
def serving_many() -> Iterator[Callable[[FastAPI], str]]:
    stops: list[Any] = []

    def start(app: FastAPI) -> str:
        context = serving(app)
        stops.append(context)
        return context.__enter__()

    try:
        yield start
    finally:
        for context in stops:
            context.__exit__(None, None, None)


def clinic(callee: Callee | str | None = None) -> FakeTwilioRest:
    fake = FakeTwilioRest(timing=TIMING)
    fake.add_number(CLINIC)
    if callee is not None:
        fake.add_callee(PATIENT, callee)
    return fake


def calls_of(fake: FakeTwilioRest) -> TwilioCalls:
    return TwilioCalls(TwilioAccount(fake.account_sid, fake.auth_token, fake.base_url))


async def place(fake: FakeTwilioRest, url: str, *, machine_detection: bool = True) -> str:
    """Place a call as the service does; its SID."""
    placed = await calls_of(fake).create(
        to=PATIENT, from_=CLINIC, url=f"{url}/voice/outbound",
        status_callback=f"{url}/voice/outbound/status", machine_detection=machine_detection)
    return placed.sid


async def dial(fake: FakeTwilioRest, url: str, *, machine_detection: bool = True
               ) -> dict[str, Any]:
    """Place a call and wait for it to end; the call as Twilio reports it."""
    sid = await place(fake, url, machine_detection=machine_detection)
    return await fake.wait_for(sid, timeout_s=20)


def assert_signed_twilio_params(form: dict[str, str], sid: str, fake: FakeTwilioRest) -> None:
    assert all(name in form for name in COMMON)
    assert (form["CallSid"], form["AccountSid"]) == (sid, fake.account_sid)
    assert (form["From"], form["To"], form["Direction"]) == (CLINIC, PATIENT, "outbound-api")


@pytest.mark.parametrize(("callee", "statuses"), [
    ("busy", ["initiated", "busy"]),
    ("no_answer", ["initiated", "ringing", "no-answer"]),
    (None, ["initiated", "ringing", "no-answer"]),  # nobody registered: nobody answers
    ("fail", ["initiated", "failed"]),
])
async def test_an_unanswered_call_reports_its_progress_and_never_asks_for_twiml(
        service, callee, statuses):
    fake = clinic(callee)
    async with serve_twilio_rest(fake):
        tiny, url = service(fake)
        call = await dial(fake, url)

    assert call["status"] == statuses[-1]
    assert tiny.call_statuses() == statuses
    assert [form["SequenceNumber"] for form in tiny.status_forms] == [
        str(n) for n in range(len(statuses))]
    for form in tiny.status_forms:
        assert_signed_twilio_params(form, call["sid"], fake)
        assert form["CallbackSource"] == "call-progress-events"
    assert tiny.status_forms[-1]["CallDuration"] == "0"
    assert "AnsweredBy" not in tiny.status_forms[-1]
    assert tiny.voice_forms == []


async def test_calls_placed_one_after_another_share_one_tls_context(service, monkeypatch):
    """Each TLS context reads the CA bundle (about 40 ms of the stand-in's event loop): one
    per call would cap how fast the stand-in can place calls."""
    built: list[str] = []
    build = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append("context")
        return build(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    fake = clinic("busy")
    async with serve_twilio_rest(fake):
        tiny, url = service(fake)
        calls = [await dial(fake, url) for _ in range(3)]

    assert [call["status"] for call in calls] == ["busy"] * 3
    assert tiny.call_statuses() == ["initiated", "busy"] * 3
    assert len(built) <= 1


async def test_a_voicemail_hears_the_message_after_the_beep(service):
    fake = clinic("voicemail")
    async with serve_twilio_rest(fake):
        tiny, url = service(fake)
        call = await dial(fake, url)

    assert tiny.call_statuses() == ["initiated", "ringing", "in-progress", "completed"]
    [asked] = tiny.voice_forms
    assert_signed_twilio_params(asked, call["sid"], fake)
    assert (asked["CallStatus"], asked["AnsweredBy"]) == ("in-progress", "machine_end_beep")
    completed = tiny.status_forms[-1]
    assert completed["AnsweredBy"] == "machine_end_beep" and "CallDuration" in completed
    outcome = fake.outcome(call["sid"])
    assert outcome.said == [MESSAGE] and outcome.error is None
    assert (call["status"], call["answered_by"]) == ("completed", "machine_end_beep")


async def test_without_machine_detection_the_twiml_is_asked_for_with_no_verdict(service):
    fake = clinic("voicemail")
    async with serve_twilio_rest(fake):
        tiny, url = service(fake)
        call = await dial(fake, url, machine_detection=False)

    [asked] = tiny.voice_forms
    assert "AnsweredBy" not in asked and "AnsweredBy" not in tiny.status_forms[-1]
    assert call["answered_by"] is None


def write_script(tmp_path: Path, lines: list[str], **extra: Any) -> Path:
    import yaml

    path = tmp_path / "callee.yaml"
    path.write_text(yaml.safe_dump({
        "name": "answers_the_clinic", "from": PATIENT, "to": CLINIC,
        "turns": [{"say": line, "pause_s": 0.1} for line in lines], **extra}))
    return path


async def test_a_person_answers_on_the_media_stream_the_twiml_names(service, tmp_path):
    lines = ["Yes, this is Margaret speaking.", GOODBYE_SAY]
    # hangs up well after the tiny agent's reply to the last line has been sent
    person = script_callee(write_script(tmp_path, lines, hangup_after_s=0.6),
                           synthesize=tone_voice)
    fake = clinic(person)
    async with serve_twilio_rest(fake):
        tiny, url = service(fake)
        call = await dial(fake, url)
    await asyncio.to_thread(tiny.stream_over.wait, 5)

    [asked] = tiny.voice_forms
    assert asked["AnsweredBy"] == "human"
    assert tiny.stream_signed == [True]
    first, second = tiny.stream_messages[:2]
    assert (first["event"], first["protocol"]) == ("connected", "Call")
    assert second["event"] == "start"
    start = second["start"]
    assert (start["callSid"], start["accountSid"]) == (call["sid"], fake.account_sid)
    assert start["customParameters"] == {"call_id": "call-1"}
    assert tiny.caller_spoke() and len(tiny.events("stop")) == 1
    outcome = fake.outcome(call["sid"])
    assert outcome.stream_url == f"{url.replace('http', 'ws')}/ws"
    assert outcome.callee_said == lines and outcome.ended_by == "callee"
    assert outcome.agent_speech_s > 0 and outcome.error is None
    assert tiny.call_statuses() == ["initiated", "ringing", "in-progress", "completed"]
    assert tiny.status_forms[-1]["AnsweredBy"] == "human"
    assert call["status"] == "completed"


async def test_the_service_ending_the_stream_ends_the_call(service, tmp_path):
    person = script_callee(write_script(tmp_path, ["Hello?", "Are you still there?"]),
                           synthesize=tone_voice)
    fake = clinic(person)
    async with serve_twilio_rest(fake):
        tiny, url = service(fake, hang_up_stream=True)
        call = await dial(fake, url)

    outcome = fake.outcome(call["sid"])
    assert outcome.ended_by == "agent" and outcome.callee_said == ["Hello?"]
    assert call["status"] == "completed" and tiny.call_statuses()[-1] == "completed"


async def test_hanging_up_through_the_api_stops_the_stream(service, tmp_path):
    person = script_callee(write_script(tmp_path, ["Hello?"] * 3), synthesize=tone_voice)
    fake = clinic(person)
    async with serve_twilio_rest(fake):
        tiny, url = service(fake, stream_agent_s=0.0)
        sid = await place(fake, url)
        assert await asyncio.to_thread(tiny.stream_started.wait, 10)
        await calls_of(fake).hang_up(sid)
        call = await fake.wait_for(sid)
    await asyncio.to_thread(tiny.stream_over.wait, 5)

    assert fake.outcome(call["sid"]).ended_by == "api"
    assert len(tiny.events("stop")) == 1
    assert call["status"] == "completed" and tiny.call_statuses()[-1] == "completed"


async def test_only_the_progress_events_asked_for_are_reported(service):
    fake = clinic("busy")
    async with serve_twilio_rest(fake):
        tiny, url = service(fake)
        async with httpx.AsyncClient(auth=(fake.account_sid, fake.auth_token)) as http:
            placed = await http.post(
                f"{fake.base_url}/2010-04-01/Accounts/{fake.account_sid}/Calls.json",
                data={"To": PATIENT, "From": CLINIC, "Url": f"{url}/voice/outbound",
                      "StatusCallback": f"{url}/voice/outbound/status"})
        call = await fake.wait_for(placed.json()["sid"])

    assert placed.status_code == 201 and placed.json()["status"] == "queued"
    assert tiny.call_statuses() == ["busy"] and call["status"] == "busy"


def test_a_callee_file_is_a_persona_or_a_call_script(tmp_path):
    persona = person_callee("scenarios/personas/callback_test_results.yaml")
    script = person_callee(write_script(tmp_path, ["Hello?"]))

    assert (persona.kind, persona.name) == ("person", "callback_test_results")
    assert (script.kind, script.name) == ("person", "answers_the_clinic")
    with pytest.raises(CalleeError, match="neither a persona"):
        person_callee(tmp_path / "missing.yaml")


def test_the_command_line_names_a_bad_callee_before_serving(capsys, tmp_path):
    missing = tmp_path / "missing.yaml"

    assert main([CLINIC, "--callee", f"{PATIENT}=person:{missing}"]) == 2
    assert "neither a persona" in capsys.readouterr().err
    assert main([CLINIC, "--callee", f"{PATIENT}=answering_machine"]) == 2
    assert "voicemail" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([CLINIC, "--callee", "voicemail"])


async def test_a_person_whose_voice_fails_never_answers_and_the_call_says_why(
        service, tmp_path):
    async def broken_voice(text: str, sample_rate: int) -> bytes:
        raise OSError("no speech engine")

    fake = clinic(script_callee(write_script(tmp_path, ["Hello?"]), synthesize=broken_voice))
    async with serve_twilio_rest(fake):
        tiny, url = service(fake)
        call = await dial(fake, url)

    assert call["status"] == "failed" and tiny.voice_forms == []
    assert tiny.call_statuses() == ["initiated", "ringing", "failed"]
    assert "voice failed" in fake.outcome(call["sid"]).error
