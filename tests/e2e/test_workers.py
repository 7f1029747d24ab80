"""`python main.py serve` with two worker processes behind its one port, on the session
database and no Redis: a call answered by one worker streams in the other; an observer
on either sees it live; either lists the calls of both; the machine's cap counts both
workers' calls; an operator on one ends a call running in the other; a worker killed
mid-call is started again and its call closed on record; SIGTERM drains every worker.

Which worker takes a connection is the kernel's choice, so each step that must reach a
given worker stops the other one (SIGSTOP) while it connects: only the running worker
can accept."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from twilio.request_validator import RequestValidator
from websockets.asyncio.client import ClientConnection, connect

from runner.dev_credentials import twilio_auth_token
from simulator.caller_audio import StreamIdentity, TwilioMessages
from simulator.simulator import (
    CallParties,
    StreamTarget,
    call_params,
    media_stream_url,
    parse_stream_twiml,
    send_signed,
    signed_upgrade,
)
from tests.e2e.conftest import RunningServer, start_demo_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CLINIC = "+15550100100"  # the demo clinic
SERVING = re.compile(r"worker (\d)/2 serving \(pid (\d+)\)")
DRAIN_S = 30


@dataclass
class Machine:
    server: RunningServer
    workers: dict[int, int] = field(default_factory=dict)  # worker number → pid
    calls: list[str] = field(default_factory=list)  # the calls streamed here

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def token(self) -> str:
        return twilio_auth_token(self.server.settings)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.server.api_key}"}

    def serving(self) -> dict[int, int]:
        """Each worker's pid, as the supervisor last said it serves."""
        found: dict[int, int] = {}
        for number, pid in SERVING.findall(self.server.log()):
            found[int(number)] = int(pid)
        return found

    async def all_serving(self, timeout_s: float = 120.0, *, not_pids: set[int] = frozenset()
                          ) -> dict[int, int]:
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.serving()
            if len(found) == 2 and not set(found.values()) & not_pids:
                self.workers = found
                return found
            assert time.monotonic() < deadline, self.server.log()[-3000:]
            await asyncio.sleep(0.2)

    @contextlib.contextmanager
    def only(self, number: int) -> Iterator[None]:
        """Only worker `number` accepts connections meanwhile (the other is stopped)."""
        others = [pid for n, pid in self.workers.items() if n != number]
        for pid in others:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in others:
                os.kill(pid, signal.SIGCONT)


@pytest.fixture(scope="module")
async def machine(db, tmp_path_factory) -> AsyncIterator[Machine]:
    server = await start_demo_server(db, tmp_path_factory.mktemp("workers"), "workers", {
        "WORKERS": "2", "MAX_CONCURRENT_CALLS": "2", "LOG_LEVEL": "INFO",
        "CALL_SWEEP_INTERVAL_S": "1", "SHUTDOWN_DRAIN_S": str(DRAIN_S),
    })
    running = Machine(server)
    await running.all_serving()
    yield running
    server.process.stop(timeout_s=DRAIN_S + 40)


def fresh_client() -> httpx.AsyncClient:
    """A new connection for every request: each goes to whichever worker accepts it."""
    return httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_keepalive_connections=0))


@dataclass
class PhoneCall:
    """A caller on the line: the answer, then Twilio's media stream, held open."""

    call_id: str
    websocket: ClientConnection
    reader: asyncio.Task | None = None

    async def hang_up(self) -> None:
        with contextlib.suppress(Exception):
            await self.websocket.close()
        if self.reader is not None:
            self.reader.cancel()

    async def closed(self, timeout_s: float) -> None:
        assert self.reader is not None
        await asyncio.wait_for(asyncio.shield(self.reader), timeout_s)


async def answer(machine: Machine, caller: str) -> tuple[CallParties, StreamTarget | None, str]:
    """Twilio's answer webhook for a call from `caller`; (parties, stream or None, TwiML)."""
    parties = CallParties.new(caller, CLINIC)
    async with fresh_client() as http:
        response = await send_signed(http, RequestValidator(machine.token),
                                     f"{machine.url}/voice/answer",
                                     {**call_params(parties), "CallStatus": "ringing"})
    assert response.status_code == 200, response.text
    target = parse_stream_twiml(response.text) if "<Stream" in response.text else None
    return parties, target, response.text


