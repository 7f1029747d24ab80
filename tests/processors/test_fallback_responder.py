"""With no LLM the caller still gets an honest answer and a callback offer, never silence;
a yes is a real call back (its task written) and the caller hears when it will come."""

from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMServiceMetadataFrame,
    LLMTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import run_test

from call.frames import EndCallFrame
from db import outbound
from db.call_backs import URGENT_PRIORITY, CallBacks
from processors.call_control.fallback_responder_processor import (
    CallbackDialogue,
    FallbackResponderProcessor,
)
from processors.llm_context import last_user_text
from tests.call_backs import SATURDAY_9, call_back_tasks, clinic_call
from tests.fakes import FailingLLM, ScriptedLLM

# Call backs that can be offered; none of these tests says yes to one.
OFFERABLE = CallBacks(None, lambda: None)


def context_frame(text: str) -> LLMContextFrame:
    return LLMContextFrame(context=LLMContext(messages=[{"role": "user", "content": text}]))


def test_first_turn_offers_a_callback_and_keeps_the_call_open():
    dialogue = CallbackDialogue("Riverside Clinic")
    said = dialogue.reply("I need to move my appointment")
    reply = dialogue.say(said.line)
    assert "can't help with that right now" in reply and "call you back" in reply
    assert "Riverside Clinic" in reply
    assert said.end_call is False


def test_yes_asks_for_the_call_back_and_ends_the_call():
    dialogue = CallbackDialogue("Riverside Clinic")
    dialogue.reply("hello")
    said = dialogue.reply("yes please")
    assert said.call_back and said.end_call


def test_no_declines_without_requesting_anything():
    dialogue = CallbackDialogue("Riverside Clinic")
    dialogue.reply("hello")
    said = dialogue.reply("no thanks")
    assert said.end_call and not said.call_back
    assert "call again later" in dialogue.say(said.line)


def test_an_unclear_answer_is_asked_once_more_then_the_call_ends_without_a_request():
    dialogue = CallbackDialogue("Riverside Clinic")
    dialogue.reply("hello")
    again = dialogue.reply("um what was that")
    final = dialogue.reply("hmm")
    assert "yes or no" in dialogue.say(again.line) and not again.end_call
    assert final.end_call and not final.call_back


def test_with_no_way_to_call_back_none_is_offered():
    dialogue = CallbackDialogue("Riverside Clinic", can_call_back=False)
    said = dialogue.reply("I need to move my appointment")
    reply = dialogue.say(said.line)
    assert said.end_call and not said.call_back
    assert "call you" not in reply and "Please call Riverside Clinic again later" in reply


async def test_without_an_llm_the_responder_answers_the_turn_itself(session, writer):
    responder = FallbackResponderProcessor(session, llm_available=False, call_backs=OFFERABLE)
    down, _ = await run_test(
        responder,
        frames_to_send=[context_frame("Can I book a checkup?")],
        expected_down_frames=[LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame],
    )
    assert "call you back" in down[1].text
    assert [e.type for e in writer.events()] == ["llm_unavailable"]


def spoken(down) -> list[str]:
    return [f.text for f in down if isinstance(f, LLMTextFrame)]


async def yes_to_the_offer(session, call_backs: CallBacks) -> list[Frame]:
    responder = FallbackResponderProcessor(session, llm_available=False, call_backs=call_backs)
    down, _ = await run_test(
        responder,
        frames_to_send=[context_frame("hello"), context_frame("yes please")],
        expected_down_frames=[
            LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame,
            LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame, EndCallFrame,
        ],
    )
    return down


async def test_a_yes_to_the_offer_is_a_call_back_task_and_the_caller_hears_when(
        db, workspace_id, writer):
    session, call_backs = await clinic_call(db, workspace_id, writer)

    down = await yes_to_the_offer(session, call_backs)

    assert spoken(down)[1] == (
        "Thank you. Someone from Riverside Clinic will call you back tomorrow morning from "
        "9 AM. Goodbye.")
    assert down[-1].reason == "agent_hangup"
    (task,) = await call_back_tasks(db, session.call_id)
    assert (task["kind"], task["status"], task["phone"]) == ("callback", "pending",
                                                             session.caller_number)
    assert task["not_before"] == SATURDAY_9 and task["request"] is not None
    assert "callback_requested" in [e.type for e in writer.events()]
    (promised,) = writer.events("call_back_promised")
    assert promised.data["task_id"] == str(task["id"])


