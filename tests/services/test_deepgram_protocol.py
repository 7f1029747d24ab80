"""Deepgram live STT, against a local fake of its documented `/v1/listen` WebSocket protocol.

The call's merged keyterms reach Deepgram as repeated `keyterm` query parameters,
the key as `Authorization: Token …`, caller audio as binary linear16 frames; a
final `Results` message becomes the transcript the rest of the pipeline sees.
"""

import json
from urllib.parse import parse_qs, urlsplit

import pytest
from pipecat.frames.frames import (
    InputAudioRawFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import SleepFrame, run_test
from websockets.asyncio.server import ServerConnection

from config import Settings
from pipeline.providers import ProviderPlan, build_stt
from services.keyterms import merge_keyterms
from tests.local_http import serve_websocket

pytestmark = pytest.mark.timeout(20)

RATE = 8000
HEARD = "i need to move my ozempic refill appointment"


class FakeDeepgramListen:
    """Accepts one live session; answers `Finalize` with a final Results message."""

    def __init__(self) -> None:
        self.path = ""
        self.authorization = ""
        self.audio_bytes = 0
        self.control: list[str] = []

    async def handle(self, connection: ServerConnection) -> None:
        self.path = connection.request.path
        self.authorization = connection.request.headers.get("Authorization", "")
        async for message in connection:
            if isinstance(message, bytes):
                self.audio_bytes += len(message)
                continue
            kind = json.loads(message).get("type")
            self.control.append(kind)
            if kind == "Finalize":
                await connection.send(json.dumps(results(HEARD, self.audio_bytes)))
            elif kind == "CloseStream":
                break

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query)


def results(transcript: str, audio_bytes: int) -> dict:
    duration = audio_bytes / 2 / RATE
    words = [
        {"word": w, "start": 0.1 * i, "end": 0.1 * i + 0.1, "confidence": 0.97,
         "punctuated_word": w}
        for i, w in enumerate(transcript.split())
    ]
    return {
        "type": "Results", "channel_index": [0, 1], "duration": duration, "start": 0.0,
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


@pytest.fixture
async def deepgram():
    fake = FakeDeepgramListen()
    async with serve_websocket(fake.handle) as fake.base_url:
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