async def stream(machine: Machine, parties: CallParties, target: StreamTarget) -> PhoneCall:
    """Twilio opens the media stream; returns once the first agent audio arrived."""
    messages = TwilioMessages(StreamIdentity(
        account_sid=parties.account_sid, call_sid=parties.call_sid,
        stream_sid=parties.stream_sid, custom_parameters=target.parameters))
    ws_url = media_stream_url(machine.url, target.url)
    websocket = await connect(ws_url, additional_headers=signed_upgrade(machine.token, ws_url))
    await websocket.send(messages.connected())
    await websocket.send(messages.start())
    while json.loads(await asyncio.wait_for(websocket.recv(), 10)).get("event") != "media":
        pass
    call = PhoneCall(target.call_id, websocket)
    machine.calls.append(call.call_id)

    async def listen() -> None:
        with contextlib.suppress(Exception):
            async for _ in websocket:
                pass

    call.reader = asyncio.create_task(listen())
    return call


async def call_on(machine: Machine, answered_by: int, streamed_by: int,
                  caller: str) -> PhoneCall:
    parties, target, twiml = None, None, ""
    with machine.only(answered_by):
        parties, target, twiml = await answer(machine, caller)
    assert target is not None, twiml
    await asyncio.sleep(0.3)  # the phone rings; the greeting renders
    with machine.only(streamed_by):
        return await stream(machine, parties, target)


async def active_calls(machine: Machine, via: int) -> dict[str, dict]:
    with machine.only(via):
        async with fresh_client() as http:
            reply = await http.get(f"{machine.url}/api/calls/active", headers=machine.headers)
    assert reply.status_code == 200, reply.text
    return {entry["call_id"]: entry for entry in reply.json()["calls"]}


async def events_of(db, call_id: str) -> dict[str, dict]:
    rows = await db.pool.fetch("SELECT type, data FROM call_events WHERE call_id = $1 "
                               "ORDER BY seq", uuid.UUID(call_id))
    return {row["type"]: row["data"] for row in rows}


async def until(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (value := await predicate()):
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.2)
    return value


async def test_a_call_answered_by_one_worker_runs_in_the_other_and_either_watches_lists_caps_and_ends_it(  # noqa: E501
        machine, db):
    first, second = machine.workers[1], machine.workers[2]
    with machine.only(1):  # an operator's dashboard, on the first worker
        workspace_feed = await connect(machine.url.replace("http", "ws") + "/api/observe",
                                       additional_headers=machine.headers)
    seen: list[tuple[str, str | None]] = []

    async def watch() -> None:
        with contextlib.suppress(Exception):
            async for raw in workspace_feed:
                message = json.loads(raw)
                seen.append((message["type"], message.get("call_id")))

    watching = asyncio.create_task(watch())
    handed_over = await call_on(machine, answered_by=1, streamed_by=2, caller="+15550100201")
    local = await call_on(machine, answered_by=1, streamed_by=1, caller="+15550100202")
    try:
        # The call answered by the first worker runs in the second, greeted at once with
        # the greeting the first one rendered while the phone rang.
        record = await db.pool.fetchrow("SELECT owner_instance, config_snapshot FROM calls "
                                        "WHERE id = $1", uuid.UUID(handed_over.call_id))
        assert f"-{second}-" in record["owner_instance"]
        greeting = (await events_of(db, handed_over.call_id))["greeting"]
        assert greeting["prerendered"] is True
        # Either worker lists the calls of both.
        for via in (1, 2):
            listed = await active_calls(machine, via)
            assert f"-{second}-" in listed[handed_over.call_id]["pod_id"]
            assert f"-{first}-" in listed[local.call_id]["pod_id"]
        # Two calls on the machine: a third caller hears the lines are busy, on either.
        for via in (1, 2):
            with machine.only(via):
                parties, refused, twiml = await answer(machine, "+15550100203")
            assert refused is None and "busy" in twiml
            turned_away = await until(lambda: db.pool.fetchrow(
                "SELECT c.completion_reason, e.data FROM calls c JOIN call_events e "
                "ON e.call_id = c.id WHERE c.call_sid = $1", parties.call_sid), 10,
                "the caller turned away is not on record")
            assert turned_away["completion_reason"] == "at_capacity"
            assert (turned_away["data"]["calls_in_hand"], turned_away["data"]["limit"]) == (2, 2)

        # An observer on the first worker follows the call running in the second.
        with machine.only(1):
            call_feed = await connect(
                machine.url.replace("http", "ws") + f"/api/calls/{handed_over.call_id}/observe",
                additional_headers=machine.headers)
        info = json.loads(await asyncio.wait_for(call_feed.recv(), 10))
        assert info["type"] == "session_info"
        assert info["data"]["active"]["call_id"] == handed_over.call_id

        # An operator's end, sent to the first worker, ends the call in the second.
        async with fresh_client() as http:
            with machine.only(1):
                sending = asyncio.create_task(http.post(
                    f"{machine.url}/api/calls/{handed_over.call_id}/actions/end",
                    headers=machine.headers))
                await asyncio.sleep(0.5)  # accepted by the first worker
            action = await sending
        assert action.status_code == 202, action.text
        assert f"-{second}-" in action.json()["pod_id"]
        await handed_over.closed(30)
        observed = []
        while not observed or observed[-1] != "session_end":
            observed.append(json.loads(await asyncio.wait_for(call_feed.recv(), 30))["type"])
        assert "session_start" in observed and "operator_action" in observed
        await call_feed.close()
        ended = await until(lambda: db.pool.fetchval(
            "SELECT completion_reason FROM calls WHERE id = $1 AND ended_at IS NOT NULL",
            uuid.UUID(handed_over.call_id)), 15, "the ended call was never closed")
        assert ended == "operator_ended"
        await until(lambda: _gone(machine, handed_over.call_id), 10,
                    "the ended call stayed listed")
        assert ("session_start", handed_over.call_id) in seen
        assert ("session_start", local.call_id) in seen
        assert ("session_end", handed_over.call_id) in seen
    finally:
        await handed_over.hang_up()
        await local.hang_up()
        watching.cancel()
        await workspace_feed.close()


