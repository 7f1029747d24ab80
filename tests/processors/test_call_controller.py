"""Only the controller ends a call: after the goodbye, or when the call runs too long."""

from pipecat.frames.frames import EndWorkerFrame, TTSSpeakFrame
from pipecat.tests.utils import SleepFrame, run_test

from processors.call_controller import CallController
from processors.frames import EndCallFrame
from services.call_session import CompletionReason, SessionMode
from tests.fakes import make_session


async def test_an_end_request_ends_the_pipeline_with_its_reason(writer):
    session = make_session(writer, SessionMode.TEXT)
    controller = CallController(session, max_duration_s=60)
    _, up = await run_test(
        controller, frames_to_send=[EndCallFrame(reason="agent_hangup")],
        expected_down_frames=[], expected_up_frames=[EndWorkerFrame],
    )
    assert up[0].reason == "agent_hangup"
    assert session.completion_reason is CompletionReason.AGENT_HANGUP
    assert [e.type for e in writer.events()] == ["call_end_requested"]


async def test_a_call_past_its_maximum_duration_says_goodbye_and_ends(writer):
    session = make_session(writer, SessionMode.TEXT)
    controller = CallController(session, max_duration_s=0.05)
    down, up = await run_test(
        controller, frames_to_send=[SleepFrame(sleep=0.3)], send_end_frame=False,
    )
    assert any(isinstance(f, TTSSpeakFrame) and "time limit" in f.text for f in down)
    assert session.completion_reason is CompletionReason.MAX_DURATION
    assert "max_duration_reached" in [e.type for e in writer.events()]
