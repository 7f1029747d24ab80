"""How the caller sounds, measured by Hume's realtime Expression Measurement API.

Why: the offline analyzer hears arousal only (pitch, loudness, rate); Hume's audio model
scores hundreds of expressions in speech, so a call with HUME_API_KEY gets the caller's
emotions, not just their energy. The legacy streaming API (`hume` package,
`expression_measurement`) is switched off; this uses its replacement through its own SDK,
`hume_expression_measurement` 0.1.0.

One realtime session per call, kept open: `connect()` opens it and configures 16 kHz s16le
mono; `analyze()` resamples each 2 s segment of caller audio to 16 kHz, streams it in
100 ms binary frames no faster than real time, and returns the measurements that arrived
since the last call (Hume measures every 3 s of *speech*, so most calls return nothing);
`close()` ends the session. A background task receives; a failure it sees is raised by the
next `analyze()` — `ProviderUnavailable` when it can only fail again (auth, billing, a
config Hume rejects), a plain `RuntimeError`/`ConnectionError` otherwise, so the tap's
circuit breaker counts it. The `analyze()` after a transient failure opens a new session.

Labels: a Hume name equal to one of our 53 labels (case-insensitive) maps by itself; other
names go through data/hume_labels.yaml (synonyms, or null). A name neither knows is kept in
the reading under its own name: it carries no valence or arousal and the state counts it
(`unknown_labels`), never guessed.

Verified in the SDK source (site-packages/hume_expression_measurement, 0.1.0):
- endpoint: audio/client.py `AsyncAudioClient.connect` opens
  `environment.production + "/v1/expression/audio/realtime"`; environment.py PRODUCTION is
  `wss://api.cloud.hume.ai` (a custom `ExpressionMeasurementClientEnvironment(base=,
  production=)` points it at a local fake). The socket is websockets' *legacy* client,
  whose 10 s close timeout the SDK does not expose: cancelled mid-handshake against a
  silent server it waits that long, so a handshake we give up on is left to finish in a
  task of its own (`_detached`) and `connect()` returns at its timeout. That client also
  refuses to send once a close frame is in while earlier messages still wait to be read,
  so after a failed send the receiver drains first: an `error` explains the close.
- auth: core/client_wrapper.py `get_headers` sends the key as `X-Hume-Api-Key` on the
  handshake. A refused handshake raises `core.api_error.ApiError` with the HTTP status
  (401: "Websocket initialized with invalid credentials."); its str() holds the response
  headers, so reasons here are built from the status alone, never the error text.
- client → server: `send_audio_session_update(AudioSessionUpdate)` sends
  `{"type": "session.update", "audio": {"type": "audio/pcm", "encoding": "s16le",
  "sample_rate": 16000, "channels": 1}, "measurement_timer_ms": N}` (omitted fields reset to
  defaults; after the first frame it ends the session with `config_invalid`);
  `send_audio_frame(bytes)` a binary frame; `send_audio_session_close(SessionClose)`
  `{"type": "session.close"}`. Limits (connect docstring): 10 s (320 KB) per frame, 1 MiB
  per message (ends the session: `message_too_large`), empty or odd-length frames get
  `invalid_audio_frame`, faster than 1 s of audio per second gets `rate_limited`.
- server → client (audio/socket_client.py union, types/*.py): `session.created`,
  `session.updated` (audio, measurement_timer_ms), `utterance.start`, `measurement.result`
  (measurement_id, utterance_id, audio_start_ms, audio_end_ms, trigger, expressions
  [{name, probability}], voice_attributes), `utterance.end`, `error` (code, message,
  retryable; codes invalid_audio_frame, invalid_image_frame, message_invalid,
  rate_limited, config_invalid, message_too_large, internal_error; `retryable` is false for
  every error that ends the session), `session.closed` (reason client_request,
  server_shutdown, idle_timeout or error).
- parsing: `recv()` raises `json.JSONDecodeError` on text that is not JSON, returns the raw
  dict when no model fits, and — every model's `type` being `Literal[...] | Any` — can hand
  back an unknown type as whichever model its fields fit (tried: an unknown type with
  utterance fields comes back as `UtteranceStart`). So messages are dispatched on their
  `type` string, never on the model class alone.
- close codes (reconnect/_policy.py): a session-ending error closes with 1008; 1001, 1006
  (no close frame), 1011, 1012, 1013 are worth a new connection, as is 1008 after an audio
  `internal_error`; other 4xx handshake statuses than 408/429 fail the same way every time.
- billing and quota: not named anywhere in the SDK. What it does say: a 401 body is
  `AuthenticationError`; other refusals carry `ErrorBody` with codes such as `forbidden`
  (403) and `server_busy`; its reconnect policy retries only 408/429 among 4xx. So 401,
  402 and 403 at the handshake are permanent here, 429 and 5xx are transient.
- names: types/audio_expression_name.py is plain `str` — the SDK lists no names (see
  data/hume_labels.yaml for where the names came from).
"""

