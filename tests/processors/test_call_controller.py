"""Only the controller ends a call: after the goodbye, or when the call runs too long."""

from pipecat.frames.frames import EndWorkerFrame, InterruptionFrame, TTSSpeakFrame
from pipecat.tests.utils import SleepFrame, run_test

from call.call_session import CompletionReason, SessionMode
from call.frames import EndCallFrame
from processors.call_control.call_controller_processor import CallControllerProcessor
from tests.fakes import make_session


async def test_an_end_request_ends_the_pipeline_with_its_reason(writer):
    session = make_session(writer, SessionMode.TEXT)
    controller = CallControllerProcessor(session, max_duration_s=60)
    _, up = await run_test(
        controller, frames_to_send=[EndCallFrame(reason="agent_hangup")],
        expected_down_frames=[], expected_up_frames=[EndWorkerFrame],
    )
    assert up[0].reason == "agent_hangup"
    assert session.completion_reason is CompletionReason.AGENT_HANGUP
    assert [e.type for e in writer.events()] == ["call_end_requested"]


async def test_a_call_past_its_maximum_duration_says_goodbye_and_ends(writer):
    session = make_session(writer, SessionMode.TEXT)
    controller = CallControllerProcessor(session, max_duration_s=0.05)
    down, up = await run_test(
        controller, frames_to_send=[SleepFrame(sleep=0.3)], send_end_frame=False,
    )
    assert any(isinstance(f, TTSSpeakFrame) and "time limit" in f.text for f in down)
    assert session.completion_reason is CompletionReason.MAX_DURATION
    assert "max_duration_reached" in [e.type for e in writer.events()]


async def test_a_deferred_transfer_waits_for_the_goodbye_and_a_barge_in_calls_it_off(writer):
    session = make_session(writer)
    session.transfer_to = "+15550100999"
    controller = CallControllerProcessor(session, max_duration_s=60, grace_s=0.3)
    down, up = await run_test(
        controller,
        frames_to_send=[EndCallFrame(reason="transferred"), SleepFrame(sleep=0.1),
                        InterruptionFrame(), SleepFrame(sleep=0.5)],
    )
    assert not any(isinstance(f, EndWorkerFrame) for f in up)  # the call went on
    assert session.transfer_to is None and session.completion_reason is None
    assert [e.type for e in writer.events()] == [
        "call_end_requested", "transfer_cancelled", "call_end_cancelled"]


async def test_an_uninterrupted_transfer_goes_ahead_after_the_goodbye(writer):
    session = make_session(writer)
    session.transfer_to = "+15550100999"
    controller = CallControllerProcessor(session, max_duration_s=60, grace_s=0.1)
    _, up = await run_test(controller, frames_to_send=[EndCallFrame(reason="transferred")],
                           expected_up_frames=[EndWorkerFrame])
    assert session.transfer_to == "+15550100999"
    assert session.completion_reason is CompletionReason.TRANSFERRED
