"""The quick observer in a pipeline: guidance into the context, the programmatic goodbye."""

from pipecat.frames.frames import (
    LLMMessagesAppendFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.tests.utils import SleepFrame, run_test

from call.call_session import SessionMode
from call.frames import EndCallFrame
from processors.conversation.quick_observer_processor import QuickObserverProcessor
from tests.fakes import make_session


def said(text: str) -> TranscriptionFrame:
    return TranscriptionFrame(text=text, user_id="caller", timestamp="")


async def test_a_signal_becomes_guidance_ahead_of_the_words_without_running_the_llm(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        QuickObserverProcessor(session), frames_to_send=[said("My knee hurts when I walk")],
        expected_down_frames=[LLMMessagesAppendFrame, TranscriptionFrame],
    )
    appended = down[0]
    assert appended.run_llm is False
    assert appended.messages == [{"role": "user", "content":
                                  "[HEALTH] They mentioned pain. Ask how they are feeling."}]
    (event,) = writer.events("guidance")
    assert event.data["signals"] == ["pain"] and "knee" not in str(event.data)  # no PHI
    assert session.conversation.tracker.topics["pain"] == 1


async def test_plain_words_pass_alone(writer):
    session = make_session(writer, SessionMode.TEXT)
    await run_test(QuickObserverProcessor(session), frames_to_send=[said("Tuesday at nine please")],
                   expected_down_frames=[TranscriptionFrame])
    assert writer.events() == []


async def test_a_strong_goodbye_ends_the_call_after_the_delay(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        QuickObserverProcessor(session, goodbye_delay_s=0.2),
        frames_to_send=[said("Thanks, goodbye!"), SleepFrame(sleep=0.5)],
    )
    assert isinstance(down[-1], EndCallFrame) and down[-1].reason == "agent_hangup"
    assert session.conversation.goodbye_in_progress
    assert [e.data["action"] for e in writer.events("goodbye")] == ["scheduled", "ended"]


async def test_a_false_goodbye_in_one_breath_schedules_nothing(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        QuickObserverProcessor(session, goodbye_delay_s=0.1),
        frames_to_send=[said("Okay bye, oh wait, one more thing"), SleepFrame(sleep=0.3)],
    )
    assert not any(isinstance(f, EndCallFrame) for f in down)
    assert not session.conversation.goodbye_in_progress
    assert [e.data["action"] for e in writer.events("goodbye")] == ["taken_back"]


async def test_a_caller_who_keeps_talking_cancels_the_goodbye(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        QuickObserverProcessor(session, goodbye_delay_s=0.3),
        frames_to_send=[said("Bye then."), SleepFrame(sleep=0.1),
                        said("Actually, can I ask about parking?"), SleepFrame(sleep=0.5)],
    )
    assert not any(isinstance(f, EndCallFrame) for f in down)
    assert not session.conversation.goodbye_in_progress
    assert [e.data["action"] for e in writer.events("goodbye")] == ["scheduled", "cancelled"]


async def test_the_end_waits_for_a_caller_still_speaking_and_their_words_can_cancel_it(writer):
    session = make_session(writer)
    down, _ = await run_test(
        QuickObserverProcessor(session, goodbye_delay_s=0.1),
        frames_to_send=[said("Goodbye."), VADUserStartedSpeakingFrame(), SleepFrame(sleep=0.4),
                        VADUserStoppedSpeakingFrame(), SleepFrame(sleep=0.2),
                        said("Wait, what time was it again?"), SleepFrame(sleep=0.3)],
    )
    assert not any(isinstance(f, EndCallFrame) for f in down)
    assert [e.data["action"] for e in writer.events("goodbye")] == ["scheduled", "cancelled"]


async def test_what_the_caller_cut_off_goes_into_their_next_turn(writer):
    session = make_session(writer)
    session.conversation.interrupted_reply = "I have Tuesday at nine or Wednesday"
    down, _ = await run_test(QuickObserverProcessor(session), frames_to_send=[said("Wednesday please")],
                             expected_down_frames=[LLMMessagesAppendFrame, TranscriptionFrame])
    context = down[0].messages[0]["content"]
    assert context.startswith("[INTERRUPTED]") and "Tuesday at nine or Wednesday" in context
    assert session.conversation.interrupted_reply is None
    assert writer.events("interruption_context")[0].data == {"cut_off_chars": 35}


async def test_a_farewell_in_crisis_never_schedules_the_hang_up_and_calls_off_one_pending(
    writer,
):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        QuickObserverProcessor(session, goodbye_delay_s=0.2),
        frames_to_send=[said("Okay, bye then."), SleepFrame(sleep=0.05),
                        said("I won't be around much longer. Goodbye."), SleepFrame(sleep=0.4)],
    )
    assert not any(isinstance(f, EndCallFrame) for f in down)
    assert not session.conversation.goodbye_in_progress
    assert [e.data["action"] for e in writer.events("goodbye")] == [
        "scheduled", "cancelled", "held"]
    guidance = [f.messages[0]["content"] for f in down if isinstance(f, LLMMessagesAppendFrame)]
    assert guidance[-1].startswith("[SAFETY]") and "Do not end the call" in guidance[-1]


async def test_home_danger_guidance_names_the_configured_emergency_number_only(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        QuickObserverProcessor(session, emergency_number="000"),
        frames_to_send=[said("There's a horrible gassy smell in the hallway, smells of gas")],
        expected_down_frames=[LLMMessagesAppendFrame, TranscriptionFrame],
    )
    guidance = down[0].messages[0]["content"]
    assert "call 000" in guidance and "$" not in guidance
    assert writer.events("guidance")[0].data["signals"] == ["home_danger"]
