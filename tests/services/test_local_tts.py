"""The eSpeak TTS service speaks like a cloud one: started, audio, timed words, stopped."""

import asyncio
import time

import pytest
from pipecat.frames.frames import (
    ErrorFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
    TTSUpdateSettingsFrame,
)
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import run_test

from processors.emotion.tone_controller_processor import tone_settings_of
from processors.emotion.voice_controls import tts_settings_for
from services.espeak.engine import EspeakEngine
from services.espeak.tts import EspeakTTSService, words_per_minute_for
from services.prosody.emotion import prosody_features

pytestmark = pytest.mark.timeout(20)

SENTENCE = "Your appointment is on Tuesday at ten thirty."
PHONE = PipelineParams(audio_out_sample_rate=8000)


def tts(voice: str = "en-us", **settings) -> EspeakTTSService:
    return EspeakTTSService(settings=EspeakTTSService.Settings(voice=voice, **settings))


async def speak(service: EspeakTTSService, text: str = SENTENCE):
    down, up = await run_test(service, frames_to_send=[TTSSpeakFrame(text)], pipeline_params=PHONE)
    return down, up


async def test_a_speak_frame_becomes_started_audio_words_and_stopped():
    down, up = await speak(tts(speed=1.0))
    lifecycle = (TTSStartedFrame, TTSAudioRawFrame, TTSStoppedFrame)
    kinds = [type(f) for f in down if isinstance(f, lifecycle)]
    assert kinds[0] is TTSStartedFrame and kinds[-1] is TTSStoppedFrame
    audio = [f for f in down if isinstance(f, TTSAudioRawFrame)]
    assert len(audio) > 5 and {f.sample_rate for f in audio} == {8000}
    seconds = sum(len(f.audio) for f in audio) / 2 / 8000
    assert 1.5 < seconds < 5.0
    assert not [f for f in up if isinstance(f, ErrorFrame)]


async def test_words_arrive_one_by_one_with_rising_timestamps_and_no_duplicate_sentence():
    down, _ = await speak(tts())
    words = [f for f in down if isinstance(f, TTSTextFrame)]
    assert [f.text for f in words] == SENTENCE.split()
    assert all(f.pts for f in words)
    assert [f.pts for f in words] == sorted(f.pts for f in words)
    spoken_span = (words[-1].pts - words[0].pts) / 1e9
    assert 1.0 < spoken_span < 4.0


async def test_speed_maps_to_a_speaking_rate_and_changes_the_length():
    assert words_per_minute_for(1.0, 165) == 165
    assert words_per_minute_for(2.0, 165) == words_per_minute_for(1.2, 165) == 198
    assert words_per_minute_for(0.1, 165) == words_per_minute_for(0.7, 165) == 115

    def seconds(frames) -> float:
        return sum(len(f.audio) for f in frames if isinstance(f, TTSAudioRawFrame)) / 16000

    slow, _ = await speak(tts(speed=0.7))
    fast, _ = await speak(tts(speed=1.2))
    assert seconds(fast) < 0.75 * seconds(slow)


async def test_an_unknown_voice_reports_an_error_instead_of_crashing():
    _, up = await speak(tts(voice="no-such-voice"))
    assert any(isinstance(f, ErrorFrame) and "no-such-voice" in f.error for f in up)


async def test_closing_the_stream_stops_synthesis_promptly():
    service = tts()
    service._sample_rate = 8000  # normally set by the pipeline's StartFrame
    stream = service.run_tts(" ".join([SENTENCE] * 200), "context")  # ~10 minutes of speech
    first = await anext(stream)
    assert isinstance(first, TTSAudioRawFrame)
    await stream.aclose()
    started = time.perf_counter()
    await asyncio.wrap_future(EspeakEngine.shared().start_synthesis("ok", on_chunk=lambda c: None))
    assert time.perf_counter() - started < 0.5  # the engine was not busy finishing the rest


async def test_a_reply_of_two_sentences_keeps_its_words_in_time_across_both():
    first, second = "Your appointment is on Tuesday.", "Please arrive ten minutes early."
    frames = [
        LLMFullResponseStartFrame(),
        LLMTextFrame(f"{first} "),
        LLMTextFrame(second),
        LLMFullResponseEndFrame(),
    ]
    down, _ = await run_test(tts(), frames_to_send=frames, pipeline_params=PHONE)
    words = [f for f in down if isinstance(f, TTSTextFrame)]
    assert [f.text for f in words] == f"{first} {second}".split()
    assert len({f.context_id for f in words}) == 1  # one turn, one audio context
    pts = [f.pts for f in words]
    assert pts == sorted(pts)
    # The second sentence starts after the first one's audio, not back at zero.
    first_audio_s = 1.5
    assert (pts[5] - pts[0]) / 1e9 > first_audio_s


async def test_a_voice_tone_changes_pitch_and_the_workspace_volume_is_kept():
    def audio_of(frames) -> bytes:
        return b"".join(f.audio for f in frames if isinstance(f, TTSAudioRawFrame))

    service = tts(volume=0.5)
    tone = tts_settings_for("enthusiastic", *tone_settings_of(service))
    plain, _ = await speak(tts(volume=0.5))
    lively, _ = await run_test(
        service, frames_to_send=[TTSUpdateSettingsFrame(delta=tone), TTSSpeakFrame(SENTENCE)],
        pipeline_params=PHONE,
    )
    plain_pcm, lively_pcm = audio_of(plain), audio_of(lively)
    plain_f, lively_f = prosody_features(plain_pcm, 8000), prosody_features(lively_pcm, 8000)
    assert lively_f.pitch_hz > plain_f.pitch_hz * 1.05  # the tone raised the voice
    assert abs(lively_f.loudness_db - plain_f.loudness_db) < 3  # the volume did not move
    loud, _ = await speak(tts(volume=1.5))
    assert prosody_features(audio_of(loud), 8000).loudness_db > plain_f.loudness_db + 3
