"""Operator commands applied to a call: what the pipeline is given, what the record says."""

from __future__ import annotations

from pipecat.frames.frames import InterruptionFrame, TTSSpeakFrame

from call.frames import EndCallFrame
from ops.commands import CallControl, OperatorAction, OperatorCommand
from tests.fakes import CollectingWriter, make_session


class Worker:
    """The part of a PipelineWorker the control uses: frames queued at the source."""

    def __init__(self) -> None:
        self.queued: list = []

    async def queue_frames(self, frames) -> None:
        self.queued.extend(frames)


def command(action: OperatorAction) -> OperatorCommand:
    return OperatorCommand("call-1", "w1", action)


def actions(writer: CollectingWriter) -> list[dict]:
    return [e.data for e in writer.events("operator_action")]


async def test_end_says_goodbye_then_ends_the_call_as_operator_ended():
    writer, worker = CollectingWriter(), Worker()
    control = CallControl(make_session(writer), worker, transfer_number=None)
    await control.apply(command(OperatorAction.END))
    interruption, goodbye, end = worker.queued
    assert isinstance(interruption, InterruptionFrame)
    assert isinstance(goodbye, TTSSpeakFrame) and "ended this call" in goodbye.text
    assert isinstance(end, EndCallFrame) and end.reason == "operator_ended"
    assert actions(writer) == [{"action": "end"}]


async def test_take_over_suspends_the_agent_and_release_gives_the_call_back():
    writer, worker = CollectingWriter(), Worker()
    session = make_session(writer)
    control = CallControl(session, worker, transfer_number=None)
    await control.apply(command(OperatorAction.TAKE_OVER))
    assert session.conversation.suspended and session.transfer_to is None
    assert [type(f) for f in worker.queued] == [InterruptionFrame, TTSSpeakFrame]
    await control.apply(command(OperatorAction.TAKE_OVER))  # twice: nothing more
    assert len(worker.queued) == 2
    await control.apply(command(OperatorAction.RELEASE))
    assert not session.conversation.suspended
    await control.apply(command(OperatorAction.RELEASE))
    assert actions(writer) == [
        {"action": "take-over", "outcome": "suspended", "transfer": False},
        {"action": "take-over", "outcome": "already_suspended"},
        {"action": "release", "outcome": "resumed"},
        {"action": "release", "outcome": "not_suspended"},
    ]


async def test_take_over_with_a_transfer_number_puts_the_caller_through():
    writer, worker = CollectingWriter(), Worker()
    session = make_session(writer)
    control = CallControl(session, worker, transfer_number="+15550109999")
    await control.apply(command(OperatorAction.TAKE_OVER))
    assert session.transfer_to == "+15550109999"
    end = worker.queued[-1]
    assert isinstance(end, EndCallFrame) and end.reason == "transferred"
    assert [e.data for e in writer.events("transfer_requested")] == [{"state": "operator"}]
    await control.apply(command(OperatorAction.RELEASE))  # too late: the call is ending
    assert session.transfer_to == "+15550109999" and session.conversation.suspended
    assert actions(writer)[-1] == {"action": "release", "outcome": "transfer_in_progress"}
