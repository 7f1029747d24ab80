"""Observer sockets, the active list and operator actions against the real service,
on a running text call."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from db import repositories as repo
from runner.dev_credentials import twilio_auth_token
from simulator.simulator import CallScript, simulate_call
from tests.e2e.conftest import RunningServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

HELD_CALL = CallScript.model_validate({
    "name": "operator_actions", "from": "+15550100204", "to": "+15550100100",
    "turns": [{"say": "I need a checkup tomorrow morning."},
              {"say": "Are you still there?", "pause_s": 4},
              {"say": "Hello again.", "pause_s": 4}],
    "hangup_after_s": 60,
})


def ws_url(server: RunningServer, path: str) -> str:
    return server.url.replace("http://", "ws://") + path


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def next_message(ws: ClientConnection, kind: str, timeout_s: float = 20.0,
                       seen: list | None = None, **data) -> dict:
    """The next message of `kind` whose data has `data` (pings and others skipped)."""
    deadline = time.monotonic() + timeout_s
    while True:
        raw = await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.monotonic()))
        message = json.loads(raw)
        if seen is not None:
            seen.append(message)
        if message["type"] == kind and all(message["data"].get(k) == v
                                           for k, v in data.items()):
            return message


async def closed_with(ws: ClientConnection) -> tuple[int | None, str | None]:
    try:
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    except ConnectionClosed:
        return ws.close_code, ws.close_reason


async def running_call(http: httpx.AsyncClient, server: RunningServer,
                       known: set[str]) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        reply = await http.get(f"{server.url}/api/calls/active", headers=bearer(server.api_key))
        assert reply.status_code == 200
        new = [c for c in reply.json()["calls"] if c["call_id"] not in known]
        if new:
            return new[0]
        await asyncio.sleep(0.1)
    raise AssertionError("the call never appeared in /api/calls/active")


async def start_text_call(http: httpx.AsyncClient, server: RunningServer,
                          script: CallScript) -> tuple[asyncio.Task, dict]:
    """A simulated text call on `server`: (the simulation, its /api/calls/active entry)."""
    before = await http.get(f"{server.url}/api/calls/active", headers=bearer(server.api_key))
    known = {c["call_id"] for c in before.json()["calls"]}
    simulation = asyncio.create_task(simulate_call(
        script, base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=True,
        log=lambda *_: None))
    try:
        return simulation, await running_call(http, server, known)
    except BaseException:
        simulation.cancel()
        raise


async def test_an_operator_takes_over_releases_and_ends_a_running_call(live_server, db):
    server = live_server
    async with httpx.AsyncClient(timeout=10) as http:
        simulation, entry = await start_text_call(http, server, HELD_CALL)
        call_id = entry["call_id"]
        assert entry["mode"] == "text" and entry["pod_id"]

        async def act(action: str) -> httpx.Response:
            return await http.post(f"{server.url}/api/calls/{call_id}/actions/{action}",
                                   headers=bearer(server.api_key))

        seen: list[dict] = []
        async with connect(ws_url(server, f"/api/calls/{call_id}/observe"),
                           additional_headers=bearer(server.api_key)) as ws:
            info = json.loads(await ws.recv())
            assert info["type"] == "session_info"
            assert info["data"]["active"]["call_id"] == call_id
            start = await next_message(ws, "session_start", seen=seen)
            assert start["seq"] == 1 and start["data"]["trace_id"] == call_id
            await next_message(ws, "user_transcript", seen=seen,
                               transcript="I need a checkup tomorrow morning.")

            assert (await act("take-over")).status_code == 202
            await next_message(ws, "operator_action", seen=seen, action="take-over",
                               outcome="suspended")
            await next_message(ws, "user_transcript", seen=seen,
                               transcript="Are you still there?")
            held = await next_message(ws, "agent_transcript", seen=seen)
            assert "person from our team" in held["data"]["transcript"]
            listed = (await http.get(f"{server.url}/api/calls/active",
                                     headers=bearer(server.api_key))).json()["calls"]
            assert [c["suspended"] for c in listed if c["call_id"] == call_id] == [True]

            assert (await act("release")).status_code == 202
            await next_message(ws, "operator_action", seen=seen, action="release",
                               outcome="resumed")
            assert (await act("end")).status_code == 202
            await next_message(ws, "operator_action", seen=seen, action="end")
            end = await next_message(ws, "session_end", seen=seen,
                                     completion_reason="operator_ended")
            assert end["data"]["turns"] >= 3
            assert await closed_with(ws) == (1000, "")

        seqs = [m["seq"] for m in seen if m.get("seq") is not None]
        assert seqs == list(range(1, len(seqs) + 1))  # the whole call, in order, once
        result = await asyncio.wait_for(simulation, 30)
        assert result.ended_by == "agent"
        record = result.record
        assert record["completion_reason"] == "operator_ended"
        actions = [e["data"] for e in record["events"] if e["type"] == "operator_action"]
        assert [a["action"] for a in actions] == ["take-over", "release", "end"]
        assert any(e["type"] == "agent_held" for e in record["events"])
        assert "ended this call" in [t for t in record["turns"]
                                     if t["speaker_role"] == "agent"][-1]["text"]

        assert (await act("end")).status_code == 409  # over
        unknown = await http.post(f"{server.url}/api/calls/{uuid.uuid4()}/actions/end",
                                  headers=bearer(server.api_key))
        assert unknown.status_code == 404
        assert (await http.post(f"{server.url}/api/calls/{call_id}/actions/dance",
                                headers=bearer(server.api_key))).status_code == 422

        # An observer of the finished call: snapshot, the whole replay, the end, a close.
        async with connect(ws_url(server, f"/api/calls/{call_id}/observe")) as ws:
            await ws.send(json.dumps({"type": "auth", "api_key": server.api_key}))
            messages = []
            code, _ = await closed_with_messages(ws, messages)
        assert code == 1000
        assert messages[0]["type"] == "session_info"
        assert messages[0]["data"]["call"]["completion_reason"] == "operator_ended"
        assert [m["seq"] for m in messages[1:]] == seqs
        assert messages[-1]["type"] == "session_end"


async def closed_with_messages(ws: ClientConnection, into: list) -> tuple[int | None, str]:
    try:
        while True:
            into.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
    except ConnectionClosed:
        return ws.close_code, ws.close_reason


async def test_observers_without_a_valid_key_for_the_call_are_refused(live_server, db):
    server = live_server
    call_id = await repo.create_call(
        db.pool, workspace_id=(await repo.get_workspace_by_name(db.pool, "demo"))["id"],
        service_id=None, call_sid=None, direction="eval", from_number=None, to_number=None,
        status="ringing")
    other = await repo.create_workspace(db.pool, f"other-{uuid.uuid4().hex[:6]}")
    other_key = await repo.create_api_key(db.pool, other["id"], "other")
    path = f"/api/calls/{call_id}/observe"

    cases = [
        ({}, None),  # nothing: the authentication window (1 s) passes
        ({}, json.dumps({"type": "auth", "api_key": "vk_00000000_" + "x" * 24})),
        ({}, "not json at all"),
        (bearer("vk_00000000_" + "y" * 24), None),
        (bearer(other_key), None),  # a valid key, another workspace's call
    ]
    for headers, first in cases:
        async with connect(ws_url(server, path), additional_headers=headers) as ws:
            if first is not None:
                await ws.send(first)
            code, reason = await closed_with(ws)
        assert code == 1008 and reason, (headers, first)
    async with connect(ws_url(server, f"{path}?api_key={server.api_key}")) as ws:
        assert (await closed_with(ws))[0] == 1008  # never from the query string
    async with connect(ws_url(server, "/api/observe"), additional_headers=bearer("nope")) as ws:
        assert (await closed_with(ws))[0] == 1008
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{server.url}/api/calls/active")).status_code == 401
        listed = await http.get(f"{server.url}/api/calls/active", headers=bearer(other_key))
        assert listed.json() == {"calls": []}
        foreign = await http.post(f"{server.url}/api/calls/{call_id}/actions/end",
                                  headers=bearer(other_key))
        assert foreign.status_code == 404


async def test_the_workspace_stream_pings_and_ignores_garbage(live_server):
    server = live_server
    async with connect(ws_url(server, "/api/observe")) as ws:
        await ws.send(json.dumps({"type": "auth", "api_key": server.api_key}))
        info = json.loads(await ws.recv())
        assert info["type"] == "session_info" and isinstance(info["data"]["active_calls"], list)
        await ws.send("garbage {")
        await ws.send(b"\x00\x01binary")
        started = time.monotonic()
        pings = []
        while len(pings) < 3:
            message = json.loads(await asyncio.wait_for(ws.recv(), 3))
            if message["type"] == "ping":
                pings.append(time.monotonic() - started)
        assert 0.9 < pings[-1] < 3.0  # every 0.5 s
