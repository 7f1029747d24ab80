"""Deepgram live STT, against a local fake of its documented `/v1/listen` WebSocket protocol.

The call's merged keyterms reach Deepgram as repeated `keyterm` query parameters,
the key as `Authorization: Token …`, caller audio as binary linear16 frames; a
final `Results` message becomes the transcript the rest of the pipeline sees.
"""

import pytest
from pipecat.frames.frames import (
    InputAudioRawFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import SleepFrame, run_test

from config import Settings
from pipeline.providers import ProviderPlan, build_stt
from services.keyterms import merge_keyterms
from tests.voice_fakes import HEARD, RATE, FakeDeepgramListen, serve_deepgram_live

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
async def deepgram():
    async with serve_deepgram_live(FakeDeepgramListen()) as fake:
        yield fake


async def test_a_caller_turn_is_transcribed_with_the_calls_keyterms(deepgram):
    settings = Settings(
        _env_file=None, deepgram_api_key="dg-test-key", deepgram_base_url=deepgram.base_url
    )
    keyterms = merge_keyterms(["Ozempic"], ["Dr. Okafor", "ozempic"], ["appointment"])
    stt = build_stt(ProviderPlan.from_settings(settings), settings, keyterms)
    speech = [InputAudioRawFrame(b"\x01\x00" * 160, RATE, 1) for _ in range(25)]

    down, _ = await run_test(
        stt,
        frames_to_send=[VADUserStartedSpeakingFrame(), *speech, VADUserStoppedSpeakingFrame(),
                        SleepFrame(sleep=0.5)],
        pipeline_params=PipelineParams(audio_in_sample_rate=RATE),
    )

    assert [f.text for f in down if isinstance(f, TranscriptionFrame)] == [HEARD]
    assert deepgram.query["keyterm"] == ["Ozempic", "Dr. Okafor", "appointment"]
    assert deepgram.query["sample_rate"] == ["8000"] and deepgram.query["encoding"] == ["linear16"]
    assert deepgram.query["model"] == ["nova-3-general"]
    assert deepgram.authorization == "Token dg-test-key"
    assert deepgram.audio_bytes == 25 * 320 and "Finalize" in deepgram.control