from __future__ import annotations

import asyncio
import json
import time
import typing
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml
from hume_expression_measurement import (
    AsyncExpressionMeasurementClient,
    AudioConfigUpdate,
    AudioMeasurementResult,
    AudioSessionUpdate,
    AudioSessionUpdated,
    Error,
    ExpressionMeasurementClientEnvironment,
    SessionClose,
)
from hume_expression_measurement.audio.socket_client import AsyncAudioSocketClient
from hume_expression_measurement.core.api_error import ApiError
from hume_expression_measurement.types.audio_expression_name import AudioExpressionName
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, model_validator
from websockets.exceptions import ConnectionClosed, WebSocketException

from services.emotion.dimensions import emotion_table
from services.emotion.provider import ProviderUnavailable
from services.emotion.reading import EmotionReading, Source

LABELS_FILE = Path(__file__).resolve().parent / "data" / "hume_labels.yaml"

SAMPLE_RATE = 16_000
BYTES_PER_S = SAMPLE_RATE * 2  # s16le mono
FRAME_BYTES = BYTES_PER_S // 10  # 100 ms, as Hume recommends
MAX_FRAME_BYTES = 10 * BYTES_PER_S  # 10 s of audio: Hume rejects longer frames
MAX_MESSAGE_BYTES = 1_048_576  # a larger message ends the session
MEASUREMENT_MS_RANGE = (3000, 10_000)
MAX_PENDING_READINGS = 16
CLOSE_TIMEOUT_S = 1.0

# Errors that would come back on every new session: our request, not Hume's state.
PERMANENT_ERROR_CODES = frozenset({"config_invalid", "message_invalid", "message_too_large"})
# Handshake statuses that fail the same way every time (the SDK retries only 408 and 429).
PERMANENT_STATUSES = {
    401: "API key rejected",
    402: "payment required (billing)",
    403: "access forbidden (plan, billing or permission)",
}
INFORMATIONAL = frozenset({"session.created", "session.updated", "utterance.start",
                           "utterance.end"})
_T = typing.TypeVar("_T")

assert FRAME_BYTES <= MAX_FRAME_BYTES < MAX_MESSAGE_BYTES


# --- label mapping -------------------------------------------------------------------


def sdk_expression_names() -> frozenset[str] | None:
    """Hume's audio expression names as the SDK lists them; None when it lists none
    (0.1.0 types the name as plain `str`)."""
    return frozenset(_literal_strings(AudioExpressionName)) or None


def _literal_strings(annotation: object) -> Iterator[str]:
    if typing.get_origin(annotation) is typing.Literal:
        yield from (arg for arg in typing.get_args(annotation) if isinstance(arg, str))
        return
    for arg in typing.get_args(annotation):
        yield from _literal_strings(arg)


