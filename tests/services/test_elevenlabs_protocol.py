"""ElevenLabs streaming TTS, against a local fake of its documented multi-stream-input protocol.

The service opens `/v1/text-to-speech/{voice}/multi-stream-input` with the model and
an output format at the call's rate, authenticates with `xi-api-key`, opens a
context carrying the workspace's voice speed, streams text, and plays the base64
audio chunks the server returns until `isFinal`.
"""

from urllib.parse import urlsplit

import pytest
from pipecat.frames.frames import (
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSTextFrame,
    TTSUpdateSettingsFrame,
)
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import SleepFrame, run_test

from call.voice_settings import VoiceSettings
from config import Settings
from pipeline.providers import ProviderPlan, build_tts
from processors.emotion.tone_controller_processor import tone_settings_of
from processors.emotion.voice_controls import tts_settings_for, voice_tones
from tests.voice_fakes import RATE, FakeElevenLabsStream, serve_elevenlabs

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
async def elevenlabs():
    async with serve_elevenlabs(FakeElevenLabsStream()) as fake:
        yield fake


async def test_agent_speech_is_synthesized_in_the_workspace_voice_at_the_phone_rate(elevenlabs):
    settings = Settings(
        _env_file=None, elevenlabs_api_key="el-test-key", elevenlabs_url=elevenlabs.url
    )
    voice = VoiceSettings(voice_id="clinicVoice01", speed=0.9)
    tts = build_tts(ProviderPlan.from_settings(settings), settings, voice)

    down, _ = await run_test(
        tts,
        frames_to_send=[TTSSpeakFrame("Your appointment is on Tuesday."), SleepFrame(sleep=1.0)],
        pipeline_params=PipelineParams(audio_out_sample_rate=RATE),
    )

    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    assert audio and audio == elevenlabs.audio_sent
    assert [f.text for f in down if isinstance(f, TTSTextFrame)] == [
        "Your", "appointment", "is", "on", "Tuesday."
    ]
    assert urlsplit(elevenlabs.path).path == "/v1/text-to-speech/clinicVoice01/multi-stream-input"
    assert elevenlabs.query["model_id"] == ["eleven_flash_v2_5"]
    assert elevenlabs.query["output_format"] == ["pcm_8000"]
    assert elevenlabs.api_key == "el-test-key"
    context_init = next(m for m in elevenlabs.messages if "voice_settings" in m)
    assert context_init["voice_settings"]["speed"] == 0.9


async def test_a_voice_tone_changes_the_next_contexts_voice_but_never_its_speed(elevenlabs):
    settings = Settings(
        _env_file=None, elevenlabs_api_key="el-test-key", elevenlabs_url=elevenlabs.url
    )
    tts = build_tts(ProviderPlan.from_settings(settings), settings, VoiceSettings(speed=0.9))
    calm = tts_settings_for("calm", *tone_settings_of(tts))

    await run_test(
        tts,
        frames_to_send=[TTSUpdateSettingsFrame(delta=calm), TTSSpeakFrame("I understand."),
                        SleepFrame(sleep=1.0)],
        pipeline_params=PipelineParams(audio_out_sample_rate=RATE),
    )

    voice = next(m for m in elevenlabs.messages if "voice_settings" in m)["voice_settings"]
    shape = voice_tones().tones["calm"].elevenlabs
    assert (voice["stability"], voice["style"]) == (shape.stability, shape.style)
    assert voice["speed"] == 0.9  # the workspace's, always
