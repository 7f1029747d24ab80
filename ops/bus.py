"""The event bus: observer events from the pod running a call to observers on any pod,
and operator commands to the pod running a call.

`EventBus` holds what every implementation shares: the observers subscribed on this
pod (each with its own bounded `Subscription`), the fan-out to them, and the command
handlers of the calls running here. `InProcessBus` (one pod, the default) keeps each
call's replay buffer in memory; `ops/redis_bus.RedisBus` shares both through
Redis. Publishing never blocks and never raises: it costs the call a few microseconds.

Late joiners: `subscribe` registers the observer's queue first, then reads the replay,
then the subscription drops live events already replayed (seq ≤ the last replayed) —
no gap, no duplicate.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from typing import Any

from loguru import logger

from lib.event_loop import BackgroundTasks
from ops.commands import OperatorCommand
from ops.events import ObserverEvent

# Finished calls' replay buffers kept in memory (so an observer of a call that just
# ended still gets its events); the oldest call's buffer goes first.
REPLAY_CALLS_KEPT = 500

CommandHandler = Callable[[OperatorCommand], Awaitable[None]]


class Subscription:
    """One observer's bounded queue: full → events dropped, then one `dropped` notice
    ahead of the next event, so a slow observer never slows the call or anyone else."""

    _ids = itertools.count(1)

    def __init__(self, workspace_id: str, call_id: str | None, limit: int) -> None:
        self.id = next(self._ids)
        self.workspace_id = workspace_id
        self.call_id = call_id
        self._limit = limit
        self._items: deque[ObserverEvent | dict[str, Any]] = deque()  # events, notices
        self._floor: dict[str, int] = {}
        self._dropped = 0
        self.dropped_total = 0
        self._ready = asyncio.Event()
        self.waiting = False  # its reader sleeps until woken
        self.closed = False

    def wants(self, event: ObserverEvent) -> bool:
        """Its workspace's events only, whatever reaches the pod (the replay is held to
        the same rule): of its call, or of every call."""
        if event.workspace_id != self.workspace_id:
            return False
        return self.call_id is None or event.call_id == self.call_id

    @property
    def pending(self) -> int:
        return len(self._items)

    def offer(self, event: ObserverEvent) -> bool:
        """Never blocks: a full queue counts the event as dropped. True: queued and the
        reader sleeps (wake it, see `wake`)."""
        if len(self._items) >= self._limit:
            self._dropped += 1
            self.dropped_total += 1
            return False
        if self._dropped:
            self._items.append(self._dropped_notice())
        self._items.append(event)
        return self.waiting

    def _dropped_notice(self) -> dict[str, Any]:
        """The `dropped` notice for the events dropped since the last one (count reset)."""
        notice = {"type": "dropped", "count": self._dropped}
        self._dropped = 0
        return notice

    def wake(self) -> None:
        self._ready.set()

    def replayed(self, events: list[ObserverEvent]) -> list[ObserverEvent]:
        """The replay in order; live events it already holds will be skipped."""
        ordered = sorted(events, key=lambda e: (e.call_id, e.seq))
        for event in ordered:
            self._floor[event.call_id] = max(self._floor.get(event.call_id, 0), event.seq)
        return ordered

    async def next(self, timeout_s: float | None = None) -> dict[str, Any] | None:
        """The next message for the observer (an event or a `dropped` notice); None on
        timeout or when closed."""
        while True:
            while self._items:
                item = self._items.popleft()
                if not isinstance(item, ObserverEvent):
                    return item  # a notice
                if item.seq <= self._floor.get(item.call_id, 0):
                    continue  # already replayed
                return item.message()
            if self._dropped:
                return self._dropped_notice()
            if self.closed:
                return None
            self._ready.clear()
            self.waiting = True
            try:
                await asyncio.wait_for(self._ready.wait(), timeout_s)
            except TimeoutError:
                return None
            finally:
                self.waiting = False

    def close(self) -> None:
        self.closed = True
        self._ready.set()


class ObserverSlot:
    """One observer socket counted against its workspace's cap on this pod; `release`
    frees it (once, however often it is called, so every exit path may call it)."""

    def __init__(self, workspace_id: str, counts: dict[str, int]) -> None:
        self.workspace_id = workspace_id
        self._counts = counts
        self.released = False

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        left = self._counts.get(self.workspace_id, 0) - 1
        if left > 0:
            self._counts[self.workspace_id] = left
        else:
            self._counts.pop(self.workspace_id, None)


def _wake(subs: list[Subscription]) -> None:
    for sub in subs:
        sub.wake()


class EventBus:
    """Shared part of the bus implementations; see the module docstring."""

    def __init__(self, pod_id: str, *, replay_events: int, queue_events: int) -> None:
        self.pod_id = pod_id
        self.replay_events = replay_events
        self.queue_events = queue_events
        self.published = 0
        self.dropped = 0  # events that could not be published (Redis down, outbox full)
        self._subscriptions: dict[int, Subscription] = {}
        self._by_call: dict[str, set[int]] = {}
        self._by_workspace: dict[str, set[int]] = {}
        self._handlers: dict[str, tuple[str | None, CommandHandler]] = {}  # call → (workspace, …)
        self._observers: dict[str, int] = {}  # workspace → observer sockets holding a slot
        self._background = BackgroundTasks()

    # --- publishing (the call's path) ----------------------------------------------

    def publish(self, event: ObserverEvent) -> None:
        """Hand an event over; never blocks, never raises."""
        raise NotImplementedError

    def fan_out(self, event: ObserverEvent) -> None:
        """Give an event to this pod's observers of its call and workspace. Sleeping
        readers are woken in one later loop callback, not on the publisher's path."""
        sleeping: list[Subscription] = []
        for ids in (self._by_call.get(event.call_id, ()),
                    self._by_workspace.get(event.workspace_id or "", ())):
            for sub_id in ids:
                sub = self._subscriptions.get(sub_id)
                if sub is not None and sub.wants(event) and sub.offer(event):
                    sleeping.append(sub)
        if sleeping:
            asyncio.get_running_loop().call_soon(_wake, sleeping)

    # --- observers --------------------------------------------------------------------

    def claim_observer(self, workspace_id: str, limit: int) -> ObserverSlot | None:
        """A slot for one more observer socket of the workspace on this pod, or None when
        it already holds `limit` (the socket is then refused: a runaway dashboard cannot
        exhaust the pod)."""
        held = self._observers.get(workspace_id, 0)
        if held >= limit:
            return None
        self._observers[workspace_id] = held + 1
        return ObserverSlot(workspace_id, self._observers)

    def observers(self, workspace_id: str) -> int:
        """Observer sockets of the workspace holding a slot on this pod."""
        return self._observers.get(workspace_id, 0)

    async def subscribe(
        self, workspace_id: str, call_id: str | None = None
    ) -> tuple[Subscription, list[ObserverEvent]]:
        """A new observer (of one call, or of the whole workspace with `call_id=None`) and
        the replay it must be sent first (a workspace stream starts live)."""
        sub = Subscription(workspace_id, call_id, self.queue_events)
        self._subscriptions[sub.id] = sub
        index = self._by_call.setdefault(call_id, set()) if call_id is not None \
            else self._by_workspace.setdefault(workspace_id, set())
        index.add(sub.id)
        try:
            replay = await self.replay(call_id) if call_id is not None else []
        except BaseException:  # cancelled (or failed) before the caller holds it: no leak
            self.unsubscribe(sub)
            raise
        return sub, sub.replayed([e for e in replay if e.workspace_id == workspace_id])

    def unsubscribe(self, sub: Subscription) -> None:
        sub.close()
        self._subscriptions.pop(sub.id, None)
        key, index = (sub.call_id, self._by_call) if sub.call_id is not None \
            else (sub.workspace_id, self._by_workspace)
        ids = index.get(key)
        if ids is not None:
            ids.discard(sub.id)
            if not ids:
                del index[key]

    async def replay(self, call_id: str) -> list[ObserverEvent]:
        """The call's recent events, oldest first."""
        raise NotImplementedError

    # --- operator commands ------------------------------------------------------------

    def handle_commands(self, call_id: str, handler: CommandHandler, *,
                        workspace_id: str | None = None) -> None:
        """`handler` applies commands for the call; with `workspace_id`, only commands
        naming that workspace (the API checked it; a command from elsewhere on a shared
        Redis never reaches another workspace's call)."""
        self._handlers[call_id] = (workspace_id, handler)

    def drop_commands(self, call_id: str) -> None:
        self._handlers.pop(call_id, None)

    async def send_command(self, pod_id: str, command: OperatorCommand) -> bool:
        """Deliver to the pod running the call; False if no one there could take it."""
        raise NotImplementedError

    def run_command(self, command: OperatorCommand) -> bool:
        """Apply a command to a call running here, off the caller's path; False if the
        call is not running here."""
        workspace_id, handler = self._handlers.get(command.call_id, (None, None))
        if handler is None or workspace_id not in (None, command.workspace_id):
            return False
        self._background.start(self._apply(handler, command),
                               name=f"operator-{command.action.value}-{command.call_id}")
        return True

    @staticmethod
    async def _apply(handler: CommandHandler, command: OperatorCommand) -> None:
        try:
            await handler(command)
        except Exception as error:  # noqa: BLE001 - a failed action never takes the pod down
            logger.warning(f"call {command.call_id}: operator {command.action.value} failed "
                           f"({type(error).__name__})")

    async def start(self) -> None:
        """Connect (a no-op in process)."""

    async def close(self) -> None:
        for sub in list(self._subscriptions.values()):
            self.unsubscribe(sub)
        self._background.cancel()


class InProcessBus(EventBus):
    """One pod: replay buffers and fan-out in memory."""

    def __init__(self, pod_id: str, *, replay_events: int, queue_events: int) -> None:
        super().__init__(pod_id, replay_events=replay_events, queue_events=queue_events)
        self._replay: OrderedDict[str, deque[ObserverEvent]] = OrderedDict()

    def publish(self, event: ObserverEvent) -> None:
        try:
            buffer = self._replay.get(event.call_id)
            if buffer is None:
                buffer = self._replay[event.call_id] = deque(maxlen=self.replay_events)
                while len(self._replay) > REPLAY_CALLS_KEPT:
                    self._replay.popitem(last=False)
            buffer.append(event)
            self.published += 1
            self.fan_out(event)
        except Exception as error:  # noqa: BLE001 - an observer problem never reaches the call
            self.dropped += 1  # no traceback: the event in its locals holds what was said
            logger.warning(f"call {event.call_id}: observer event not published "
                           f"({type(error).__name__})")

    async def replay(self, call_id: str) -> list[ObserverEvent]:
        return list(self._replay.get(call_id, ()))

    async def send_command(self, pod_id: str, command: OperatorCommand) -> bool:
        return pod_id == self.pod_id and self.run_command(command)
