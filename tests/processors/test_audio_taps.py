"""Caller audio ends after turn detection, and every frame of it is in the recording."""

import asyncio

from pipecat.frames.frames import InputAudioRawFrame, TextFrame
from pipecat.tests.utils import run_test
from pipecat.workers.runner import WorkerRunner

from bench.harness import MemoryTransport
from call.recording import StereoRecording
from config import Settings
from pipeline.call_deps import CallDeps, ServiceOverrides
from pipeline.factory import build_call_pipeline
from pipeline.providers import ProviderPlan
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
