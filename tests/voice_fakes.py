"""Local fakes of the two streaming voice providers, as their documentation describes
their WebSocket protocols, with faults a test queues connection by connection.

- Deepgram live STT (`/v1/listen`): `Authorization: Token <key>`, the options as query
  parameters, caller audio as binary frames, JSON control messages (`KeepAlive`,
  `Finalize`, `CloseStream`) and `Results` messages back; a `Finalize` is answered by a
  final result marked `from_finalize`. Transcripts are handed out one per answered
  `Finalize`, in order (a connection that fails before answering keeps its transcript
  for the next one).
- ElevenLabs multi-context TTS (`/v1/text-to-speech/{voice}/multi-stream-input`):
  `xi-api-key`, a context opened by a message with `voice_settings`, text messages,
  `flush`, `close_context`, `close_socket`; audio comes back word by word as base64
  with its character alignment, then `isFinal` once the context is flushed or closed.

A queued fault applies to one connection: a refusal to the next handshake (HTTP 503),
any other to the next connection that carries a message (one already open included):
drop the socket mid-stream (no close frame, as a lost network does), answer late (slow
first byte) or send a message that is not JSON.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tests.fakes import tone

RATE = 8000
MS_PER_CHAR = 60
HEARD = "i need to move my ozempic refill appointment"
NOT_JSON = '{"type": "Results", "channel": '  # cut off mid-object


@dataclass
class ListenFault:
    """What one Deepgram connection does wrong."""

    refuse: bool = False  # the handshake is answered 503
    drop_after_audio_s: float | None = None  # the socket is lost once this much audio came
    final_delay_s: float = 0.0  # a Finalize is answered this late
    malformed_final: bool = False  # a Finalize is answered with a message that is not JSON


def results(transcript: str, start_s: float, duration_s: float) -> dict:
    """A final `Results` message covering the stream from `start_s` for `duration_s`."""
    words = [
        {"word": w, "start": start_s + 0.1 * i, "end": start_s + 0.1 * i + 0.1,
         "confidence": 0.97, "punctuated_word": w}
        for i, w in enumerate(transcript.split())
    ]
    return {
        "type": "Results", "channel_index": [0, 1], "duration": duration_s, "start": start_s,
        "is_final": True, "speech_final": True, "from_finalize": True,
        "channel": {"alternatives": [
            {"transcript": transcript, "confidence": 0.97, "words": words}
        ]},
        "metadata": {
            "request_id": "5d5f2b3c-0000-4000-8000-000000000000",
            "model_info": {"name": "2-general-nova", "version": "2024-01-09.29447", "arch": "nova-3"},
            "model_uuid": "1dbdfb4d-85b2-4659-9db6-cdd5a3d1ef0f",
        },
    }


@dataclass
class FaultQueue:
    """The faults queued for a fake's next connections, and what they did so far."""

    faults: list = field(default_factory=list)
    opened: int = 0
    refused: int = 0
    dropped: int = 0

    def fail_next(self, *faults) -> None:
        self.faults.extend(faults)

    def refuse_all(self) -> None:
        """The provider is down from now on: every handshake is refused."""
        self.faults = [type(self).fault_type(refuse=True)] * 1000

    async def process_request(self, connection: ServerConnection, _request):
        if self.faults and self.faults[0].refuse:
            self.faults.pop(0)
            self.refused += 1
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "unavailable\n")
        return None

    def _take(self):
        if self.faults and not self.faults[0].refuse:
            return self.faults.pop(0)
        return None


