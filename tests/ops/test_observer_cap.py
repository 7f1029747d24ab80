"""The per-workspace cap on observer sockets: the bus's slots, then the real service
(cap 2) refusing the third socket with 1013 and admitting one again once a slot frees."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from websockets.asyncio.client import ClientConnection, connect

from ops.bus import InProcessBus
from tests.e2e.conftest import another_server
from tests.ops.test_live_calls import bearer, closed_with, ws_url

CAP = 2


def test_slots_are_counted_per_workspace_and_freed_once():
    bus = InProcessBus("pod", replay_events=10, queue_events=100)
    first, second = bus.claim_observer("w1", CAP), bus.claim_observer("w1", CAP)
    assert first is not None and second is not None
    assert bus.claim_observer("w1", CAP) is None
    other = bus.claim_observer("w2", CAP)  # another workspace has slots of its own
    assert other is not None and bus.observers("w2") == 1
    first.release()
    first.release()  # a second release (another exit path) frees nothing more
    assert bus.observers("w1") == 1
    third = bus.claim_observer("w1", CAP)
    assert third is not None and bus.claim_observer("w1", CAP) is None
    for slot in (second, third, other):
        slot.release()
    assert bus.observers("w1") == 0 and bus.observers("w2") == 0


@pytest.fixture(scope="module")
async def capped_server(server, db, tmp_path_factory):
    async with another_server(server, db, tmp_path_factory, "capped",
                              {"OBSERVER_MAX_PER_WORKSPACE": str(CAP),
                               "OBSERVER_AUTH_TIMEOUT_S": "1",
                               "OBSERVER_PING_S": "0.5"}) as running:
        yield running


async def admitted(server, path: str = "/api/observe") -> ClientConnection:
    """An open observer socket that got its `session_info` (so it holds a slot)."""
    ws = await connect(ws_url(server, path), additional_headers=bearer(server.api_key))
    info = json.loads(await asyncio.wait_for(ws.recv(), 10))
    assert info["type"] == "session_info"
    return ws


async def admitted_soon(server, timeout_s: float = 5.0) -> ClientConnection:
    """A slot is freed when the server sees the close: retry briefly until it has."""
    deadline = time.monotonic() + timeout_s
    while True:
        ws = await connect(ws_url(server, "/api/observe"),
                           additional_headers=bearer(server.api_key))
        message = None
        try:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
        except Exception:  # noqa: BLE001 - refused: closed before session_info
            await ws.close()
            assert ws.close_code == 1013, ws.close_code
        if message is not None:
            assert message["type"] == "session_info"
            return ws
        assert time.monotonic() < deadline, "a closed observer never freed its slot"
        await asyncio.sleep(0.1)


@pytest.mark.e2e
@pytest.mark.timeout(120)
async def test_past_the_cap_a_socket_is_refused_with_1013_until_one_closes(capped_server):
    server = capped_server
    held = [await admitted(server) for _ in range(CAP)]
    try:
        async with connect(ws_url(server, "/api/observe"),
                           additional_headers=bearer(server.api_key)) as extra:
            code, reason = await closed_with(extra)
        assert code == 1013 and "try again later" in reason
        # A call observer counts against the same cap, and is refused before its call
        # is even looked up (an unknown call would otherwise be 1008).
        unknown = f"/api/calls/{uuid.uuid4()}/observe"
        async with connect(ws_url(server, unknown),
                           additional_headers=bearer(server.api_key)) as extra:
            assert (await closed_with(extra))[0] == 1013
        # No key: refused as unauthenticated, whatever the cap (the cap cannot be probed).
        async with connect(ws_url(server, "/api/observe"),
                           additional_headers=bearer("vk_00000000_" + "z" * 24)) as anon:
            assert (await closed_with(anon))[0] == 1008
        # The existing observers are untouched: both still get their pings.
        for ws in held:
            assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "ping"

        await held.pop().close()
        held.append(await admitted_soon(server))
    finally:
        for ws in held:
            await ws.close()


@pytest.mark.e2e
@pytest.mark.timeout(120)
async def test_sockets_that_end_early_or_abruptly_free_their_slots(capped_server):
    server = capped_server
    unknown = f"/api/calls/{uuid.uuid4()}/observe"
    for _ in range(CAP + 2):  # refused as an unknown call after claiming a slot
        async with connect(ws_url(server, unknown),
                           additional_headers=bearer(server.api_key)) as ws:
            code, reason = await closed_with(ws)
        assert (code, reason) == (1008, "unknown call")
    for _ in range(CAP + 1):  # dropped without a close handshake
        ws = await admitted_soon(server)
        ws.transport.abort()
    held = [await admitted_soon(server) for _ in range(CAP)]
    for ws in held:
        await ws.close()
