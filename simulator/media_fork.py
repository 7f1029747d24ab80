"""A call's forked media streams (`<Start><Stream url track>`), as Twilio runs them
(twilio.com/docs/voice/twiml/stream, /docs/voice/media-streams/websocket-messages).

A fork is one-way: Twilio opens a WebSocket to `url` (its upgrade signed with
X-Twilio-Signature, like the `<Connect><Stream>` one), sends `connected` and `start`
(`streamSid` MZ…, `callSid`, `accountSid`, `tracks`, the `<Parameter>`s as
`customParameters`, `mediaFormat`), then one `media` message per track every 20 ms,
μ-law at 8 kHz, for as long as the stream lives, and `stop` when the call ends (or a
`<Stop><Stream>` names it). The fork does not hold up the TwiML: the call's next verb
runs at once. What the leg's person says reaches every fork open at the time, at the
pace it is spoken (`Mouth`); the inbound track is silence between lines, the outbound
track (what the leg hears) is silence throughout in this stand-in.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from simulator.caller_audio import (
    FRAME_S,
    SILENCE_FRAME,
    CallerMicrophone,
    FrameClock,
    StreamIdentity,
    TwilioMessages,
)
from simulator.simulator import WS_OPEN_TIMEOUT_S, signed_upgrade
from simulator.twilio_wire import webhook_tls

# `track` attribute → the tracks the stream carries.
TRACKS: dict[str, tuple[str, ...]] = {
    "inbound_track": ("inbound",), "outbound_track": ("outbound",),
    "both_tracks": ("inbound", "outbound"),
}


@dataclass
class ForkRecord:
    """One fork of a call as the stand-in ran it. `stopped_by`: `call` (the call ended or
    left this stand-in's hands), `twiml` (a `<Stop><Stream>`), or `service` (it closed
    the socket); `error` when it could not be opened."""

    url: str
    name: str | None
    track: str
    parameters: dict[str, str]
    stream_sid: str
    opened: bool = False
    messages_sent: int = 0
    media_sent: int = 0
    stopped_by: str | None = None
    error: str | None = None


class ForkedStream:
    """Streams one leg to one fork URL in real time until stopped."""

    def __init__(self, record: ForkRecord, identity: StreamIdentity, auth_token: str) -> None:
        self.record = record
        self._identity = identity
        self._token = auth_token
        self._tracks = TRACKS.get(record.track, TRACKS["inbound_track"])
        self._mic = CallerMicrophone()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def live(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"fork-{self.record.stream_sid[:8]}")

    def hear(self, frames: list[bytes]) -> None:
        """The leg's person says these frames: they go out on the inbound track."""
        self._mic.say(frames)

    async def stop(self, by: str) -> None:
        """Send `stop` and close (unless it already ended); returns once it has."""
        if self.record.stopped_by is None and self.live:
            self.record.stopped_by = by
        self._stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        url = self.record.url
        try:
            websocket = await connect(
                url, open_timeout=WS_OPEN_TIMEOUT_S, additional_headers=signed_upgrade(
                    self._token, url), ssl=webhook_tls() if url.startswith("wss:") else None)
        except InvalidStatus as error:
            self.record.error = f"the fork at {url} was refused: HTTP {error.response.status_code}"
            return
        except (OSError, InvalidHandshake, TimeoutError) as error:
            self.record.error = f"cannot open the fork at {url}: {type(error).__name__}"
            return
        self.record.opened = True
        listening = asyncio.create_task(self._until_closed(websocket))
        try:
            await self._stream(websocket, TwilioMessages(self._identity, self._tracks))
        except ConnectionClosed:
            self.record.stopped_by = self.record.stopped_by or "service"
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)
            await websocket.close()

    async def _stream(self, websocket: ClientConnection, messages: TwilioMessages) -> None:
        await self._send(websocket, messages.connected())
        await self._send(websocket, messages.start())
        clock = FrameClock()
        while not self._stopping.is_set():
            index = await clock.next_frame()
            if self._stopping.is_set():
                break
            for track in self._tracks:
                frame = self._mic.next_frame() if track == "inbound" else SILENCE_FRAME
                await self._send(websocket, messages.media(frame, index, track))
                self.record.media_sent += 1
        await self._send(websocket, messages.stop())

    async def _send(self, websocket: ClientConnection, message: str) -> None:
        await websocket.send(message)
        self.record.messages_sent += 1

    async def _until_closed(self, websocket: ClientConnection) -> None:
        """A fork carries nothing back; the service closing it ends the fork."""
        with contextlib.suppress(ConnectionClosed):
            async for _ in websocket:
                pass
        if not self._stopping.is_set():
            self.record.stopped_by = self.record.stopped_by or "service"
            self._stopping.set()


class Mouth:
    """What the person on a leg says outside a `<Connect><Stream>`: heard on every fork
    of the call open at the time, and taking as long as it is spoken. `spoken` is the
    leg's record of the lines."""

    def __init__(self, spoken: list[str]) -> None:
        self._spoken = spoken
        self.forks: list[ForkedStream] = []

    async def say(self, text: str, frames: list[bytes]) -> None:
        self._spoken.append(text)
        for fork in self.forks:
            if fork.live:
                fork.hear(frames)
        await asyncio.sleep(len(frames) * FRAME_S)
