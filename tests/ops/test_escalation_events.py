"""An operator acknowledging or resolving an escalation: the change reaches the call's
observers (numbered by the call's own feed, on the pod running it, from any pod) and
its record; a finished call's escalation changes in the database alone."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable

import httpx
import pytest
from websockets.asyncio.client import connect

from call.call_session import CallLog, CallSession, SessionMode
from call.identity import CallIdentity
from ops.bus import InProcessBus
from ops.commands import CallControl, OperatorAction, OperatorCommand
from ops.plane import OpsPlane
from ops.redis_bus import RedisBus
from ops.registry import LocalRegistry, RedisRegistry
from simulator.simulator import CallScript
from tests.fakes import CollectingWriter
from tests.ops.redis_server import valkey_server
from tests.ops.test_live_calls import (
    bearer,
    closed_with_messages,
    next_message,
    start_text_call,
    ws_url,
)

ESCALATION = {"id": 41, "call_id": "call-1", "concept": "self_harm", "severity": "hard"}


class Worker:
    """The part of a PipelineWorker CallControl uses (an escalation change queues nothing)."""

    def __init__(self) -> None:
        self.queued: list = []

    async def queue_frames(self, frames) -> None:
        self.queued.extend(frames)


def running(plane: OpsPlane, writer: CollectingWriter, call_id: str = "call-1") -> CallSession:
    """A call live on `plane`'s pod: its record and feed, open to commands."""
    feed = plane.feed(call_id, "w1", service_id="s1", call_sid=None, initial_state="greeting")
    session = CallSession(identity=CallIdentity(call_id, "w1", "s1"), mode=SessionMode.TEXT,
                          log=CallLog(call_id, writer, observe=feed),
                          clinic_name="Riverside Clinic")
    session.log.event("call_started", mode="text")
    session.log.escalation("self_harm", "hard", similarity=0.8, judge=None, reason="test")
    plane.call_running(session, CallControl(session, Worker(), transfer_number=None))
    return session


async def messages(sub, count: int) -> list[dict]:
    out = []
    for _ in range(count):
        message = await sub.next(3.0)
        assert message is not None, f"only {out}"
        out.append(message)
    return out


def test_an_escalation_command_travels_between_pods_whole():
    command = OperatorCommand("call-1", "w1", OperatorAction.ESCALATION,
                              {"escalation_id": 41, "status": "resolved", "operator": "Ada"})
    assert OperatorCommand.from_json(command.to_json()) == command
    old_pod = '{"call_id": "c", "workspace_id": "w", "action": "end"}'  # no data
    assert OperatorCommand.from_json(old_pod).data == {}


async def test_a_change_on_a_running_call_is_the_next_event_of_its_feed():
    plane = OpsPlane(InProcessBus("pod", replay_events=100, queue_events=100),
                     LocalRegistry("pod"))
    writer = CollectingWriter()
    sub, _ = await plane.bus.subscribe("w1")  # the workspace's stream
    call_sub, replay = await plane.bus.subscribe("w1", "call-1")
    session = running(plane, writer)

    assert await plane.escalation_changed("w1", ESCALATION, status="acknowledged",
                                          operator="Nurse Ada")
    live = await messages(sub, 3)
    assert [(m["type"], m["seq"]) for m in live] == [
        ("session_start", 1), ("escalation", 2), ("escalation", 3)]
    assert live[1]["data"]["status"] == "open"
    assert live[2]["data"] == {"escalation_id": 41, "concept": "self_harm", "severity": "hard",
                               "status": "acknowledged", "operator": "Nurse Ada"}
    assert [m["seq"] for m in await messages(call_sub, 3)] == [1, 2, 3]
    [update] = writer.events("escalation_update")
    assert update.data == live[2]["data"]

    session.log.event("call_ended", reason="agent_hangup")  # the feed goes on numbering
    assert [(m["type"], m["seq"]) for m in await messages(sub, 1)] == [("session_end", 4)]
    await plane.close()


async def test_a_finished_or_foreign_call_gets_no_event():
    plane = OpsPlane(InProcessBus("pod", replay_events=100, queue_events=100),
                     LocalRegistry("pod"))
    writer = CollectingWriter()
    running(plane, writer)
    before = await plane.bus.replay("call-1")

    assert not await plane.escalation_changed("w2", ESCALATION, status="acknowledged",
                                              operator="Intruder")  # not its workspace
    plane.call_finished("call-1")
    assert not await plane.escalation_changed("w1", ESCALATION, status="resolved",
                                              operator="Nurse Ada")
    await asyncio.sleep(0.05)
    assert await plane.bus.replay("call-1") == before
    assert writer.events("escalation_update") == []
    await plane.close()


@pytest.fixture(scope="module")
def redis_url():
    with valkey_server() as server:
        yield server.connection_url


