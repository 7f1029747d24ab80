"""The emotion tap: caller audio and final transcripts to the emotion providers, beside
the voice path and never on it.

Every frame is pushed on first, untouched; then audio is appended to the current 2 s
segment and a full segment goes into a bounded queue (5 segments; final transcripts: 20).
A full queue drops its *oldest* item and counts it — newer audio says more about how
the caller is now. Two background workers drain the queues into the providers, each
behind its own circuit breaker, with a timeout per request; what they return updates
the call's emotional state. A provider that cannot connect (bad key, billing, no answer)
disables its channel for the call; every change is a `emotion_provider` event, and a
change of dominant emotion an `emotion` event. Also noted here for the behavioural
signals: barge-ins (an interruption while the agent speaks) and long silences (agent
done → caller's first words).
"""

from __future__ import annotations

import asyncio
from collections import deque

from loguru import logger
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    CancelFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    InterruptionFrame,
    StartFrame,
    TranscriptionFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from call.call_session import CallSession
from processors.emotion.breaker import BreakerState, CircuitBreaker
from processors.emotion.call_emotion import CallEmotion
from services.emotion.provider import AudioEmotionProvider, ProviderUnavailable, TextEmotionProvider
from services.emotion.reading import EmotionReading, Source

SEGMENT_S = 2.0
MAX_AUDIO_SEGMENTS = 5
MAX_TEXT_ITEMS = 20
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 3.0


class BoundedQueue:
    """A queue that never makes its producer wait: when full, the oldest item goes."""

    def __init__(self, size: int) -> None:
        self._items: deque = deque(maxlen=size)
        self._ready = asyncio.Event()
        self.dropped = 0

    def put(self, item: object) -> None:
        if len(self._items) == self._items.maxlen:
            self.dropped += 1
        self._items.append(item)
        self._ready.set()

    async def get(self) -> object:
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()

    def __len__(self) -> int:
        return len(self._items)


class EmotionTapProcessor(FrameProcessor):
    def __init__(
        self, session: CallSession, emotion: CallEmotion, *, audio: AudioEmotionProvider,
        text: TextEmotionProvider, segment_s: float = SEGMENT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S, **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._emotion = emotion
        self._audio_provider = audio
        self._text_provider = text
        self._segment_s = segment_s
        self._timeout_s = request_timeout_s
        self._audio = BoundedQueue(MAX_AUDIO_SEGMENTS)
        self._text = BoundedQueue(MAX_TEXT_ITEMS)
        self._buffer = bytearray()
        self._buffer_rate = 0
        self._workers: list[asyncio.Task] = []
        self._breakers = {
            "audio": emotion.breaker("audio", self._reporter("audio", audio.name)),
            "text": emotion.breaker("text", self._reporter("text", text.name)),
        }
        self._bot_speaking = False
        self._bot_stopped_at: float | None = None
        self._last_dominant: str | None = None

    @property
    def dropped(self) -> int:
        return self._audio.dropped + self._text.dropped

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)  # first: the voice path never waits here
        if isinstance(frame, InputAudioRawFrame):
            self._add_audio(frame)
        elif isinstance(frame, TranscriptionFrame):
            self._on_words(frame.text)
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._bot_speaking = True
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
            self._bot_stopped_at = self._emotion.clock()
        elif isinstance(frame, InterruptionFrame) and self._bot_speaking:
            self._emotion.state.note_barge_in()
        elif isinstance(frame, StartFrame):
            self._workers = [
                self.create_task(self._audio_worker(), name="emotion-audio"),
                self.create_task(self._text_worker(), name="emotion-text"),
            ]
        elif isinstance(frame, (EndFrame, CancelFrame)):
            await self._stop()

    async def cleanup(self) -> None:
        await super().cleanup()
        await self._stop()

    # --- producers (on the frame path: constant time) ----------------------------------

    def _add_audio(self, frame: InputAudioRawFrame) -> None:
        if self._buffer_rate != frame.sample_rate:
            self._buffer.clear()
            self._buffer_rate = frame.sample_rate
        self._buffer.extend(frame.audio)
        if len(self._buffer) >= int(self._segment_s * frame.sample_rate) * 2:
            self._audio.put((bytes(self._buffer), frame.sample_rate, self._emotion.clock()))
            self._buffer.clear()

    def _on_words(self, text: str) -> None:
        if not text.strip():
            return
        if self._bot_stopped_at is not None:
            self._emotion.state.note_silence(self._emotion.clock() - self._bot_stopped_at)
            self._bot_stopped_at = None
        self._text.put((text, self._emotion.clock()))

    # --- workers (background, bounded, never raising) ----------------------------------

    async def _audio_worker(self) -> None:
        breaker = self._breakers["audio"]
        try:
            await asyncio.wait_for(self._audio_provider.connect(), CONNECT_TIMEOUT_S)
        except (ProviderUnavailable, TimeoutError, OSError) as error:
            breaker.disable(f"connect: {type(error).__name__}: {str(error)[:120]}")
            return
        while breaker.state is not BreakerState.DISABLED:
            pcm, rate, at = await self._audio.get()
            if not breaker.allow():
                continue  # open: the segment is skipped, not queued behind a sick provider
            await self._call(breaker, self._audio_provider.analyze(pcm, rate, at=at))

    async def _text_worker(self) -> None:
        breaker = self._breakers["text"]
        while breaker.state is not BreakerState.DISABLED:
            text, at = await self._text.get()
            if breaker.allow():
                await self._call(breaker, self._text_provider.analyze(text, at=at))

    async def _call(self, breaker: CircuitBreaker, request) -> None:
        try:
            readings = await asyncio.wait_for(request, self._timeout_s)
        except asyncio.CancelledError:
            raise
        except ProviderUnavailable as error:
            breaker.disable(f"{str(error)[:120]}")
            return
        except Exception as error:  # noqa: BLE001 - a provider failure is a breaker count
            breaker.failure(f"{type(error).__name__}: {str(error)[:120]}")
            return
        if not isinstance(readings, list) or not all(
            isinstance(r, EmotionReading) for r in readings
        ):
            breaker.failure("provider returned something that is not emotion readings")
            return
        breaker.success()
        for reading in readings:
            self._emotion.state.add(reading)
        if readings:
            self._report_dominant(readings[-1].source)

    def _report_dominant(self, source: Source) -> None:
        snapshot = self._emotion.state.snapshot()
        if snapshot.dominant and snapshot.dominant != self._last_dominant:
            self._last_dominant = snapshot.dominant
            self._session.log.event(
                "emotion", dominant=snapshot.dominant, valence=snapshot.valence,
                arousal=snapshot.arousal, source=source.value,
            )

    def _reporter(self, channel: str, provider: str):
        def report(state: BreakerState, reason: str) -> None:
            logger.info(f"call {self._session.call_id}: emotion {channel} {state.value} ({reason})")
            self._session.log.event("emotion_provider", channel=channel, provider=provider,
                                    state=state.value, reason=reason)
        return report

    async def _stop(self) -> None:
        workers, self._workers = self._workers, []
        for worker in workers:
            await self.cancel_task(worker)
        self._emotion.summary.dropped_segments = self.dropped
        if workers:
            try:
                await asyncio.wait_for(self._audio_provider.close(), 2.0)
            except Exception as error:  # noqa: BLE001 - closing is best effort
                logger.debug(f"emotion provider close: {error!r}")
