"""The event bus across worker processes (and pods) through PostgreSQL, when there is no
`REDIS_URL`: LISTEN/NOTIFY for the live stream, a table for the replay.

The process running a call hands each event to a bounded outbox (`publish` never
waits: the database never delays a call; a full outbox drops the event and counts it).
A sender task writes a batch in one transaction on a connection of its own: each event
goes to the call's replay (`ops_replay`, the newest `observer_replay_events` per call,
an hour at most) and is announced with `pg_notify`, which PostgreSQL delivers at commit,
in order, so an event is in the replay exactly when it is announced. A NOTIFY payload
must stay under 8000 bytes: a larger event is announced by its call and number and read
from the replay. Every process listens on one connection and fans events out to its own
observers. A database that is down drops events (counted, logged once) until it is back.

Operator commands go out on one channel naming the process that runs the call; that
process runs the command and answers on another channel, so the sender knows whether
it ran (a process that is gone never answers: `send_command` is then False).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from typing import Any

import asyncpg
from loguru import logger

from ops.bus import EventBus
from ops.commands import OperatorCommand
from ops.events import ObserverEvent
from ops.outage import Outage
from ops.postgres_link import PostgresLink, connect

EVENTS_CHANNEL = "ops_events"
COMMANDS_CHANNEL = "ops_commands"
ANSWERS_CHANNEL = "ops_command_answers"
CHANNELS = (EVENTS_CHANNEL, COMMANDS_CHANNEL, ANSWERS_CHANNEL)
NOTIFY_MAX_BYTES = 7900  # PostgreSQL refuses a payload of 8000 bytes or more
REPLAY_TTL_S = 3600  # a finished call's recent events stay replayable this long
# Rows kept per call at least, so an event announced by reference is still there when
# the listeners read it, even with no replay configured.
REFERENCE_ROOM = 200
OUTBOX_EVENTS = 10_000
SEND_BATCH = 200
SEND_TIMEOUT_S = 5.0
RETRY_S = 1.0
CLOSE_DRAIN_S = 1.0
PRUNE_EVERY_S = 60.0
ANSWER_WAIT_S = 2.0  # how long a command's sender waits to hear it ran
LISTEN_CHECK_S = 5.0  # a listening connection is checked this often (a frozen server)

_INSERT = "INSERT INTO ops_replay (call_id, seq, event) VALUES ($1, $2, $3)"
_TRIM = """DELETE FROM ops_replay WHERE call_id = $1 AND id <= (
               SELECT id FROM ops_replay WHERE call_id = $1 ORDER BY id DESC
               OFFSET $2 LIMIT 1)"""


def announcement(event: ObserverEvent, raw: str) -> str:
    """What the NOTIFY carries: the event itself, or where to read it when too large."""
    if len(raw.encode()) <= NOTIFY_MAX_BYTES:
        return raw
    return json.dumps({"ref": {"call_id": event.call_id, "seq": event.seq}})


class PostgresBus(EventBus):
    def __init__(self, dsn: str, pod_id: str, *, replay_events: int, queue_events: int,
                 link: PostgresLink | None = None) -> None:
        super().__init__(pod_id, replay_events=replay_events, queue_events=queue_events)
        self._dsn = dsn
        self._owns_link = link is None  # a link given is closed by whoever gave it
        self._link = link or PostgresLink(dsn, "event bus")
        self._outbox: asyncio.Queue[ObserverEvent] = asyncio.Queue(OUTBOX_EVENTS)
        self._inbox: asyncio.Queue[tuple[str, str]] = asyncio.Queue()  # (channel, payload)
        self._answers: dict[str, asyncio.Future[bool]] = {}
        self._listening = asyncio.Event()
        self._listen_outage = Outage("event bus (listening)", "PostgreSQL")
        self._in_flight = 0
        self._pruned_at = 0.0
        self._tasks: list[asyncio.Task] = []

    # --- publishing (the call's path) ----------------------------------------------

    def publish(self, event: ObserverEvent) -> None:
        try:
            self._outbox.put_nowait(event)
            self.published += 1
        except asyncio.QueueFull:
            self.dropped += 1

    async def start(self) -> None:
        """Start sending and listening; waits (briefly) until this process listens, so an
        observer's replay-then-live is gap-free from the first request."""
        self._tasks = [asyncio.create_task(self._send_loop(), name="ops-bus-send"),
                       asyncio.create_task(self._listen_loop(), name="ops-bus-listen"),
                       asyncio.create_task(self._receive_loop(), name="ops-bus-receive")]
        try:
            await asyncio.wait_for(self._listening.wait(), 5.0)
        except TimeoutError:
            logger.warning("event bus: not listening to PostgreSQL yet; retrying in the "
                           "background")

    async def close(self) -> None:
        """Send what is still in the outbox (the last calls' ends; bounded), then stop."""
        await super().close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_DRAIN_S):
                while (not self._outbox.empty() or self._in_flight) and not self._link.outage.down:
                    await asyncio.sleep(0.01)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._owns_link:
            await self._link.close()

    async def _send_loop(self) -> None:
        while True:
            batch = [await self._outbox.get()]
            while len(batch) < SEND_BATCH and not self._outbox.empty():
                batch.append(self._outbox.get_nowait())
            self._in_flight = len(batch)
            try:
                await self._link.run(lambda conn: self._send(conn, batch),
                                     timeout_s=SEND_TIMEOUT_S)
                self._link.outage.ok()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the calls go on without observers
                self.dropped += len(batch)
                self._link.outage.failed(error)
                await asyncio.sleep(RETRY_S)
            finally:
                self._in_flight = 0
            await self._prune()

    async def _send(self, conn: asyncpg.Connection, batch: list[ObserverEvent]) -> None:
        """One transaction: each event into its call's replay and announced (in order, at
        commit); each call's replay trimmed once per batch."""
        rows = [(event.call_id, event.seq, event.to_json()) for event in batch]
        keep = max(self.replay_events, REFERENCE_ROOM)
        async with conn.transaction():
            await conn.executemany(_INSERT, rows)
            await conn.executemany(f"SELECT pg_notify('{EVENTS_CHANNEL}', $1)",
                                   [(announcement(event, raw),)
                                    for event, (_c, _s, raw) in zip(batch, rows, strict=True)])
            await conn.executemany(_TRIM, [(call_id, keep) for call_id in
                                           {event.call_id for event in batch}])

    async def _prune(self) -> None:
        """Every minute or so: forget replays older than REPLAY_TTL_S (any process may)."""
        now = time.monotonic()
        if now - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = now
        with contextlib.suppress(Exception):
            await self._link.run(lambda conn: conn.execute(
                "DELETE FROM ops_replay WHERE created_at < now() - make_interval(secs => $1)",
                float(REPLAY_TTL_S)))

    # --- reading ------------------------------------------------------------------------

    async def replay(self, call_id: str) -> list[ObserverEvent]:
        if not self.replay_events:
            return []
        try:
            rows = await self._link.run(lambda conn: conn.fetch(
                """SELECT event FROM (SELECT id, event FROM ops_replay WHERE call_id = $1
                                      ORDER BY id DESC LIMIT $2) newest ORDER BY id""",
                call_id, self.replay_events))
        except Exception as error:  # noqa: BLE001 - no replay, the live stream still comes
            self._link.outage.failed(error)
            return []
        events = []
        for row in rows:
            try:
                events.append(ObserverEvent.from_json(row["event"]))
            except ValueError:
                continue
        return events

    # --- listening ----------------------------------------------------------------------

    async def _listen_loop(self) -> None:
        while True:
            conn: asyncpg.Connection | None = None
            lost = asyncio.Event()
            try:
                conn = await connect(self._dsn)
                conn.add_termination_listener(lambda _conn: lost.set())
                for channel in CHANNELS:
                    await conn.add_listener(channel, self._notified)
                self._listening.set()
                self._listen_outage.ok()
                while not conn.is_closed():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lost.wait(), LISTEN_CHECK_S)
                    if lost.is_set():
                        raise ConnectionError("listening connection closed")
                    await conn.fetchval("SELECT 1")  # a frozen server fails the bound
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - listen again; the calls go on
                self._listen_outage.failed(error)
            finally:
                self._listening.clear()
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            await asyncio.sleep(RETRY_S)

    def _notified(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        """asyncpg's listener callback: queued, handled in order by `_receive_loop`."""
        self._inbox.put_nowait((channel, payload))

    async def _receive_loop(self) -> None:
        while True:
            channel, payload = await self._inbox.get()
            try:
                await self._receive(channel, payload)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - one bad message, not the bus
                logger.warning(f"event bus: message not handled ({type(error).__name__})")

    async def _receive(self, channel: str, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            logger.warning("event bus: unreadable message ignored")
            return
        if channel == EVENTS_CHANNEL:
            event = (await self._announced(message) if "ref" in message
                     else ObserverEvent.from_value(message))
            if event is not None:
                self.fan_out(event)
        elif channel == COMMANDS_CHANNEL and message.get("to") == self.pod_id:
            await self._run_sent(message)
        elif channel == ANSWERS_CHANNEL and message.get("to") == self.pod_id:
            waiting = self._answers.get(str(message.get("nonce")))
            if waiting is not None and not waiting.done():
                waiting.set_result(bool(message.get("ran")))

    async def _announced(self, message: dict[str, Any]) -> ObserverEvent | None:
        """An event announced by reference, read from the replay (None: gone already)."""
        ref = message["ref"]
        try:
            raw = await self._link.run(lambda conn: conn.fetchval(
                """SELECT event FROM ops_replay WHERE call_id = $1 AND seq = $2
                   ORDER BY id DESC LIMIT 1""", str(ref["call_id"]), int(ref["seq"])))
        except Exception as error:  # noqa: BLE001 - this event is missed, the next comes
            self.dropped += 1
            self._link.outage.failed(error)
            return None
        return ObserverEvent.from_json(raw) if raw is not None else None

    # --- operator commands --------------------------------------------------------------

    async def send_command(self, pod_id: str, command: OperatorCommand) -> bool:
        """Run the command in the process `pod_id`; True once it says the call ran it,
        False when it did not (the call is not running there, or the process is gone).
        Raises when the database cannot carry it (the API answers 503)."""
        if pod_id == self.pod_id:
            return self.run_command(command)
        if not self._listening.is_set():
            raise ConnectionError("the event bus is not listening: no answer could come")
        nonce = secrets.token_hex(8)
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._answers[nonce] = answer
        message = json.dumps({"to": pod_id, "from": self.pod_id, "nonce": nonce,
                              "command": json.loads(command.to_json())})
        try:
            try:
                await self._link.run(lambda conn: conn.execute(
                    "SELECT pg_notify($1, $2)", COMMANDS_CHANNEL, message))
            except Exception as error:
                self._link.outage.failed(error)
                raise
            try:
                return await asyncio.wait_for(answer, ANSWER_WAIT_S)
            except TimeoutError:
                return False
        finally:
            self._answers.pop(nonce, None)

    async def _run_sent(self, message: dict[str, Any]) -> None:
        """A command for a call running here: run it, and tell its sender whether it did."""
        try:
            command = OperatorCommand.from_json(json.dumps(message.get("command")))
        except ValueError:
            logger.warning("event bus: unreadable command ignored")
            return
        ran = self.run_command(command)
        if not ran:
            logger.info(f"call {command.call_id}: operator command for a call no longer "
                        "running here")
        answer = json.dumps({"to": message.get("from"), "nonce": message.get("nonce"),
                             "ran": ran})
        try:
            await self._link.run(lambda conn: conn.execute(
                "SELECT pg_notify($1, $2)", ANSWERS_CHANNEL, answer))
        except Exception as error:  # noqa: BLE001 - the sender hears nothing: False there
            self._link.outage.failed(error)
