"""The Twilio stand-in plays Twilio's side of a warm hand-off: a caller's call given hold
TwiML waits in a conference, an operator leg placed with inline TwiML hears the summary
and joins it, conference status callbacks are signed and in order, `<Start><Stream>`
forks carry what a leg says with Twilio's Media Streams messages in real time, the
Participants resource mutes and holds, and a TwiML Twilio cannot read fails as Twilio
fails it. A tiny aiohttp app stands in for the service and checks every signature."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pytest
from aiohttp import WSMsgType, web
from twilio.request_validator import RequestValidator

from simulator.outbound_callee import (
    Callee,
    CalleeError,
    CallTiming,
    operator_callee,
    parse_callee,
    script_callee,
)
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from simulator.twiml_run import APPLICATION_ERROR
from tests.local_http import serve_http
from tests.simulator.conftest import tone_voice
from tests.simulator.fake_service import ULAW_SILENT_CODES

CLINIC = "+15550109001"
CALLER = "+15550109100"
OPERATOR = "+15550109200"
ROOM = "handoff-7f3a"
HOLD_LINE = "Please hold while I put you through to the front desk."
SUMMARY = "Margaret Chen wants to move Friday's physio to next week. Connecting you now."
OPERATOR_LINES = ["Hi Margaret, front desk here.", "Let me find you a slot."]
TIMING = CallTiming(no_answer_s=0.05, speech_scale=0.05)


@dataclass
class Service:
    """The service's side: signed callbacks posted to it, forks opened on it, TwiML URLs."""

    validator: RequestValidator
    conference_forms: list[dict[str, str]] = field(default_factory=list)
    call_forms: list[dict[str, str]] = field(default_factory=list)
    twiml_forms: list[dict[str, str]] = field(default_factory=list)
    forks: list[list[tuple[float, dict[str, Any]]]] = field(default_factory=list)
    unsigned: list[str] = field(default_factory=list)
    twiml_answer: str = f"<Response><Say>{HOLD_LINE}</Say></Response>"
    url: str = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/conference/status", self._form_into(self.conference_forms))
        app.router.add_post("/call/status", self._form_into(self.call_forms))
        app.router.add_post("/twiml", self._twiml)
        app.router.add_get("/fork", self._fork)
        app.router.add_get("/ws", self._fork)
        app.router.add_post("/voice/outbound", self._connect)
        return app

    async def _connect(self, request: web.Request) -> web.Response:
        return web.Response(content_type="application/xml", text=(
            f'<Response><Connect><Stream url="ws://{request.host}/ws">'
            '<Parameter name="call_id" value="call-3"/></Stream></Connect></Response>'))

    def _form_into(self, forms: list[dict[str, str]]) -> Callable[..., Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            forms.append(await self._signed_form(request))
            return web.Response(status=204)

        return handle

    async def _signed_form(self, request: web.Request) -> dict[str, str]:
        form = {k: str(v) for k, v in (await request.post()).items()}
        if not self.validator.validate(str(request.url), form,
                                       request.headers.get("X-Twilio-Signature", "")):
            self.unsigned.append(request.path)
        return form

    async def _twiml(self, request: web.Request) -> web.Response:
        self.twiml_forms.append(await self._signed_form(request))
        return web.Response(text=self.twiml_answer, content_type="application/xml")

    async def _fork(self, request: web.Request) -> web.WebSocketResponse:
        ws_url = "ws" + str(request.url)[len("http"):]
        if not self.validator.validate(ws_url, {}, request.headers.get("X-Twilio-Signature", "")):
            self.unsigned.append(request.path)
        websocket = web.WebSocketResponse()
        await websocket.prepare(request)
        received: list[tuple[float, dict[str, Any]]] = []
        self.forks.append(received)
        async for message in websocket:
            if message.type == WSMsgType.TEXT:
                received.append((time.monotonic(), json.loads(message.data)))
        return websocket

    def conference_events(self) -> list[str]:
        return [form["StatusCallbackEvent"] for form in self.conference_forms]


class Rest:
    """The service's REST requests to the stand-in."""

    def __init__(self, fake: FakeTwilioRest) -> None:
        self._fake = fake
        self.base = f"{fake.base_url}/2010-04-01/Accounts/{fake.account_sid}"

    async def post(self, path: str, data: dict[str, str]) -> httpx.Response:
        async with httpx.AsyncClient(auth=(self._fake.account_sid, self._fake.auth_token)) as http:
            return await http.post(f"{self.base}/{path}", data=data)

    async def get(self, path: str, **query: str) -> httpx.Response:
        async with httpx.AsyncClient(auth=(self._fake.account_sid, self._fake.auth_token)) as http:
            return await http.get(f"{self.base}/{path}", params=query)


async def voice(text: str) -> bytes:
    return await tone_voice(text, 8000)


async def until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def clinic(operator: Any = None) -> FakeTwilioRest:
    fake = FakeTwilioRest(timing=TIMING)
    fake.add_number(CLINIC)
    if operator is not None:
        fake.add_callee(OPERATOR, operator)
    return fake


def hold_twiml(service: str, *, fork: bool = False, end_on_exit: bool = True) -> str:
    start = (f'<Start><Stream url="ws{service[4:]}/fork"><Parameter name="leg" value="caller"/>'
             "</Stream></Start>") if fork else ""
    return (f"<Response>{start}<Say>{HOLD_LINE}</Say><Dial>"
            f'<Conference startConferenceOnEnter="false" endConferenceOnExit='
            f'"{str(end_on_exit).lower()}" waitUrl="" statusCallback="{service}/conference/status"'
            f' statusCallbackEvent="start end join leave mute hold">{ROOM}</Conference>'
            "</Dial></Response>")


def operator_twiml(service: str = "", *, fork: bool = False) -> str:
    start = (f'<Start><Stream url="ws{service[4:]}/fork" track="inbound_track">'
             '<Parameter name="call_id" value="call-7"/><Parameter name="leg" value="operator"/>'
             "</Stream></Start>") if fork else ""
    return (f"<Response>{start}<Say>{SUMMARY}</Say><Dial>"
            f'<Conference startConferenceOnEnter="true" endConferenceOnExit="true" beep="true">'
            f"{ROOM}</Conference></Dial></Response>")


async def caller_on_hold(fake: FakeTwilioRest, rest: Rest, service: str, **twiml: bool):
    """The caller's call, mid-conversation, given the hold TwiML; once it waits in the room."""
    leg = fake.add_inbound("CA" + "1" * 32, CALLER, CLINIC,
                           conference_lines=["Hello? Is that the front desk?"])
    leg.voice = voice
    updated = await rest.post(f"Calls/{leg.sid}.json", {"Twiml": hold_twiml(service, **twiml)})
    assert updated.status_code == 200 and updated.json()["direction"] == "inbound"
    await until(lambda: ROOM in fake.conferences and leg.heard[-1:] == ["hold"])
    return leg


async def place_operator(rest: Rest, service: str, twiml: str) -> str:
    placed = await rest.post("Calls.json", {
        "To": OPERATOR, "From": CLINIC, "Twiml": twiml,
        "StatusCallback": f"{service}/call/status",
        "StatusCallbackEvent": "initiated ringing answered completed"})
    assert placed.status_code == 201, placed.text
    return placed.json()["sid"]


async def test_a_caller_on_hold_waits_until_the_operator_hears_the_summary_and_joins():
    fake = clinic(operator_callee(OPERATOR_LINES, stay_s=0.2, synthesize=tone_voice))
    service = Service(RequestValidator(fake.auth_token))
    async with serve_http(service.app()) as url, serve_twilio_rest(fake):
        rest = Rest(fake)
        leg = await caller_on_hold(fake, rest, url)
        waiting = fake.conferences[ROOM]
        assert waiting.status == "init" and not waiting.started.is_set()
        sid = await place_operator(rest, url, operator_twiml())
        call = await fake.wait_for(sid, timeout_s=10)
        await asyncio.wait_for(leg.finished.wait(), 5)
        conference = await fake.conference_over(ROOM)

    operator = fake.outcome(sid)
    assert operator.heard == [SUMMARY] and operator.said == [SUMMARY]
    assert operator.conferences == [ROOM] and operator.spoken == OPERATOR_LINES
    assert operator.ended_by == "callee" and operator.error is None
    assert call["status"] == "completed" and call["direction"] == "outbound-api"
    assert [form["CallStatus"] for form in service.call_forms] == [
        "initiated", "ringing", "in-progress", "completed"]
    # the caller heard the hold line and waited; the operator's beep came in, then out
    assert leg.heard == [HOLD_LINE, "hold", "beep", "beep"]
    assert leg.spoken == ["Hello? Is that the front desk?"] and leg.conferences == [ROOM]
    assert leg.resource["status"] == "completed" and leg.ended_by == "agent"
    participants = conference.participants
    assert list(participants) == [leg.sid, sid]
    assert participants[sid].joined_at > participants[leg.sid].joined_at
    assert conference.reason_ended == "participant-with-end-conference-on-exit-left"
    assert conference.call_sid_ending == sid and service.unsigned == []


async def test_conference_callbacks_are_signed_and_in_the_order_things_happened():
    fake = clinic(operator_callee(stay_s=0.1))
    service = Service(RequestValidator(fake.auth_token))
    async with serve_http(service.app()) as url, serve_twilio_rest(fake):
        rest = Rest(fake)
        leg = await caller_on_hold(fake, rest, url)
        sid = await place_operator(rest, url, operator_twiml())
        conference = await fake.conference_over(ROOM)

    assert service.unsigned == []
    assert service.conference_events() == [
        "participant-join", "participant-join", "conference-start", "participant-leave",
        "participant-leave", "conference-end"]
    forms = service.conference_forms
    assert [form["SequenceNumber"] for form in forms] == ["1", "2", "3", "4", "5", "6"]
    assert [form.get("CallSid") for form in forms[:5]] == [leg.sid, sid, sid, sid, leg.sid]
    for form in forms:
        assert form["ConferenceSid"] == conference.sid and conference.sid.startswith("CF")
        assert (form["FriendlyName"], form["AccountSid"]) == (ROOM, fake.account_sid)
        assert parsedate_to_datetime(form["Timestamp"]).tzinfo is not None
    caller_join, operator_join = forms[0], forms[1]
    assert (caller_join["StartConferenceOnEnter"], caller_join["EndConferenceOnExit"]) == (
        "false", "true")
    assert (operator_join["StartConferenceOnEnter"], operator_join["Muted"],
            operator_join["Hold"]) == ("true", "false", "false")
    operator_leave, caller_leave, end = forms[3], forms[4], forms[5]
    assert (operator_leave["ReasonParticipantLeft"],
            operator_leave["ParticipantCallStatus"]) == ("participant_hung_up", "completed")
    assert caller_leave["ReasonParticipantLeft"] == (
        "participant_with_end_conference_on_exit_left")
    assert end["ReasonConferenceEnded"] == "participant-with-end-conference-on-exit-left"
    assert end["CallSidEndingConference"] == sid
    assert conference.events() == service.conference_events()


async def test_a_declining_operator_hears_the_start_of_the_summary_and_never_joins():
    fake = clinic("decline")
    service = Service(RequestValidator(fake.auth_token))
    async with serve_http(service.app()) as url, serve_twilio_rest(fake):
        rest = Rest(fake)
        leg = await caller_on_hold(fake, rest, url)
        sid = await place_operator(rest, url, operator_twiml())
        call = await fake.wait_for(sid, timeout_s=10)
        still_waiting = fake.conferences[ROOM].status
        hung_up = await rest.post(f"Calls/{leg.sid}.json", {"Status": "completed"})
        await asyncio.wait_for(leg.finished.wait(), 5)
        conference = await fake.conference_over(ROOM)

    declined = fake.outcome(sid)
    heard = SUMMARY.split()[: len(SUMMARY.split()) // 2]
    assert declined.heard == [" ".join(heard)] and declined.conferences == []
    assert call["status"] == "completed" and declined.ended_by == "callee"
    assert [form["CallStatus"] for form in service.call_forms][-1] == "completed"
    assert still_waiting == "init" and list(conference.participants) == [leg.sid]
    assert hung_up.status_code == 200 and leg.hung_up.is_set() and leg.ended_by == "api"
    assert service.conference_events() == [
        "participant-join", "participant-leave", "conference-end"]
    assert service.conference_forms[1]["ReasonParticipantLeft"] == "participant_hung_up"
    assert conference.reason_ended == "participant-with-end-conference-on-exit-left"


@pytest.mark.parametrize(("kind", "statuses"), [
    ("busy", ["initiated", "busy"]),
    ("no_answer", ["initiated", "ringing", "no-answer"]),
    ("fail", ["initiated", "failed"]),
])
async def test_an_operator_who_cannot_be_reached_reports_through_its_status_callback(
        kind, statuses):
    fake = clinic(kind)
    service = Service(RequestValidator(fake.auth_token))
    async with serve_http(service.app()) as url, serve_twilio_rest(fake):
        sid = await place_operator(Rest(fake), url, operator_twiml())
        call = await fake.wait_for(sid, timeout_s=10)

    assert call["status"] == statuses[-1]
    assert [form["CallStatus"] for form in service.call_forms] == statuses
    assert fake.outcome(sid).heard == [] and fake.conferences == {}


async def test_a_fork_carries_what_the_leg_says_with_twilios_messages_in_real_time():
    fake = clinic(operator_callee(OPERATOR_LINES, stay_s=0.2, synthesize=tone_voice))
    service = Service(RequestValidator(fake.auth_token))
    async with serve_http(service.app()) as url, serve_twilio_rest(fake):
        rest = Rest(fake)
        leg = await caller_on_hold(fake, rest, url, fork=True)
        await until(lambda: len(service.forks) == 1)
        sid = await place_operator(rest, url, operator_twiml(url, fork=True))
        await fake.wait_for(sid, timeout_s=10)
        await asyncio.wait_for(leg.finished.wait(), 5)
        await until(lambda: all(fork and fork[-1][1]["event"] == "stop"
                                for fork in service.forks))

    caller_fork, received = service.forks
    messages = [message for _, message in received]
    assert service.unsigned == []
    assert messages[0] == {"event": "connected", "protocol": "Call", "version": "1.0.0"}
    start = messages[1]
    assert start["event"] == "start" and start["streamSid"].startswith("MZ")
    assert (start["start"]["callSid"], start["start"]["accountSid"]) == (sid, fake.account_sid)
    assert start["start"]["tracks"] == ["inbound"]
    assert start["start"]["customParameters"] == {"call_id": "call-7", "leg": "operator"}
    assert start["start"]["mediaFormat"] == {
        "encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
    media = [m for m in messages if m["event"] == "media"]
    assert messages[-1]["event"] == "stop" and messages[-1]["stop"]["callSid"] == sid
    assert [m["media"]["chunk"] for m in media] == [str(n) for n in range(1, len(media) + 1)]
    assert [m["media"]["timestamp"] for m in media[:3]] == ["0", "20", "40"]
    assert {m["media"]["track"] for m in media} == {"inbound"}
    payloads = [base64.b64decode(m["media"]["payload"]) for m in media]
    assert {len(p) for p in payloads} == {160}
    voiced = sum(bool(set(p) - ULAW_SILENT_CODES) for p in payloads)
    spoken_s = sum(len(line.split()) * 0.15 for line in OPERATOR_LINES)
    assert voiced == pytest.approx(spoken_s / 0.02, abs=3)
    arrivals = [t for t, m in received if m["event"] == "media"]
    assert arrivals[-1] - arrivals[0] >= 0.9 * (len(arrivals) - 1) * 0.02  # paced, not burst
    (fork,) = fake.outcome(sid).forks
    assert (fork.url, fork.parameters) == (f"ws{url[4:]}/fork",
                                           {"call_id": "call-7", "leg": "operator"})
    assert fork.opened and fork.stopped_by == "call" and fork.messages_sent == len(messages)
    # the caller's fork, started before the hold line, carries their line in the room
    caller_messages = [message for _, message in caller_fork]
    assert caller_messages[1]["start"]["customParameters"] == {"leg": "caller"}
    assert caller_messages[1]["start"]["callSid"] == leg.sid
    caller_voiced = sum(bool(set(base64.b64decode(m["media"]["payload"])) - ULAW_SILENT_CODES)
                        for m in caller_messages if m["event"] == "media")
    assert caller_voiced == pytest.approx(len(leg.spoken[0].split()) * 0.15 / 0.02, abs=2)
    assert caller_messages[-1]["event"] == "stop" and leg.forks[0].stopped_by == "call"


async def test_an_inbound_leg_taken_back_to_the_agent_reports_where_to_reconnect():
    fake = clinic()
    async with serve_twilio_rest(fake):
        rest = Rest(fake)
        leg = fake.add_inbound("CA" + "2" * 32, CALLER, CLINIC)
        read = await rest.get(f"Calls/{leg.sid}.json")
        back = ('<Response><Connect><Stream url="wss://voice.example/ws">'
                '<Parameter name="call_id" value="call-9"/><Parameter name="resumed" value="1"/>'
                "</Stream></Connect></Response>")
        await rest.post(f"Calls/{leg.sid}.json", {"Twiml": back})
        await asyncio.wait_for(leg.reconnected.wait(), 2)
        reconnect = leg.take_reconnect()
        leg.stream_ended(caller_hung_up=True)
        await asyncio.wait_for(leg.finished.wait(), 2)
        too_late = await rest.post(f"Calls/{leg.sid}.json", {"Twiml": back})

    assert read.json()["status"] == "in-progress" and read.json()["from"] == CALLER
    assert reconnect == ("wss://voice.example/ws", {"call_id": "call-9", "resumed": "1"})
    assert not leg.redirected.is_set() and leg.take_reconnect() is None
    assert leg.resource["status"] == "completed" and leg.ended_by == "caller"
    assert too_late.status_code == 400 and too_late.json()["code"] == 21220


async def test_new_twiml_by_url_is_fetched_signed_and_run_on_the_call():
    fake = clinic()
    service = Service(RequestValidator(fake.auth_token))
    async with serve_http(service.app()) as url, serve_twilio_rest(fake):
        leg = fake.add_inbound("CA" + "3" * 32, CALLER, CLINIC)
        await Rest(fake).post(f"Calls/{leg.sid}.json", {"Url": f"{url}/twiml"})
        await asyncio.wait_for(leg.finished.wait(), 5)

    (asked,) = service.twiml_forms
    assert (asked["CallSid"], asked["Direction"], asked["CallStatus"]) == (
        leg.sid, "inbound", "in-progress")
    assert service.unsigned == [] and leg.heard == [HOLD_LINE] and leg.ended_by == "agent"


async def test_participants_are_listed_muted_held_and_hung_up_through_the_rest_api():
    fake = clinic(operator_callee(stay_s=None))
    service = Service(RequestValidator(fake.auth_token))
    async with serve_http(service.app()) as url, serve_twilio_rest(fake):
        rest = Rest(fake)
        leg = await caller_on_hold(fake, rest, url)
        sid = await place_operator(rest, url, operator_twiml())
        await until(lambda: fake.conferences[ROOM].status == "in-progress")
        conference = fake.conferences[ROOM]
        listed = (await rest.get("Conferences.json", FriendlyName=ROOM,
                                 Status="in-progress")).json()
        base = f"Conferences/{conference.sid}/Participants"
        everyone = (await rest.get(f"{base}.json")).json()
        muted = (await rest.post(f"{base}/{leg.sid}.json", {"Muted": "true"})).json()
        held = (await rest.post(f"{base}/{leg.sid}.json", {"Hold": "true"})).json()
        only_muted = (await rest.get(f"{base}.json", Muted="true")).json()
        bad = await rest.post(f"{base}/{leg.sid}.json", {"Muted": "maybe"})
        await rest.post(f"Calls/{sid}.json", {"Status": "completed"})
        await fake.conference_over(ROOM)
        await fake.wait_for(sid)
        await asyncio.wait_for(leg.finished.wait(), 5)
        after = (await rest.get(f"{base}.json")).json()
        ended = (await rest.get(f"Conferences/{conference.sid}.json")).json()
        gone = await rest.get(f"{base}/{leg.sid}.json")

    assert [c["sid"] for c in listed["conferences"]] == [conference.sid]
    assert {p["call_sid"] for p in everyone["participants"]} == {leg.sid, sid}
    assert muted["muted"] is True and held["hold"] is True and held["muted"] is True
    assert [p["call_sid"] for p in only_muted["participants"]] == [leg.sid]
    assert bad.status_code == 400
    assert "participant-mute" in service.conference_events()
    assert "participant-hold" in service.conference_events()
    # held: the hold music again, and no beep as the operator leaves
    assert leg.heard == [HOLD_LINE, "hold", "beep", "hold"]
    assert fake.outcome(sid).ended_by == "api"
    assert after["participants"] == [] and ended["status"] == "completed"
    assert gone.status_code == 404 and gone.json()["code"] == 20404


@pytest.mark.parametrize(("twiml", "detail"), [
    ("<Response><Say>One moment.</Say><Dance/></Response>", "unknown verb <Dance>"),
    ("<Response><Say>One moment.</Say>", "not well-formed XML"),
])
async def test_twiml_twilio_cannot_read_fails_the_call_with_12100(twiml, detail):
    fake = clinic(operator_callee())
    async with serve_twilio_rest(fake):
        sid = await place_operator(Rest(fake), "http://127.0.0.1:9", twiml)
        call = await fake.wait_for(sid)

    outcome = fake.outcome(sid)
    assert outcome.error_code == 12100 and "Document parse failure" in outcome.error
    assert detail in outcome.error and outcome.heard[-1] == APPLICATION_ERROR
    assert call["status"] == "completed" and outcome.conferences == []


async def test_a_placed_call_given_new_twiml_leaves_its_stream_for_the_conference(write_script):
    person = script_callee(write_script({
        "name": "patient", "from": OPERATOR, "to": CLINIC,
        "turns": [{"say": "Hello?", "wait_s": 30}]}), synthesize=tone_voice)
    fake = clinic(person)
    service = Service(RequestValidator(fake.auth_token))
    async with serve_http(service.app()) as url, serve_twilio_rest(fake):
        rest = Rest(fake)
        placed = await rest.post("Calls.json", {"To": OPERATOR, "From": CLINIC,
                                                "Url": f"{url}/voice/outbound"})
        sid = placed.json()["sid"]
        await until(lambda: bool(service.forks) and len(service.forks[0]) > 5)
        await rest.post(f"Calls/{sid}.json", {"Twiml": hold_twiml(url)})
        await until(lambda: ROOM in fake.conferences)
        conference = fake.conferences[ROOM]
        ended = await rest.post(f"Conferences/{conference.sid}.json", {"Status": "completed"})
        call = await fake.wait_for(sid)
        await fake.conference_over(ROOM)

    (stream,) = service.forks
    assert stream[1][1]["start"]["customParameters"] == {"call_id": "call-3"}
    assert stream[-1][1]["event"] == "stop"  # Twilio stopped the stream for the new TwiML
    outcome = fake.outcome(sid)
    assert outcome.heard == [HOLD_LINE, "hold"] and outcome.conferences == [ROOM]
    assert len(outcome.documents) == 2 and outcome.ended_by == "agent"
    assert ended.json()["status"] == "completed" and call["status"] == "completed"
    assert conference.reason_ended == "conference-ended-via-api"
    assert service.conference_events() == [
        "participant-join", "participant-leave", "conference-end"]
    assert service.conference_forms[1]["ReasonParticipantLeft"] == "conference_ended_via_api"


def test_an_operator_callee_is_named_plainly_or_by_the_script_whose_lines_it_says(write_script):
    script = write_script({"name": "front_desk", "from": OPERATOR, "to": CLINIC,
                           "turns": [{"say": line} for line in OPERATOR_LINES]})

    plain, scripted = parse_callee("operator"), parse_callee(f"operator:{script}")

    assert (plain.kind, plain.lines, plain.stay_s) == ("operator", (), 3.0)
    assert (scripted.name, scripted.lines) == ("front_desk", tuple(OPERATOR_LINES))
    assert parse_callee("decline").kind == "decline"
    with pytest.raises(CalleeError, match="only an operator"):
        Callee("voicemail", lines=("Hello",))