class _HumeLabelsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    documented_count: int = Field(gt=0)
    exact: list[str]
    names: dict[str, str | None]

    @model_validator(mode="after")
    def _consistent(self) -> _HumeLabelsFile:
        table = emotion_table()
        every = [*self.exact, *self.names]
        problems = [f"{n!r} is not a lowercase Hume name" for n in every
                    if not n or n != n.strip().lower()]
        problems += [f"exact {n!r} is none of our labels" for n in self.exact
                     if table.label(n) is None]
        problems += [f"{n!r} needs no entry: it is an exact match" for n in self.names
                     if table.label(n) is not None]
        problems += [f"{n!r} → {t!r}: not one of our labels" for n, t in self.names.items()
                     if t is not None and t not in table.dimensions]
        problems += [f"{n!r} is listed twice" for n in set(self.exact) & set(self.names)]
        if len(set(every)) > self.documented_count:
            problems.append(f"{len(set(every))} names, but Hume documents {self.documented_count}")
        sdk = sdk_expression_names()
        if sdk is not None:
            problems += [f"{n!r} is not in the SDK's list" for n in sorted(set(every) - sdk)]
        if problems:
            raise ValueError("; ".join(problems))
        return self


@dataclass(frozen=True)
class HumeLabels:
    exact: frozenset[str]  # verified names that equal one of our labels
    mapping: dict[str, str | None]  # other verified names → our label, or None (unknown)
    documented_count: int

    def label(self, name: str) -> str | None:
        """Our canonical label for a Hume name; None: not one we know (counted, not guessed)."""
        key = name.strip().lower()
        return emotion_table().label(key) or self.mapping.get(key)


def load_hume_labels(path: Path = LABELS_FILE) -> HumeLabels:
    data = _HumeLabelsFile.model_validate(yaml.safe_load(path.read_text()))
    return HumeLabels(frozenset(data.exact), dict(data.names), data.documented_count)


@lru_cache(maxsize=1)
def hume_labels() -> HumeLabels:
    return load_hume_labels()


def scores_of(result: AudioMeasurementResult, unknown: Counter[str]) -> dict[str, float]:
    """Our labels' scores; a name we do not know stays under its own name (and is counted)."""
    labels = hume_labels()
    scores: dict[str, float] = {}
    for expression in result.expressions:
        name, probability = str(expression.name), float(expression.probability)
        if not 0.0 <= probability <= 1.0:
            continue
        label = labels.label(name)
        if label is None:
            label = name.strip().lower()
            if not unknown[label]:
                logger.debug(f"hume: expression {label!r} is none of our labels (counted)")
            unknown[label] += 1
        scores[label] = max(probability, scores.get(label, 0.0))
    return scores


# --- audio ---------------------------------------------------------------------------


def to_pcm16k(pcm: bytes, sample_rate: int) -> bytes:
    """s16le mono at any rate → 16 kHz, by linear interpolation (cheap; phone audio has
    nothing above 4 kHz to lose)."""
    if sample_rate <= 0:
        raise ValueError(f"sample rate {sample_rate}")
    samples = np.frombuffer(pcm[: len(pcm) - len(pcm) % 2], dtype="<i2")
    if sample_rate == SAMPLE_RATE or samples.size == 0:
        return samples.tobytes()
    count = samples.size * SAMPLE_RATE // sample_rate
    positions = np.arange(count) * (sample_rate / SAMPLE_RATE)
    resampled = np.interp(positions, np.arange(samples.size), samples.astype(np.float64))
    return np.clip(np.rint(resampled), -32768, 32767).astype("<i2").tobytes()


def frames_of(pcm16k: bytes) -> Iterator[bytes]:
    for start in range(0, len(pcm16k), FRAME_BYTES):
        yield pcm16k[start:start + FRAME_BYTES]


# --- the provider --------------------------------------------------------------------


@dataclass(frozen=True)
class _Failure:
    """What went wrong, worded without the key or Hume's free text."""

    reason: str
    permanent: bool = False
    kind: type[Exception] = RuntimeError

    def error(self) -> Exception:
        return ProviderUnavailable(self.reason) if self.permanent else self.kind(self.reason)


