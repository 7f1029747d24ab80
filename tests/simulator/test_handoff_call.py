"""A simulated call the Twilio stand-in knows (`simulate_call(twilio=...)`) is handed off
as a real one would be: the service's new TwiML stops the media stream with Twilio's
`stop`, the caller hears the hold line and waits in the conference, talks with the
operator the service rang, and when the service takes the caller back to the agent,
the stream is opened again with its parameters and the script goes on. A tiny aiohttp
app plays the service: it answers, greets, hands off after the caller's first line and
connects the caller back once the operator has left."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import WSMsgType, web

from simulator.outbound_callee import CallTiming, operator_callee
from simulator.simulator import CallScript, simulate_call
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from tests.local_http import serve_http
from tests.simulator.conftest import tone_voice
from tests.simulator.fake_service import ULAW_SILENT_CODES, tone_ulaw

CLINIC = "+15550109301"
CALLER = "+15550109302"
OPERATOR = "+15550109303"
ROOM = "handoff-call-1"
HOLD_LINE = "Please hold while I put you through."
SUMMARY = "Caller wants to move an appointment."
CALLER_IN_CONFERENCE = "Hello, is that the front desk?"
OPERATOR_LINE = "Front desk here, how can I help?"
QUIET_FRAMES = 10  # 200 ms of the caller's silence ends a line


@dataclass
class HandoffService:
    """Answers, greets, hands the caller to the operator after their first line, and
    takes them back once the operator has left."""

    fake: FakeTwilioRest
    url: str = ""
    starts: list[dict[str, Any]] = field(default_factory=list)
    events: list[list[str]] = field(default_factory=list)  # per stream
    status_forms: list[dict[str, str]] = field(default_factory=list)
    conference_forms: list[dict[str, str]] = field(default_factory=list)
    operator_sid: str = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/voice/answer", self._answer)
        app.router.add_post("/voice/status", self._status)
        app.router.add_post("/conference/status", self._conference)
        app.router.add_get("/ws", self._stream)
        return app

    def _ws(self) -> str:
        return "ws" + self.url[len("http"):] + "/ws"

    async def _answer(self, request: web.Request) -> web.Response:
        return web.Response(content_type="application/xml", text=(
            f'<Response><Connect><Stream url="{self._ws()}">'
            '<Parameter name="call_id" value="call-1"/></Stream></Connect></Response>'))

    async def _status(self, request: web.Request) -> web.Response:
        self.status_forms.append({k: str(v) for k, v in (await request.post()).items()})
        return web.Response(status=204)

    async def _conference(self, request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        self.conference_forms.append(form)
        if form["StatusCallbackEvent"] == "participant-leave" and \
                form["CallSid"] == self.operator_sid:
            await self._rest(f"Calls/{self.starts[0]['callSid']}.json", Twiml=(
                f'<Response><Connect><Stream url="{self._ws()}">'
                '<Parameter name="call_id" value="call-1"/>'
                '<Parameter name="resumed" value="true"/></Stream></Connect></Response>'))
        return web.Response(status=204)

    async def _stream(self, request: web.Request) -> web.WebSocketResponse:
        websocket = web.WebSocketResponse()
        await websocket.prepare(request)
        events: list[str] = []
        self.events.append(events)
        heard = quiet = 0
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            events.append(data["event"])
            if data["event"] == "start":
                self.starts.append(data["start"])
                await self._speak(websocket, data["streamSid"])
            elif data["event"] == "media":
                voiced = bool(set(base64.b64decode(data["media"]["payload"]))
                              - ULAW_SILENT_CODES)
                heard, quiet = heard + voiced, 0 if voiced else quiet + 1
                if heard and quiet == QUIET_FRAMES:
                    heard = 0
                    if len(self.starts) == 1:
                        await self._hand_off(data["streamSid"])
                    else:
                        await self._speak(websocket, data["streamSid"])
            elif data["event"] == "stop":
                break
        return websocket

    async def _speak(self, websocket: web.WebSocketResponse, stream_sid: str) -> None:
        audio = tone_ulaw(0.3)
        for at in range(0, len(audio), 320):
            payload = base64.b64encode(audio[at:at + 320]).decode()
            await websocket.send_str(json.dumps(
                {"event": "media", "streamSid": stream_sid, "media": {"payload": payload}}))

    async def _hand_off(self, stream_sid: str) -> None:
        caller = self.starts[0]["callSid"]
        await self._rest(f"Calls/{caller}.json", Twiml=(
            f"<Response><Say>{HOLD_LINE}</Say><Dial><Conference "
            f'startConferenceOnEnter="false" statusCallback="{self.url}/conference/status" '
            f'statusCallbackEvent="start end join leave">{ROOM}</Conference></Dial></Response>'))
        placed = await self._rest("Calls.json", To=OPERATOR, From=CLINIC, Twiml=(
            f"<Response><Say>{SUMMARY}</Say><Dial><Conference>{ROOM}</Conference></Dial>"
            "</Response>"))
        self.operator_sid = placed["sid"]

    async def _rest(self, path: str, **form: str) -> dict[str, Any]:
        fake = self.fake
        async with httpx.AsyncClient(auth=(fake.account_sid, fake.auth_token)) as http:
            response = await http.post(
                f"{fake.base_url}/2010-04-01/Accounts/{fake.account_sid}/{path}", data=form)
        response.raise_for_status()
        return response.json()


async def test_a_handed_off_caller_holds_talks_to_the_operator_and_comes_back_to_the_agent():
    fake = FakeTwilioRest(timing=CallTiming(speech_scale=0.05))
    fake.add_number(CLINIC)
    fake.add_callee(OPERATOR, operator_callee([OPERATOR_LINE], stay_s=0.2,
                                              synthesize=tone_voice))
    fake.inbound_lines[CALLER] = [CALLER_IN_CONFERENCE]
    service = HandoffService(fake)
    script = CallScript.model_validate({
        "name": "handed_off", "from": CALLER, "to": CLINIC, "hangup_after_s": 0.3,
        "turns": [{"say": "Can I talk to someone at the front desk?", "pause_s": 0.1},
                  {"say": "Thanks, that is all sorted now.", "pause_s": 0.1}]})
    async with serve_http(service.app()) as url, serve_twilio_rest(fake):
        service.url = url
        result = await asyncio.wait_for(simulate_call(
            script, base_url=url, api_key=None, twilio_token=fake.auth_token,
            synthesize=tone_voice, quiet_s=0.3, log=lambda line: None, twilio=fake), 30)
        await fake.wait_for(service.operator_sid)
        await fake.conference_over(ROOM)

    (leg,) = fake.inbound.values()
    first, again = service.starts
    assert first["callSid"] == again["callSid"] == leg.sid
    assert first["accountSid"] == fake.account_sid and first["streamSid"] != again["streamSid"]
    assert again["customParameters"] == {"call_id": "call-1", "resumed": "true"}
    assert service.events[0][-1] == "stop" and service.events[1][-1] == "stop"
    assert leg.heard[:2] == [HOLD_LINE, "hold"] and leg.conferences == [ROOM]
    assert leg.spoken == [CALLER_IN_CONFERENCE]
    assert leg.resource["status"] == "completed" and leg.ended_by == "caller"
    operator = fake.outcome(service.operator_sid)
    assert operator.heard == [SUMMARY] and operator.spoken == [OPERATOR_LINE]
    assert [form["StatusCallbackEvent"] for form in service.conference_forms] == [
        "participant-join", "participant-join", "conference-start", "participant-leave",
        "participant-leave", "conference-end"]
    assert service.conference_forms[4]["ReasonParticipantLeft"] == (
        "participant_updated_via_api")
    kinds = [event.kind for event in result.client_log]
    assert kinds.index("stream_stopped") < kinds.index("handed_off") < kinds.index(
        "reconnected") < kinds.index("caller_hangup")
    assert [line.split(": ", 1)[-1] for line in
            (f"{e.detail}" for e in result.client_log if e.kind == "caller_line")] == [
        "Can I talk to someone at the front desk?", "Thanks, that is all sorted now."]
    assert result.ended_by == "caller"
    (completed,) = service.status_forms
    assert completed["CallStatus"] == "completed" and int(completed["CallDuration"]) >= 1
