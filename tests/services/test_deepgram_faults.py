"""Deepgram's live stream failing mid-call, against the protocol fake's injected faults:
the stream is reopened (0.25 s, 0.5 s, 1 s; at most three tries), nothing the caller said
is lost, a stalled or garbled stream is treated like a dropped one, and once the tries
are spent the offline recognizer takes over and the caller is told. Every fault is an
event in the call record.
"""

from __future__ import annotations

import time

import pytest
from pipecat.frames.frames import (
    InputAudioRawFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.worker import PipelineParams
from pipecat.services.stt_service import STTService
from pipecat.tests.utils import SleepFrame, run_test

from pipeline.stt_failover import announce_failover, with_offline_standby
from services.deepgram.reconnecting_stt import ReconnectingDeepgramSTTService
from services.provider_faults import ReconnectPolicy
from tests.voice_fakes import (
    HEARD,
    RATE,
    FakeDeepgramListen,
    ListenFault,
    serve_deepgram_live,
)

pytestmark = pytest.mark.timeout(30)

TURN_S = 0.5


class Faults:
    """The call record's events, as a sink the services write to."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def __call__(self, type_: str, **data) -> None:
        self.events.append((type_, data))

    def of(self, type_: str) -> list[dict]:
        return [data for kind, data in self.events if kind == type_]


@pytest.fixture
async def deepgram():
    async with serve_deepgram_live(FakeDeepgramListen()) as fake:
        yield fake


def recognizer(fake: FakeDeepgramListen, faults: Faults, **options) -> ReconnectingDeepgramSTTService:
    return ReconnectingDeepgramSTTService(
        api_key="dg-test-key", base_url=fake.base_url, faults=faults,
        policy=ReconnectPolicy(tries=3, first_delay_s=0.25), **options)


def caller_turn(pause_s: float = 2.0) -> list:
    speech = [InputAudioRawFrame(b"\x01\x00" * (RATE // 50), RATE, 1)
              for _ in range(int(TURN_S * 50))]
    return [VADUserStartedSpeakingFrame(), *speech, VADUserStoppedSpeakingFrame(),
            SleepFrame(sleep=pause_s)]


async def transcripts(stt, frames: list) -> list[str]:
    down, _ = await run_test(stt, frames_to_send=frames,
                             pipeline_params=PipelineParams(audio_in_sample_rate=RATE))
    return [f.text for f in down if isinstance(f, TranscriptionFrame)]


async def test_a_stream_dropped_mid_turn_is_reopened_and_hears_the_whole_turn_again(deepgram):
    faults = Faults()
    deepgram.fail_next(ListenFault(drop_after_audio_s=0.2))

    heard = await transcripts(recognizer(deepgram, faults), caller_turn())

    assert heard == [HEARD]
    assert deepgram.dropped == 1 and deepgram.opened == 2
    # Everything the caller said went to the new stream, not only what came after the drop.
    assert deepgram.audio_by_connection[1] >= TURN_S * RATE * 2
    assert "Finalize" in deepgram.control
    (reconnect,) = faults.of("stt_reconnect")
    assert reconnect["attempt"] == 1 and reconnect["cause"] == "dropped"
    assert reconnect["wait_ms"] == 250
    (recovered,) = faults.of("stt_recovered")
    assert recovered["replayed_ms"] >= TURN_S * 1000


async def test_a_message_that_is_not_json_reopens_the_stream_and_the_turn_is_still_heard(
    deepgram
):
    faults = Faults()
    deepgram.fail_next(ListenFault(malformed_final=True))

    heard = await transcripts(recognizer(deepgram, faults), caller_turn())

    assert heard == [HEARD]
    assert faults.of("stt_malformed")
    assert [e["cause"] for e in faults.of("stt_reconnect")] == ["malformed"]


async def test_a_final_transcript_that_does_not_come_in_time_is_asked_of_a_new_stream(deepgram):
    faults = Faults()
    deepgram.fail_next(ListenFault(final_delay_s=10.0))
    started = time.perf_counter()

    heard = await transcripts(recognizer(deepgram, faults, final_timeout_s=0.8), caller_turn(2.5))

    assert heard == [HEARD]
    assert time.perf_counter() - started < 6.0
    assert faults.of("stt_slow_first_byte") == [{"after_ms": 800}]
    assert [e["cause"] for e in faults.of("stt_reconnect")] == ["slow"]
    assert deepgram.answered == [HEARD]  # answered once, by the new stream


class StandIn(STTService):
    """The offline recognizer's place in the switcher: hears every turn as one line."""

    async def run_stt(self, audio: bytes):
        yield None

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            await self.push_frame(TranscriptionFrame("heard offline", "", ""))


async def test_after_three_failed_tries_the_offline_recognizer_takes_over_and_the_caller_is_told(
    deepgram
):
    faults, said = Faults(), []
    deepgram.fail_next(ListenFault(drop_after_audio_s=0.2))
    deepgram.faults += [ListenFault(refuse=True)] * 10  # Deepgram stays down
    primary = recognizer(deepgram, faults)
    switcher = with_offline_standby(primary, [], standby=StandIn())

    async def say(line: str) -> None:
        said.append(line)

    announce_failover(switcher, faults=faults, say=say)

    heard = await transcripts(switcher, [*caller_turn(2.5), *caller_turn(0.5)])

    assert [e["attempt"] for e in faults.of("stt_reconnect")] == [1, 2, 3]
    assert [e["wait_ms"] for e in faults.of("stt_reconnect")] == [250, 500, 1000]
    assert faults.of("stt_failed") == [{"tries": 3, "cause": "refused (503)"}]
    assert deepgram.refused == 3 and not primary.is_usable
    assert [e["to"] for e in faults.of("stt_fallback")] == [switcher.services[1].name]
    # The caller hears why they must say it again, and the next turn is recognised offline.
    assert len(said) == 1 and "say that again" in said[0] and "call you back" in said[0]
    assert heard == ["heard offline"]