class _OpenFailed(Exception):
    def __init__(self, failure: _Failure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


@dataclass
class _Session:
    socket: AsyncAudioSocketClient
    stack: AsyncExitStack
    started: float  # monotonic: when Hume confirmed the configuration
    receiver: asyncio.Task | None = None
    sent_s: float = 0.0  # audio streamed so far (the send rate is bounded by real time)
    ending: bool = False  # a session-ending message arrived: the socket is going away

    @property
    def alive(self) -> bool:
        return not self.ending and self.receiver is not None and not self.receiver.done()


def environment_for(base_url: str | None) -> ExpressionMeasurementClientEnvironment:
    """Hume's hosts, or a stand-in at `base_url` (http(s):// or ws(s)://, no path)."""
    if base_url is None:
        return ExpressionMeasurementClientEnvironment.PRODUCTION
    root = base_url.rstrip("/")
    scheme = root.partition("://")[0]
    if scheme not in ("http", "https", "ws", "wss"):
        raise ValueError("Hume base URL must start with http(s):// or ws(s)://")
    websocket = "ws" + root[4:] if scheme.startswith("http") else root
    http = "http" + root[2:] if scheme.startswith("ws") else root
    return ExpressionMeasurementClientEnvironment(base=http, production=websocket)


class HumeAudioProvider:
    """One call's Hume realtime session (the emotion tap owns one per call)."""

    name = "hume"

    def __init__(
        self, api_key: str, *, base_url: str | None = None,
        measurement_interval_ms: int = 3000, connect_timeout_s: float = 5.0,
    ) -> None:
        low, high = MEASUREMENT_MS_RANGE
        if not low <= measurement_interval_ms <= high:
            raise ValueError(f"measurement interval must be {low}–{high} ms")
        if not api_key:
            raise ValueError("Hume needs an API key")
        self._api_key = api_key
        self._environment = environment_for(base_url)
        self._interval_ms = measurement_interval_ms
        self._connect_timeout_s = connect_timeout_s
        self._session: _Session | None = None
        self._readings: deque[EmotionReading] = deque(maxlen=MAX_PENDING_READINGS)
        self._failure: _Failure | None = None  # seen by the receiver, not yet raised
        self._permanent: _Failure | None = None  # raised by every call from now on
        self._closed = False
        self.unknown_names: Counter[str] = Counter()
        self.measurements = 0
        self.dropped_readings = 0
        self.ignored_messages = 0
        self.sessions = 0

    def __repr__(self) -> str:  # never the key
        return f"HumeAudioProvider(host={self._environment.production!r})"

    # --- the AudioEmotionProvider interface ----------------------------------------------

    async def connect(self) -> None:
        """Opens the session; any failure is `ProviderUnavailable` (the call goes on without)."""
        if self._permanent is not None:
            raise self._permanent.error()
        if self._session is not None:
            return
        try:
            self._session = await self._open()
        except _OpenFailed as failed:
            raise ProviderUnavailable(failed.failure.reason) from None

    async def analyze(self, pcm: bytes, sample_rate: int, *, at: float) -> list[EmotionReading]:
        """Streams one segment; returns the readings that arrived since the last call.

        `at` is not needed: a reading is stamped when its measurement arrives.
        """
        if self._closed:
            raise RuntimeError("hume: provider closed")
        await self._raise_failure()
        session = await self._live_session()
        try:
            await self._stream(session, to_pcm16k(pcm, sample_rate))
        except ConnectionClosed as closed:
            failure = await self._settle(session) or _Failure(
                f"hume: connection closed ({_close_code(closed)})", kind=ConnectionError)
            raise failure.error() from None
        return self._take_readings()

    async def close(self) -> None:
        """Ends the session (session.close, then the socket). Safe twice, and unconnected."""
        self._closed = True
        await self._drop_session(polite=True)

    # --- opening and closing -----------------------------------------------------------

    def _client(self) -> AsyncExpressionMeasurementClient:
        return AsyncExpressionMeasurementClient(
            api_key=self._api_key, environment=self._environment)

    def _session_update(self) -> AudioSessionUpdate:
        return AudioSessionUpdate(
            type="session.update",
            audio=AudioConfigUpdate(type="audio/pcm", encoding="s16le",
                                    sample_rate=SAMPLE_RATE, channels=1),
            measurement_timer_ms=self._interval_ms,
        )

    async def _open(self) -> _Session:
        stack = AsyncExitStack()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                socket = await _detached(stack.enter_async_context(self._client().audio.connect()))
                await socket.send_audio_session_update(self._session_update())
                await _configured(socket)
        except asyncio.CancelledError:
            await _close_quietly(stack)
            raise
        except Exception as error:  # noqa: BLE001 - every way of failing is a reason
            await _close_quietly(stack)
            raise _OpenFailed(_open_failure(error, self._connect_timeout_s)) from None
        session = _Session(socket, stack, started=time.monotonic())
        session.receiver = asyncio.create_task(self._receive(session), name="hume-receive")
        self.sessions += 1
        logger.debug(f"hume: realtime session {self.sessions} open")
        return session

    async def _live_session(self) -> _Session:
        """The open session; after a transient failure, a new one."""
        if self._session is not None and self._session.alive:
            return self._session
        await self._drop_session()
        try:
            self._session = await self._open()
        except _OpenFailed as failed:
            if failed.failure.permanent:
                self._permanent = failed.failure
            raise failed.failure.error() from None
        return self._session

    async def _drop_session(self, *, polite: bool = False) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        if session.receiver is not None:
            session.receiver.cancel()
            await asyncio.gather(session.receiver, return_exceptions=True)
        if polite and not session.ending:
            with suppress(Exception):
                await asyncio.wait_for(session.socket.send_audio_session_close(
                    SessionClose(type="session.close")), CLOSE_TIMEOUT_S)
        await _close_quietly(session.stack)

    # --- sending -------------------------------------------------------------------------

    async def _stream(self, session: _Session, pcm16k: bytes) -> None:
        """100 ms frames, never ahead of real time since the session started."""
        for frame in frames_of(pcm16k):
            seconds = len(frame) / BYTES_PER_S
            ahead = session.sent_s + seconds - (time.monotonic() - session.started)
            if ahead > 0:
                await asyncio.sleep(ahead)
            await session.socket.send_audio_frame(frame)
            session.sent_s += seconds

    async def _settle(self, session: _Session) -> _Failure | None:
        """After a failed send: lets the receiver read what Hume sent before it closed (an
        `error` explains the close), then drops the session; returns what went wrong."""
        if session.receiver is not None:
            await asyncio.wait({session.receiver}, timeout=CLOSE_TIMEOUT_S)
        await self._drop_session()
        failure, self._failure = self._failure, None
        return self._permanent or failure

    def _take_readings(self) -> list[EmotionReading]:
        readings = list(self._readings)
        self._readings.clear()
        return readings

    async def _raise_failure(self) -> None:
        if self._permanent is not None:
            await self._drop_session()
            raise self._permanent.error()
        failure, self._failure = self._failure, None
        if failure is None:
            return
        if self._session is not None and not self._session.alive:
            await self._drop_session()
        raise failure.error()

    # --- receiving -----------------------------------------------------------------------

    async def _receive(self, session: _Session) -> None:
        while True:
            try:
                message = await session.socket.recv()
            except json.JSONDecodeError:
                self._ignore("not JSON")
                continue
            except ConnectionClosed as closed:
                self._on_closed(session, closed)
                return
            except Exception as error:  # noqa: BLE001 - the SDK failed: treat as a drop
                session.ending = True
                self._fail(_Failure(f"hume: receive failed ({type(error).__name__})",
                                    kind=ConnectionError))
                return
            try:
                self._dispatch(session, message)
            except Exception as error:  # noqa: BLE001 - one odd message never ends the session
                self._ignore(f"unreadable ({type(error).__name__})")

    def _dispatch(self, session: _Session, message: object) -> None:
        kind = _type_of(message)
        if kind == "measurement.result" and isinstance(message, AudioMeasurementResult):
            self._on_measurement(message)
        elif kind == "error" and isinstance(message, Error):
            self._on_error(session, message)
        elif kind == "session.closed":
            session.ending = True
            reason = getattr(message, "reason", None) or "unknown"
            self._fail(_Failure(f"hume: session closed by the server ({reason})",
                                kind=ConnectionError))
        elif kind not in INFORMATIONAL:
            self._ignore(f"type {str(kind)[:40]!r}")

    def _on_measurement(self, result: AudioMeasurementResult) -> None:
        self.measurements += 1
        scores = scores_of(result, self.unknown_names)
        if not scores:
            return  # nothing judged present in this window
        if len(self._readings) == self._readings.maxlen:
            self.dropped_readings += 1
        self._readings.append(EmotionReading(
            Source.PROSODY, scores, at=time.monotonic(), provider="hume"))

    def _on_error(self, session: _Session, error: Error) -> None:
        code = str(error.code)[:40]
        logger.warning(f"hume: error {code} (retryable={error.retryable})")
        if code in PERMANENT_ERROR_CODES:
            session.ending = True
            self._fail(_Failure(f"hume: {code}", permanent=True))
        elif not error.retryable:
            session.ending = True
            self._fail(_Failure(f"hume: {code} (session ended)"))
        else:
            self._fail(_Failure(f"hume: {code}"))  # the session goes on

    def _on_closed(self, session: _Session, closed: ConnectionClosed) -> None:
        session.ending = True
        self._fail(_Failure(f"hume: connection closed ({_close_code(closed)})",
                            kind=ConnectionError))

    def _fail(self, failure: _Failure) -> None:
        """Keeps the first failure for the next analyze(); a permanent one wins."""
        if failure.permanent:
            self._permanent = failure
        if self._failure is None or failure.permanent:
            self._failure = failure

    def _ignore(self, what: str) -> None:
        self.ignored_messages += 1
        logger.debug(f"hume: ignored a message ({what})")


# --- helpers -------------------------------------------------------------------------


async def _configured(socket: AsyncAudioSocketClient) -> None:
    """Waits for `session.updated` (skipping `session.created`); an `error` is a refusal."""
    while True:
        try:
            message = await socket.recv()
        except json.JSONDecodeError:
            continue
        kind = _type_of(message)
        if kind == "session.updated" and isinstance(message, AudioSessionUpdated):
            if message.audio.sample_rate != SAMPLE_RATE:
                raise _OpenFailed(_Failure("hume: session configured at another sample rate",
                                           permanent=True))
            return
        if kind == "error" and isinstance(message, Error):
            code = str(message.code)[:40]
            raise _OpenFailed(_Failure(f"hume: session.update refused ({code})",
                                       permanent=code in PERMANENT_ERROR_CODES))


def _open_failure(error: Exception, timeout_s: float) -> _Failure:
    if isinstance(error, _OpenFailed):
        return error.failure
    if isinstance(error, TimeoutError):
        return _Failure(f"hume: no answer within {timeout_s:g} s", kind=TimeoutError)
    if isinstance(error, ApiError):
        status = error.status_code or 0
        if status in PERMANENT_STATUSES:
            return _Failure(f"hume: {PERMANENT_STATUSES[status]} ({status})", permanent=True)
        if status == 429:
            return _Failure("hume: rate or quota limit (429)", kind=ConnectionError)
        return _Failure(f"hume: handshake refused ({status})", kind=ConnectionError)
    if isinstance(error, ConnectionClosed):
        return _Failure(f"hume: closed during setup ({_close_code(error)})", kind=ConnectionError)
    if isinstance(error, (OSError, WebSocketException)):
        return _Failure(f"hume: unreachable ({type(error).__name__})", kind=ConnectionError)
    return _Failure(f"hume: setup failed ({type(error).__name__})", kind=ConnectionError)


async def _detached(awaitable: typing.Awaitable[_T]) -> _T:
    """Awaits in a task of its own, left to finish by itself when we give up: cancelled
    mid-handshake, the SDK's (legacy) websockets client waits up to its 10 s close timeout
    for a silent server, and the SDK offers no way to shorten it."""
    task = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_forget)
        raise


def _forget(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a late failure of an abandoned handshake is not news


async def _close_quietly(stack: AsyncExitStack) -> None:
    try:
        await asyncio.wait_for(stack.aclose(), CLOSE_TIMEOUT_S)
    except Exception as error:  # noqa: BLE001 - closing is best effort
        logger.debug(f"hume: close: {type(error).__name__}")


def _type_of(message: object) -> object:
    if isinstance(message, dict):
        return message.get("type")
    if isinstance(message, bytes | bytearray):
        return "binary"
    return getattr(message, "type", None)


def _close_code(closed: ConnectionClosed) -> str:
    if closed.rcvd is None:
        return "code 1006, no close frame"
    return f"code {closed.rcvd.code}"
