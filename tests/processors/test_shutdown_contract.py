"""The session shutdown contract: every way a call can end stops the speaker and closes
the call record (its turns, `call_ended`, status, reason), and none leaves the call
running.

Each case runs the production pipeline (`build_call_pipeline`, offline providers) over
an in-memory phone line through `run_call`, ends it one way, and checks the same things.
The agent is mid-sentence (a long line) when an abrupt end comes: a hang-up, a closed
socket or a failed STT must cut it off, not wait for it.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from pipecat.frames.frames import (
    CancelWorkerFrame,
    Frame,
    TranscriptionFrame,
    TTSSpeakFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from bench.harness import MemoryTransport
from call.call_session import CompletionReason
from call.frames import EndCallFrame
from config import Settings
from pipeline.call_deps import CallDeps, ServiceOverrides
from pipeline.factory import build_call_pipeline
from pipeline.providers import ProviderPlan
from runner.call_runner import caller_disconnected, run_call
from tests.fakes import CallRuntime, make_session
from tests.jobs import eventually

pytestmark = pytest.mark.timeout(90)

LONG_LINE = ("Let me read you everything we have this week, starting with Monday morning, "
             "then every slot on Tuesday, one by one.")  # about 5 s of speech


class FailingSTT(FrameProcessor):
    """A speech-to-text service that fails for good when told to (a dropped provider)."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)

    async def fail(self) -> None:
        await self.push_error(error_msg="STT connection lost", fatal=True)


class Runtime(CallRuntime):
    """The runtime run_call needs, whose record writer counts its flushes."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, flushed=0)
        self.writer = self

    async def flush(self, _timeout: float) -> None:
        self.flushed += 1


async def end_by(trigger, writer, **settings_values):
    settings = Settings(_env_file=None, goodbye_delay_s=0.3, **settings_values)
    session = make_session(writer)
    transport = MemoryTransport(8000)
    stt = FailingSTT()
    call = build_call_pipeline(transport, session, CallDeps(
        settings=settings, plan=ProviderPlan.from_settings(settings),
        overrides=ServiceOverrides(stt=stt),
    ))
    runtime = Runtime(settings)
    running = asyncio.create_task(run_call(call, session, runtime))
    await asyncio.sleep(0.5)
    await call.worker.queue_frames([TTSSpeakFrame(LONG_LINE)])
    await asyncio.sleep(1.0)  # the agent is speaking now (on a busy machine, a moment later)

    async def speaking() -> bool:
        return bool(transport.output().audio_times)

    await eventually(speaking, timeout=10)
    triggered = time.perf_counter()
    await trigger(SimpleNamespace(call=call, session=session, transport=transport, stt=stt))
    await asyncio.wait_for(running, 45)
    ended_after = time.perf_counter() - triggered
    written = len(transport.output().audio_times)
    await asyncio.sleep(0.5)
    return SimpleNamespace(session=session, runtime=runtime, ended_after=ended_after,
                           audio_after_end=len(transport.output().audio_times) - written)


async def hang_up(ctx):
    """Twilio's `stop`, as the serializer turns it into a frame."""
    ctx.session.caller_hung_up = True
    await ctx.transport.input().push_frame(
        CancelWorkerFrame(reason=CompletionReason.CALLER_HANGUP.value))


async def close_socket(ctx):
    await caller_disconnected(ctx.session, ctx.call)


async def fail_stt(ctx):
    await ctx.stt.fail()


async def reach_terminal_state(ctx):
    """What the navigator does at the graph's terminal state: goodbye, then the end."""
    await ctx.call.worker.queue_frames([TTSSpeakFrame("Goodbye."), EndCallFrame()])


async def say_goodbye(ctx):
    await ctx.call.worker.queue_frames(
        [TranscriptionFrame(text="Okay, goodbye.", user_id="caller", timestamp="")])


async def wait(_ctx):
    pass  # the forced end comes by itself


CASES = {
    "caller hangs up": (hang_up, {}, CompletionReason.CALLER_HANGUP, True),
    "socket closes": (close_socket, {}, CompletionReason.CALLER_DISCONNECTED, True),
    "STT fails for good": (fail_stt, {}, CompletionReason.PIPELINE_ERROR, True),
    "terminal state": (reach_terminal_state, {}, CompletionReason.AGENT_HANGUP, False),
    "caller's goodbye": (say_goodbye, {}, CompletionReason.AGENT_HANGUP, False),
    "maximum duration": (wait, {"max_call_duration_s": 3.0}, CompletionReason.MAX_DURATION,
                         False),
    # A clinic call is never cut off at the time limit: a person takes over.
    "director's time limit": (wait, {"director_wind_down_s": 2.0, "director_force_end_s": 2.5,
                                     "human_transfer_number": "+15550100999"},
                              CompletionReason.TRANSFERRED, False),
    "silent caller": (wait, {"silence_checkins_s": [0.3, 0.3, 0.3],
                             "silence_goodbye_after_s": 0.3}, CompletionReason.CALLER_SILENT,
                      False),
}


@pytest.mark.parametrize("path", list(CASES))
async def test_every_way_a_call_ends_stops_the_speaker_and_closes_the_record(path, writer):
    trigger, values, reason, abrupt = CASES[path]

    ended = await end_by(trigger, writer, **values)

    # The speaker stopped: nothing is played once the call is over; an abrupt end cuts
    # the long line off instead of waiting the ~5 s it takes to say.
    assert ended.audio_after_end == 0
    if abrupt:
        assert ended.ended_after < 3.0
    # The record is closed: the reason, the end, every turn written, the writer flushed.
    (call_ended,) = writer.events("call_ended")
    assert call_ended.data == {"reason": reason.value, "repeated_questions": 0}
    updates = [u.fields for u in writer.of_type("CallUpdate")]
    assert updates[-1]["status"] == "completed"
    assert updates[-1]["completion_reason"] == reason.value
    agent_turns = [t for t in writer.of_type("TurnRecord") if t.speaker_role == "agent"]
    assert any(LONG_LINE[:40] in t.text for t in agent_turns)
    assert ended.runtime.flushed == 1 and ended.runtime.active_calls == {}