@dataclass
class FakeDeepgramListen(FaultQueue):
    """Deepgram's live transcription socket; `faults` apply to the next connections."""

    fault_type = ListenFault

    transcripts: list[str] = field(default_factory=lambda: [HEARD])
    rate: int = RATE
    path: str = ""
    authorization: str = ""
    audio_bytes: int = 0  # over every connection
    audio_by_connection: list[int] = field(default_factory=list)
    control: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    base_url: str = ""

    async def handle(self, connection: ServerConnection) -> None:
        fault: ListenFault | None = None
        self.opened += 1
        self.path = connection.request.path
        self.authorization = connection.request.headers.get("Authorization", "")
        received, answered_to, faulted_at = 0, 0.0, 0
        index = len(self.audio_by_connection)
        self.audio_by_connection.append(0)
        try:
            async for message in connection:
                if fault is None and (fault := self._take()):
                    faulted_at = received
                if isinstance(message, bytes):
                    received += len(message)
                    self.audio_bytes += len(message)
                    self.audio_by_connection[index] = received
                    if (fault and fault.drop_after_audio_s is not None
                            and received - faulted_at >= fault.drop_after_audio_s * self.rate * 2):
                        self.dropped += 1
                        connection.transport.abort()  # no close frame: a lost network
                        return
                    continue
                kind = json.loads(message).get("type")
                self.control.append(kind)
                if kind == "Finalize":
                    if fault and fault.malformed_final:
                        await connection.send(NOT_JSON)
                        continue
                    await asyncio.sleep(fault.final_delay_s if fault else 0.0)
                    heard_to = received / 2 / self.rate
                    text = self.transcripts[0] if self.transcripts else ""
                    await connection.send(json.dumps(
                        results(text, answered_to, heard_to - answered_to)))
                    if self.transcripts:
                        self.answered.append(self.transcripts.pop(0))
                    answered_to = heard_to
                elif kind == "CloseStream":
                    break
        except ConnectionClosed:
            pass

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query)


@dataclass
class StreamFault:
    """What one ElevenLabs connection does wrong."""

    refuse: bool = False  # the handshake is answered 503
    drop_after_words: int | None = None  # the socket is lost after this many words' audio
    first_byte_delay_s: float = 0.0  # each context's first audio comes this late
    malformed_before_audio: int = 0  # messages that are not JSON, sent before the audio


@dataclass
class FakeElevenLabsStream(FaultQueue):
    """ElevenLabs' multi-context stream; `faults` apply to the next connections."""

    fault_type = StreamFault
    rate: int = RATE
    ms_per_char: int = MS_PER_CHAR  # how long the voice takes per character
    path: str = ""
    api_key: str = ""
    messages: list[dict] = field(default_factory=list)
    audio_sent: bytes = b""
    words_sent: list[str] = field(default_factory=list)
    url: str = ""

    async def handle(self, connection: ServerConnection) -> None:
        fault: StreamFault | None = None
        self.opened += 1
        self.path = connection.request.path
        self.api_key = connection.request.headers.get("xi-api-key", "")
        words_out = 0
        started: set[str] = set()
        try:
            async for raw in connection:
                fault = fault or self._take()
                message = json.loads(raw)
                self.messages.append(message)
                context = message.get("context_id")
                text = message.get("text", "")
                if text.strip() and context:
                    if context not in started and fault:
                        started.add(context)
                        await asyncio.sleep(fault.first_byte_delay_s)
                        for _ in range(fault.malformed_before_audio):
                            await connection.send(NOT_JSON)
                    for word in text.split():
                        if (fault and fault.drop_after_words is not None
                                and words_out >= fault.drop_after_words):
                            self.dropped += 1
                            connection.transport.abort()
                            return
                        await connection.send(json.dumps(self._word(word + " ", context)))
                        words_out += 1
                if message.get("close_context") or message.get("flush"):
                    await connection.send(json.dumps({"isFinal": True, "contextId": context}))
                if message.get("close_socket"):
                    await connection.close()
                    return
        except ConnectionClosed:
            pass

    def _word(self, chars: str, context: str) -> dict:
        audio = tone(len(chars) * self.ms_per_char / 1000, self.rate)
        self.audio_sent += audio
        self.words_sent.append(chars.strip())
        return {
            "audio": base64.b64encode(audio).decode(),
            "alignment": {
                "chars": list(chars),
                "charStartTimesMs": [i * self.ms_per_char for i in range(len(chars))],
                "charDurationsMs": [self.ms_per_char] * len(chars),
            },
            "contextId": context,
        }

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query)


@asynccontextmanager
async def serve_deepgram_live(fake: FakeDeepgramListen) -> AsyncIterator[FakeDeepgramListen]:
    async with serve(fake.handle, "127.0.0.1", 0, process_request=fake.process_request) as server:
        fake.base_url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        yield fake


@asynccontextmanager
async def serve_elevenlabs(fake: FakeElevenLabsStream) -> AsyncIterator[FakeElevenLabsStream]:
    async with serve(fake.handle, "127.0.0.1", 0, process_request=fake.process_request) as server:
        fake.url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        yield fake
