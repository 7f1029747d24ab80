"""The emotion tap forwards every frame at once and never waits on a provider."""

import asyncio
import time

from pipecat.frames.frames import InputAudioRawFrame, TranscriptionFrame
from pipecat.tests.utils import SleepFrame, run_test

from processors.emotion.call_emotion import CallEmotion
from processors.emotion.emotion_tap_processor import BoundedQueue, EmotionTapProcessor
from services.emotion.provider import ProviderUnavailable
from services.emotion.reading import EmotionReading, Source
from services.vader.emotion import LocalTextProvider

RATE = 8000
FRAME = b"\x10\x00" * (RATE // 50)  # 20 ms


def audio(count: int) -> list[InputAudioRawFrame]:
    return [InputAudioRawFrame(FRAME, RATE, 1) for _ in range(count)]


class SlowAudio:
    """Answers every segment, but takes far longer than a frame lasts."""

    name = "slow"

    def __init__(self, delay_s: float = 10.0) -> None:
        self.delay_s = delay_s
        self.segments: list[int] = []

    async def connect(self) -> None:
        pass

    async def analyze(self, pcm, sample_rate, *, at):
        self.segments.append(len(pcm))
        await asyncio.sleep(self.delay_s)
        return [EmotionReading(Source.PROSODY, {"Anger": 0.8}, at)]

    async def close(self) -> None:
        pass


class BrokenAudio(SlowAudio):
    def __init__(self, on_connect: bool = False, result=None) -> None:
        super().__init__(0)
        self.on_connect = on_connect
        self.result = result

    async def connect(self) -> None:
        if self.on_connect:
            raise ProviderUnavailable("401: invalid API key")

    async def analyze(self, pcm, sample_rate, *, at):
        if self.result is not None:
            return self.result
        raise ConnectionError("socket closed")


def tap(session, provider, **kwargs) -> tuple[EmotionTapProcessor, CallEmotion]:
    emotion = CallEmotion()
    return EmotionTapProcessor(session, emotion, audio=provider, text=LocalTextProvider(),
                      segment_s=0.1, request_timeout_s=30, **kwargs), emotion


async def test_every_frame_passes_at_once_even_with_a_provider_that_hangs(session):
    provider = SlowAudio()
    processor, _ = tap(session, provider)
    frames = audio(100)  # 2 s of audio: 20 segments of 0.1 s
    started = time.perf_counter()
    down, _ = await run_test(processor, frames_to_send=frames,
                             expected_down_frames=[InputAudioRawFrame] * 100)
    assert time.perf_counter() - started < 2.0
    assert all(a is b for a, b in zip(down, frames))  # untouched, in order
    # the provider got the first segment and is still on it; newer ones replaced older
    assert provider.segments == [1600] and processor.dropped >= 20 - 1 - 5


def test_a_full_queue_drops_its_oldest_item():
    queue = BoundedQueue(2)
    for item in (1, 2, 3, 4):
        queue.put(item)
    assert queue.dropped == 2 and len(queue) == 2
    assert asyncio.run(queue.get()) == 3


async def test_words_and_audio_update_the_emotional_state(session, writer):
    class Angry(SlowAudio):
        async def analyze(self, pcm, sample_rate, *, at):
            return [EmotionReading(Source.PROSODY, {"Anger": 0.9}, at)]

    processor, emotion = tap(session, Angry(0))
    await run_test(processor, frames_to_send=[
        *audio(10), TranscriptionFrame("This is ridiculous, I've been waiting an hour!", "u", ""),
        SleepFrame(0.2),
    ])
    snapshot = emotion.snapshot()
    assert snapshot.dominant == "Anger" and snapshot.words_dominant == "Annoyance"
    assert writer.events("emotion")[0].data["dominant"] == "Anger"


async def test_a_provider_that_rejects_the_key_disables_only_itself(session, writer):
    processor, emotion = tap(session, BrokenAudio(on_connect=True))
    await run_test(processor, frames_to_send=[
        *audio(10), TranscriptionFrame("I'm so worried about this", "u", ""), SleepFrame(0.2),
    ])
    [event] = [e for e in writer.events("emotion_provider") if e.data["channel"] == "audio"]
    assert event.data["state"] == "disabled" and "invalid API key" in event.data["reason"]
    assert emotion.snapshot().words_dominant == "Anxiety"  # the words still count
    assert emotion.summary.provider_health == {"audio": "disabled", "text": "closed"}


async def test_failures_mid_call_open_the_breaker_and_garbage_counts_as_failure(session, writer):
    processor, _ = tap(session, BrokenAudio())
    await run_test(processor, frames_to_send=[*audio(10), SleepFrame(0.2)])
    states = [e.data["state"] for e in writer.events("emotion_provider")]
    assert states[0] == "open"

    writer.records.clear()
    processor, emotion = tap(session, BrokenAudio(result={"Anger": "very"}))
    await run_test(processor, frames_to_send=[*audio(10), SleepFrame(0.2)])
    assert [e.data["state"] for e in writer.events("emotion_provider")][0] == "open"
    assert emotion.snapshot().dominant is None
