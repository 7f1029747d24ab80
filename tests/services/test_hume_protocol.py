"""Hume's realtime Expression Measurement, against a local fake of its documented audio protocol.

The provider opens `/v1/expression/audio/realtime` with the key in `X-Hume-Api-Key`, sends
`session.update` (16 kHz s16le mono) before any audio, streams the caller's audio resampled
to 16 kHz in frames of at most 100 ms and no faster than real time, and turns
`measurement.result` messages into prosody readings in our labels. A refused key, a server
that never answers, errors, drops and garbage each end the way the emotion tap expects.
"""

import asyncio
import json
import time
import traceback
from collections.abc import Callable
from contextlib import asynccontextmanager, suppress
from http import HTTPStatus

import pytest
from pipecat.frames.frames import InputAudioRawFrame
from pipecat.tests.utils import SleepFrame, run_test
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from processors.emotion.call_emotion import CallEmotion
from processors.emotion.emotion_tap_processor import EmotionTapProcessor
from processors.emotion.state import EmotionalState
from services.emotion.dimensions import emotion_table
from services.emotion.provider import ProviderUnavailable
from services.emotion.reading import EmotionReading, Source
from services.hume.emotion import (
    HumeAudioProvider,
    hume_labels,
    load_hume_labels,
    sdk_expression_names,
)
from services.vader.emotion import LocalTextProvider
from tests.fakes import tone

pytestmark = pytest.mark.timeout(30)

KEY = "hm-test-key-5f2b9c"
PATH = "/v1/expression/audio/realtime"
PHONE_RATE = 8000
HUME_RATE = 16_000
FRAME_LIMIT = 10 * HUME_RATE * 2  # Hume rejects frames of more than 10 s of audio
MESSAGE_LIMIT = 1_048_576  # and ends the session on any larger message
AUDIO_CONFIG = {"type": "audio/pcm", "encoding": "s16le", "sample_rate": HUME_RATE, "channels": 1}
EXPRESSIONS = [  # descending probability, as Hume sends them
    {"name": "anger", "probability": 0.81},  # one of our labels
    {"name": "pondering", "probability": 0.42},  # mapped in hume_labels.yaml
    {"name": "neutral", "probability": 0.3},  # mapped to nothing
    {"name": "gleeful defiance", "probability": 0.12},  # a name nobody told us about
]


def message(kind: str, **fields) -> str:
    return json.dumps({"type": kind, **fields})


class FakeHumeRealtime:
    """One realtime session per connection, as Hume's audio realtime guide describes it.

    It checks what the client sends (the key, `session.update` before any audio and at
    16 kHz, frame sizes, the send rate) and notes any breach in `problems`. On a session's
    first audio frame it plays that session's script: `measure` (an utterance with one
    measurement), `drop` (the connection dies), `internal_error` / `too_large` /
    `rate_limited` (Hume's error messages) or `garbage`.
    """

    def __init__(self, *scripts: tuple[str, ...]) -> None:
        self.scripts = list(scripts) or [("measure",)]
        self.keys: list[str] = []
        self.updates: list[dict] = []
        self.control: list[str] = []
        self.frame_sizes: list[int] = []
        self.problems: list[str] = []
        self.sessions = 0

    @property
    def audio_bytes(self) -> int:
        return sum(self.frame_sizes)

    def check_handshake(self, connection: ServerConnection, request):
        key = request.headers.get("X-Hume-Api-Key", "")
        self.keys.append(key)
        if request.path != PATH:
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        if key != KEY:  # answered before the service, as Hume's AuthenticationError says
            body = json.dumps({"message": "Invalid API key", "request_id": "req-401"})
            return connection.respond(HTTPStatus.UNAUTHORIZED, body)
        return None

    async def handle(self, connection: ServerConnection) -> None:
        script = self.scripts[self.sessions] if self.sessions < len(self.scripts) else ()
        self.sessions += 1
        session = {"configured_at": None, "audio_s": 0.0, "played": False}
        await connection.send(message(
            "session.created", session_id=f"sess-{self.sessions}", audio=AUDIO_CONFIG,
            measurement_timer_ms=3000))
        with suppress(ConnectionClosed):  # scripts end sessions too
            async for raw in connection:
                if isinstance(raw, bytes):
                    await self._audio(connection, session, raw, script)
                elif not await self._control(connection, session, json.loads(raw)):
                    return

    async def _control(self, connection: ServerConnection, session: dict, data: dict) -> bool:
        kind = data.get("type")
        self.control.append(kind)
        if kind == "session.update":
            if session["audio_s"]:
                self.problems.append("session.update after audio")
            if data.get("audio") != AUDIO_CONFIG:
                self.problems.append(f"audio config {data.get('audio')}")
            self.updates.append(data)
            session["configured_at"] = time.monotonic()
            await connection.send(message("session.updated", audio=data["audio"],
                                          measurement_timer_ms=data["measurement_timer_ms"]))
        elif kind == "session.close":
            await connection.send(closed("client_request"))
            await connection.close()
            return False
        return True

    async def _audio(
        self, connection: ServerConnection, session: dict, frame: bytes, script: tuple[str, ...],
    ) -> None:
        self.frame_sizes.append(len(frame))
        if session["configured_at"] is None:
            self.problems.append("audio before session.update")
        if not frame or len(frame) % 2 or len(frame) > FRAME_LIMIT or len(frame) > MESSAGE_LIMIT:
            self.problems.append(f"frame of {len(frame)} bytes")
        session["audio_s"] += len(frame) / (HUME_RATE * 2)
        elapsed = time.monotonic() - (session["configured_at"] or time.monotonic())
        if session["audio_s"] > elapsed + 0.05:
            self.problems.append(f"{session['audio_s']:.2f} s of audio after {elapsed:.2f} s")
            await connection.send(message("error", code="rate_limited", retryable=True,
                                          message="Audio is arriving faster than real time."))
        if not session["played"]:
            session["played"] = True
            for action in script:
                await ACTIONS[action](connection)


