"""The in-process bus: late joiners, slow observers, operator commands."""

from __future__ import annotations

import asyncio
import time

from ops.bus import InProcessBus, Subscription
from ops.commands import OperatorAction, OperatorCommand
from ops.events import ObserverEvent


def event(seq: int, call_id: str = "c1", workspace_id: str = "w1") -> ObserverEvent:
    return ObserverEvent(call_id, workspace_id, seq, "user_transcript", {"transcript": str(seq)})


async def drain(sub: Subscription, until_seq: int, timeout_s: float = 2.0) -> list[dict]:
    got: list[dict] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = await sub.next(0.05)
        if message is None:
            continue
        got.append(message)
        if message.get("seq") == until_seq:
            break
    return got


async def test_a_late_joiner_gets_replay_then_live_with_no_gap_and_no_duplicate():
    bus = InProcessBus("pod", replay_events=50, queue_events=1000)
    for seq in range(1, 101):
        bus.publish(event(seq))

    async def keep_publishing():
        for seq in range(101, 301):
            bus.publish(event(seq))
            if seq % 5 == 0:
                await asyncio.sleep(0)  # the observer joins while events keep coming

    publisher = asyncio.create_task(keep_publishing())
    await asyncio.sleep(0)
    sub, replay = await bus.subscribe("w1", "c1")
    await publisher
    live = await drain(sub, 300)
    seqs = [e.seq for e in replay] + [m["seq"] for m in live]
    assert seqs == list(range(seqs[0], 301))  # contiguous: no gap, no duplicate
    assert seqs[0] > 1  # the replay is bounded to the last 50 at join time
    assert len(replay) == 50


async def test_a_late_joiner_whose_replay_overlaps_queued_live_events_sees_each_once():
    bus = InProcessBus("pod", replay_events=50, queue_events=1000)
    bus.publish(event(1))
    read_replay = bus.replay

    async def replay_after_more(call_id):
        bus.publish(event(2))  # published after the observer subscribed, before the read
        bus.publish(event(3))
        return await read_replay(call_id)

    bus.replay = replay_after_more  # type: ignore[method-assign]
    sub, replay = await bus.subscribe("w1", "c1")
    bus.publish(event(4))
    live = await drain(sub, 4)
    assert [e.seq for e in replay] == [1, 2, 3]
    assert [m["seq"] for m in live] == [4]


async def test_a_slow_observer_is_dropped_with_a_notice_while_a_fast_one_gets_everything():
    bus = InProcessBus("pod", replay_events=10, queue_events=20)
    slow, _ = await bus.subscribe("w1", "c1")
    fast, _ = await bus.subscribe("w1", "c1")
    received: list[int] = []

    async def fast_reader():
        while len(received) < 500:
            message = await fast.next(1.0)
            assert message is not None and message["type"] != "dropped"
            received.append(message["seq"])

    reader = asyncio.create_task(fast_reader())
    costs = []
    for seq in range(1, 501):
        started = time.thread_time()  # CPU time: a preempted test process is not a slow bus
        bus.publish(event(seq))
        costs.append(time.thread_time() - started)
        await asyncio.sleep(0)  # the fast observer keeps up; the slow one never reads
    await asyncio.wait_for(reader, 5)
    assert received == list(range(1, 501))
    assert max(costs) < 0.005  # publishing never waits for anyone

    got = []
    while (message := await slow.next(0.05)) is not None:
        got.append(message)
    assert [m["seq"] for m in got[:20]] == list(range(1, 21))
    assert got[20] == {"type": "dropped", "count": 480}
    assert len(got) == 21
    # Once it reads again it gets new events, after the notice.
    bus.publish(event(501))
    assert (await slow.next(0.5))["seq"] == 501


async def test_the_workspace_stream_sees_every_call_of_its_workspace_only():
    bus = InProcessBus("pod", replay_events=10, queue_events=100)
    sub, replay = await bus.subscribe("w1")
    assert replay == []
    bus.publish(event(1, "c1", "w1"))
    bus.publish(event(1, "c2", "w2"))
    bus.publish(event(1, "c3", "w1"))
    assert [(m["call_id"], m["seq"]) for m in [await sub.next(0.1), await sub.next(0.1)]] == [
        ("c1", 1), ("c3", 1)]
    assert await sub.next(0.05) is None
    bus.unsubscribe(sub)
    bus.publish(event(2, "c1", "w1"))
    assert await sub.next(0.05) is None


async def test_another_workspaces_replay_is_not_handed_out():
    bus = InProcessBus("pod", replay_events=10, queue_events=100)
    bus.publish(event(1, "c1", "w1"))
    _, replay = await bus.subscribe("w2", "c1")
    assert replay == []


async def test_commands_reach_the_handler_of_a_call_running_here_only():
    bus = InProcessBus("pod", replay_events=10, queue_events=100)
    seen: list[OperatorCommand] = []
    done = asyncio.Event()

    async def handler(command: OperatorCommand) -> None:
        seen.append(command)
        done.set()

    command = OperatorCommand("c1", "w1", OperatorAction.TAKE_OVER)
    assert not await bus.send_command("pod", command)  # nothing registered yet
    bus.handle_commands("c1", handler)
    assert not await bus.send_command("other-pod", command)
    assert await bus.send_command("pod", command)
    await asyncio.wait_for(done.wait(), 1)
    assert seen == [command]
    assert OperatorCommand.from_json(command.to_json()) == command
    bus.drop_commands("c1")
    assert not await bus.send_command("pod", command)
    await bus.close()


async def test_a_call_observer_never_gets_another_workspaces_event_of_that_call_id():
    bus = InProcessBus("pod", replay_events=10, queue_events=100)
    sub, _ = await bus.subscribe("w1", "c1")
    bus.fan_out(event(1, "c1", "w2"))  # e.g. from another deployment sharing the Redis
    bus.publish(event(2, "c1", "w1"))
    assert [m["seq"] for m in [await sub.next(0.1)]] == [2]
    assert await sub.next(0.05) is None


async def test_a_subscribe_cancelled_during_its_replay_leaves_no_subscription():
    class SlowReplay(InProcessBus):
        async def replay(self, call_id: str) -> list[ObserverEvent]:
            await asyncio.sleep(10)
            return []

    bus = SlowReplay("pod", replay_events=10, queue_events=100)
    joining = asyncio.create_task(bus.subscribe("w1", "c1"))
    await asyncio.sleep(0.01)
    joining.cancel()
    await asyncio.gather(joining, return_exceptions=True)
    assert bus._subscriptions == {} and bus._by_call == {}


async def test_a_command_naming_another_workspace_never_reaches_the_call():
    bus = InProcessBus("pod", replay_events=10, queue_events=100)
    seen: list[OperatorCommand] = []

    async def handler(command: OperatorCommand) -> None:
        seen.append(command)

    bus.handle_commands("c1", handler, workspace_id="w1")
    assert not await bus.send_command("pod", OperatorCommand("c1", "w2", OperatorAction.END))
    assert await bus.send_command("pod", OperatorCommand("c1", "w1", OperatorAction.END))
    await asyncio.sleep(0.05)
    assert [c.workspace_id for c in seen] == ["w1"]
    await bus.close()
