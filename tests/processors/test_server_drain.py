"""The server's drain (SIGTERM): a live call finishes the sentence under way, then hears
that the call must end, and is recorded `server_shutdown`, all within the bound; at the
bound, or at a second signal, whatever is left is ended at once, still `server_shutdown`.

Runs the production pipeline (offline providers) over an in-memory phone line through
`run_call`, like the session shutdown contract.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from pipecat.frames.frames import TTSSpeakFrame

from bench.harness import MemoryTransport, speak, trim_trailing_silence
from call.call_session import CompletionReason
from config import Settings
from lib.prompts import render_prompt
from pipeline.call_deps import CallDeps
from pipeline.factory import build_call_pipeline
from pipeline.providers import ProviderPlan
from runner.call_runner import run_call
from runner.drain import SHUTDOWN_LINE, CallDrain, end_call_on_drain
from runner.runtime import AppRuntime
from services.espeak.engine import synthesize_pcm
from tests.fakes import make_session
from tests.processors.test_shutdown_contract import LONG_LINE, Runtime

pytestmark = pytest.mark.timeout(90)

SHORT_LINE = "Let me check the diary for Tuesday morning for you."


async def live_call(writer, line: str):
    """A phone call whose agent is in the middle of saying `line`."""
    settings = Settings(_env_file=None, goodbye_delay_s=0.3)
    session = make_session(writer)
    transport = MemoryTransport(8000)
    call = build_call_pipeline(transport, session, CallDeps(
        settings=settings, plan=ProviderPlan.from_settings(settings)))
    runtime = Runtime(settings)
    running = asyncio.create_task(run_call(call, session, runtime))
    await asyncio.sleep(0.5)
    await call.worker.queue_frames([TTSSpeakFrame(line)])
    await asyncio.sleep(1.0)
    assert transport.output().audio_times, "the agent should be speaking"
    return SimpleNamespace(runtime=runtime, session=session, transport=transport,
                           running=running)


def agent_lines(writer) -> list[str]:
    return [t.text for t in writer.of_type("TurnRecord") if t.speaker_role == "agent"]


def closed_as(writer) -> str:
    (ended,) = writer.events("call_ended")
    assert writer.of_type("CallUpdate")[-1].fields["completion_reason"] == ended.data["reason"]
    return ended.data["reason"]


async def test_a_live_call_finishes_its_sentence_then_hears_it_must_end(writer):
    call = await live_call(writer, SHORT_LINE)
    drain = call.runtime.drain
    began = time.perf_counter()

    drain.begin()
    outcome = await drain.finish(call.runtime.active_calls, bound_s=15.0)

    took = time.perf_counter() - began
    assert (outcome.ended, outcome.cut) == (1, 0) and took < 15.0
    said = " ".join(agent_lines(writer))
    # The sentence under way was finished, then the caller heard that the call must end.
    assert said.endswith(f"{SHORT_LINE} {render_prompt(SHUTDOWN_LINE)}")
    interrupted = [t for t in writer.of_type("TurnRecord") if t.interrupted]
    assert interrupted == []
    assert closed_as(writer) == CompletionReason.SERVER_SHUTDOWN.value
    assert writer.events("server_draining")
    assert call.running.done() and call.runtime.active_calls == {}


async def test_at_the_bound_a_call_still_speaking_is_ended_and_recorded_server_shutdown(writer):
    call = await live_call(writer, LONG_LINE)
    began = time.perf_counter()

    outcome = await call.runtime.drain.finish(call.runtime.active_calls, bound_s=0.5)

    assert (outcome.ended, outcome.cut) == (0, 1)
    assert time.perf_counter() - began < 5.0
    assert closed_as(writer) == CompletionReason.SERVER_SHUTDOWN.value


async def test_a_second_signal_ends_every_call_at_once(writer):
    call = await live_call(writer, LONG_LINE)
    drain = call.runtime.drain
    finishing = asyncio.create_task(drain.finish(call.runtime.active_calls, bound_s=30.0))
    await asyncio.sleep(0.2)
    hurried = time.perf_counter()

    drain.hurry()
    outcome = await finishing

    assert outcome.cut == 1 and time.perf_counter() - hurried < 3.0
    assert closed_as(writer) == CompletionReason.SERVER_SHUTDOWN.value


class QueueingWorker:
    def __init__(self) -> None:
        self.queued: list = []

    async def queue_frames(self, frames) -> None:
        self.queued += frames


async def test_a_call_already_ending_for_its_own_reason_keeps_it(writer):
    session, worker, drain = make_session(writer), QueueingWorker(), CallDrain()
    session.end_as(CompletionReason.AGENT_HANGUP)
    drain.begin()

    await end_call_on_drain(drain, session, worker)

    assert worker.queued == [] and session.completion_reason is CompletionReason.AGENT_HANGUP


async def test_a_call_that_starts_during_the_drain_is_told_at_once(writer):
    session, worker, drain = make_session(writer), QueueingWorker(), CallDrain()
    drain.begin()

    await asyncio.wait_for(end_call_on_drain(drain, session, worker), 1.0)

    spoken, end = worker.queued
    assert spoken.text == render_prompt(SHUTDOWN_LINE)
    assert end.reason == CompletionReason.SERVER_SHUTDOWN.value


def test_a_draining_process_has_no_room_for_another_call():
    drain = CallDrain()
    runtime = SimpleNamespace(drain=drain, calls_in_hand=lambda: 0, call_capacity=12)
    assert AppRuntime.has_capacity(runtime)

    drain.begin()

    assert not AppRuntime.has_capacity(runtime)


async def test_a_caller_talking_over_the_line_does_not_keep_the_call_open(writer):
    call = await live_call(writer, SHORT_LINE)
    words = trim_trailing_silence(await synthesize_pcm(
        "Wait, wait, hold on, I still need to book that appointment please.", 8000,
        words_per_minute=200), 8000)
    drain = call.runtime.drain
    drain.begin()
    finishing = asyncio.create_task(drain.finish(call.runtime.active_calls, bound_s=20.0))
    await asyncio.sleep(3.0)  # the shutdown line is playing

    await speak(call.transport, words, 8000, silence_s=1.0)
    outcome = await finishing

    # The line was heard to its end, nothing was said after it, and the call ended.
    assert (outcome.ended, outcome.cut) == (1, 0)
    said = " ".join(agent_lines(writer))
    assert said.endswith(render_prompt(SHUTDOWN_LINE)), said
    assert closed_as(writer) == CompletionReason.SERVER_SHUTDOWN.value