def closed(reason: str) -> str:
    return message("session.closed", session_id="sess", reason=reason,
                   received={"audio_duration_ms": 100, "frames": 1},
                   produced={"utterances": 1, "measurements": 1})


async def measure(connection: ServerConnection) -> None:
    await connection.send(message("utterance.start", utterance_id=0, audio_start_ms=98))
    await connection.send(message(
        "measurement.result", measurement_id=0, utterance_id=0, audio_start_ms=98,
        audio_end_ms=3098, trigger="interval", expressions=EXPRESSIONS,
        voice_attributes=[{"name": "husky", "probability": 0.91}]))
    await connection.send(message("utterance.end", utterance_id=0, audio_start_ms=98,
                                  audio_end_ms=3400))


async def drop(connection: ServerConnection) -> None:
    connection.transport.abort()  # no close frame: the network went away


def session_ending_error(code: str):
    async def send(connection: ServerConnection) -> None:
        await connection.send(message("error", code=code, retryable=False,
                                      message="The session cannot continue."))
        await connection.send(closed("error"))
        await connection.close(1008, code)
    return send


async def rate_limited(connection: ServerConnection) -> None:
    await connection.send(message("error", code="rate_limited", retryable=True,
                                  message="Audio is arriving faster than real time."))


async def garbage(connection: ServerConnection) -> None:
    await connection.send("{not json")
    await connection.send(message("mystery.event", utterance_id=1, audio_start_ms=0))
    await connection.send(message("measurement.result", expressions="lots of anger"))
    await connection.send(b"\x00\x01binary")


ACTIONS = {
    "measure": measure, "drop": drop, "rate_limited": rate_limited, "garbage": garbage,
    "internal_error": session_ending_error("internal_error"),
    "too_large": session_ending_error("message_too_large"),
}


@asynccontextmanager
async def serve_hume(fake: FakeHumeRealtime):
    """Like tests.local_http.serve_websocket, plus the handshake check (a 401 needs it)."""
    async with serve(fake.handle, "127.0.0.1", 0, process_request=fake.check_handshake) as server:
        yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"


@asynccontextmanager
async def silent_tcp_server():
    """Accepts the connection and never says a word (not even the handshake)."""
    writers: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        await reader.read()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        for writer in writers:
            writer.close()
        server.close()


@asynccontextmanager
async def silent_websocket_server():
    """Completes the handshake, then never confirms the session.update."""
    async def listen(connection: ServerConnection) -> None:
        async for _ in connection:
            pass

    async with serve(listen, "127.0.0.1", 0) as server:
        yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"



async def speak(voice: HumeAudioProvider, seconds: float = 0.1) -> list[EmotionReading]:
    return await voice.analyze(tone(seconds, PHONE_RATE), PHONE_RATE, at=time.monotonic())


async def readings_within(voice: HumeAudioProvider, seconds: float = 1.5) -> list[EmotionReading]:
    """Keeps talking until Hume's measurement comes back (it arrives on its own time)."""
    deadline = time.monotonic() + seconds
    readings: list[EmotionReading] = []
    while not readings and time.monotonic() < deadline:
        readings = await speak(voice)
    return readings


