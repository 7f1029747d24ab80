"""Garbage on /ws never takes the server down, and every call record is closed with a reason."""

import asyncio
import base64
import json
import uuid
import xml.etree.ElementTree as ET

import httpx
import pytest
import websockets

from runner.dev_credentials import twilio_auth_token
from simulator.simulator import signed_upgrade
from tests.e2e.test_api import answer_form, signed_answer

pytestmark = pytest.mark.e2e


def ws_url(server) -> str:
    return server.url.replace("http://", "ws://") + "/ws"


def open_stream(server, **options):
    """The media stream, its upgrade signed as Twilio signs it."""
    url = ws_url(server)
    token = twilio_auth_token(server.settings)
    return websockets.connect(url, additional_headers=signed_upgrade(token, url), **options)


def new_call(server) -> tuple[str, dict]:
    form = answer_form()
    root = ET.fromstring(signed_answer(server, form).text)
    return root.find("./Connect/Stream/Parameter").get("value"), form


def start_message(call_id: str, form: dict) -> str:
    return json.dumps({
        "event": "start", "sequenceNumber": "1", "streamSid": "MZ" + uuid.uuid4().hex,
        "start": {
            "streamSid": "MZ" + uuid.uuid4().hex, "accountSid": form["AccountSid"],
            "callSid": form["CallSid"], "tracks": ["inbound"],
            "customParameters": {"call_id": call_id},
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        },
    })


def media(sequence: int) -> str:
    payload = base64.b64encode(b"\xff" * 160).decode()
    return json.dumps({"event": "media", "sequenceNumber": str(sequence),
                       "media": {"track": "inbound", "payload": payload}})


async def record(server, call_id: str, timeout: float = 15.0) -> dict:
    headers = {"Authorization": f"Bearer {server.api_key}"}
    async with httpx.AsyncClient() as client:
        for _ in range(int(timeout / 0.2)):
            detail = (await client.get(f"{server.url}/api/calls/{call_id}", headers=headers)).json()
            if detail.get("completion_reason"):
                return detail
            await asyncio.sleep(0.2)
    raise AssertionError(f"call {call_id} never closed: {detail}")


async def test_junk_before_and_during_a_call_is_recorded_and_the_call_is_closed(server):
    call_id, form = new_call(server)
    async with open_stream(server, max_size=None) as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        await ws.send("this is not json")
        await ws.send(media(1))  # media before start
        await ws.send(start_message(call_id, form))
        await ws.send('{"event": "dance"}')
        await ws.send("[1, 2, 3]")
        await ws.send(json.dumps({"event": "media", "media": {"payload": "%%%"}}))
        for sequence in range(2, 12):
            await ws.send(media(sequence))
            await asyncio.sleep(0.02)
        await ws.send(json.dumps({"event": "stop", "stop": {}}))
    detail = await record(server, call_id)
    assert detail["completion_reason"] == "caller_hangup"
    kinds = [e["data"]["kind"] for e in detail["events"] if e["type"] == "bad_input"]
    assert {"invalid_json", "media_before_start", "unknown_event", "not_an_event",
            "media_bad_base64"} <= set(kinds)


async def test_an_oversized_message_is_dropped_and_the_call_goes_on(server):
    call_id, form = new_call(server)
    async with open_stream(server, max_size=None) as ws:
        await ws.send(start_message(call_id, form))
        await ws.send(json.dumps({"event": "media", "media": {"payload": "A" * 200_000}}))
        await ws.send(media(2))
        await asyncio.sleep(0.3)
        await ws.send(json.dumps({"event": "stop", "stop": {}}))
    detail = await record(server, call_id)
    assert "oversized" in [e["data"].get("kind") for e in detail["events"] if e["type"] == "bad_input"]


async def test_a_flood_of_garbage_ends_only_that_call(server):
    call_id, form = new_call(server)
    async with open_stream(server, max_size=None) as ws:
        await ws.send(start_message(call_id, form))
        for _ in range(30):
            await ws.send("{garbage")
        await asyncio.sleep(1.0)
    detail = await record(server, call_id)
    assert detail["completion_reason"] == "protocol_error"
    assert httpx.get(f"{server.url}/health").json()["status"] == "ok"


async def test_an_abrupt_disconnect_mid_utterance_closes_the_record(server):
    call_id, form = new_call(server)
    ws = await open_stream(server, max_size=None)
    await ws.send(start_message(call_id, form))
    for sequence in range(1, 20):
        await ws.send(media(sequence))
        await asyncio.sleep(0.02)
    ws.transport.abort()  # no close frame, no stop event
    detail = await record(server, call_id)
    assert detail["completion_reason"] == "caller_disconnected"


async def test_a_stream_for_an_unknown_call_is_refused(server):
    async with open_stream(server, max_size=None) as ws:
        await ws.send(start_message(str(uuid.uuid4()), answer_form()))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
    assert closed.value.rcvd.code == 1008


async def test_a_connection_that_never_starts_is_closed_after_the_timeout(server):
    async with open_stream(server, max_size=None) as ws:
        await ws.send(json.dumps({"event": "connected"}))
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)


async def test_a_malformed_dtmf_is_recorded_and_the_call_goes_on(server):
    call_id, form = new_call(server)
    async with open_stream(server, max_size=None) as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        await ws.send(b"\x00\x01 not twilio")  # binary before start: bad input, not fatal
        await ws.send(start_message(call_id, form))
        await ws.send(json.dumps({"event": "dtmf", "dtmf": "5"}))
        for sequence in range(1, 6):
            await ws.send(media(sequence))
            await asyncio.sleep(0.02)
        await ws.send(json.dumps({"event": "stop", "stop": {}}))
    detail = await record(server, call_id)
    assert detail["completion_reason"] == "caller_hangup"
    bad = [(e["data"]["kind"], e["data"]["where"]) for e in detail["events"]
           if e["type"] == "bad_input"]
    assert ("binary", "before start") in bad and ("dtmf_malformed", "in call") in bad


async def test_a_binary_first_frame_is_closed_as_unsupported_data(server):
    async with open_stream(server, max_size=None) as ws:
        await ws.send(b"\x00\x01\x02")
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1003
