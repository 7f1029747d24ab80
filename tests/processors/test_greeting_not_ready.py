"""A greeting not pre-rendered in time is synthesized live, first thing: the caller hears
it all the same, and the record says it was not pre-rendered."""

import asyncio

from pipecat.frames.frames import TTSSpeakFrame
from pipecat.workers.runner import WorkerRunner

from bench.harness import MemoryTransport
from config import Settings
from pipeline.call_deps import CallDeps, ServiceOverrides
from pipeline.factory import build_call_pipeline
from pipeline.providers import ProviderPlan
from tests.fakes import InstantSTT, InstantTTS, ScriptedLLM

RATE = 8000
GREETING = "Thank you for calling Riverside Clinic. How can I help?"


async def test_a_greeting_not_rendered_in_time_is_spoken_live_and_on_record(session, writer,
                                                                          tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path)
    transport = MemoryTransport(RATE)
    call = build_call_pipeline(transport, session, CallDeps(
        settings=settings, plan=ProviderPlan.from_settings(settings),
        overrides=ServiceOverrides(stt=InstantSTT(), llm=ScriptedLLM(), tts=InstantTTS()),
        greeting=None, greeting_text=GREETING,
    ))

    assert [f.text for f in call.initial_frames if isinstance(f, TTSSpeakFrame)] == [GREETING]
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(call.worker)
    running = asyncio.create_task(runner.run())
    try:
        await call.worker.queue_frames(call.initial_frames)
        for _ in range(50):
            if transport.output().audio_times:
                break
            await asyncio.sleep(0.05)
    finally:
        await call.worker.cancel()
        await asyncio.wait_for(running, 10)

    assert transport.output().audio_times, "the caller heard no greeting"
    assert [e.data for e in writer.events("greeting")] == [{"prerendered": False}]
