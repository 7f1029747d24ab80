"""Hostile input against the real service (`python main.py serve`): what an attacker can send
costs neither a caller nor a record, nor floods or leaks into the log.

Each test ends by placing a real call on the media stream: the caller hears the agent within
`SILENCE_BOUND_S` and the call's record is closed with a reason and its events.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from tests.e2e.conftest import RunningServer, start_demo_server
from tests.e2e.test_bad_input import new_call, open_stream, record, start_message, ws_url

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SILENCE_BOUND_S = 5.0  # longest a caller may wait for the agent's first audio
LOG_WAIT_S = 5.0
HOSTILE_SOCKETS = 12


@pytest.fixture(scope="module")
async def service(db, tmp_path_factory) -> AsyncIterator[RunningServer]:
    running = await start_demo_server(db, tmp_path_factory.mktemp("hostile"), "hostile", {
        "LOG_LEVEL": "INFO", "START_MESSAGE_TIMEOUT_S": "3"})
    try:
        yield running
    finally:
        running.process.stop()


async def log_after(service: RunningServer, offset: int, pattern: str, count: int) -> str:
    """The log written since `offset` once `pattern` appears `count` times (bounded)."""
    deadline = time.monotonic() + LOG_WAIT_S
    while True:
        written = service.log()[offset:]
        if len(re.findall(pattern, written)) >= count or time.monotonic() > deadline:
            return written
        await asyncio.sleep(0.1)


async def a_caller_is_answered_and_recorded(service: RunningServer) -> None:
    """(a) The caller hears the agent within the bound; (b) the record is closed."""
    call_id, form = new_call(service)
    async with open_stream(service, max_size=None) as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        await ws.send(start_message(call_id, form))
        started = time.monotonic()
        async with asyncio.timeout(SILENCE_BOUND_S):
            while json.loads(await ws.recv()).get("event") != "media":
                pass
        first_audio_s = time.monotonic() - started
        await ws.send(json.dumps({"event": "stop", "stop": {}}))
    detail = await record(service, call_id)
    assert first_audio_s < SILENCE_BOUND_S
    assert detail["completion_reason"] == "caller_hangup"
    assert "call_ended" in {event["type"] for event in detail["events"]}


async def test_sockets_dropped_before_their_first_message_cost_a_line_not_a_traceback(service):
    offset = len(service.log())
    observer = service.url.replace("http://", "ws://") + "/api/observe"
    closes: list[int | None] = []
    for _ in range(HOSTILE_SOCKETS // 3):
        async with open_stream(service):
            pass  # closed at once, with a close frame
        aborted = await open_stream(service)
        aborted.transport.abort()  # gone, without one
        async with open_stream(service) as binary:
            await binary.send(b"\x00\x01\x02")
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(binary.recv(), 5)
            closes.append(closed.value.rcvd.code if closed.value.rcvd else None)
        async with websockets.connect(observer):
            pass
        (await websockets.connect(observer)).transport.abort()
    written = await log_after(service, offset, r"before its first message|binary first",
                              HOSTILE_SOCKETS)

    assert closes == [1003] * (HOSTILE_SOCKETS // 3)  # unsupported data, said so
    assert "Traceback" not in written and "ERROR" not in written, written[:3000]
    assert len(written.splitlines()) <= 4 * (HOSTILE_SOCKETS + 2 * HOSTILE_SOCKETS // 3)
    await a_caller_is_answered_and_recorded(service)


async def test_an_unsigned_media_stream_is_refused_before_it_opens(service):
    offset = len(service.log())
    with pytest.raises(InvalidStatus) as unsigned:
        await websockets.connect(ws_url(service))
    with pytest.raises(InvalidStatus) as forged:
        await websockets.connect(ws_url(service),
                                 additional_headers={"X-Twilio-Signature": "Zm9yZ2Vk"})
    written = await log_after(service, offset, r"X-Twilio-Signature; refused", 2)

    assert unsigned.value.response.status_code == forged.value.response.status_code == 403
    assert "Traceback" not in written
    await a_caller_is_answered_and_recorded(service)


async def test_a_key_put_in_a_query_string_never_reaches_the_log(service):
    key = service.api_key
    secret = key.split("_", 2)[2]
    base = service.url
    offset = len(service.log())
    async with httpx.AsyncClient() as client:
        in_query = await client.get(f"{base}/api/calls?api_key={key}")
        as_token = await client.get(f"{base}/api/calls?limit=1&token={key}",
                                    headers={"Authorization": f"Bearer {key}"})
    sockets = base.replace("http://", "ws://")
    for path in (f"/api/observe?api_key={key}", f"/api/calls/x/observe?access_token={key}"):
        async with websockets.connect(sockets + path):
            pass
    written = await log_after(service, offset, r"<redacted>", 4)

    assert in_query.status_code == 401 and as_token.status_code == 200
    assert secret not in service.log()
    assert "api_key=<redacted>" in written and "token=<redacted>" in written
    await a_caller_is_answered_and_recorded(service)