async def test_a_caller_who_raised_a_safety_concern_is_called_back_first(
        db, workspace_id, writer):
    session, call_backs = await clinic_call(db, workspace_id, writer)
    session.log.escalation("self_harm", "soft", similarity=0.6, judge="rules", reason="x")

    await yes_to_the_offer(session, call_backs)

    (task,) = await call_back_tasks(db, session.call_id)
    assert task["priority"] == URGENT_PRIORITY


async def test_a_call_back_that_could_not_be_written_is_never_promised(
        db, workspace_id, writer, task_writes_fail):
    session, call_backs = await clinic_call(db, workspace_id, writer)

    down = await yes_to_the_offer(session, call_backs)

    said = spoken(down)[1]
    assert "will call you" not in said and "please don't wait for our call" in said
    assert isinstance(down[-1], EndCallFrame)  # a goodbye, never silence
    assert await call_back_tasks(db, session.call_id) == []
    (failed,) = writer.events("call_not_arranged")
    assert failed.data == {"source": "fallback_responder",
                           "error": "ReadOnlySQLTransactionError"}


async def test_a_caller_who_asked_not_to_be_called_is_not_promised_a_call(
        db, workspace_id, writer):
    session, call_backs = await clinic_call(db, workspace_id, writer)
    await outbound.set_do_not_call(db.pool, workspace_id, patient_id=None,
                                   phone=session.caller_number, call_id=None)

    down = await yes_to_the_offer(session, call_backs)

    assert "please don't wait for our call" in spoken(down)[1]
    assert await call_back_tasks(db, session.call_id) == []
    assert writer.events("call_not_arranged")[0].data["why"].startswith("they asked not")


async def test_with_no_way_to_call_back_the_caller_is_told_to_call_again(session, writer):
    responder = FallbackResponderProcessor(session, llm_available=False)
    down, _ = await run_test(responder, frames_to_send=[context_frame("Can I book a checkup?")])
    (said,) = spoken(down)
    assert "call you" not in said and said.endswith("again later. Goodbye.")
    assert isinstance(down[-1], EndCallFrame)


async def test_with_an_llm_context_passes_through_untouched(session, writer):
    responder = FallbackResponderProcessor(session, llm_available=True)
    await run_test(
        responder,
        frames_to_send=[context_frame("hello")],
        expected_down_frames=[LLMContextFrame],
    )
    assert writer.events() == []


async def test_an_llm_error_hands_the_turn_to_the_fallback(session, writer):
    responder = FallbackResponderProcessor(session, llm_available=True, call_backs=OFFERABLE)
    pipeline = Pipeline([responder, FailingLLM()])
    down, up = await run_test(
        pipeline,
        frames_to_send=[context_frame("hello")],
        expected_down_frames=[
            LLMServiceMetadataFrame, LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame,
        ],
        expected_up_frames=[LLMServiceMetadataFrame, ErrorFrame],
    )
    assert "call you back" in down[2].text
    assert responder.active
    events = writer.events("llm_unavailable")
    assert events and events[0].data["reason"] == "llm error"


class FailingTTSStandIn(FrameProcessor):
    """Something after the LLM (a TTS, the transport) reporting an error upstream."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, LLMFullResponseEndFrame):
            await self.push_error(error_msg="speech synthesis failed")


async def test_an_error_after_a_good_llm_turn_does_not_hand_the_call_to_the_fallback(
    session, writer
):
    responder = FallbackResponderProcessor(session, llm_available=True)
    pipeline = Pipeline([responder, ScriptedLLM(), FailingTTSStandIn()])
    down, up = await run_test(pipeline, frames_to_send=[context_frame("move my appointment")])
    spoken = [f.text for f in down if isinstance(f, LLMTextFrame)]
    assert "".join(spoken) == "You said: move my appointment."
    assert any(isinstance(f, ErrorFrame) for f in up)
    assert not responder.active and writer.events("llm_unavailable") == []


def test_the_callers_words_are_read_past_the_observers_guidance():
    context = LLMContext(messages=[
        {"role": "user", "content": "the earlier one [VOICE: Calmness, valence=0.4]"},
        {"role": "user", "content": "[Director guidance] main/medium/warm | x: y"},
        {"role": "user", "content": "[SAFETY] They may be describing z."},
    ])
    assert last_user_text(LLMContextFrame(context)) == "the earlier one"