async def _gone(machine: Machine, call_id: str) -> bool:
    return call_id not in await active_calls(machine, 1)


async def test_a_worker_killed_mid_call_is_started_again_and_its_call_closed_on_record(
        machine, db):
    await until(lambda: _all_closed(machine, db), 30, "earlier calls still open")
    doomed = await call_on(machine, answered_by=2, streamed_by=1, caller="+15550100204")
    killed = machine.workers[1]

    os.kill(killed, signal.SIGKILL)

    await doomed.closed(10)  # the caller's line drops at once
    closed = await until(lambda: db.pool.fetchval(
        "SELECT completion_reason FROM calls WHERE id = $1 AND ended_at IS NOT NULL",
        uuid.UUID(doomed.call_id)), 30, "the killed worker's call was never closed")
    assert closed == "server_crash"
    assert (await events_of(db, doomed.call_id))["call_ended"]["reason"] == "server_crash"
    workers = await machine.all_serving(not_pids={killed})
    assert killed not in workers.values()
    assert "worker 1/2 (pid" in machine.server.log() and "ended with exit -9" in \
        machine.server.log()
    async with fresh_client() as http:
        assert (await http.get(f"{machine.url}/health")).status_code == 200


async def _all_closed(machine: Machine, db) -> bool:
    """Every call streamed here so far is closed on record."""
    return not await db.pool.fetchval(
        "SELECT count(*) FROM calls WHERE id = ANY($1::uuid[]) AND ended_at IS NULL",
        [uuid.UUID(call_id) for call_id in machine.calls])


async def test_sigterm_drains_the_calls_of_every_worker_then_stops(machine, db):
    await until(lambda: _all_closed(machine, db), 30, "earlier calls still open")
    calls = [await call_on(machine, answered_by=1, streamed_by=1, caller="+15550100205"),
             await call_on(machine, answered_by=2, streamed_by=2, caller="+15550100206")]
    service = machine.server.process.process
    started = time.monotonic()

    service.send_signal(signal.SIGTERM)

    for call in calls:
        await call.closed(DRAIN_S + 10)  # each heard its last line, then the call ended
    code = await asyncio.to_thread(service.wait, DRAIN_S + 40)
    assert code == 0, machine.server.log()[-3000:]
    assert time.monotonic() - started < DRAIN_S + 30
    for call in calls:
        events = await events_of(db, call.call_id)
        assert "server_draining" in events
        assert events["call_ended"]["reason"] == "server_shutdown"
    assert "SIGTERM: draining every worker process" in machine.server.log()
