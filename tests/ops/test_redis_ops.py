"""The bus and the registry across pods, through a real Redis-protocol server (Valkey)."""

from __future__ import annotations

import asyncio
import time

import pytest

from ops.commands import OperatorAction, OperatorCommand
from ops.events import ObserverEvent
from ops.redis_bus import RedisBus
from ops.registry import ActiveCall, RedisRegistry
from tests.ops.redis_server import valkey_server


@pytest.fixture(scope="module")
def redis_url():
    with valkey_server() as server:
        yield server.connection_url


def event(seq: int, call_id: str, workspace_id: str = "w1") -> ObserverEvent:
    return ObserverEvent(call_id, workspace_id, seq, "agent_transcript", {"transcript": str(seq)})


async def bus(url: str, pod: str) -> RedisBus:
    started = RedisBus(url, pod, replay_events=30, queue_events=1000)
    await started.start()
    return started


async def until(predicate, timeout_s: float = 5.0, step_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while True:
        value = await predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(step_s)


async def test_an_observer_on_another_pod_gets_replay_then_live_without_gap_or_duplicate(
    redis_url,
):
    pod_a, pod_b = await bus(redis_url, "a"), await bus(redis_url, "b")
    try:
        for seq in range(1, 61):
            pod_a.publish(event(seq, "call-1"))

        async def keep_publishing():
            for seq in range(61, 161):
                pod_a.publish(event(seq, "call-1"))
                await asyncio.sleep(0.001)

        publisher = asyncio.create_task(keep_publishing())
        await asyncio.sleep(0.02)
        sub, replay = await pod_b.subscribe("w1", "call-1")
        await publisher
        seqs = [e.seq for e in replay]
        while seqs[-1] != 160:
            message = await sub.next(2.0)
            assert message is not None, f"stream stopped at {seqs[-1]}"
            seqs.append(message["seq"])
        assert seqs == list(range(seqs[0], 161))
        assert len(replay) <= 30 and seqs[0] > 1  # the replay is capped
        _, other = await pod_b.subscribe("w2", "call-1")
        assert other == []  # another workspace's call
    finally:
        await pod_a.close()
        await pod_b.close()


async def test_a_command_reaches_the_pod_running_the_call(redis_url):
    pod_a, pod_b = await bus(redis_url, "cmd-a"), await bus(redis_url, "cmd-b")
    received = asyncio.Queue()
    pod_a.handle_commands("call-2", received.put)
    try:
        command = OperatorCommand("call-2", "w1", OperatorAction.END)
        assert await pod_b.send_command("cmd-a", command)
        assert await asyncio.wait_for(received.get(), 3) == command
        assert not await pod_b.send_command("no-such-pod", command)
    finally:
        await pod_a.close()
        await pod_b.close()


async def test_a_dead_pods_calls_leave_the_registry_after_the_ttl(redis_url):
    dying = RedisRegistry(redis_url, "dying", ttl_s=1.0)
    reader = RedisRegistry(redis_url, "reader", ttl_s=1.0)
    await dying.start()
    dying.add(ActiveCall("call-3", "w3", None, "dying", time.time(), state="greeting"))

    async def listed():
        return [c.call_id for c in await reader.active("w3")]

    assert await until(listed) == ["call-3"]
    dying.update("call-3", state="booking")
    assert await until(lambda: _state(reader, "call-3", "booking"))
    await asyncio.sleep(1.3)
    assert await listed() == ["call-3"]  # the heartbeat keeps it alive past one TTL
    dying._task.cancel()  # noqa: SLF001 - the pod dies: no more beats, no goodbye
    await asyncio.sleep(1.3)
    assert await listed() == []
    assert await reader.get("call-3") is None
    await reader.close()


async def test_an_ended_call_leaves_the_registry_at_once(redis_url):
    pod = RedisRegistry(redis_url, "live", ttl_s=30.0)
    reader = RedisRegistry(redis_url, "reader2", ttl_s=30.0)
    await pod.start()
    pod.add(ActiveCall("call-4", "w4", "s", "live", time.time()))
    assert await until(lambda: reader.get("call-4"))
    pod.remove("call-4")

    async def gone():
        return await reader.get("call-4") is None and await reader.active("w4") == []

    assert await until(gone, timeout_s=2.0)
    await pod.close()
    await reader.close()


async def _state(registry: RedisRegistry, call_id: str, state: str) -> bool:
    entry = await registry.get(call_id)
    return entry is not None and entry.state == state


async def test_redis_down_mid_call_drops_events_without_blocking_and_they_resume():
    with valkey_server() as server:
        url, port = server.connection_url, server.port
        pod_a, pod_b = await bus(url, "down-a"), await bus(url, "down-b")
        sub, _ = await pod_b.subscribe("w1", "call-5")
        pod_a.publish(event(1, "call-5"))
        assert (await sub.next(3))["seq"] == 1
        server.stop()
        started = time.perf_counter()
        for seq in range(2, 50):
            pod_a.publish(event(seq, "call-5"))  # the call goes on
        assert time.perf_counter() - started < 0.01
        await until(lambda: _true(pod_a.dropped > 0), timeout_s=5)
        assert pod_a.dropped > 0
        server._desired_port = port  # noqa: SLF001 - the same address comes back
        server.start()
        try:
            async def delivered():
                pod_a.publish(event(100, "call-5"))
                message = await sub.next(0.3)
                while message is not None and message.get("seq") != 100:
                    message = await sub.next(0.3)
                return message is not None

            assert await until(delivered, timeout_s=15, step_s=0.2)
        finally:
            await pod_a.close()
            await pod_b.close()


async def _true(value: bool) -> bool:
    return value
