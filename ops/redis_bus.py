"""The event bus across pods, through Redis (`REDIS_URL`).

The pod running a call writes each event to the call's replay list (capped at
`observer_replay_events`, with a TTL) and publishes it on one channel, in one
MULTI/EXEC, so an event is in the replay exactly when it is published. Every pod
listens on that channel and fans events out to its own observers; commands for a
pod go to its own channel. `publish` only puts the event in a bounded outbox: a
sender task does the network work, so Redis never delays the call; Redis down means
events are counted as dropped (logged once) and they flow again when it is back.
"""

from __future__ import annotations

import asyncio
import contextlib

import redis.asyncio as aioredis
from loguru import logger

from ops.bus import EventBus
from ops.commands import OperatorCommand
from ops.events import ObserverEvent
from ops.redis_link import Outage, connect

EVENTS_CHANNEL = "ops:events"
REPLAY_TTL_S = 3600  # a finished call's recent events stay replayable this long
OUTBOX_EVENTS = 10_000
SEND_BATCH = 200
RETRY_S = 1.0
CLOSE_DRAIN_S = 1.0


def replay_key(call_id: str) -> str:
    return f"ops:replay:{call_id}"


def command_channel(pod_id: str) -> str:
    return f"ops:commands:{pod_id}"


class RedisBus(EventBus):
    def __init__(self, url: str, pod_id: str, *, replay_events: int, queue_events: int) -> None:
        super().__init__(pod_id, replay_events=replay_events, queue_events=queue_events)
        self._redis: aioredis.Redis = connect(url)
        self._outbox: asyncio.Queue[ObserverEvent] = asyncio.Queue(OUTBOX_EVENTS)
        self._outage = Outage("event bus")
        self._subscribed = asyncio.Event()
        self._in_flight = 0  # events taken from the outbox, not yet sent
        self._tasks: list[asyncio.Task] = []

    def publish(self, event: ObserverEvent) -> None:
        try:
            self._outbox.put_nowait(event)
            self.published += 1
        except asyncio.QueueFull:
            self.dropped += 1

    async def start(self) -> None:
        """Start sending and listening; waits (briefly) until the pod is subscribed, so an
        observer's replay-then-live is gap-free from the first request."""
        self._tasks = [asyncio.create_task(self._send_loop(), name="ops-bus-send"),
                       asyncio.create_task(self._listen_loop(), name="ops-bus-listen")]
        try:
            await asyncio.wait_for(self._subscribed.wait(), 5.0)
        except TimeoutError:
            logger.warning("event bus: not subscribed to Redis yet; retrying in the background")

    async def close(self) -> None:
        """Send what is still in the outbox (the last calls' ends; bounded), then stop."""
        await super().close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_DRAIN_S):
                while (not self._outbox.empty() or self._in_flight) and not self._outage.down:
                    await asyncio.sleep(0.01)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._redis.aclose()

    async def replay(self, call_id: str) -> list[ObserverEvent]:
        try:
            raw = await self._redis.lrange(replay_key(call_id), 0, -1)
        except Exception as error:  # noqa: BLE001 - no replay, the live stream still comes
            self._outage.failed(error)
            return []
        events = []
        for item in raw:
            try:
                events.append(ObserverEvent.from_json(item))
            except ValueError:
                continue
        return events

    async def send_command(self, pod_id: str, command: OperatorCommand) -> bool:
        if pod_id == self.pod_id:
            return self.run_command(command)
        try:
            receivers = await self._redis.publish(command_channel(pod_id), command.to_json())
        except Exception as error:  # noqa: BLE001 - the API answers 503
            self._outage.failed(error)
            raise
        return receivers > 0

    async def _send_loop(self) -> None:
        while True:
            batch = [await self._outbox.get()]
            while len(batch) < SEND_BATCH and not self._outbox.empty():
                batch.append(self._outbox.get_nowait())
            self._in_flight = len(batch)
            try:
                await self._send(batch)
                self._outage.ok()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the calls go on without observers
                self.dropped += len(batch)
                self._outage.failed(error)
                await asyncio.sleep(RETRY_S)
            finally:
                self._in_flight = 0

    async def _send(self, batch: list[ObserverEvent]) -> None:
        """One MULTI/EXEC: each event appended to its call's replay and published; each
        call's replay trimmed and given its TTL once per batch, not once per event."""
        calls: set[str] = set()
        async with self._redis.pipeline(transaction=True) as pipe:
            for event in batch:
                raw = event.to_json()
                if self.replay_events:
                    pipe.rpush(replay_key(event.call_id), raw)
                    calls.add(event.call_id)
                pipe.publish(EVENTS_CHANNEL, raw)
            for call_id in calls:
                pipe.ltrim(replay_key(call_id), -self.replay_events, -1)
                pipe.expire(replay_key(call_id), REPLAY_TTL_S)
            await pipe.execute()

    async def _listen_loop(self) -> None:
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(EVENTS_CHANNEL, command_channel(self.pod_id))
                self._subscribed.set()
                self._outage.ok()
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None:
                        self._receive(message["channel"], message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - reconnect; the calls go on
                self._outage.failed(error)
                await asyncio.sleep(RETRY_S)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    def _receive(self, channel: bytes, data: bytes) -> None:
        try:
            if channel.decode() == EVENTS_CHANNEL:
                self.fan_out(ObserverEvent.from_json(data))
            else:
                command = OperatorCommand.from_json(data)
                if not self.run_command(command):
                    logger.info(f"call {command.call_id}: operator command for a call "
                                "no longer running here")
        except ValueError:
            logger.warning("event bus: unreadable message ignored")