async def test_an_acknowledgement_on_another_pod_reaches_the_call_and_its_observers(redis_url):
    """Pod A runs the call; the API request lands on pod B, whose observer sees the event
    numbered by pod A's feed."""
    def pod(name: str) -> OpsPlane:
        return OpsPlane(RedisBus(redis_url, name, replay_events=50, queue_events=100),
                        RedisRegistry(redis_url, name, ttl_s=30))

    pod_a, pod_b = pod("esc-a"), pod("esc-b")
    await pod_a.start()
    await pod_b.start()
    try:
        sub, _ = await pod_b.bus.subscribe("w1")
        writer = CollectingWriter()
        running(pod_a, writer)
        deadline = time.monotonic() + 5
        while await pod_b.registry.get("call-1") is None:  # pod A's entry is written
            assert time.monotonic() < deadline, "the call never reached the shared registry"
            await asyncio.sleep(0.05)

        assert await pod_b.escalation_changed("w1", ESCALATION, status="acknowledged",
                                              operator="Nurse Ada")
        seen = await messages(sub, 3)
        assert [(m["type"], m["seq"]) for m in seen] == [
            ("session_start", 1), ("escalation", 2), ("escalation", 3)]
        assert seen[2]["data"]["operator"] == "Nurse Ada"
        assert [e.data["status"] for e in writer.events("escalation_update")] == ["acknowledged"]
    finally:
        await pod_a.close()
        await pod_b.close()


# --- Against the real service, on a running text call ----------------------------

CRISIS_CALL = CallScript.model_validate({
    "name": "escalation_acknowledged", "from": "+15550100204", "to": "+15550100100",
    "turns": [{"say": "I need to book an appointment."},
              {"say": "Honestly I don't want to live anymore. I want to kill myself."},
              {"say": "Are you still there?", "pause_s": 4},
              {"say": "Hello?", "pause_s": 4}],
    "hangup_after_s": 60,
})


async def escalation_id(db, call_id: str, timeout_s: float = 10.0) -> int:
    """The escalation's row, once the call's record writer has stored it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = await db.pool.fetchval(
            "SELECT id FROM escalations WHERE call_id = $1", uuid.UUID(call_id))
        if found is not None:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError("the escalation was never stored")


@pytest.mark.e2e
@pytest.mark.timeout(120)
async def test_acknowledging_a_live_calls_escalation_is_an_event_resolving_it_after_is_not(
        server, db):
    async with httpx.AsyncClient(timeout=10) as http:
        simulation, entry = await start_text_call(http, server, CRISIS_CALL)
        call_id = entry["call_id"]

        def post(path: str, operator: str) -> Awaitable[httpx.Response]:
            return http.post(f"{server.url}/api/escalations/{path}",
                             headers=bearer(server.api_key), json={"operator": operator})

        seen: list[dict] = []
        async with connect(ws_url(server, f"/api/calls/{call_id}/observe"),
                           additional_headers=bearer(server.api_key)) as ws, \
                connect(ws_url(server, "/api/observe"),
                        additional_headers=bearer(server.api_key)) as workspace:
            assert json.loads(await ws.recv())["type"] == "session_info"
            raised = await next_message(ws, "escalation", seen=seen, status="open")
            assert raised["data"]["concept"] == "suicidal_ideation"
            escalation = await escalation_id(db, call_id)

            acked = await post(f"{escalation}/acknowledge", "Nurse Ada")
            assert acked.status_code == 200 and acked.json()["status"] == "acknowledged"
            update = await next_message(ws, "escalation", seen=seen, status="acknowledged")
            assert update["data"] == {"escalation_id": escalation, "concept": "suicidal_ideation",
                                      "severity": "hard", "status": "acknowledged",
                                      "operator": "Nurse Ada"}
            assert update["seq"] > raised["seq"]
            on_workspace = await next_message(workspace, "escalation", status="acknowledged")
            assert (on_workspace["call_id"], on_workspace["seq"]) == (call_id, update["seq"])
            again = await post(f"{escalation}/acknowledge", "Someone Else")  # no change
            assert again.json()["acknowledged_by"] == "Nurse Ada"

            ended = await http.post(f"{server.url}/api/calls/{call_id}/actions/end",
                                    headers=bearer(server.api_key))
            assert ended.status_code == 202
            await next_message(ws, "session_end", seen=seen, completion_reason="operator_ended")

        seqs = [m["seq"] for m in seen if m.get("seq") is not None]
        assert seqs == list(range(1, len(seqs) + 1))  # in order, none missing, none twice
        assert [m["data"]["status"] for m in seen if m["type"] == "escalation"] == \
            ["open", "acknowledged"]  # the second acknowledgement changed nothing
        result = await asyncio.wait_for(simulation, 30)

        # The call is over: resolving changes the database alone.
        resolved = await post(f"{escalation}/resolve", "Dr. Osei")
        assert resolved.status_code == 200 and resolved.json()["status"] == "resolved"
        row = await db.pool.fetchrow(
            "SELECT status, acknowledged_by, resolved_at FROM escalations WHERE id = $1",
            escalation)
        assert (row["status"], row["acknowledged_by"]) == ("resolved", "Nurse Ada")
        assert row["resolved_at"] is not None
        await asyncio.sleep(0.5)  # anything the resolution set off has had its chance
        updates = await db.pool.fetch(
            "SELECT data FROM call_events WHERE call_id = $1 AND type = 'escalation_update'",
            uuid.UUID(call_id))
        assert [json.loads(u["data"]) if isinstance(u["data"], str) else u["data"]
                for u in updates] == [update["data"]]
        assert [e["data"]["status"] for e in result.record["events"]
                if e["type"] == "escalation_update"] == ["acknowledged"]

        # A late observer of the finished call: the same events, nothing more.
        async with connect(ws_url(server, f"/api/calls/{call_id}/observe"),
                           additional_headers=bearer(server.api_key)) as ws:
            replayed: list[dict] = []
            code, _ = await closed_with_messages(ws, replayed)
        assert code == 1000
        assert [m["seq"] for m in replayed[1:]] == seqs