async def failure_within(
    voice: HumeAudioProvider, seconds: float = 1.5, heard: list | None = None,
) -> Exception:
    """Keeps talking until analyze raises (readings returned on the way go to `heard`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            readings = await speak(voice)
        except Exception as error:  # noqa: BLE001 - the failure is what we wait for
            return error
        if heard is not None:
            heard.extend(readings)
    raise AssertionError("analyze never raised")


async def eventually(check: Callable[[], bool], seconds: float = 1.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return check()


# --- a session ---------------------------------------------------------------------------


async def test_a_measurement_becomes_a_prosody_reading_in_our_labels():
    hume = FakeHumeRealtime(("measure",))
    async with serve_hume(hume) as url:
        voice = HumeAudioProvider(KEY, base_url=url)
        await voice.connect()
        before = time.monotonic()
        first = await voice.analyze(tone(0.5, PHONE_RATE), PHONE_RATE, at=before)
        readings = first or await readings_within(voice)
        await voice.close()

    [reading] = readings
    assert reading.source is Source.PROSODY and reading.provider == "hume"
    assert reading.scores["Anger"] == 0.81 and reading.scores["Contemplation"] == 0.42
    assert before <= reading.at <= time.monotonic()
    state = EmotionalState()
    state.add(reading)
    assert state.snapshot().dominant == "Anger"
    assert state.unknown_labels == 2  # neutral and gleeful defiance: counted, never guessed
    assert voice.unknown_names == {"neutral": 1, "gleeful defiance": 1}


async def test_the_session_is_configured_first_and_phone_audio_arrives_at_16_khz():
    hume = FakeHumeRealtime(("measure",))
    async with serve_hume(hume) as url:
        voice = HumeAudioProvider(KEY, base_url=url, measurement_interval_ms=5000)
        await voice.connect()
        await voice.analyze(tone(0.5, PHONE_RATE), PHONE_RATE, at=0.0)
        await voice.close()
        assert await eventually(lambda: "session.close" in hume.control)

    assert hume.keys == [KEY]
    assert hume.updates == [{"type": "session.update", "audio": AUDIO_CONFIG,
                             "measurement_timer_ms": 5000}]
    assert hume.control == ["session.update", "session.close"]
    assert hume.audio_bytes == 2 * int(0.5 * PHONE_RATE) * 2  # twice the 8 kHz bytes
    assert max(hume.frame_sizes) <= HUME_RATE * 2 // 10  # 100 ms frames
    assert hume.problems == []  # nothing early, nothing too large, never ahead of real time


async def test_16_khz_audio_is_sent_as_it_is():
    hume = FakeHumeRealtime(("measure",))
    async with serve_hume(hume) as url:
        voice = HumeAudioProvider(KEY, base_url=f"{url.replace('ws://', 'http://')}/")
        await voice.connect()
        audio = tone(0.25, HUME_RATE)
        await voice.analyze(audio, HUME_RATE, at=0.0)
        await voice.close()
    assert hume.audio_bytes == len(audio) and hume.problems == []


# --- failing to connect ------------------------------------------------------------------


async def test_a_rejected_key_is_provider_unavailable_and_the_reason_never_holds_the_key():
    hume = FakeHumeRealtime()
    wrong_key = "hm-revoked-key-77aa01"
    async with serve_hume(hume) as url:
        voice = HumeAudioProvider(wrong_key, base_url=url)
        with pytest.raises(ProviderUnavailable) as raised:
            await voice.connect()
        await voice.close()

    assert hume.keys == [wrong_key]  # the key went in the X-Hume-Api-Key header
    assert "401" in str(raised.value) and "key" in str(raised.value).lower()
    printed = "".join(traceback.format_exception(raised.value))
    assert wrong_key not in printed and wrong_key not in repr(voice)
    assert hume.sessions == 0


@pytest.mark.parametrize("server", [silent_tcp_server, silent_websocket_server],
                         ids=["no handshake", "no session.updated"])
async def test_a_server_that_never_answers_is_provider_unavailable_within_the_timeout(server):
    async with server() as url:
        voice = HumeAudioProvider(KEY, base_url=url, connect_timeout_s=0.3)
        started_at = time.monotonic()
        with pytest.raises(ProviderUnavailable, match="no answer within 0.3 s"):
            await voice.connect()
        waited = time.monotonic() - started_at
        await voice.close()
    assert waited < 1.0


async def test_nothing_listening_is_provider_unavailable():
    async with silent_tcp_server() as url:
        pass  # the port is closed again
    voice = HumeAudioProvider(KEY, base_url=url, connect_timeout_s=0.5)
    with pytest.raises(ProviderUnavailable, match="unreachable"):
        await voice.connect()


# --- failing mid-session -----------------------------------------------------------------


@pytest.mark.parametrize(("script", "expected"), [
    ("drop", ConnectionError),
    ("internal_error", RuntimeError),
    ("too_large", ProviderUnavailable),
])
async def test_a_failure_mid_session_is_raised_by_the_next_analyze(script, expected):
    hume = FakeHumeRealtime((script,))
    async with serve_hume(hume) as url:
        voice = HumeAudioProvider(KEY, base_url=url)
        await voice.connect()
        error = await failure_within(voice)
        await voice.close()
        await voice.close()  # twice: still fine

    assert isinstance(error, expected)
    if expected is not ProviderUnavailable:
        assert not isinstance(error, ProviderUnavailable)  # transient: the breaker counts it
    assert KEY not in str(error)


async def test_after_a_dropped_connection_the_next_analyze_opens_a_new_session():
    hume = FakeHumeRealtime(("drop",), ("measure",))
    async with serve_hume(hume) as url:
        voice = HumeAudioProvider(KEY, base_url=url)
        await voice.connect()
        assert isinstance(await failure_within(voice), ConnectionError)
        readings = await readings_within(voice)
        await voice.close()

    assert readings and readings[0].scores["Anger"] == 0.81
    assert hume.sessions == 2 and len(hume.updates) == 2


async def test_a_retryable_error_is_counted_once_and_the_session_goes_on():
    hume = FakeHumeRealtime(("rate_limited", "measure"))
    async with serve_hume(hume) as url:
        voice = HumeAudioProvider(KEY, base_url=url)
        await voice.connect()
        heard: list[EmotionReading] = []
        error = await failure_within(voice, heard=heard)
        heard += await speak(voice)  # no second failure
        heard += await speak(voice)
        await voice.close()

    assert type(error) is RuntimeError and "rate_limited" in str(error)
    assert [r.scores["Anger"] for r in heard] == [0.81]  # sent after the error, same session
    assert hume.sessions == 1


async def test_garbage_and_unknown_messages_neither_crash_nor_become_readings():
    hume = FakeHumeRealtime(("garbage", "measure"))
    async with serve_hume(hume) as url:
        voice = HumeAudioProvider(KEY, base_url=url)
        await voice.connect()
        readings = await readings_within(voice)
        readings += await speak(voice)
        await voice.close()

    assert [r.scores["Anger"] for r in readings] == [0.81]  # only the real measurement
    assert voice.ignored_messages >= 3


async def test_close_is_safe_when_never_connected():
    voice = HumeAudioProvider(KEY, base_url="ws://127.0.0.1:9")
    await voice.close()
    await voice.close()


# --- the label mapping ----------------------------------------------------------------


def test_the_mapping_file_loads_and_every_target_is_one_of_our_labels():
    labels = hume_labels()
    ours = set(emotion_table().dimensions)
    assert all(target in ours for target in labels.mapping.values() if target is not None)
    assert all(labels.label(name) in ours for name in labels.exact)
    assert labels.label("Pondering ") == "Contemplation"
    assert labels.label("surprise (positive)") == "Surprise (positive)"
    assert labels.label("neutral") is None and labels.label("never heard of it") is None
    assert sdk_expression_names() is None  # SDK 0.1.0 lists no names: nothing to check against


def test_a_mapping_to_a_label_we_do_not_have_is_refused(tmp_path):
    path = tmp_path / "hume_labels.yaml"
    path.write_text("documented_count: 415\nexact: [joy]\nnames:\n  glee: Happiness\n")
    with pytest.raises(ValueError, match="Happiness"):
        load_hume_labels(path)


# --- with the emotion tap ------------------------------------------------------------


async def test_the_emotion_tap_hears_the_caller_through_hume(session, writer):
    hume = FakeHumeRealtime(("measure",))
    async with serve_hume(hume) as url:
        emotion = CallEmotion()
        tap = EmotionTapProcessor(session, emotion, audio=HumeAudioProvider(KEY, base_url=url),
                         text=LocalTextProvider(), segment_s=0.1, request_timeout_s=5)
        frames = [InputAudioRawFrame(tone(0.02, PHONE_RATE), PHONE_RATE, 1) for _ in range(20)]
        await run_test(tap, frames_to_send=[*frames, SleepFrame(0.6)])
        assert await eventually(lambda: "session.close" in hume.control)

    assert emotion.snapshot().dominant == "Anger"
    assert writer.events("emotion")[0].data["dominant"] == "Anger"
    assert emotion.summary.provider_health["audio"] == "closed"
    assert hume.sessions == 1 and hume.problems == []
