"""Caller audio passes the layers that read words by and ends after turn detection;
agent audio ends after the transport output; every frame of both is in the recording."""

import asyncio

from pipecat.frames.frames import (
    Frame,
    InputAudioRawFrame,
    InterruptionFrame,
    LLMMessagesAppendFrame,
    TextFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.workers.runner import WorkerRunner

from bench.harness import MemoryTransport
from call.recording import StereoRecording
from config import Settings
from pipeline.audio_bypass import AudioBypass
from pipeline.call_deps import CallDeps, ServiceOverrides
from pipeline.factory import build_call_pipeline
from pipeline.providers import ProviderPlan
from processors.llm_context import guidance_message
from processors.voice.agent_audio_end_processor import AgentAudioEndProcessor
from processors.voice.caller_audio_end_processor import CallerAudioEndProcessor
from tests.fakes import InstantSTT, InstantTTS, ScriptedLLM
from tests.jobs import eventually

RATE = 8000
FRAME = b"\x01\x00" * (RATE // 50)  # 20 ms of near-silence


async def test_caller_audio_is_recorded_and_goes_no_further(session, tmp_path):
    recording = StereoRecording(session, tmp_path, RATE)
    frames = [InputAudioRawFrame(audio=FRAME, sample_rate=RATE, num_channels=1) for _ in range(5)]
    received, _ = await run_test(
        CallerAudioEndProcessor(recording),
        frames_to_send=[*frames, TextFrame("still flows")],
        expected_down_frames=[TextFrame],
    )
    assert received[0].text == "still flows"
    assert recording.seconds == 0.1


async def test_the_recording_has_every_caller_frame_the_transport_received(session, tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path)
    transport = MemoryTransport(RATE)
    call = build_call_pipeline(transport, session, CallDeps(
        settings=settings, plan=ProviderPlan.from_settings(settings),
        overrides=ServiceOverrides(stt=InstantSTT(["hello"]), llm=ScriptedLLM(), tts=InstantTTS()),
        recordings_dir=tmp_path,
    ))
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(call.worker)
    running = asyncio.create_task(runner.run())
    await asyncio.sleep(0.2)
    for _ in range(100):  # two seconds of caller audio
        await transport.input().feed(FRAME, RATE)

    async def every_frame_handled() -> bool:  # however busy the machine is
        return call.recording is not None and call.recording.seconds >= 2.0

    await eventually(every_frame_handled, timeout=10)
    await call.worker.cancel()
    await asyncio.wait_for(running, 10)
    assert call.recording is not None and call.recording.seconds == 2.0


def caller_audio() -> InputAudioRawFrame:
    return InputAudioRawFrame(audio=FRAME, sample_rate=RATE, num_channels=1)


class WordsReader(FrameProcessor):
    """A layer that reads words: keeps what it is handed, and puts guidance ahead of each
    transcript as the quick observer does."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[Frame] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        self.handed.append(frame)
        if isinstance(frame, TranscriptionFrame):
            await self.push_frame(guidance_message(f"[HEALTH] about: {frame.text}"))
        await self.push_frame(frame, direction)


async def test_caller_audio_passes_the_words_readers_by_and_the_rest_goes_through_in_order():
    first, second = WordsReader(), WordsReader()
    said = TranscriptionFrame("my back hurts", "caller", "")
    down, _ = await run_test(
        AudioBypass([first, second]),
        frames_to_send=[caller_audio(), said, caller_audio(), SleepFrame(0.05),
                        InterruptionFrame()],
    )
    for reader in (first, second):
        assert not any(isinstance(f, InputAudioRawFrame) for f in reader.handed)
        assert any(isinstance(f, InterruptionFrame) for f in reader.handed)  # reaches all
    assert sum(isinstance(f, InputAudioRawFrame) for f in down) == 2
    rest = [f for f in down if not isinstance(f, InputAudioRawFrame)]
    assert [type(f) for f in rest] == [LLMMessagesAppendFrame, LLMMessagesAppendFrame,
                                       TranscriptionFrame, InterruptionFrame]
    assert [m.messages[0]["content"] for m in rest[:2]] == ["[HEALTH] about: my back hurts"] * 2
    assert rest[2] is said  # each guidance ahead of the words it came from


async def test_agent_audio_is_recorded_and_goes_no_further(session, tmp_path):
    recording = StereoRecording(session, tmp_path, RATE)
    played = [TTSAudioRawFrame(audio=FRAME, sample_rate=RATE, num_channels=1)
              for _ in range(5)]
    received, _ = await run_test(
        AgentAudioEndProcessor(recording),
        frames_to_send=[*played, TextFrame("still flows")],
        expected_down_frames=[TextFrame],
    )
    assert received[0].text == "still flows"
    assert recording.seconds == 0.1
