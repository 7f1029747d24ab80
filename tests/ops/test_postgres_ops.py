"""The bus and the registry across worker processes through PostgreSQL (no Redis): the
session's embedded server, each bus and registry with connections of its own as each
worker process has."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from ops import postgres_bus
from ops.commands import OperatorAction, OperatorCommand
from ops.events import ObserverEvent
from ops.postgres_bus import NOTIFY_MAX_BYTES, PostgresBus
from ops.postgres_link import PostgresLink
from ops.postgres_registry import PostgresRegistry
from ops.registry import ActiveCall, RegistryUnavailable
from tests.ops.database_proxy import DatabaseProxy


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def event(seq: int, call_id: str, workspace_id: str = "w1", text: str | None = None
          ) -> ObserverEvent:
    return ObserverEvent(call_id, workspace_id, seq, "agent_transcript",
                         {"transcript": text if text is not None else str(seq)})


async def bus(dsn: str, pod: str, replay_events: int = 30) -> PostgresBus:
    started = PostgresBus(dsn, pod, replay_events=replay_events, queue_events=1000)
    await started.start()
    return started


async def until(predicate, timeout_s: float = 5.0, step_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while True:
        value = await predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(step_s)


async def test_an_observer_in_another_process_gets_replay_then_live_without_gap_or_duplicate(db):
    call = unique("call")
    pod_a, pod_b = await bus(db.dsn, unique("a")), await bus(db.dsn, unique("b"))
    try:
        for seq in range(1, 61):
            pod_a.publish(event(seq, call))

        async def keep_publishing():
            for seq in range(61, 161):
                pod_a.publish(event(seq, call))
                await asyncio.sleep(0.001)

        publisher = asyncio.create_task(keep_publishing())
        await asyncio.sleep(0.05)
        sub, replay = await pod_b.subscribe("w1", call)
        await publisher
        seqs = [e.seq for e in replay]
        while not seqs or seqs[-1] != 160:
            message = await sub.next(3.0)
            assert message is not None, f"stream stopped at {seqs[-1] if seqs else None}"
            seqs.append(message["seq"])
        assert seqs == list(range(seqs[0], 161))
        assert len(replay) <= 30 and seqs[0] > 1  # the replay is capped
        _, other = await pod_b.subscribe("w2", call)
        assert other == []  # another workspace's call
    finally:
        await pod_a.close()
        await pod_b.close()


async def test_an_event_too_large_for_a_notify_reaches_the_other_process_whole(db):
    call = unique("call")
    pod_a, pod_b = await bus(db.dsn, unique("a")), await bus(db.dsn, unique("b"))
    try:
        sub, _ = await pod_b.subscribe("w1", call)
        words = "the caller spoke at length " * (NOTIFY_MAX_BYTES // 20)
        pod_a.publish(event(1, call, text="short"))
        pod_a.publish(event(2, call, text=words))
        pod_a.publish(event(3, call, text="after"))
        got = [await sub.next(3.0) for _ in range(3)]
        assert [m["seq"] for m in got] == [1, 2, 3]  # in order, the large one too
        assert got[1]["data"]["transcript"] == words
        replayed = await pod_b.replay(call)
        assert [e.seq for e in replayed] == [1, 2, 3]
    finally:
        await pod_a.close()
        await pod_b.close()


async def test_a_command_runs_in_the_process_running_the_call_and_its_sender_hears_so(
        db, monkeypatch):
    monkeypatch.setattr(postgres_bus, "ANSWER_WAIT_S", 0.5)
    call, a, b = unique("call"), unique("cmd-a"), unique("cmd-b")
    pod_a, pod_b = await bus(db.dsn, a), await bus(db.dsn, b)
    received = asyncio.Queue()
    pod_a.handle_commands(call, received.put, workspace_id="w1")
    try:
        command = OperatorCommand(call, "w1", OperatorAction.END)
        assert await pod_b.send_command(a, command)
        assert await asyncio.wait_for(received.get(), 3) == command
        # Not running there, another workspace's, or a process that is gone: not run.
        assert not await pod_b.send_command(a, OperatorCommand(unique("call"), "w1",
                                                               OperatorAction.END))
        assert not await pod_b.send_command(a, OperatorCommand(call, "w2", OperatorAction.END))
        assert not await pod_b.send_command(unique("gone"), command)
        assert received.empty()
    finally:
        await pod_a.close()
        await pod_b.close()


async def test_a_dead_process_calls_leave_the_registry_after_the_ttl(db):
    workspace = unique("w")
    dying_link, reader_link = PostgresLink(db.dsn, "test"), PostgresLink(db.dsn, "test")
    dying = PostgresRegistry(dying_link, unique("dying"), ttl_s=1.0)
    reader = PostgresRegistry(reader_link, unique("reader"), ttl_s=1.0)
    await dying.start()
    call = unique("call")
    dying.add(ActiveCall(call, workspace, None, dying.pod_id, time.time(), state="greeting"))

    async def listed():
        return [c.call_id for c in await reader.active(workspace)]

    try:
        assert await until(listed) == [call]
        dying.update(call, state="booking")
        assert await until(lambda: _state(reader, call, "booking"))
        await asyncio.sleep(1.3)
        assert await listed() == [call]  # the heartbeat keeps it alive past one TTL
        dying._task.cancel()  # noqa: SLF001 - the process dies: no more beats, no goodbye
        await asyncio.sleep(1.3)
        assert await listed() == []
        assert await reader.get(call) is None
    finally:
        await reader.close()
        await dying_link.close()
        await reader_link.close()


async def test_an_ended_call_leaves_the_registry_at_once_and_others_stay(db):
    workspace = unique("w")
    link = PostgresLink(db.dsn, "test")
    pod_a = PostgresRegistry(link, unique("a"), ttl_s=30.0)
    pod_b = PostgresRegistry(PostgresLink(db.dsn, "test"), unique("b"), ttl_s=30.0)
    await pod_a.start()
    await pod_b.start()
    first, second = unique("call"), unique("call")
    pod_a.add(ActiveCall(first, workspace, "s", pod_a.pod_id, time.time()))
    pod_b.add(ActiveCall(second, workspace, "s", pod_b.pod_id, time.time() + 1))
    try:
        async def both():
            return [c.call_id for c in await pod_a.active(workspace)] == [first, second]

        assert await until(both)
        pod_a.remove(first)

        async def only_second():
            return [c.call_id for c in await pod_b.active(workspace)] == [second]

        assert await until(only_second, timeout_s=2.0)
        assert (await pod_a.get(second)).pod_id == pod_b.pod_id
    finally:
        await pod_a.close()
        await pod_b.close()
        await link.close()


async def _state(registry: PostgresRegistry, call_id: str, state: str) -> bool:
    entry = await registry.get(call_id)
    return entry is not None and entry.state == state


async def test_a_frozen_or_dead_database_never_delays_the_call_and_events_resume(
        db, monkeypatch):
    monkeypatch.setattr(postgres_bus, "SEND_TIMEOUT_S", 0.5)
    monkeypatch.setattr(postgres_bus, "RETRY_S", 0.2)
    monkeypatch.setattr(postgres_bus, "LISTEN_CHECK_S", 0.5)
    proxy = DatabaseProxy(db.dsn)
    await proxy.start()
    call = unique("call")
    pod_a, pod_b = await bus(proxy.dsn, unique("a")), await bus(db.dsn, unique("b"))
    sub, _ = await pod_b.subscribe("w1", call)
    registry = PostgresRegistry(PostgresLink(proxy.dsn, "test"), unique("a"), ttl_s=30.0)
    try:
        pod_a.publish(event(1, call))
        assert (await sub.next(3))["seq"] == 1

        for outage in (proxy.freeze, proxy.cut):
            result = outage()
            if asyncio.iscoroutine(result):
                await result
            dropped = pod_a.dropped
            started = time.perf_counter()
            for seq in range(2, 300):
                pod_a.publish(event(seq, call))  # the call goes on
            registry.add(ActiveCall(call, "w1", None, registry.pod_id, time.time()))
            registry.remove(call)
            assert time.perf_counter() - started < 0.05
            assert await until(lambda: _true(pod_a.dropped > dropped), timeout_s=5)
            with pytest.raises(RegistryUnavailable):
                await registry.get(call)  # the API says 503, within its bound
            await proxy.restore()

            async def delivered():
                pod_a.publish(event(1000, call))
                message = await sub.next(0.3)
                while message is not None and message.get("seq") != 1000:
                    message = await sub.next(0.3)
                return message is not None

            assert await until(delivered, timeout_s=15, step_s=0.2)
    finally:
        await pod_a.close()
        await pod_b.close()
        await registry.close()
        await proxy.close()


async def _true(value: bool) -> bool:
    return value
