"""ElevenLabs' stream failing mid-sentence, against the protocol fake's injected faults:
a cut-off sentence is finished (by ElevenLabs once it is back, else by the local voice),
a first byte that does not come is said by the local voice, malformed messages are
skipped, and once ElevenLabs cannot be reached the local voice keeps the call. Every
fault is an event in the call record.
"""

from __future__ import annotations

import time

import pytest
from pipecat.frames.frames import Frame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import SleepFrame, run_test

from services.elevenlabs.fallback_tts import FallbackElevenLabsTTSService
from tests.services.test_deepgram_faults import Faults
from tests.voice_fakes import RATE, FakeElevenLabsStream, StreamFault, serve_elevenlabs

pytestmark = pytest.mark.timeout(30)

LINE = "Your appointment with Doctor Patel is on Tuesday the fourth at nine in the morning."
WORDS = LINE.split()


@pytest.fixture
async def elevenlabs():
    async with serve_elevenlabs(FakeElevenLabsStream()) as fake:
        yield fake


def voice(fake: FakeElevenLabsStream, faults: Faults, **options) -> FallbackElevenLabsTTSService:
    return FallbackElevenLabsTTSService(
        api_key="el-test-key", url=fake.url, faults=faults,
        settings=FallbackElevenLabsTTSService.Settings(voice="clinicVoice01"), **options)


class FirstAudio(BaseObserver):
    """When the first agent audio left the TTS."""

    def __init__(self) -> None:
        super().__init__()
        self.at: float | None = None

    async def on_push_frame(self, data: FramePushed) -> None:
        if isinstance(data.frame, TTSAudioRawFrame) and self.at is None:
            self.at = time.perf_counter()


async def spoken(tts, *frames: Frame, observer: BaseObserver | None = None) -> bytes:
    down, _ = await run_test(tts, frames_to_send=list(frames),
                             pipeline_params=PipelineParams(audio_out_sample_rate=RATE),
                             observers=[observer] if observer else None)
    return b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))


def text_sent(fake: FakeElevenLabsStream, connection_messages: list[dict]) -> str:
    return " ".join(m["text"].strip() for m in connection_messages
                    if m.get("text", "").strip())


async def test_a_sentence_cut_off_by_a_drop_is_finished_by_elevenlabs_once_it_is_back(elevenlabs):
    faults = Faults()
    elevenlabs.fail_next(StreamFault(drop_after_words=4))

    audio = await spoken(voice(elevenlabs, faults), TTSSpeakFrame(LINE), SleepFrame(sleep=2.5))

    assert elevenlabs.dropped == 1 and elevenlabs.opened == 2
    # The first four words were heard; the new stream was asked for exactly the rest.
    assert elevenlabs.words_sent == WORDS
    assert text_sent(elevenlabs, elevenlabs.messages).endswith(" ".join(WORDS[4:]))
    assert audio == elevenlabs.audio_sent  # every word, once, in order
    assert [e["attempt"] for e in faults.of("tts_reconnect")] == [1]
    assert faults.of("tts_resumed") == [{"words": len(WORDS) - 4}]
    assert not faults.of("tts_fallback")


async def test_a_sentence_cut_off_while_elevenlabs_stays_down_is_finished_by_the_local_voice(
    elevenlabs
):
    faults = Faults()
    elevenlabs.fail_next(StreamFault(drop_after_words=4))
    elevenlabs.faults += [StreamFault(refuse=True)] * 10

    audio = await spoken(voice(elevenlabs, faults), TTSSpeakFrame(LINE), SleepFrame(sleep=4.0))

    heard_from_elevenlabs = elevenlabs.audio_sent
    assert elevenlabs.words_sent == WORDS[:4]
    assert audio.startswith(heard_from_elevenlabs)
    rest_s = (len(audio) - len(heard_from_elevenlabs)) / 2 / RATE
    assert rest_s > 0.25 * (len(WORDS) - 4)  # the other words, in the local voice
    (fallback, *_) = faults.of("tts_fallback")
    assert fallback == {"reason": "drop", "scope": "sentence", "words": len(WORDS) - 4}
    assert faults.of("tts_reconnect")


async def test_a_first_byte_that_does_not_come_is_said_by_the_local_voice_in_time(elevenlabs):
    faults, first = Faults(), FirstAudio()
    elevenlabs.fail_next(StreamFault(first_byte_delay_s=5.0))
    started = time.perf_counter()

    audio = await spoken(voice(elevenlabs, faults, first_byte_timeout_s=0.8),
                         TTSSpeakFrame(LINE), SleepFrame(sleep=3.0), observer=first)

    assert first.at is not None and first.at - started < 0.8 + 1.0
    assert len(audio) / 2 / RATE > 0.25 * len(WORDS)  # the whole sentence, locally
    assert faults.of("tts_slow_first_byte") == [{"after_ms": 800}]
    assert faults.of("tts_fallback") == [
        {"reason": "slow_first_byte", "scope": "sentence", "words": len(WORDS)}]


async def test_malformed_messages_are_skipped_and_the_sentence_plays_whole(elevenlabs):
    faults = Faults()
    elevenlabs.fail_next(StreamFault(malformed_before_audio=2))

    audio = await spoken(voice(elevenlabs, faults), TTSSpeakFrame(LINE), SleepFrame(sleep=1.5))

    assert audio == elevenlabs.audio_sent and elevenlabs.words_sent == WORDS
    assert faults.of("tts_malformed") == [{"count": 1}, {"count": 2}]
    assert not faults.of("tts_reconnect") and elevenlabs.opened == 1


async def test_with_elevenlabs_unreachable_every_sentence_is_said_by_the_local_voice(elevenlabs):
    faults = Faults()
    elevenlabs.refuse_all()

    audio = await spoken(voice(elevenlabs, faults), TTSSpeakFrame(LINE), SleepFrame(sleep=1.0),
                         TTSSpeakFrame("Is there anything else?"), SleepFrame(sleep=1.0))

    assert len(audio) / 2 / RATE > 0.25 * (len(WORDS) + 4)
    assert elevenlabs.words_sent == []
    reasons = [e["reason"] for e in faults.of("tts_fallback")]
    assert reasons[:2] == ["unavailable", "unavailable"]
